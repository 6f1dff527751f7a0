//go:build !purego && !openblas

#include "textflag.h"

// AVX-512 passes over a convolution chunk's rows (conv_amd64.go). Every length is a
// positive multiple of 16 floats.

// func addRowsReluAVX512(dst, bias *float32, rows, o int)
// Each of the rows o-long rows of dst becomes relu(row + bias), the ReLU as reluTo's:
// the value with its sign-extended sign bit cleared out.
TEXT ·addRowsReluAVX512(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ bias+8(FP), SI
	MOVQ rows+16(FP), CX
	MOVQ o+24(FP), DX
	SHLQ $2, DX

addrow:
	XORQ BX, BX

addcol:
	VMOVUPS (DI)(BX*1), Z0
	VADDPS  (SI)(BX*1), Z0, Z0
	VPSRAD  $31, Z0, Z1
	VPANDND Z0, Z1, Z0
	VMOVUPS Z0, (DI)(BX*1)
	ADDQ    $64, BX
	CMPQ    BX, DX
	JB      addcol
	ADDQ    DX, DI
	DECQ    CX
	JNZ     addrow
	VZEROUPPER
	RET

// func reluAVX512(dst, src *float32, n int)
// dst = relu(src), as reluTo.
TEXT ·reluAVX512(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $4, CX

reluloop:
	VMOVUPS (SI), Z0
	VPSRAD  $31, Z0, Z1
	VPANDND Z0, Z1, Z0
	VMOVUPS Z0, (DI)
	ADDQ    $64, SI
	ADDQ    $64, DI
	DECQ    CX
	JNZ     reluloop
	VZEROUPPER
	RET

// func reluGradAVX512(dst, grad, y *float32, n int)
// dst = grad where the ReLU output y is positive, else 0, as reluGrad: the mask is the sign
// of -y (as int32), sign-extended.
TEXT ·reluGradAVX512(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ grad+8(FP), SI
	MOVQ y+16(FP), DX
	MOVQ n+24(FP), CX
	SHRQ $4, CX
	VPXORD Z31, Z31, Z31

gradloop:
	VMOVUPS (DX), Z1
	VPSUBD  Z1, Z31, Z1
	VPSRAD  $31, Z1, Z1
	VPANDD  (SI), Z1, Z0
	VMOVUPS Z0, (DI)
	ADDQ    $64, SI
	ADDQ    $64, DI
	ADDQ    $64, DX
	DECQ    CX
	JNZ     gradloop
	VZEROUPPER
	RET

// func sumRowsAVX512(grad, dst *float32, rows, o int)
// dst += the sum of the rows o-long rows of grad (row by row, in order, as sumRows).
TEXT ·sumRowsAVX512(SB), NOSPLIT, $0-32
	MOVQ grad+0(FP), SI
	MOVQ dst+8(FP), DI
	MOVQ rows+16(FP), CX
	MOVQ o+24(FP), DX
	SHLQ $2, DX

sumrow:
	XORQ BX, BX

sumcol:
	VMOVUPS (DI)(BX*1), Z0
	VADDPS  (SI)(BX*1), Z0, Z0
	VMOVUPS Z0, (DI)(BX*1)
	ADDQ    $64, BX
	CMPQ    BX, DX
	JB      sumcol
	ADDQ    DX, SI
	DECQ    CX
	JNZ     sumrow
	VZEROUPPER
	RET
