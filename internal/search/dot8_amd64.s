//go:build !purego

#include "textflag.h"

// func dotRowsI8AVX2(q *int16, m *int8, dim, rows int, out *int32)
// out[r] = q · m[r*dim:(r+1)*dim] for r < rows, in int32; q holds int8
// values widened to int16; dim is a positive multiple of 32. Each step
// widens 32 int8 of the row to int16 and multiplies pairs into int32
// (VPMADDWD): exact, since |q|, |m| ≤ 127.
TEXT ·dotRowsI8AVX2(SB), NOSPLIT, $0-40
	MOVQ q+0(FP), SI
	MOVQ m+8(FP), DI
	MOVQ dim+16(FP), CX
	MOVQ rows+24(FP), DX
	MOVQ out+32(FP), R8
	TESTQ DX, DX
	JZ   done

row:
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	MOVQ  SI, R9
	MOVQ  CX, R10

inner:
	VPMOVSXBW (DI), Y4
	VPMOVSXBW 16(DI), Y5
	VPMADDWD  (R9), Y4, Y4
	VPMADDWD  32(R9), Y5, Y5
	VPADDD    Y4, Y0, Y0
	VPADDD    Y5, Y1, Y1
	ADDQ      $32, DI
	ADDQ      $64, R9
	SUBQ      $32, R10
	JNZ       inner

	VPADDD       Y1, Y0, Y0
	VEXTRACTI128 $1, Y0, X1
	VPADDD       X1, X0, X0
	VPHADDD      X0, X0, X0
	VPHADDD      X0, X0, X0
	VMOVD        X0, (R8)
	ADDQ         $4, R8
	DECQ         DX
	JNZ          row
	VZEROUPPER

done:
	RET
