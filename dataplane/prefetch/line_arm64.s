//go:build !purego

#include "textflag.h"

// func Line(addr unsafe.Pointer)
TEXT ·Line(SB), NOSPLIT, $0-8
	MOVD addr+0(FP), R0
	PRFM (R0), PLDL1KEEP
	RET
