#include "textflag.h"

// func hasAVX2() bool
TEXT ·hasAVX2(SB), NOSPLIT, $0-1
	MOVB $0, ret+0(FP)
	// OSXSAVE (CPUID.1:ECX bit 27) and AVX (bit 28).
	MOVL $1, AX
	XORL CX, CX
	CPUID
	MOVL CX, BX
	ANDL $0x18000000, BX
	CMPL BX, $0x18000000
	JNE  no
	// XCR0 must enable the XMM and YMM state (bits 1 and 2).
	XORL CX, CX
	XGETBV
	ANDL $6, AX
	CMPL AX, $6
	JNE  no
	// AVX2: CPUID.(EAX=7, ECX=0):EBX bit 5.
	MOVL $7, AX
	XORL CX, CX
	CPUID
	ANDL $0x20, BX
	JZ   no
	MOVB $1, ret+0(FP)
no:
	RET

// func hasAVX512() bool: AVX-512 Foundation, with the OS saving the opmask
// and ZMM state (XCR0 bits 5 to 7) as well as XMM and YMM (bits 1, 2).
TEXT ·hasAVX512(SB), NOSPLIT, $0-1
	MOVB $0, ret+0(FP)
	MOVL $1, AX
	XORL CX, CX
	CPUID
	ANDL $0x08000000, CX // OSXSAVE
	JZ   no512
	XORL CX, CX
	XGETBV
	ANDL $0xe6, AX
	CMPL AX, $0xe6
	JNE  no512
	// AVX512F: CPUID.(EAX=7, ECX=0):EBX bit 16.
	MOVL $7, AX
	XORL CX, CX
	CPUID
	ANDL $0x10000, BX
	JZ   no512
	MOVB $1, ret+0(FP)
no512:
	RET

// func conv2x2RowAVX512(top, bot, out *float32, n int, coef *[5]float32)
//
// conv2x2RowAVX2 sixteen outputs at a time, n a multiple of 16: the same
// multiplies and adds, with the same operands first.
TEXT ·conv2x2RowAVX512(SB), NOSPLIT, $0-40
	MOVQ top+0(FP), SI
	MOVQ bot+8(FP), DI
	MOVQ out+16(FP), DX
	MOVQ n+24(FP), CX
	MOVQ coef+32(FP), AX
	VBROADCASTSS 0(AX), Z0
	VBROADCASTSS 4(AX), Z1
	VBROADCASTSS 8(AX), Z2
	VBROADCASTSS 12(AX), Z3
	VBROADCASTSS 16(AX), Z4
	VPXORD       Z5, Z5, Z5
	SHRQ         $4, CX
	JZ           done512

loop512:
	VMULPS  0(SI), Z0, Z6
	VADDPS  Z6, Z5, Z6
	VMULPS  4(SI), Z1, Z7
	VADDPS  Z7, Z6, Z6
	VMULPS  0(DI), Z2, Z7
	VADDPS  Z7, Z6, Z6
	VMULPS  4(DI), Z3, Z7
	VADDPS  Z7, Z6, Z6
	VMULPS  Z6, Z4, Z6
	VMOVUPS Z6, 0(DX)
	ADDQ    $64, SI
	ADDQ    $64, DI
	ADDQ    $64, DX
	DECQ    CX
	JNZ     loop512

done512:
	VZEROUPPER
	RET

// func conv2x2RowAVX2(top, bot, out *float32, n int, coef *[5]float32)
//
// out[i] = alpha * ((((0 + top[i]*w0) + top[i+1]*w1) + bot[i]*w2) + bot[i+1]*w3)
// for i < n, n a multiple of 8. Each add takes the running sum as its first
// operand, as the scalar code does.
TEXT ·conv2x2RowAVX2(SB), NOSPLIT, $0-40
	MOVQ top+0(FP), SI
	MOVQ bot+8(FP), DI
	MOVQ out+16(FP), DX
	MOVQ n+24(FP), CX
	MOVQ coef+32(FP), AX
	VBROADCASTSS 0(AX), Y0
	VBROADCASTSS 4(AX), Y1
	VBROADCASTSS 8(AX), Y2
	VBROADCASTSS 12(AX), Y3
	VBROADCASTSS 16(AX), Y4
	VXORPS       Y5, Y5, Y5
	SHRQ         $3, CX
	JZ           done

loop:
	VMULPS  0(SI), Y0, Y6
	VADDPS  Y6, Y5, Y6
	VMULPS  4(SI), Y1, Y7
	VADDPS  Y7, Y6, Y6
	VMULPS  0(DI), Y2, Y7
	VADDPS  Y7, Y6, Y6
	VMULPS  4(DI), Y3, Y7
	VADDPS  Y7, Y6, Y6
	VMULPS  Y6, Y4, Y6
	VMOVUPS Y6, 0(DX)
	ADDQ    $32, SI
	ADDQ    $32, DI
	ADDQ    $32, DX
	DECQ    CX
	JNZ     loop

done:
	VZEROUPPER
	RET
