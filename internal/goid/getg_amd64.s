#include "textflag.h"

// func getg() unsafe.Pointer
// The current goroutine's runtime structure, from thread-local storage, as runtime.getg.
TEXT ·getg(SB), NOSPLIT, $0-8
	MOVQ (TLS), AX
	MOVQ AX, ret+0(FP)
	RET
