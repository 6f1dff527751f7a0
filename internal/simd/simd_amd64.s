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
