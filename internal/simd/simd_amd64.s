//go:build !purego

#include "textflag.h"

// func maxPool2x2RowAVX512(r0, r1, out *float32, code *uint8, ow, c int)
// c is a positive multiple of 16; one pixel is c floats (R9 bytes).
TEXT ·maxPool2x2RowAVX512(SB), NOSPLIT, $0-48
	MOVQ r0+0(FP), SI
	MOVQ r1+8(FP), DX
	MOVQ out+16(FP), DI
	MOVQ code+24(FP), R8
	MOVQ ow+32(FP), CX
	MOVQ c+40(FP), R9
	SHLQ $2, R9
	MOVL $1, AX
	VPBROADCASTD AX, Z28
	MOVL $2, AX
	VPBROADCASTD AX, Z29
	MOVL $3, AX
	VPBROADCASTD AX, Z30

mpixel:
	LEAQ (SI)(R9*1), R11 // top right
	LEAQ (DX)(R9*1), R12 // bottom right
	XORQ BX, BX
	MOVQ R8, R10

mvec:
	VMOVUPS   (SI)(BX*1), Z0 // the maximum so far: top left
	VPXORD    Z4, Z4, Z4     // its position: 0
	VMOVUPS   (R11)(BX*1), Z1
	VCMPPS    $0x1e, Z0, Z1, K1 // K1 = v > m
	VCMPPS    $3, Z1, Z1, K2    // K2 = v is NaN
	KORW      K1, K2, K1
	VMOVAPS   Z1, K1, Z0
	VMOVDQA32 Z28, K1, Z4
	VMOVUPS   (DX)(BX*1), Z1
	VCMPPS    $0x1e, Z0, Z1, K1
	VCMPPS    $3, Z1, Z1, K2
	KORW      K1, K2, K1
	VMOVAPS   Z1, K1, Z0
	VMOVDQA32 Z29, K1, Z4
	VMOVUPS   (R12)(BX*1), Z1
	VCMPPS    $0x1e, Z0, Z1, K1
	VCMPPS    $3, Z1, Z1, K2
	KORW      K1, K2, K1
	VMOVAPS   Z1, K1, Z0
	VMOVDQA32 Z30, K1, Z4
	VMOVUPS   Z0, (DI)(BX*1)
	VPMOVDB   Z4, (R10)
	ADDQ      $16, R10
	ADDQ      $64, BX
	CMPQ      BX, R9
	JB        mvec

	LEAQ (SI)(R9*2), SI
	LEAQ (DX)(R9*2), DX
	ADDQ R9, DI
	MOVQ R10, R8
	DECQ CX
	JNZ  mpixel
	VZEROUPPER
	RET

// func maxPool2x2GradRowAVX512(gr *float32, code *uint8, q0, q1 *float32, ow, c int)
TEXT ·maxPool2x2GradRowAVX512(SB), NOSPLIT, $0-48
	MOVQ gr+0(FP), SI
	MOVQ code+8(FP), R8
	MOVQ q0+16(FP), DI
	MOVQ q1+24(FP), DX
	MOVQ ow+32(FP), CX
	MOVQ c+40(FP), R9
	SHLQ $2, R9
	MOVL $1, AX
	VPBROADCASTD AX, Z28
	MOVL $2, AX
	VPBROADCASTD AX, Z29
	MOVL $3, AX
	VPBROADCASTD AX, Z30

gpixel:
	LEAQ (DI)(R9*1), R11
	LEAQ (DX)(R9*1), R12
	XORQ BX, BX

gvec:
	VMOVUPS   (SI)(BX*1), Z0
	VPMOVZXBD (R8), Z4
	VPTESTNMD Z4, Z4, K1
	VPCMPEQD  Z28, Z4, K2
	VPCMPEQD  Z29, Z4, K3
	VPCMPEQD  Z30, Z4, K4
	VMOVAPS.Z Z0, K1, Z1
	VMOVUPS   Z1, (DI)(BX*1)
	VMOVAPS.Z Z0, K2, Z1
	VMOVUPS   Z1, (R11)(BX*1)
	VMOVAPS.Z Z0, K3, Z1
	VMOVUPS   Z1, (DX)(BX*1)
	VMOVAPS.Z Z0, K4, Z1
	VMOVUPS   Z1, (R12)(BX*1)
	ADDQ      $16, R8
	ADDQ      $64, BX
	CMPQ      BX, R9
	JB        gvec

	ADDQ R9, SI
	LEAQ (DI)(R9*2), DI
	LEAQ (DX)(R9*2), DX
	DECQ CX
	JNZ  gpixel
	VZEROUPPER
	RET

// func conv3x3C1AVX512(x *float32, w int, k, bias, out *float32, npix, o, relu int)
// For each 16-filter block: its 9 kernel rows in Z0-Z8 and bias in Z9, then every pixel:
// Z10 = bias + the 9 products (embedded-broadcast FMAs from the 3 input rows).
TEXT ·conv3x3C1AVX512(SB), NOSPLIT, $0-64
	MOVQ x+0(FP), SI
	MOVQ w+8(FP), R8
	SHLQ $2, R8           // row stride, bytes
	MOVQ k+16(FP), R9
	MOVQ bias+24(FP), R10
	MOVQ out+32(FP), DI
	MOVQ o+48(FP), R13
	SHLQ $2, R13          // o in bytes: one kernel row, one output pixel
	XORQ BX, BX           // block offset, bytes

cblock:
	// kernel rows t = 0..8 of this block: R9 + t*R13 + BX
	LEAQ    (R9)(BX*1), AX
	VMOVUPS (AX), Z0
	ADDQ    R13, AX
	VMOVUPS (AX), Z1
	ADDQ    R13, AX
	VMOVUPS (AX), Z2
	ADDQ    R13, AX
	VMOVUPS (AX), Z3
	ADDQ    R13, AX
	VMOVUPS (AX), Z4
	ADDQ    R13, AX
	VMOVUPS (AX), Z5
	ADDQ    R13, AX
	VMOVUPS (AX), Z6
	ADDQ    R13, AX
	VMOVUPS (AX), Z7
	ADDQ    R13, AX
	VMOVUPS (AX), Z8
	VMOVUPS (R10)(BX*1), Z9
	MOVQ    SI, R11       // row 0 of the window
	LEAQ    (SI)(R8*1), R12
	LEAQ    (R12)(R8*1), DX
	LEAQ    (DI)(BX*1), R14
	MOVQ    npix+40(FP), CX

cpix:
	VMOVAPS Z9, Z10
	VFMADD231PS.BCST (R11), Z0, Z10
	VFMADD231PS.BCST 4(R11), Z1, Z10
	VFMADD231PS.BCST 8(R11), Z2, Z10
	VFMADD231PS.BCST (R12), Z3, Z10
	VFMADD231PS.BCST 4(R12), Z4, Z10
	VFMADD231PS.BCST 8(R12), Z5, Z10
	VFMADD231PS.BCST (DX), Z6, Z10
	VFMADD231PS.BCST 4(DX), Z7, Z10
	VFMADD231PS.BCST 8(DX), Z8, Z10
	CMPQ relu+56(FP), $0
	JEQ  cstore
	VPSRAD  $31, Z10, Z11
	VPANDND Z10, Z11, Z10

cstore:
	VMOVUPS Z10, (R14)
	ADDQ    $4, R11
	ADDQ    $4, R12
	ADDQ    $4, DX
	ADDQ    R13, R14
	DECQ    CX
	JNZ     cpix

	ADDQ $64, BX
	CMPQ BX, R13
	JB   cblock
	VZEROUPPER
	RET

// func conv3x3C1GradAVX512(x *float32, w int, gr, y *float32, npix, o, relu int, dk, db *float32)
// For each 16-filter block: its 9 kernel-gradient rows in Z0-Z8 and bias gradient in Z9,
// then every pixel: g = the output gradient (masked by y > 0 with relu), Z9 += g, and
// Zt += x_t * g for the window's 9 inputs.
TEXT ·conv3x3C1GradAVX512(SB), NOSPLIT, $0-72
	MOVQ x+0(FP), SI
	MOVQ w+8(FP), R8
	SHLQ $2, R8
	MOVQ gr+16(FP), DI
	MOVQ y+24(FP), R15
	MOVQ o+40(FP), R13
	SHLQ $2, R13
	MOVQ dk+56(FP), R9
	MOVQ db+64(FP), R10
	VPXORD Z31, Z31, Z31
	XORQ BX, BX

gblock:
	LEAQ    (R9)(BX*1), AX
	VMOVUPS (AX), Z0
	ADDQ    R13, AX
	VMOVUPS (AX), Z1
	ADDQ    R13, AX
	VMOVUPS (AX), Z2
	ADDQ    R13, AX
	VMOVUPS (AX), Z3
	ADDQ    R13, AX
	VMOVUPS (AX), Z4
	ADDQ    R13, AX
	VMOVUPS (AX), Z5
	ADDQ    R13, AX
	VMOVUPS (AX), Z6
	ADDQ    R13, AX
	VMOVUPS (AX), Z7
	ADDQ    R13, AX
	VMOVUPS (AX), Z8
	VMOVUPS (R10)(BX*1), Z9
	MOVQ    SI, R11
	LEAQ    (SI)(R8*1), R12
	LEAQ    (R12)(R8*1), DX
	LEAQ    (DI)(BX*1), R14
	LEAQ    (R15)(BX*1), AX
	MOVQ    npix+32(FP), CX

gpix:
	VMOVUPS (R14), Z10
	CMPQ    relu+48(FP), $0
	JEQ     gacc
	VMOVUPS (AX), Z11
	VPSUBD  Z11, Z31, Z11
	VPSRAD  $31, Z11, Z11
	VPANDD  Z11, Z10, Z10

gacc:
	VADDPS Z10, Z9, Z9
	VFMADD231PS.BCST (R11), Z10, Z0
	VFMADD231PS.BCST 4(R11), Z10, Z1
	VFMADD231PS.BCST 8(R11), Z10, Z2
	VFMADD231PS.BCST (R12), Z10, Z3
	VFMADD231PS.BCST 4(R12), Z10, Z4
	VFMADD231PS.BCST 8(R12), Z10, Z5
	VFMADD231PS.BCST (DX), Z10, Z6
	VFMADD231PS.BCST 4(DX), Z10, Z7
	VFMADD231PS.BCST 8(DX), Z10, Z8
	ADDQ R13, R14
	ADDQ R13, AX
	ADDQ $4, R11
	ADDQ $4, R12
	ADDQ $4, DX
	DECQ CX
	JNZ  gpix

	LEAQ    (R9)(BX*1), AX
	VMOVUPS Z0, (AX)
	ADDQ    R13, AX
	VMOVUPS Z1, (AX)
	ADDQ    R13, AX
	VMOVUPS Z2, (AX)
	ADDQ    R13, AX
	VMOVUPS Z3, (AX)
	ADDQ    R13, AX
	VMOVUPS Z4, (AX)
	ADDQ    R13, AX
	VMOVUPS Z5, (AX)
	ADDQ    R13, AX
	VMOVUPS Z6, (AX)
	ADDQ    R13, AX
	VMOVUPS Z7, (AX)
	ADDQ    R13, AX
	VMOVUPS Z8, (AX)
	VMOVUPS Z9, (R10)(BX*1)
	ADDQ    $64, BX
	CMPQ    BX, R13
	JB      gblock
	VZEROUPPER
	RET

// func adamAVX512(w, grad, m, v *float32, n int, alpha, b1, b2, eps float32)
TEXT ·adamAVX512(SB), NOSPLIT, $0-56
	MOVQ         w+0(FP), DI
	MOVQ         grad+8(FP), SI
	MOVQ         m+16(FP), DX
	MOVQ         v+24(FP), R8
	MOVQ         n+32(FP), CX
	SHRQ         $4, CX
	VBROADCASTSS alpha+40(FP), Z28
	VBROADCASTSS b1+44(FP), Z29
	VBROADCASTSS b2+48(FP), Z30
	VBROADCASTSS eps+52(FP), Z31

adamloop:
	VMOVUPS (SI), Z0     // g
	VMOVUPS (DX), Z1     // m
	VMOVUPS (R8), Z2     // v
	VSUBPS  Z1, Z0, Z3   // g - m
	VMULPS  Z29, Z3, Z3  // (g-m)*b1
	VADDPS  Z3, Z1, Z1   // m + ...
	VMULPS  Z0, Z0, Z4   // g*g
	VSUBPS  Z2, Z4, Z4   // g*g - v
	VMULPS  Z30, Z4, Z4  // *b2
	VADDPS  Z4, Z2, Z2   // v + ...
	VMOVUPS Z1, (DX)
	VMOVUPS Z2, (R8)
	VSQRTPS Z2, Z5
	VADDPS  Z31, Z5, Z5  // sqrt(v) + eps
	VMULPS  Z28, Z1, Z6  // alpha*m
	VDIVPS  Z5, Z6, Z6   // / (sqrt(v)+eps)
	VMOVUPS (DI), Z7
	VSUBPS  Z6, Z7, Z7
	VMOVUPS Z7, (DI)
	ADDQ    $64, DI
	ADDQ    $64, SI
	ADDQ    $64, DX
	ADDQ    $64, R8
	DECQ    CX
	JNZ     adamloop
	VZEROUPPER
	RET

// func packTrans32AVX512(b *float32, ldb, kc int, dst *float32)
// Z30 holds the indices 0, ldb, ..., 15*ldb; the second half of the strip starts
// 16*ldb floats further.
TEXT ·packTrans32AVX512(SB), NOSPLIT, $0-32
	MOVQ b+0(FP), SI
	MOVQ ldb+8(FP), AX
	MOVQ kc+16(FP), CX
	MOVQ dst+24(FP), DI
	// indices: j*ldb for j = 0..15
	VPBROADCASTD AX, Z1      // ldb in every lane
	MOVL         $0, DX
	VPBROADCASTD DX, Z30
	MOVQ         $0x0f0e0d0c0b0a0908, R8
	MOVQ         $0x0706050403020100, R9
	VMOVQ        R9, X2
	VPINSRQ      $1, R8, X2, X2
	VPMOVZXBD    X2, Z2      // 0..15
	VPMULLD      Z1, Z2, Z30 // j*ldb
	MOVQ         AX, R10
	SHLQ         $6, R10     // 16*ldb*4 bytes
	LEAQ         (SI)(R10*1), R11

ploop:
	KXNORW     K1, K1, K1
	VGATHERDPS (SI)(Z30*4), K1, Z0
	KXNORW     K2, K2, K2
	VGATHERDPS (R11)(Z30*4), K2, Z3
	VMOVUPS    Z0, (DI)
	VMOVUPS    Z3, 64(DI)
	ADDQ       $4, SI
	ADDQ       $4, R11
	ADDQ       $128, DI
	DECQ       CX
	JNZ        ploop
	VZEROUPPER
	RET
