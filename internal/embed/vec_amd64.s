//go:build !purego

#include "textflag.h"

// Constants for the vectorised exp (Cephes expf) and erf (A&S 7.1.26).
DATA vconst<>+0(SB)/4, $0x3fb8aa3b   // log2(e)
DATA vconst<>+4(SB)/4, $0x3f317200   // ln2 hi  0.693145751953125
DATA vconst<>+8(SB)/4, $0xb5bfbe8e   // -ln2 lo (negated: -1.428606765330187e-06)
DATA vconst<>+12(SB)/4, $0x39506967  // p0 1.9875691500e-4
DATA vconst<>+16(SB)/4, $0x3ab743ce  // p1 1.3981999507e-3
DATA vconst<>+20(SB)/4, $0x3c088908  // p2 8.3334519073e-3
DATA vconst<>+24(SB)/4, $0x3d2aa9c1  // p3 4.1665795894e-2
DATA vconst<>+28(SB)/4, $0x3e2aaaaa  // p4 1.6666665459e-1
DATA vconst<>+32(SB)/4, $0x3f000000  // p5 0.5
DATA vconst<>+36(SB)/4, $0x3f800000  // 1.0
DATA vconst<>+40(SB)/4, $0xc2ae0000  // -87
DATA vconst<>+44(SB)/4, $0x42b00000  // 88
DATA vconst<>+48(SB)/4, $0x3f3504f3  // 1/sqrt(2)
DATA vconst<>+52(SB)/4, $0x3ea7ba05  // A&S p 0.3275911
DATA vconst<>+56(SB)/4, $0x3f87dc22  // a5 1.061405429
DATA vconst<>+60(SB)/4, $0xbfba00e3  // a4 -1.453152027
DATA vconst<>+64(SB)/4, $0x3fb5f0e3  // a3 1.421413741
DATA vconst<>+68(SB)/4, $0xbe91a98e  // a2 -0.284496736
DATA vconst<>+72(SB)/4, $0x3e827906  // a1 0.254829592
DATA vconst<>+76(SB)/4, $0x7fffffff  // abs mask
DATA vconst<>+80(SB)/4, $0x3f000000  // 0.5
GLOBL vconst<>(SB), RODATA|NOPTR, $84

// EXP computes Y0 = exp(Y0) for 8 lanes; clobbers Y1-Y3.
#define EXP \
	VBROADCASTSS vconst<>+40(SB), Y1 \
	VMAXPS Y1, Y0, Y0 \
	VBROADCASTSS vconst<>+44(SB), Y1 \
	VMINPS Y1, Y0, Y0 \
	VBROADCASTSS vconst<>+0(SB), Y1 \
	VMULPS Y1, Y0, Y1 \
	VROUNDPS $0, Y1, Y1 \
	VBROADCASTSS vconst<>+4(SB), Y2 \
	VFNMADD231PS Y2, Y1, Y0 \
	VBROADCASTSS vconst<>+8(SB), Y2 \
	VFMADD231PS Y2, Y1, Y0 \
	VBROADCASTSS vconst<>+12(SB), Y2 \
	VBROADCASTSS vconst<>+16(SB), Y3 \
	VFMADD213PS Y3, Y0, Y2 \
	VBROADCASTSS vconst<>+20(SB), Y3 \
	VFMADD213PS Y3, Y0, Y2 \
	VBROADCASTSS vconst<>+24(SB), Y3 \
	VFMADD213PS Y3, Y0, Y2 \
	VBROADCASTSS vconst<>+28(SB), Y3 \
	VFMADD213PS Y3, Y0, Y2 \
	VBROADCASTSS vconst<>+32(SB), Y3 \
	VFMADD213PS Y3, Y0, Y2 \
	VMULPS Y0, Y0, Y3 \
	VFMADD213PS Y0, Y3, Y2 \
	VBROADCASTSS vconst<>+36(SB), Y3 \
	VADDPS Y3, Y2, Y2 \
	VCVTPS2DQ Y1, Y1 \
	VPSLLD $23, Y1, Y1 \
	VPADDD Y1, Y2, Y0

// func expSubSum(x *float32, n int, mx float32) float32
// x[i] = exp(x[i]-mx) for i < n (n a multiple of 8); returns the sum.
TEXT ·expSubSum(SB), NOSPLIT, $0-28
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), CX
	VBROADCASTSS mx+16(FP), Y5
	VXORPS Y4, Y4, Y4
	SHRQ $3, CX
	JZ   done
loop:
	VMOVUPS (SI), Y0
	VSUBPS Y5, Y0, Y0
	EXP
	VMOVUPS Y0, (SI)
	VADDPS Y0, Y4, Y4
	ADDQ $32, SI
	DECQ CX
	JNZ  loop
done:
	VEXTRACTF128 $1, Y4, X0
	VADDPS X0, X4, X4
	VHADDPS X4, X4, X4
	VHADDPS X4, X4, X4
	MOVSS X4, ret+24(FP)
	VZEROUPPER
	RET

// func maxVec(x *float32, n int) float32   (n a positive multiple of 8)
TEXT ·maxVec(SB), NOSPLIT, $0-20
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), CX
	VMOVUPS (SI), Y0
	ADDQ $32, SI
	SHRQ $3, CX
	DECQ CX
	JZ   mdone
mloop:
	VMAXPS (SI), Y0, Y0
	ADDQ $32, SI
	DECQ CX
	JNZ  mloop
mdone:
	VEXTRACTF128 $1, Y0, X1
	VMAXPS X1, X0, X0
	VPERMILPS $0x4e, X0, X1
	VMAXPS X1, X0, X0
	VPERMILPS $0xb1, X0, X1
	VMAXPS X1, X0, X0
	MOVSS X0, ret+16(FP)
	VZEROUPPER
	RET

// func geluVec(x *float32, n int)   (n a multiple of 8)
// x = x·Φ(x), Φ(x) = ½(1+erf(x/√2)), erf by A&S 7.1.26.
TEXT ·geluVec(SB), NOSPLIT, $0-16
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), CX
	SHRQ $3, CX
	JZ   gdone
gloop:
	VMOVUPS (SI), Y6                 // x
	VBROADCASTSS vconst<>+76(SB), Y7
	VANDPS Y7, Y6, Y7                // |x|
	VBROADCASTSS vconst<>+48(SB), Y1
	VMULPS Y1, Y7, Y7                // z = |x|/√2
	VBROADCASTSS vconst<>+52(SB), Y1
	VBROADCASTSS vconst<>+36(SB), Y2
	VFMADD213PS Y2, Y7, Y1           // 1 + p·z
	VDIVPS Y1, Y2, Y8                // t = 1/(1+p·z)
	VBROADCASTSS vconst<>+56(SB), Y9
	VBROADCASTSS vconst<>+60(SB), Y1
	VFMADD213PS Y1, Y8, Y9
	VBROADCASTSS vconst<>+64(SB), Y1
	VFMADD213PS Y1, Y8, Y9
	VBROADCASTSS vconst<>+68(SB), Y1
	VFMADD213PS Y1, Y8, Y9
	VBROADCASTSS vconst<>+72(SB), Y1
	VFMADD213PS Y1, Y8, Y9
	VMULPS Y8, Y9, Y9                // poly·t
	VMULPS Y7, Y7, Y0
	VXORPS Y1, Y1, Y1
	VSUBPS Y0, Y1, Y0                // -z²
	EXP                              // Y0 = exp(-z²)
	VMULPS Y0, Y9, Y9                // q = 1 - erf(z)
	VBROADCASTSS vconst<>+80(SB), Y1
	VMULPS Y1, Y9, Y9                // h = q/2
	VBROADCASTSS vconst<>+36(SB), Y2
	VSUBPS Y9, Y2, Y2                // 1-h  (Φ for x >= 0)
	VBLENDVPS Y6, Y9, Y2, Y2         // x < 0 ? h : 1-h
	VMULPS Y6, Y2, Y2
	VMOVUPS Y2, (SI)
	ADDQ $32, SI
	DECQ CX
	JNZ  gloop
gdone:
	VZEROUPPER
	RET
