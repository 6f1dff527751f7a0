package kernels

import (
	"bytes"
	"math"
	"os"
	"regexp"
	"strings"
	"testing"
	"unsafe"

	"godist/distlib/optim"
)

// ptxEntry is one .entry of a PTX file: its name and parameter types in order.
type ptxEntry struct {
	name  string
	types []string
}

var (
	entryRE = regexp.MustCompile(`(?m)^\.visible \.entry (\w+)\(\s*([^)]*)\)`)
	paramRE = regexp.MustCompile(`\.param (\.\w+) (\w+)`)
)

// parsePTX returns the entries of a PTX module, keyed by name.
func parsePTX(t *testing.T, src []byte) map[string]ptxEntry {
	t.Helper()
	out := map[string]ptxEntry{}
	for _, m := range entryRE.FindAllSubmatch(src, -1) {
		e := ptxEntry{name: string(m[1])}
		for _, pm := range paramRE.FindAllSubmatch(m[2], -1) {
			e.types = append(e.types, string(pm[1]))
		}
		out[e.name] = e
	}
	return out
}

func TestTableMatchesPTX(t *testing.T) {
	for _, tc := range []struct {
		name, target string
		src          []byte
	}{
		{"sm80", ".target sm_80", ptxSM80},
		{"sm90", ".target sm_90", ptxSM90},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !bytes.Contains(tc.src, []byte("\n"+tc.target+"\n")) {
				t.Fatalf("PTX does not declare %q", tc.target)
			}
			if !bytes.Contains(tc.src, []byte("\n.version 7.8\n")) {
				t.Errorf("PTX is not ISA 7.8 (nvcc 11.8's); regenerate with go generate ./gpu/kernels or update this test and the package doc")
			}
			entries := parsePTX(t, tc.src)
			if len(entries) != len(All) {
				t.Errorf("PTX has %d entries, the table %d", len(entries), len(All))
			}
			for _, k := range All {
				e, ok := entries[k.Name]
				if !ok {
					t.Errorf("table kernel %s is not in the PTX", k.Name)
					continue
				}
				var want []string
				for _, prm := range k.Params {
					want = append(want, prm.Kind.PTXType())
				}
				if strings.Join(e.types, " ") != strings.Join(want, " ") {
					t.Errorf("%s: PTX params %v, table %v", k.Name, e.types, want)
				}
			}
			for name := range entries {
				if _, err := Lookup(name); err != nil {
					t.Errorf("PTX kernel %s is not in the table", name)
				}
			}
		})
	}
}

// The .cu source and the table must name the same kernels with the same parameter names.
func TestTableMatchesSource(t *testing.T) {
	src := readFile(t, "kernels.cu")
	re := regexp.MustCompile(`__global__ void (\w+)\(([^)]*)\)`)
	ms := re.FindAllStringSubmatch(src, -1)
	if len(ms) != len(All) {
		t.Fatalf("kernels.cu has %d kernels, the table %d", len(ms), len(All))
	}
	for j, m := range ms {
		k := All[j]
		if m[1] != k.Name {
			t.Errorf("kernel %d: kernels.cu has %s, the table %s (keep the same order)", j, m[1], k.Name)
			continue
		}
		args := strings.Split(m[2], ",")
		if len(args) != len(k.Params) {
			t.Errorf("%s: kernels.cu has %d params, the table %d", k.Name, len(args), len(k.Params))
			continue
		}
		for pi, a := range args {
			f := strings.Fields(strings.NewReplacer("*", " * ").Replace(a))
			name := f[len(f)-1]
			kind := I32
			switch {
			case strings.Contains(a, "*"):
				kind = Ptr
			case f[0] == "float":
				kind = F32
			}
			if name != k.Params[pi].Name || kind != k.Params[pi].Kind {
				t.Errorf("%s param %d: kernels.cu %q, table %s %s", k.Name, pi, strings.TrimSpace(a), k.Params[pi].Name, k.Params[pi].Kind)
			}
		}
	}
}

func TestPTX(t *testing.T) {
	for _, tc := range []struct {
		major, minor int
		want         []byte
		err          string
	}{
		{9, 0, ptxSM90, ""},
		{10, 0, ptxSM90, ""},
		{8, 0, ptxSM80, ""},
		{8, 6, ptxSM80, ""},
		{7, 5, nil, "below 8.0"},
		{-1, 0, nil, "not valid"},
	} {
		got, err := PTX(tc.major, tc.minor)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("PTX(%d, %d) error %v, want %q", tc.major, tc.minor, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("PTX(%d, %d): %v", tc.major, tc.minor, err)
		}
		if len(got) != len(tc.want)+1 || got[len(got)-1] != 0 || !bytes.Equal(got[:len(got)-1], tc.want) {
			t.Errorf("PTX(%d, %d) is not the embedded module plus a NUL", tc.major, tc.minor)
		}
		got[0] = 'X'
		if tc.want[0] == 'X' {
			t.Errorf("PTX(%d, %d) returned the embedded bytes, not a copy", tc.major, tc.minor)
		}
	}
}

func TestArgs(t *testing.T) {
	for _, tc := range []struct {
		name string
		k    *Kernel
		vals []any
		err  string
	}{
		{"adam", Adam, []any{DevicePtr(0x1000), DevicePtr(0x2000), DevicePtr(0x3000), DevicePtr(0x4000), float32(0.5), float32(0.1), 0.001, float32(1e-7), 12345}, ""},
		{"nesterov bool", SGDMomentum, []any{DevicePtr(8), DevicePtr(16), DevicePtr(24), float32(0.1), float32(0.9), true, int32(7)}, ""},
		{"nullable", RMSprop, []any{DevicePtr(8), DevicePtr(16), DevicePtr(24), DevicePtr(0), float32(0.1), float32(0.9), float32(1e-7), float32(0), 3}, ""},
		{"count", Add, []any{DevicePtr(8), DevicePtr(16), 4}, "takes 4 arguments"},
		{"null", Add, []any{DevicePtr(8), DevicePtr(0), DevicePtr(16), 4}, "null device pointer"},
		{"go pointer", Add, []any{DevicePtr(8), &[]float32{1}, DevicePtr(16), 4}, "pass a kernels.DevicePtr"},
		{"negative", Add, []any{DevicePtr(8), DevicePtr(8), DevicePtr(16), -1}, "outside [0,"},
		{"too big", Fill, []any{DevicePtr(8), float32(1), int64(math.MaxInt32) + 1}, "outside [0,"},
		{"float type", Scale, []any{DevicePtr(8), 2, DevicePtr(16), 4}, "pass a float32"},
		{"float overflow", Scale, []any{DevicePtr(8), 1e300, DevicePtr(16), 4}, "overflows float32"},
		{"int type", Fill, []any{DevicePtr(8), float32(1), 4.0}, "pass an int"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ptrs, err := tc.k.Args(tc.vals...)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), tc.k.Name) {
					t.Fatalf("error %v, want one naming %s with %q", err, tc.k.Name, tc.err)
				}
				if _, perr := tc.k.Pack(tc.vals...); perr == nil || perr.Error() != err.Error() {
					t.Fatalf("Pack error %v, Args error %v", perr, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			buf, err := tc.k.Pack(tc.vals...)
			if err != nil {
				t.Fatal(err)
			}
			off := 0
			for j, prm := range tc.k.Params {
				size := prm.Kind.Size()
				off = (off + size - 1) / size * size
				// The slot Args points at must hold the same bytes Pack laid out.
				slot := unsafe.Slice((*byte)(ptrs[j]), size)
				if !bytes.Equal(slot, buf[off:off+size]) {
					t.Errorf("param %d (%s): Args bytes %x, Pack bytes %x", j, prm.Name, slot, buf[off:off+size])
				}
				want := expected(t, prm, tc.vals[j])
				if !bytes.Equal(slot, want) {
					t.Errorf("param %d (%s): bytes %x, want %x", j, prm.Name, slot, want)
				}
				off += size
			}
			if off != len(buf) {
				t.Errorf("Pack length %d, want %d", len(buf), off)
			}
		})
	}
}

// expected returns the little-endian bytes a value must become, computed independently.
func expected(t *testing.T, prm Param, v any) []byte {
	t.Helper()
	le := func(x uint64, n int) []byte {
		b := make([]byte, n)
		for j := range b {
			b[j] = byte(x >> (8 * j))
		}
		return b
	}
	switch x := v.(type) {
	case DevicePtr:
		return le(uint64(x), 8)
	case float32:
		return le(uint64(math.Float32bits(x)), 4)
	case float64:
		return le(uint64(math.Float32bits(float32(x))), 4)
	case int:
		return le(uint64(x), 4)
	case int32:
		return le(uint64(x), 4)
	case bool:
		if x {
			return le(1, 4)
		}
		return le(0, 4)
	}
	t.Fatalf("no expectation for %T", v)
	return nil
}

func TestPackLayout(t *testing.T) {
	// fill_f32(ptr, f32, i32): 8 + 4 + 4; adam's 4 ptrs then 4 f32 and an i32: 32+20 = 52.
	// axpy_f32(f32, ptr, ptr, i32): the pointer after the float aligns to 8.
	for _, tc := range []struct {
		k    *Kernel
		vals []any
		size int
	}{
		{Fill, []any{DevicePtr(1), float32(2), 3}, 16},
		{Adam, []any{DevicePtr(1), DevicePtr(2), DevicePtr(3), DevicePtr(4), float32(1), float32(1), float32(1), float32(1), 5}, 52},
		{Axpy, []any{float32(2), DevicePtr(1), DevicePtr(2), 3}, 28},
	} {
		buf, err := tc.k.Pack(tc.vals...)
		if err != nil {
			t.Fatal(err)
		}
		if len(buf) != tc.size {
			t.Errorf("%s: Pack gave %d bytes, want %d", tc.k.Name, len(buf), tc.size)
		}
	}
}

func TestGeometry(t *testing.T) {
	for _, tc := range []struct {
		name   string
		got    func() (Geometry, error)
		grid   [3]uint32
		block  [3]uint32
		shared uint32
		err    string
	}{
		{"linear 1", func() (Geometry, error) { return Linear(1) }, [3]uint32{1, 1, 1}, [3]uint32{256, 1, 1}, 0, ""},
		{"linear 257", func() (Geometry, error) { return Linear(257) }, [3]uint32{2, 1, 1}, [3]uint32{256, 1, 1}, 0, ""},
		{"linear capped", func() (Geometry, error) { return Linear(1 << 30) }, [3]uint32{MaxLinearGrid, 1, 1}, [3]uint32{256, 1, 1}, 0, ""},
		{"linear empty", func() (Geometry, error) { return Linear(0) }, [3]uint32{0, 1, 1}, [3]uint32{256, 1, 1}, 0, ""},
		{"linear negative", func() (Geometry, error) { return Linear(-1) }, [3]uint32{}, [3]uint32{}, 0, "element count -1"},
		{"rows 10", func() (Geometry, error) { return RowBlocks(64, 10) }, [3]uint32{64, 1, 1}, [3]uint32{32, 1, 1}, 128, ""},
		{"rows 100", func() (Geometry, error) { return RowBlocks(3, 100) }, [3]uint32{3, 1, 1}, [3]uint32{128, 1, 1}, 512, ""},
		{"rows no cols", func() (Geometry, error) { return RowBlocks(3, 0) }, [3]uint32{3, 1, 1}, [3]uint32{32, 1, 1}, 128, ""},
		{"rows none", func() (Geometry, error) { return RowBlocks(0, 5) }, [3]uint32{0, 1, 1}, [3]uint32{32, 1, 1}, 128, ""},
		{"rows wide", func() (Geometry, error) { return RowBlocks(2, 100000) }, [3]uint32{2, 1, 1}, [3]uint32{1024, 1, 1}, 4096, ""},
		{"columns 10", func() (Geometry, error) { return ColumnTiles(10) }, [3]uint32{1, 1, 1}, [3]uint32{32, 8, 1}, 0, ""},
		{"columns 65", func() (Geometry, error) { return ColumnTiles(65) }, [3]uint32{3, 1, 1}, [3]uint32{32, 8, 1}, 0, ""},
		{"tiles", func() (Geometry, error) { return Tiles2D(100, 33, 16, 16) }, [3]uint32{7, 3, 1}, [3]uint32{16, 16, 1}, 0, ""},
		{"tiles block", func() (Geometry, error) { return Tiles2D(100, 33, 64, 32) }, [3]uint32{}, [3]uint32{}, 0, "1 to 1024 threads"},
		{"tiles y", func() (Geometry, error) { return Tiles2D(1, 1<<20, 1, 1) }, [3]uint32{}, [3]uint32{}, 0, "over CUDA's 65535"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := tc.got()
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if g.Grid != tc.grid || g.Block != tc.block || g.Shared != tc.shared {
				t.Errorf("got %+v, want grid %v block %v shared %d", g, tc.grid, tc.block, tc.shared)
			}
		})
	}
	if g, _ := Linear(0); !g.Empty() {
		t.Errorf("Linear(0) is not Empty")
	}
}

func TestAdamAlpha(t *testing.T) {
	// The alpha adam_f32 gets must be the one optim's Adam uses: one step of Spec.Apply on
	// a zero state gives w = -alpha*m/(sqrt(v)+eps) with m = (1-b1)g, v = (1-b2)g².
	s := optim.NewAdam(0.01, 0.9, 0.999, 1e-7)
	for _, step := range []int64{1, 2, 10, 1000} {
		alpha, err := AdamAlpha(s.LearningRate, s.Beta1, s.Beta2, step)
		if err != nil {
			t.Fatal(err)
		}
		tf := float64(step)
		want := float32(0.01 * math.Sqrt(1-math.Pow(0.999, tf)) / (1 - math.Pow(0.9, tf)))
		if alpha != want {
			t.Errorf("t=%d: alpha %v, want %v", step, alpha, want)
		}
		w, g := []float32{0}, []float32{0.5}
		m, v := []float32{0}, []float32{0}
		s.Apply(w, g, [][]float32{m, v}, step)
		b1, b2, eps := float32(1-s.Beta1), float32(1-s.Beta2), float32(s.Epsilon)
		mm := (g[0] - 0) * b1
		vv := (g[0]*g[0] - 0) * b2
		if got := -alpha * mm / (float32(math.Sqrt(float64(vv))) + eps); got != w[0] {
			t.Errorf("t=%d: kernel formula gives %v, optim %v", step, got, w[0])
		}
	}
	if _, err := AdamAlpha(0.1, 0.9, 0.999, 0); err == nil {
		t.Errorf("AdamAlpha(t=0) gave no error")
	}
}

func readFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestWindow(t *testing.T) {
	for _, tc := range []struct {
		h, w, k, stride int
		padding         string
		oh, ow, pt, pl  int
		err             string
	}{
		{28, 28, 3, 1, "valid", 26, 26, 0, 0, ""},
		{28, 28, 3, 1, "same", 28, 28, 1, 1, ""},
		{9, 10, 2, 2, "same", 5, 5, 0, 0, ""},
		{9, 10, 2, 2, "valid", 4, 5, 0, 0, ""},
		{13, 11, 4, 2, "SAME", 7, 6, 1, 1, ""},
		{2, 2, 3, 1, "valid", 0, 0, 0, 0, "larger than the input"},
		{5, 5, 3, 0, "same", 0, 0, 0, 0, "must all be >= 1"},
		{5, 5, 3, 1, "full", 0, 0, 0, 0, `padding "full"`},
	} {
		oh, ow, pt, pl, err := Window(tc.h, tc.w, tc.k, tc.k, tc.stride, tc.padding)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%+v: error %v, want %q", tc, err, tc.err)
			}
			continue
		}
		if err != nil || oh != tc.oh || ow != tc.ow || pt != tc.pt || pl != tc.pl {
			t.Errorf("%+v: got %d %d %d %d %v", tc, oh, ow, pt, pl, err)
		}
	}
}
