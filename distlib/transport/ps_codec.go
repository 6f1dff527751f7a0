package transport

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"unsafe"
)

// psEncoder appends the little-endian fields of a parameter-server message.
type psEncoder struct{ b []byte }

func (e *psEncoder) u8(v uint8)   { e.b = append(e.b, v) }
func (e *psEncoder) u32(v uint32) { e.b = binary.LittleEndian.AppendUint32(e.b, v) }
func (e *psEncoder) u64(v uint64) { e.b = binary.LittleEndian.AppendUint64(e.b, v) }

func (e *psEncoder) ints(v []int) {
	e.u32(uint32(len(v)))
	for _, x := range v {
		e.u64(uint64(int64(x)))
	}
}

func (e *psEncoder) floats(v []float32) {
	e.b = slices.Grow(e.b, 4+4*len(v))
	e.u32(uint32(len(v)))
	if nativeLittleEndian {
		// The wire format is the memory layout: one copy, no per-element encoding.
		e.b = append(e.b, floatBytes(v)...)
		return
	}
	n := len(e.b)
	e.b = append(e.b, make([]byte, 4*len(v))...)
	for i, x := range v {
		binary.LittleEndian.PutUint32(e.b[n+4*i:], math.Float32bits(x))
	}
}

// nativeLittleEndian reports whether float32 values sit in memory as the wire format
// writes them (little-endian IEEE 754), so that they are copied as bytes.
var nativeLittleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// floatBytes views v's memory as bytes (no copy).
func floatBytes(v []float32) []byte {
	if len(v) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 4*len(v))
}

// putFloats fills dst from the little-endian encoding b (len(b) == 4*len(dst)).
func putFloats(dst []float32, b []byte) {
	if nativeLittleEndian {
		copy(floatBytes(dst), b)
		return
	}
	for i := range dst {
		dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
}

func (e *psEncoder) str(s string) {
	e.u32(uint32(len(s)))
	e.b = append(e.b, s...)
}

// psDecoder reads what psEncoder wrote; the first short read sets err and every later read
// returns zero.
type psDecoder struct {
	b   []byte
	err error
	// out, when set, is where the handler of a call inside a Do appends its answer (the
	// Do's answer, every call's after the other's); else a handler makes its own.
	out *psEncoder
}

// answer returns the encoder a handler appends its answer to: d.out, or a new one with
// room for n bytes.
func (d *psDecoder) answer(n int) *psEncoder {
	if d.out != nil {
		return d.out
	}
	return &psEncoder{b: make([]byte, 0, n)}
}

var errPSShort = errors.New("transport: ps: truncated message")

func (d *psDecoder) take(n int) []byte {
	if d.err != nil || n < 0 || n > len(d.b) {
		if d.err == nil {
			d.err = errPSShort
		}
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

func (d *psDecoder) u8() uint8 {
	if b := d.take(1); b != nil {
		return b[0]
	}
	return 0
}

func (d *psDecoder) u32() uint32 {
	if b := d.take(4); b != nil {
		return binary.LittleEndian.Uint32(b)
	}
	return 0
}

func (d *psDecoder) u64() uint64 {
	if b := d.take(8); b != nil {
		return binary.LittleEndian.Uint64(b)
	}
	return 0
}

// count reads a length and checks that at least n*elemSize bytes remain for it.
func (d *psDecoder) count(elemSize int) int {
	n := int(d.u32())
	if d.err == nil && n*elemSize > len(d.b) {
		d.err = fmt.Errorf("transport: ps: message claims %d elements, has room for %d", n, len(d.b)/elemSize)
		return 0
	}
	return n
}

func (d *psDecoder) ints() []int {
	n := d.count(8)
	v := make([]int, n)
	for i := range v {
		v[i] = int(int64(d.u64()))
	}
	return v
}

func (d *psDecoder) floats() []float32 {
	n := d.count(4)
	b := d.take(4 * n)
	if b == nil {
		return nil
	}
	v := make([]float32, n)
	putFloats(v, b)
	return v
}

// floatsOrInto reads a float array into dst when it has the array's length, else into
// a new slice, and returns it.
func (d *psDecoder) floatsOrInto(dst []float32) []float32 {
	n := d.count(4)
	b := d.take(4 * n)
	if b == nil {
		return nil
	}
	if len(dst) != n {
		dst = make([]float32, n)
	}
	putFloats(dst, b)
	return dst
}

func (d *psDecoder) str() string {
	n := d.count(1)
	return string(d.take(n))
}

// done returns the decoding error, or one for trailing bytes.
func (d *psDecoder) done() error {
	if d.err == nil && len(d.b) != 0 {
		d.err = fmt.Errorf("transport: ps: %d trailing bytes in message", len(d.b))
	}
	return d.err
}
