//go:build !purego && !openblas

#include "textflag.h"

// A_ROW is one row of a kernel step: broadcast A's value at addr into t and add t times
// the step's B row (Z24, Z25) into that row's accumulators c0, c1.
#define A_ROW(addr, t, c0, c1) \
	VBROADCASTSS addr, t; \
	VFMADD231PS  t, Z24, c0; \
	VFMADD231PS  t, Z25, c1

// C_ROW writes one row of C at DX: alpha (Z26) times its accumulators c0, c1, plus C's
// values where load is set (K3, K4), in the columns of mask (K1, K2).
#define C_ROW(c0, c1) \
	VMOVUPS.Z   (DX), K3, Z27; \
	VMOVUPS.Z   64(DX), K4, Z28; \
	VFMADD231PS c0, Z26, Z27; \
	VFMADD231PS c1, Z26, Z28; \
	VMOVUPS     Z27, K1, (DX); \
	VMOVUPS     Z28, K2, 64(DX)

// C_ROW_STREAM writes one row of C at DX, all 32 columns, as C_ROW with load clear does
// (alpha times the accumulators, fused with an add of zero, so that the values are the
// same to the bit), but with streaming stores: the two lines (DX 64-byte aligned) go to
// memory without first being read into the caches.
#define C_ROW_STREAM(c0, c1) \
	VPXORD      Z27, Z27, Z27; \
	VPXORD      Z28, Z28, Z28; \
	VFMADD231PS c0, Z26, Z27; \
	VFMADD231PS c1, Z26, Z28; \
	VMOVNTPS    Z27, (DX); \
	VMOVNTPS    Z28, 64(DX)

// C_NEXT ends the kernel after the last row asked for (R9 rows left), else moves DX to the
// next row of C.
#define C_NEXT \
	DECQ R9; \
	JZ   done; \
	ADDQ R8, DX

// func kern12x32(kc int, a *float32, ars, aps int, b *float32, bs int, c *float32, ldc int, alpha float32, rows int, mask, load uint64)
// C[0:rows, cols] += alpha * A(12 x kc) * B(kc x 32), where A(i, p) is a[i*ars + p*aps] and
// B(p, 0:32) is b[p*bs : p*bs+32] (strides in elements): packed operands (ars 1, aps 12;
// bs 32) and operands read in place (a row-major A: ars lda, aps 1; a transposed one: ars 1,
// aps lda; a row-major B: bs ldb) alike. The columns written are those set in mask (bits
// 0-15: columns 0-15, bits 16-31: 16-31); C is read where load has the bits set (load =
// mask: C += ...; load = 0: C = alpha*A*B, C not read: a beta-0 product needs no clearing
// pass first). Masked loads and stores never touch the columns past the mask. Bit 63 of
// load set (the other bits of load clear, mask all 32 columns, c and every row of C
// 64-byte aligned) writes C = alpha*A*B with streaming stores instead (C_ROW_STREAM); the
// caller fences them (sfence) before another core reads C. All 12 rows
// of A and all 32 columns of B are read (the caller pads edge strips). Needs AVX-512F;
// kc >= 1, 1 <= rows <= 12. Z0-Z23 hold the 12 x 32 accumulators (row i in Z(2i),
// Z(2i+1)); each A value is broadcast once into one of Z26-Z31 for its two FMAs, so a step
// of 24 FMAs issues 14 loads. Rows 3j..3j+2 of A are read through base register j (SI,
// R10, R11, R12) plus 0, 1 or 2 row strides (BX).
TEXT ·kern12x32(SB), NOSPLIT, $0-96
	MOVQ kc+0(FP), CX
	MOVQ a+8(FP), SI
	MOVQ ars+16(FP), BX
	SHLQ $2, BX
	MOVQ aps+24(FP), AX
	SHLQ $2, AX
	MOVQ b+32(FP), DI
	MOVQ bs+40(FP), R13
	SHLQ $2, R13
	LEAQ (SI)(BX*2), R10
	ADDQ BX, R10
	LEAQ (R10)(BX*2), R11
	ADDQ BX, R11
	LEAQ (R11)(BX*2), R12
	ADDQ BX, R12
	MOVQ ldc+56(FP), R8
	SHLQ $2, R8
	MOVQ rows+72(FP), R9
	MOVQ mask+80(FP), DX
	KMOVW DX, K1
	SHRQ $16, DX
	KMOVW DX, K2
	MOVQ load+88(FP), DX
	KMOVW DX, K3
	SHRQ $16, DX
	KMOVW DX, K4
	MOVQ c+48(FP), DX
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	VPXORD Z8, Z8, Z8
	VPXORD Z9, Z9, Z9
	VPXORD Z10, Z10, Z10
	VPXORD Z11, Z11, Z11
	VPXORD Z12, Z12, Z12
	VPXORD Z13, Z13, Z13
	VPXORD Z14, Z14, Z14
	VPXORD Z15, Z15, Z15
	VPXORD Z16, Z16, Z16
	VPXORD Z17, Z17, Z17
	VPXORD Z18, Z18, Z18
	VPXORD Z19, Z19, Z19
	VPXORD Z20, Z20, Z20
	VPXORD Z21, Z21, Z21
	VPXORD Z22, Z22, Z22
	VPXORD Z23, Z23, Z23

loop:
	VMOVUPS (DI), Z24
	VMOVUPS 64(DI), Z25
	A_ROW((SI), Z26, Z0, Z1)
	A_ROW((SI)(BX*1), Z27, Z2, Z3)
	A_ROW((SI)(BX*2), Z28, Z4, Z5)
	A_ROW((R10), Z29, Z6, Z7)
	A_ROW((R10)(BX*1), Z30, Z8, Z9)
	A_ROW((R10)(BX*2), Z31, Z10, Z11)
	A_ROW((R11), Z26, Z12, Z13)
	A_ROW((R11)(BX*1), Z27, Z14, Z15)
	A_ROW((R11)(BX*2), Z28, Z16, Z17)
	A_ROW((R12), Z29, Z18, Z19)
	A_ROW((R12)(BX*1), Z30, Z20, Z21)
	A_ROW((R12)(BX*2), Z31, Z22, Z23)
	ADDQ AX, SI
	ADDQ AX, R10
	ADDQ AX, R11
	ADDQ AX, R12
	ADDQ R13, DI
	DECQ CX
	JNZ  loop

	VBROADCASTSS alpha+64(FP), Z26
	MOVQ load+88(FP), CX
	BTQ  $63, CX
	JCS  stream
	C_ROW(Z0, Z1)
	C_NEXT
	C_ROW(Z2, Z3)
	C_NEXT
	C_ROW(Z4, Z5)
	C_NEXT
	C_ROW(Z6, Z7)
	C_NEXT
	C_ROW(Z8, Z9)
	C_NEXT
	C_ROW(Z10, Z11)
	C_NEXT
	C_ROW(Z12, Z13)
	C_NEXT
	C_ROW(Z14, Z15)
	C_NEXT
	C_ROW(Z16, Z17)
	C_NEXT
	C_ROW(Z18, Z19)
	C_NEXT
	C_ROW(Z20, Z21)
	C_NEXT
	C_ROW(Z22, Z23)

done:
	VZEROUPPER
	RET

stream:
	C_ROW_STREAM(Z0, Z1)
	C_NEXT
	C_ROW_STREAM(Z2, Z3)
	C_NEXT
	C_ROW_STREAM(Z4, Z5)
	C_NEXT
	C_ROW_STREAM(Z6, Z7)
	C_NEXT
	C_ROW_STREAM(Z8, Z9)
	C_NEXT
	C_ROW_STREAM(Z10, Z11)
	C_NEXT
	C_ROW_STREAM(Z12, Z13)
	C_NEXT
	C_ROW_STREAM(Z14, Z15)
	C_NEXT
	C_ROW_STREAM(Z16, Z17)
	C_NEXT
	C_ROW_STREAM(Z18, Z19)
	C_NEXT
	C_ROW_STREAM(Z20, Z21)
	C_NEXT
	C_ROW_STREAM(Z22, Z23)
	JMP done

// func sfence()
// Orders this thread's streaming stores before its later stores (the all-reduce's signal
// that a bucket is ready).
TEXT ·sfence(SB), NOSPLIT, $0-0
	SFENCE
	RET
