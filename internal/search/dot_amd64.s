//go:build !purego

#include "textflag.h"

// func dotRowsAVX2(q, m *float32, dim, rows int, out *float32)
// out[r] = q · m[r*dim:(r+1)*dim] for r < rows; dim is a positive multiple of 32.
TEXT ·dotRowsAVX2(SB), NOSPLIT, $0-40
	MOVQ q+0(FP), SI
	MOVQ m+8(FP), DI
	MOVQ dim+16(FP), CX
	MOVQ rows+24(FP), DX
	MOVQ out+32(FP), R8
	TESTQ DX, DX
	JZ   done

row:
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	MOVQ   SI, R9
	MOVQ   CX, R10

inner:
	VMOVUPS     (R9), Y4
	VMOVUPS     32(R9), Y5
	VMOVUPS     64(R9), Y6
	VMOVUPS     96(R9), Y7
	VFMADD231PS (DI), Y4, Y0
	VFMADD231PS 32(DI), Y5, Y1
	VFMADD231PS 64(DI), Y6, Y2
	VFMADD231PS 96(DI), Y7, Y3
	ADDQ        $128, R9
	ADDQ        $128, DI
	SUBQ        $32, R10
	JNZ         inner

	VADDPS       Y1, Y0, Y0
	VADDPS       Y3, Y2, Y2
	VADDPS       Y2, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	VHADDPS      X0, X0, X0
	VHADDPS      X0, X0, X0
	VMOVSS       X0, (R8)
	ADDQ         $4, R8
	DECQ         DX
	JNZ          row
	VZEROUPPER

done:
	RET
