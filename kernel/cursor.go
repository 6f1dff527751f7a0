package kernel

import "unicode/utf8"

// The protocol gives and takes cursor positions in code points (Unicode scalar values);
// Executor works in byte offsets. This file is the only place that converts: the complete
// and inspect handlers convert a request's cursor_pos with byteCursor and a reply's
// cursor_start and cursor_end with codePoints.

// byteCursor returns the request's cursor_pos as a byte offset of its code; without one,
// the cursor is at the end of the code.
func (r completeRequest) byteCursor() int {
	if r.CursorPos == nil {
		return len(r.Code)
	}
	return byteOffset(r.Code, *r.CursorPos)
}

// byteOffset converts a code point offset into a byte offset of s, clamped to s.
func byteOffset(s string, cp int) int {
	if cp <= 0 {
		return 0
	}
	n := 0
	for i := range s {
		if n == cp {
			return i
		}
		n++
	}
	return len(s)
}

// codePoints converts a byte offset of s into a code point offset, clamped to s.
func codePoints(s string, b int) int {
	if b <= 0 {
		return 0
	}
	if b > len(s) {
		b = len(s)
	}
	return utf8.RuneCountInString(s[:b])
}
