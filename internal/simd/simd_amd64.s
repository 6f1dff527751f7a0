//go:build !purego

#include "textflag.h"

// FTZ_ON saves MXCSR at 4(SP) and sets its flush-to-zero and denormals-are-zero bits
// (0x8040); FTZ_OFF restores it. A function using them has a frame of at least 8 bytes.
#define FTZ_ON \
	STMXCSR 0(SP); \
	MOVL    0(SP), AX; \
	MOVL    AX, 4(SP); \
	ORL     $0x8040, AX; \
	MOVL    AX, 0(SP); \
	LDMXCSR 0(SP)

#define FTZ_OFF LDMXCSR 4(SP)

// ADAM_LOAD loads adam's arguments: w, grad, m, v into DI, SI, DX, R8, n/width into CX,
// alpha, b1, b2, eps broadcast into A, B1, B2, EPS.
#define ADAM_LOAD(shift, A, B1, B2, EPS) \
	MOVQ         w+0(FP), DI; \
	MOVQ         grad+8(FP), SI; \
	MOVQ         m+16(FP), DX; \
	MOVQ         v+24(FP), R8; \
	MOVQ         n+32(FP), CX; \
	SHRQ         shift, CX; \
	VBROADCASTSS alpha+40(FP), A; \
	VBROADCASTSS b1+44(FP), B1; \
	VBROADCASTSS b2+48(FP), B2; \
	VBROADCASTSS eps+52(FP), EPS

// ADAM_UPDATE updates one vector of elements at DI, DX, R8 with the gradient in R0:
// m += (g-m)*b1; v += (g*g-v)*b2; w -= alpha*m/(sqrt(v)+eps), with no fused multiply-add.
// R1..R7 are scratch vector registers (X, Y or Z: the width).
#define ADAM_UPDATE(R0, R1, R2, R3, R4, R5, R6, R7, A, B1, B2, EPS) \
	VMOVUPS (DX), R1; \
	VMOVUPS (R8), R2; \
	VSUBPS  R1, R0, R3; \
	VMULPS  B1, R3, R3; \
	VADDPS  R3, R1, R1; \
	VMULPS  R0, R0, R4; \
	VSUBPS  R2, R4, R4; \
	VMULPS  B2, R4, R4; \
	VADDPS  R4, R2, R2; \
	VMOVUPS R1, (DX); \
	VMOVUPS R2, (R8); \
	VSQRTPS R2, R5; \
	VADDPS  EPS, R5, R5; \
	VMULPS  A, R1, R6; \
	VDIVPS  R5, R6, R6; \
	VMOVUPS (DI), R7; \
	VSUBPS  R6, R7, R7; \
	VMOVUPS R7, (DI)

// ADAM_STEP updates one vector of elements at DI, SI, DX, R8 (the gradient at SI) and
// advances them by bytes.
#define ADAM_STEP(bytes, R0, R1, R2, R3, R4, R5, R6, R7, A, B1, B2, EPS) \
	VMOVUPS (SI), R0; \
	ADAM_UPDATE(R0, R1, R2, R3, R4, R5, R6, R7, A, B1, B2, EPS); \
	ADDQ    bytes, DI; \
	ADDQ    bytes, SI; \
	ADDQ    bytes, DX; \
	ADDQ    bytes, R8

// ADAM_SUM_LOAD loads adamSum's arguments: w, g0, g1, m, v into DI, SI, R9, DX, R8,
// n/width into CX and R10, alpha, b1, b2, eps broadcast into A, B1, B2, EPS.
#define ADAM_SUM_LOAD(shift, A, B1, B2, EPS) \
	MOVQ         w+0(FP), DI; \
	MOVQ         g0+8(FP), SI; \
	MOVQ         g1+16(FP), R9; \
	MOVQ         m+24(FP), DX; \
	MOVQ         v+32(FP), R8; \
	MOVQ         n+40(FP), CX; \
	SHRQ         shift, CX; \
	MOVQ         CX, R10; \
	VBROADCASTSS alpha+48(FP), A; \
	VBROADCASTSS b1+52(FP), B1; \
	VBROADCASTSS b2+56(FP), B2; \
	VBROADCASTSS eps+60(FP), EPS

// ADAM_SUM2_LOAD is ADAM_SUM_LOAD for adamSum2's arguments: the second copy's w, m, v into
// R13, R11, R12.
#define ADAM_SUM2_LOAD(shift, A, B1, B2, EPS) \
	MOVQ         w+0(FP), DI; \
	MOVQ         g0+8(FP), SI; \
	MOVQ         g1+16(FP), R9; \
	MOVQ         m+24(FP), DX; \
	MOVQ         v+32(FP), R8; \
	MOVQ         w2+40(FP), R13; \
	MOVQ         m2+48(FP), R11; \
	MOVQ         v2+56(FP), R12; \
	MOVQ         n+64(FP), CX; \
	SHRQ         shift, CX; \
	MOVQ         CX, R10; \
	VBROADCASTSS alpha+72(FP), A; \
	VBROADCASTSS b1+76(FP), B1; \
	VBROADCASTSS b2+80(FP), B2; \
	VBROADCASTSS eps+84(FP), EPS

// ADAM_SUM2_STORE stores ADAM_UPDATE's new m, v and w (registers M, V, W) into the second
// copy and advances its pointers by bytes.
#define ADAM_SUM2_STORE(bytes, M, V, W) \
	VMOVUPS M, (R11); \
	VMOVUPS V, (R12); \
	VMOVUPS W, (R13); \
	ADDQ    bytes, R11; \
	ADDQ    bytes, R12; \
	ADDQ    bytes, R13

// ADAM_SUM_TERMS512 loads 16 elements of each term (SI, R9) and jumps to out when either
// holds a subnormal value (its exponent bits zero, Z26, and its fraction bits not, Z27:
// integer tests, which DAZ does not touch; VFPCLASSPS's denormal class does not see them
// under DAZ); else it leaves their sum in Z0.
#define ADAM_SUM_TERMS512(out) \
	VMOVUPS   (SI), Z0; \
	VMOVUPS   (R9), Z8; \
	VPTESTNMD Z26, Z0, K1; \
	VPTESTMD  Z27, Z0, K1, K1; \
	VPTESTNMD Z26, Z8, K2; \
	VPTESTMD  Z27, Z8, K2, K2; \
	KORTESTW  K1, K2; \
	JNZ       out; \
	VADDPS    Z8, Z0, Z0

// ADAM_SUM_TERMS256 is ADAM_SUM_TERMS512 for 8 elements in YMM registers, the tests made
// with compares (Y10 the exponent bits, Y11 the fraction bits, Y9 zero).
#define ADAM_SUM_TERMS256(out) \
	VMOVUPS  (SI), Y0; \
	VMOVUPS  (R9), Y8; \
	VPAND    Y10, Y0, Y1; \
	VPCMPEQD Y9, Y1, Y1; \
	VPAND    Y11, Y0, Y2; \
	VPCMPEQD Y9, Y2, Y2; \
	VPANDN   Y1, Y2, Y1; \
	VPAND    Y10, Y8, Y3; \
	VPCMPEQD Y9, Y3, Y3; \
	VPAND    Y11, Y8, Y4; \
	VPCMPEQD Y9, Y4, Y4; \
	VPANDN   Y3, Y4, Y3; \
	VPOR     Y3, Y1, Y1; \
	VPTEST   Y1, Y1; \
	JNZ      out; \
	VADDPS   Y8, Y0, Y0

// LOAD_ROWS4 loads 4 rows of 16 floats from base, base+R8, base+2*R8, base+R9 (R8 the row
// stride in bytes, R9 three of them) into r0..r3 (packTrans32AVX512).
#define LOAD_ROWS4(base, r0, r1, r2, r3) \
	VMOVUPS (base), r0; \
	VMOVUPS (base)(R8*1), r1; \
	VMOVUPS (base)(R8*2), r2; \
	VMOVUPS (base)(R9*1), r3

// LANES_STORE finishes a 16x16 transpose across 128-bit lanes for 4 registers that hold
// 4x4 blocks transposed within lanes (a, b, c, d: rows 0-3, 4-7, 8-11, 12-15 of one lane
// position) and stores the 4 transposed rows at o0..o3(AX) (packTrans32AVX512; Z16-Z23
// scratch).
#define LANES_STORE(a, b, c, d, o0, o1, o2, o3) \
	VSHUFF32X4 $0x44, b, a, Z16; \
	VSHUFF32X4 $0xEE, b, a, Z17; \
	VSHUFF32X4 $0x44, d, c, Z18; \
	VSHUFF32X4 $0xEE, d, c, Z19; \
	VSHUFF32X4 $0x88, Z18, Z16, Z20; \
	VSHUFF32X4 $0xDD, Z18, Z16, Z21; \
	VSHUFF32X4 $0x88, Z19, Z17, Z22; \
	VSHUFF32X4 $0xDD, Z19, Z17, Z23; \
	VMOVUPS    Z20, o0(AX); \
	VMOVUPS    Z21, o1(AX); \
	VMOVUPS    Z22, o2(AX); \
	VMOVUPS    Z23, o3(AX)

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
// 16 elements at a time (n a multiple of 16). It runs with MXCSR's flush-to-zero and
// denormals-are-zero bits set, as TensorFlow's CPU kernels do, and restores MXCSR before it
// returns: moments decaying toward zero (a weight whose gradient is always zero) would
// otherwise be subnormal for thousands of steps, each operation on them a slow microcode
// assist (BenchmarkAdamSmallMoments).
TEXT ·adamAVX512(SB), NOSPLIT, $8-56
	FTZ_ON
	ADAM_LOAD($4, Z28, Z29, Z30, Z31)

adamloop:
	ADAM_STEP($64, Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7, Z28, Z29, Z30, Z31)
	DECQ CX
	JNZ  adamloop
	VZEROUPPER
	FTZ_OFF
	RET

// func adamAVX2(w, grad, m, v *float32, n int, alpha, b1, b2, eps float32)
// adamAVX512's loop, 8 elements at a time in YMM registers (n a multiple of 8), for CPUs
// without AVX-512: the same arithmetic and MXCSR bits, so the same values bit for bit.
TEXT ·adamAVX2(SB), NOSPLIT, $8-56
	FTZ_ON
	ADAM_LOAD($3, Y12, Y13, Y14, Y15)

adam2loop:
	ADAM_STEP($32, Y0, Y1, Y2, Y3, Y4, Y5, Y6, Y7, Y12, Y13, Y14, Y15)
	DECQ CX
	JNZ  adam2loop
	VZEROUPPER
	FTZ_OFF
	RET

// FLOAT_BITS broadcasts a float32's exponent bits into EXP and its fraction bits into FRAC
// (through 0(SP)).
#define FLOAT_BITS(EXP, FRAC) \
	MOVL         $0x7f800000, AX; \
	MOVL         AX, 0(SP); \
	VPBROADCASTD 0(SP), EXP; \
	MOVL         $0x007fffff, AX; \
	MOVL         AX, 0(SP); \
	VPBROADCASTD 0(SP), FRAC

// ADAM_SUM_NEXT advances adamSum's five pointers by bytes and counts the vector done
// (flags set for the loop's JNZ).
#define ADAM_SUM_NEXT(bytes) \
	ADDQ bytes, DI; \
	ADDQ bytes, SI; \
	ADDQ bytes, R9; \
	ADDQ bytes, DX; \
	ADDQ bytes, R8; \
	DECQ CX

// func adamSumAVX512(w, g0, g1, m, v *float32, n int, alpha, b1, b2, eps float32) int
// adamAVX512's update with the gradient g0+g1, 16 elements at a time (n a positive multiple
// of 16), summed in the loop. Under MXCSR's denormals-are-zero a subnormal term would count
// as zero before the addition, where the sum of the terms as written (simd.AddTo, then
// Adam) keeps it: a block of 16 where either term holds a subnormal value ends the loop, and
// it returns the elements it updated, which the caller goes on from (ADAM_SUM_TERMS512).
TEXT ·adamSumAVX512(SB), NOSPLIT, $8-72
	FTZ_ON
	ADAM_SUM_LOAD($4, Z28, Z29, Z30, Z31)
	FLOAT_BITS(Z26, Z27)

adamsumloop:
	ADAM_SUM_TERMS512(adamsumout)
	ADAM_UPDATE(Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7, Z28, Z29, Z30, Z31)
	ADAM_SUM_NEXT($64)
	JNZ        adamsumloop

adamsumout:
	SUBQ       CX, R10                  // vectors updated
	SHLQ       $4, R10
	MOVQ       R10, ret+64(FP)
	VZEROUPPER
	FTZ_OFF
	RET

// func adamSumAVX2(w, g0, g1, m, v *float32, n int, alpha, b1, b2, eps float32) int
// adamSumAVX512's loop, 8 elements at a time (n a positive multiple of 8), the same tests
// with compares (ADAM_SUM_TERMS256).
TEXT ·adamSumAVX2(SB), NOSPLIT, $8-72
	FTZ_ON
	ADAM_SUM_LOAD($3, Y12, Y13, Y14, Y15)
	FLOAT_BITS(Y10, Y11)
	VPXOR        Y9, Y9, Y9

adamsum2loop:
	ADAM_SUM_TERMS256(adamsum2out)
	ADAM_UPDATE(Y0, Y1, Y2, Y3, Y4, Y5, Y6, Y7, Y12, Y13, Y14, Y15)
	ADAM_SUM_NEXT($32)
	JNZ      adamsum2loop

adamsum2out:
	SUBQ     CX, R10                    // vectors updated
	SHLQ     $3, R10
	MOVQ     R10, ret+64(FP)
	VZEROUPPER
	FTZ_OFF
	RET

// func adamSum2AVX512(w, g0, g1, m, v, w2, m2, v2 *float32, n int, alpha, b1, b2, eps float32) int
// adamSumAVX512 that also stores each new w, m and v at w2, m2, v2 (a second copy of the
// variable and its slots, which held the same values): one loop updates both copies.
TEXT ·adamSum2AVX512(SB), NOSPLIT, $8-96
	FTZ_ON
	ADAM_SUM2_LOAD($4, Z28, Z29, Z30, Z31)
	FLOAT_BITS(Z26, Z27)

adamsum2dloop:
	ADAM_SUM_TERMS512(adamsum2dout)
	ADAM_UPDATE(Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7, Z28, Z29, Z30, Z31)
	ADAM_SUM2_STORE($64, Z1, Z2, Z7)
	ADAM_SUM_NEXT($64)
	JNZ        adamsum2dloop

adamsum2dout:
	SUBQ       CX, R10                  // vectors updated
	SHLQ       $4, R10
	MOVQ       R10, ret+88(FP)
	VZEROUPPER
	FTZ_OFF
	RET

// func adamSum2AVX2(w, g0, g1, m, v, w2, m2, v2 *float32, n int, alpha, b1, b2, eps float32) int
// adamSum2AVX512's loop, 8 elements at a time, with adamSumAVX2's tests.
TEXT ·adamSum2AVX2(SB), NOSPLIT, $8-96
	FTZ_ON
	ADAM_SUM2_LOAD($3, Y12, Y13, Y14, Y15)
	FLOAT_BITS(Y10, Y11)
	VPXOR        Y9, Y9, Y9

adamsum2d2loop:
	ADAM_SUM_TERMS256(adamsum2d2out)
	ADAM_UPDATE(Y0, Y1, Y2, Y3, Y4, Y5, Y6, Y7, Y12, Y13, Y14, Y15)
	ADAM_SUM2_STORE($32, Y1, Y2, Y7)
	ADAM_SUM_NEXT($32)
	JNZ      adamsum2d2loop

adamsum2d2out:
	SUBQ     CX, R10                    // vectors updated
	SHLQ     $3, R10
	MOVQ     R10, ret+88(FP)
	VZEROUPPER
	FTZ_OFF
	RET

// func packTrans32AVX512(b *float32, ldb, kc int, dst *float32)
// Blocks of 16 columns (p) go through registers, one half of the strip (16 rows, j) at a
// time: the 16 rows' values are loaded and transposed, 4x4 within 128-bit lanes by two
// rounds of unpacks, then across lanes by two rounds of VSHUFF32X4 (64 shuffles for 256
// values), and each transposed row is stored where its p's 16 values of that half go. Rows
// are read through bases R10, R11, R12, BX (rows 0, 4, 8, 12 of the half) plus 0 to 3 row
// strides (R8, R9 = 3*R8). The last kc%16 columns are gathered: Z30 holds the indices 0,
// ldb, ..., 15*ldb, and the second half of the strip starts 16*ldb floats further.
TEXT ·packTrans32AVX512(SB), NOSPLIT, $0-32
	MOVQ b+0(FP), SI
	MOVQ ldb+8(FP), R8
	SHLQ $2, R8              // row stride in bytes
	LEAQ (R8)(R8*2), R9      // 3 row strides
	MOVQ kc+16(FP), DX
	SHRQ $4, DX              // full 16-column blocks
	JZ   tail
	MOVQ dst+24(FP), DI
	MOVQ $2, CX              // halves left

half:
	MOVQ DX, R13             // blocks left in this half
	MOVQ SI, R10
	MOVQ DI, AX

block:
	LEAQ (R10)(R8*4), R11
	LEAQ (R11)(R8*4), R12
	LEAQ (R12)(R8*4), BX
	LOAD_ROWS4(R10, Z0, Z1, Z2, Z3)
	LOAD_ROWS4(R11, Z4, Z5, Z6, Z7)
	LOAD_ROWS4(R12, Z8, Z9, Z10, Z11)
	LOAD_ROWS4(BX, Z12, Z13, Z14, Z15)
	VUNPCKLPS Z1, Z0, Z16
	VUNPCKHPS Z1, Z0, Z17
	VUNPCKLPS Z3, Z2, Z18
	VUNPCKHPS Z3, Z2, Z19
	VUNPCKLPS Z5, Z4, Z20
	VUNPCKHPS Z5, Z4, Z21
	VUNPCKLPS Z7, Z6, Z22
	VUNPCKHPS Z7, Z6, Z23
	VUNPCKLPS Z9, Z8, Z24
	VUNPCKHPS Z9, Z8, Z25
	VUNPCKLPS Z11, Z10, Z26
	VUNPCKHPS Z11, Z10, Z27
	VUNPCKLPS Z13, Z12, Z28
	VUNPCKHPS Z13, Z12, Z29
	VUNPCKLPS Z15, Z14, Z30
	VUNPCKHPS Z15, Z14, Z31
	VUNPCKLPD Z18, Z16, Z0
	VUNPCKHPD Z18, Z16, Z1
	VUNPCKLPD Z19, Z17, Z2
	VUNPCKHPD Z19, Z17, Z3
	VUNPCKLPD Z22, Z20, Z4
	VUNPCKHPD Z22, Z20, Z5
	VUNPCKLPD Z23, Z21, Z6
	VUNPCKHPD Z23, Z21, Z7
	VUNPCKLPD Z26, Z24, Z8
	VUNPCKHPD Z26, Z24, Z9
	VUNPCKLPD Z27, Z25, Z10
	VUNPCKHPD Z27, Z25, Z11
	VUNPCKLPD Z30, Z28, Z12
	VUNPCKHPD Z30, Z28, Z13
	VUNPCKLPD Z31, Z29, Z14
	VUNPCKHPD Z31, Z29, Z15
	LANES_STORE(Z0, Z4, Z8, Z12, 0, 512, 1024, 1536)
	LANES_STORE(Z1, Z5, Z9, Z13, 128, 640, 1152, 1664)
	LANES_STORE(Z2, Z6, Z10, Z14, 256, 768, 1280, 1792)
	LANES_STORE(Z3, Z7, Z11, Z15, 384, 896, 1408, 1920)
	ADDQ $64, R10            // the next 16 columns
	ADDQ $2048, AX           // 16 groups of 32 values further
	DECQ R13
	JNZ  block
	LEAQ (SI)(R8*8), SI
	LEAQ (SI)(R8*8), SI      // the second half: 16 rows further
	ADDQ $64, DI             // the second 16 values of each group
	DECQ CX
	JNZ  half

tail:
	MOVQ b+0(FP), SI
	MOVQ ldb+8(FP), AX
	MOVQ kc+16(FP), CX
	MOVQ dst+24(FP), DI
	MOVQ CX, DX
	ANDQ $-16, DX            // columns done
	LEAQ (SI)(DX*4), SI
	SHLQ $7, DX              // 128 bytes of dst per column
	ADDQ DX, DI
	ANDQ $15, CX
	JZ   done
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
done:
	VZEROUPPER
	RET


// func convReLUPoolAVX512(x *float32, w int, k, bias, out *float32, code *uint8, pw, o int)
// For each 16-filter block (kernel rows Z0-Z8, bias Z9) and each pooled pixel: the 4
// convolution outputs of its window (Z10-Z13, 9 broadcast FMAs each from the 4 input rows
// R11, R12, DX, R14), their maximum and its position as in maxPool2x2RowAVX512, the ReLU.
TEXT ·convReLUPoolAVX512(SB), NOSPLIT, $0-64
	MOVQ x+0(FP), SI
	MOVQ w+8(FP), R8
	SHLQ $2, R8
	MOVQ k+16(FP), R9
	MOVQ bias+24(FP), R10
	MOVQ o+56(FP), R13
	SHLQ $2, R13
	MOVL $1, AX
	VPBROADCASTD AX, Z28
	MOVL $2, AX
	VPBROADCASTD AX, Z29
	MOVL $3, AX
	VPBROADCASTD AX, Z30
	XORQ BX, BX

fblock:
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
	MOVQ    code+40(FP), AX
	MOVQ    BX, R15
	SHRQ    $2, R15
	ADDQ    R15, AX
	MOVQ    R13, R15
	SHRQ    $2, R15
	MOVQ    out+32(FP), DI
	ADDQ    BX, DI
	MOVQ    SI, R11
	LEAQ    (SI)(R8*1), R12
	LEAQ    (R12)(R8*1), DX
	LEAQ    (DX)(R8*1), R14
	MOVQ    pw+48(FP), CX

fpix:
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
	VMOVAPS Z9, Z11
	VFMADD231PS.BCST 4(R11), Z0, Z11
	VFMADD231PS.BCST 8(R11), Z1, Z11
	VFMADD231PS.BCST 12(R11), Z2, Z11
	VFMADD231PS.BCST 4(R12), Z3, Z11
	VFMADD231PS.BCST 8(R12), Z4, Z11
	VFMADD231PS.BCST 12(R12), Z5, Z11
	VFMADD231PS.BCST 4(DX), Z6, Z11
	VFMADD231PS.BCST 8(DX), Z7, Z11
	VFMADD231PS.BCST 12(DX), Z8, Z11
	VMOVAPS Z9, Z12
	VFMADD231PS.BCST (R12), Z0, Z12
	VFMADD231PS.BCST 4(R12), Z1, Z12
	VFMADD231PS.BCST 8(R12), Z2, Z12
	VFMADD231PS.BCST (DX), Z3, Z12
	VFMADD231PS.BCST 4(DX), Z4, Z12
	VFMADD231PS.BCST 8(DX), Z5, Z12
	VFMADD231PS.BCST (R14), Z6, Z12
	VFMADD231PS.BCST 4(R14), Z7, Z12
	VFMADD231PS.BCST 8(R14), Z8, Z12
	VMOVAPS Z9, Z13
	VFMADD231PS.BCST 4(R12), Z0, Z13
	VFMADD231PS.BCST 8(R12), Z1, Z13
	VFMADD231PS.BCST 12(R12), Z2, Z13
	VFMADD231PS.BCST 4(DX), Z3, Z13
	VFMADD231PS.BCST 8(DX), Z4, Z13
	VFMADD231PS.BCST 12(DX), Z5, Z13
	VFMADD231PS.BCST 4(R14), Z6, Z13
	VFMADD231PS.BCST 8(R14), Z7, Z13
	VFMADD231PS.BCST 12(R14), Z8, Z13
	VMOVAPS   Z10, Z14
	VPXORD    Z15, Z15, Z15
	VCMPPS    $0x1e, Z14, Z11, K1
	VCMPPS    $3, Z11, Z11, K2
	KORW      K1, K2, K1
	VMOVAPS   Z11, K1, Z14
	VMOVDQA32 Z28, K1, Z15
	VCMPPS    $0x1e, Z14, Z12, K1
	VCMPPS    $3, Z12, Z12, K2
	KORW      K1, K2, K1
	VMOVAPS   Z12, K1, Z14
	VMOVDQA32 Z29, K1, Z15
	VCMPPS    $0x1e, Z14, Z13, K1
	VCMPPS    $3, Z13, Z13, K2
	KORW      K1, K2, K1
	VMOVAPS   Z13, K1, Z14
	VMOVDQA32 Z30, K1, Z15
	VPSRAD    $31, Z14, Z16
	VPANDND   Z14, Z16, Z14
	VMOVUPS   Z14, (DI)
	VPMOVDB   Z15, (AX)
	ADDQ      $8, R11
	ADDQ      $8, R12
	ADDQ      $8, DX
	ADDQ      $8, R14
	ADDQ      R13, DI
	ADDQ      R15, AX
	DECQ      CX
	JNZ       fpix

	ADDQ $64, BX
	CMPQ BX, R13
	JB   fblock
	VZEROUPPER
	RET

// func convReLUPoolGradAVX512(x *float32, w int, gr, y *float32, code *uint8, pw, o int, dk, db *float32)
// For each 16-filter block (kernel-gradient rows Z0-Z8, bias gradient Z9) and each pooled
// pixel: g = its gradient where the pooled output is positive; Z9 += g; for each window
// position, the lanes it won (g masked) times the position's 9 inputs into Z0-Z8.
TEXT ·convReLUPoolGradAVX512(SB), NOSPLIT, $0-72
	MOVQ x+0(FP), SI
	MOVQ w+8(FP), R8
	SHLQ $2, R8
	MOVQ o+48(FP), R13
	SHLQ $2, R13
	MOVQ dk+56(FP), R9
	MOVL $1, AX
	VPBROADCASTD AX, Z28
	MOVL $2, AX
	VPBROADCASTD AX, Z29
	MOVL $3, AX
	VPBROADCASTD AX, Z30
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
	MOVQ    db+64(FP), AX
	VMOVUPS (AX)(BX*1), Z9
	MOVQ    code+32(FP), AX
	MOVQ    BX, R15
	SHRQ    $2, R15
	ADDQ    R15, AX
	MOVQ    R13, R15
	SHRQ    $2, R15
	MOVQ    gr+16(FP), DI
	ADDQ    BX, DI
	MOVQ    y+24(FP), R10
	ADDQ    BX, R10
	MOVQ    SI, R11
	LEAQ    (SI)(R8*1), R12
	LEAQ    (R12)(R8*1), DX
	LEAQ    (DX)(R8*1), R14
	MOVQ    pw+40(FP), CX

gpix:
	VMOVUPS   (DI), Z10
	VMOVUPS   (R10), Z11
	VPSUBD    Z11, Z31, Z11
	VPSRAD    $31, Z11, Z11
	VPANDD    Z11, Z10, Z10
	VADDPS    Z10, Z9, Z9
	VPMOVZXBD (AX), Z12
	VPTESTNMD Z12, Z12, K1
	VMOVAPS.Z Z10, K1, Z13
	VFMADD231PS.BCST (R11), Z13, Z0
	VFMADD231PS.BCST 4(R11), Z13, Z1
	VFMADD231PS.BCST 8(R11), Z13, Z2
	VFMADD231PS.BCST (R12), Z13, Z3
	VFMADD231PS.BCST 4(R12), Z13, Z4
	VFMADD231PS.BCST 8(R12), Z13, Z5
	VFMADD231PS.BCST (DX), Z13, Z6
	VFMADD231PS.BCST 4(DX), Z13, Z7
	VFMADD231PS.BCST 8(DX), Z13, Z8
	VPCMPEQD  Z28, Z12, K1
	VMOVAPS.Z Z10, K1, Z13
	VFMADD231PS.BCST 4(R11), Z13, Z0
	VFMADD231PS.BCST 8(R11), Z13, Z1
	VFMADD231PS.BCST 12(R11), Z13, Z2
	VFMADD231PS.BCST 4(R12), Z13, Z3
	VFMADD231PS.BCST 8(R12), Z13, Z4
	VFMADD231PS.BCST 12(R12), Z13, Z5
	VFMADD231PS.BCST 4(DX), Z13, Z6
	VFMADD231PS.BCST 8(DX), Z13, Z7
	VFMADD231PS.BCST 12(DX), Z13, Z8
	VPCMPEQD  Z29, Z12, K1
	VMOVAPS.Z Z10, K1, Z13
	VFMADD231PS.BCST (R12), Z13, Z0
	VFMADD231PS.BCST 4(R12), Z13, Z1
	VFMADD231PS.BCST 8(R12), Z13, Z2
	VFMADD231PS.BCST (DX), Z13, Z3
	VFMADD231PS.BCST 4(DX), Z13, Z4
	VFMADD231PS.BCST 8(DX), Z13, Z5
	VFMADD231PS.BCST (R14), Z13, Z6
	VFMADD231PS.BCST 4(R14), Z13, Z7
	VFMADD231PS.BCST 8(R14), Z13, Z8
	VPCMPEQD  Z30, Z12, K1
	VMOVAPS.Z Z10, K1, Z13
	VFMADD231PS.BCST 4(R12), Z13, Z0
	VFMADD231PS.BCST 8(R12), Z13, Z1
	VFMADD231PS.BCST 12(R12), Z13, Z2
	VFMADD231PS.BCST 4(DX), Z13, Z3
	VFMADD231PS.BCST 8(DX), Z13, Z4
	VFMADD231PS.BCST 12(DX), Z13, Z5
	VFMADD231PS.BCST 4(R14), Z13, Z6
	VFMADD231PS.BCST 8(R14), Z13, Z7
	VFMADD231PS.BCST 12(R14), Z13, Z8
	ADDQ      $8, R11
	ADDQ      $8, R12
	ADDQ      $8, DX
	ADDQ      $8, R14
	ADDQ      R13, DI
	ADDQ      R13, R10
	ADDQ      R15, AX
	DECQ      CX
	JNZ       gpix

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
	MOVQ    db+64(FP), AX
	VMOVUPS Z9, (AX)(BX*1)
	ADDQ    $64, BX
	CMPQ    BX, R13
	JB      gblock
	VZEROUPPER
	RET

// func addAVX512(dst, src *float32, n int)
// n is a positive multiple of 64: four vectors per iteration.
TEXT ·addAVX512(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $6, CX

addloop:
	VMOVUPS (DI), Z0
	VMOVUPS 64(DI), Z1
	VMOVUPS 128(DI), Z2
	VMOVUPS 192(DI), Z3
	VADDPS  (SI), Z0, Z0
	VADDPS  64(SI), Z1, Z1
	VADDPS  128(SI), Z2, Z2
	VADDPS  192(SI), Z3, Z3
	VMOVUPS Z0, (DI)
	VMOVUPS Z1, 64(DI)
	VMOVUPS Z2, 128(DI)
	VMOVUPS Z3, 192(DI)
	ADDQ    $256, DI
	ADDQ    $256, SI
	DECQ    CX
	JNZ     addloop
	VZEROUPPER
	RET
