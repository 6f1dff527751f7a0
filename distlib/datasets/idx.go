package datasets

import (
	"bufio"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// ErrFormat reports a file that is not a valid IDX file of the expected kind (bad magic
// number, wrong dimensions, truncated or trailing data).
var ErrFormat = errors.New("datasets: bad IDX file")

// IDX magic numbers: 0x0000 then the type code 0x08 (unsigned byte) then the rank.
const (
	// ImagesMagic is the magic number of an IDX file of images (ubyte, rank 3).
	ImagesMagic = 2051
	// LabelsMagic is the magic number of an IDX file of labels (ubyte, rank 1).
	LabelsMagic = 2049
)

// maxIDXBytes bounds the data an IDX header may announce (the MNIST training images are
// 47 MB; a corrupt header must not make us allocate gigabytes).
const maxIDXBytes = 1 << 30

// ReadIDX reads an unsigned-byte IDX file, gzip-compressed or raw (detected from its first
// bytes), and returns its dimensions and data. name is used in errors. The data must be
// exactly what the header announces: short data is reported as truncated, extra bytes as
// trailing data, and so are bytes after the end of the gzip stream (a second gzip member
// or anything appended to the compressed file).
func ReadIDX(r io.Reader, name string) (dims []int, values []byte, err error) {
	raw, err := idxBytes(r, name)
	if err != nil {
		return nil, nil, err
	}
	return parseIDX(raw, name, 0)
}

// idxBytes returns the IDX bytes of r: r itself, or its gzip stream decompressed, refusing
// anything after the end of that stream.
func idxBytes(r io.Reader, name string) ([]byte, error) {
	const limit = maxIDXBytes + 4 + 4*255 // the largest data plus the largest header
	br := bufio.NewReader(r)
	head, _ := br.Peek(2)
	if len(head) < 2 || head[0] != 0x1f || head[1] != 0x8b {
		raw, err := io.ReadAll(io.LimitReader(br, limit+1))
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrFormat, name, err)
		}
		if len(raw) > limit {
			return nil, fmt.Errorf("%w: %s: larger than %d bytes", ErrFormat, name, limit)
		}
		return raw, nil
	}
	gz, err := gzip.NewReader(br)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: gzip: %v", ErrFormat, name, err)
	}
	defer gz.Close()
	gz.Multistream(false)
	raw, err := io.ReadAll(io.LimitReader(gz, limit+1))
	if err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, fmt.Errorf("%w: %s: truncated: the gzip stream ends early (%v)", ErrFormat, name, err)
		}
		return nil, fmt.Errorf("%w: %s: gzip: %v", ErrFormat, name, err)
	}
	if len(raw) > limit {
		return nil, fmt.Errorf("%w: %s: decompresses to more than %d bytes", ErrFormat, name, limit)
	}
	var extra [1]byte
	if n, _ := io.ReadFull(br, extra[:]); n > 0 {
		return nil, fmt.Errorf("%w: %s: trailing data after the end of the gzip stream (a second gzip member or bytes appended to the file); "+
			"an IDX .gz file is one gzip stream", ErrFormat, name)
	}
	return raw, nil
}

// parseIDX parses the IDX bytes raw, checking the magic number when wantMagic is not 0.
func parseIDX(raw []byte, name string, wantMagic int) (dims []int, values []byte, err error) {
	if len(raw) < 4 {
		return nil, nil, fmt.Errorf("%w: %s: truncated: no 4-byte magic number (the file has %d bytes)", ErrFormat, name, len(raw))
	}
	hdr := raw[:4]
	if hdr[0] != 0 || hdr[1] != 0 || hdr[2] != 0x08 || hdr[3] == 0 {
		return nil, nil, fmt.Errorf("%w: %s: magic number %d (0x%08x) is not an unsigned-byte IDX magic (want %d for images, %d for labels)",
			ErrFormat, name, binary.BigEndian.Uint32(hdr), binary.BigEndian.Uint32(hdr), ImagesMagic, LabelsMagic)
	}
	rank := int(hdr[3])
	if magic := int(binary.BigEndian.Uint32(hdr)); wantMagic != 0 && magic != wantMagic {
		return nil, nil, fmt.Errorf("%w: %s: magic number %d (rank %d), want %d (rank %d)", ErrFormat, name, magic, rank, wantMagic, wantMagic-0x800)
	}
	if len(raw) < 4+4*rank {
		return nil, nil, fmt.Errorf("%w: %s: truncated: header announces %d dimensions, the file has %d bytes", ErrFormat, name, rank, len(raw))
	}
	dims = make([]int, rank)
	total := 1
	for i := range dims {
		dims[i] = int(binary.BigEndian.Uint32(raw[4+4*i:]))
		total *= dims[i]
		if dims[i] > maxIDXBytes || total > maxIDXBytes {
			return nil, nil, fmt.Errorf("%w: %s: dimensions %v exceed %d bytes", ErrFormat, name, dims[:i+1], maxIDXBytes)
		}
	}
	values = raw[4+4*rank:]
	if len(values) < total {
		return nil, nil, fmt.Errorf("%w: %s: truncated: header %v announces %d bytes of data, the file has %d", ErrFormat, name, dims, total, len(values))
	}
	if len(values) > total {
		return nil, nil, fmt.Errorf("%w: %s: trailing data: %d bytes after the %d bytes the header %v announces", ErrFormat, name, len(values)-total, total, dims)
	}
	return dims, values, nil
}

// EncodeIDX returns the raw (uncompressed) IDX encoding of unsigned-byte values with the
// given dimensions; it is the inverse of ReadIDX, for writing fixtures and subsets.
func EncodeIDX(dims []int, values []byte) ([]byte, error) {
	total := 1
	for _, d := range dims {
		if d < 0 {
			return nil, fmt.Errorf("datasets: EncodeIDX: negative dimension in %v", dims)
		}
		total *= d
	}
	if len(dims) == 0 || len(dims) > 255 {
		return nil, fmt.Errorf("datasets: EncodeIDX: rank %d must be 1 to 255", len(dims))
	}
	if total != len(values) {
		return nil, fmt.Errorf("datasets: EncodeIDX: dimensions %v hold %d values, got %d", dims, total, len(values))
	}
	out := make([]byte, 4+4*len(dims), 4+4*len(dims)+len(values))
	out[2], out[3] = 0x08, byte(len(dims))
	for i, d := range dims {
		binary.BigEndian.PutUint32(out[4+4*i:], uint32(d))
	}
	return append(out, values...), nil
}
