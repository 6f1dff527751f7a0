package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"godist/interp"
)

// recOutput records a cell's streams.
type recOutput struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (o *recOutput) Stream(_, text string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.buf.WriteString(text)
}
func (o *recOutput) Display(map[string]any, map[string]any, string, bool) {}
func (o *recOutput) ClearOutput(bool)                                     {}
func (o *recOutput) Input(string, bool) (string, error)                   { return "", errors.New("no input") }
func (o *recOutput) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}

func TestParseDistributedArgs(t *testing.T) {
	for _, tc := range []struct {
		in      string
		workers int
		timeout time.Duration
		err     string
	}{
		{"", 2, 0, ""},
		{"--workers 3", 3, 0, ""},
		{"--workers=4 --timeout 1m", 4, time.Minute, ""},
		{"--workers 0", 0, 0, "want 1 to 64"},
		{"--workers two", 0, 0, "invalid value"},
		{"--timeout -1s", 0, 0, "negative"},
		{"extra", 0, 0, `unexpected argument "extra"`},
		{"--gpus 2", 0, 0, "not defined"},
	} {
		a, err := parseDistributedArgs(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("parseDistributedArgs(%q) = %v, want an error containing %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || a.workers != tc.workers || a.timeout != tc.timeout {
			t.Errorf("parseDistributedArgs(%q) = %+v, %v; want %d workers, timeout %v", tc.in, a, err, tc.workers, tc.timeout)
		}
	}
}

// TestDistributedMagic runs cells on two worker processes of a real godist binary.
func TestDistributedMagic(t *testing.T) {
	if testing.Short() {
		t.Skip("builds godist and starts worker processes; skipped under -short")
	}
	bin := filepath.Join(t.TempDir(), "godist")
	if out, err := exec.Command("go", "build", "-o", bin, "godist/cmd/godist").CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/godist: %v\n%s", err, out)
	}
	t.Setenv("GODIST_BIN", bin)
	s, err := interp.New(interp.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, tc := range []struct {
		name, cell string
		want       []string
		wantErr    string
		count      map[string]int // substrings and how many times each must appear
	}{
		{"two workers", `%%distributed --workers 2
import (
	"fmt"
	"godist/distlib/distribute"
	"godist/distlib/tensor"
)
s := distribute.NewMultiWorkerMirroredStrategy()
i, n := s.ExtendedWorker()
v, err := distribute.BroadcastFromChief(s, []*tensor.Tensor{tensor.Scalar(float32(10 + i))})
fmt.Printf("worker %d of %d chief=%v got %v err=%v\n", i, n, s.ExtendedIsChief(), v[0].Data(), err)
`, []string{"[worker 0] worker 0 of 2 chief=true got [10] err=<nil>", "[worker 1] worker 1 of 2 chief=false got [10] err=<nil>"}, "", nil},
		{"Fit prints each epoch's lines once", `%%distributed --workers 1
import (
	"godist/distlib/data"
	"godist/distlib/keras"
	"godist/distlib/keras/layers"
	"godist/distlib/tensor"
)
x := tensor.RandomNormal([]int{256, 4}, 0, 1, 1)
m := keras.Sequential(layers.Dense(1, layers.InputShape(4)))
m.Compile(keras.SGD(0.01), keras.MeanSquaredError())
m.Fit(data.FromTensorSlices(x, tensor.ReduceSum(x, 1)).Batch(32, false), keras.Epochs(2))
`, []string{"[worker 0] Epoch 1/2\n[worker 0] 8/8 [====", "[worker 0] Epoch 2/2\n[worker 0] 8/8 [===="}, "",
			map[string]int{"Epoch 1/2": 1, "Epoch 2/2": 1, "/step - loss": 2}},
		{"compile error names the line", `%%distributed --workers 2
x := undefinedThing + 1
`, nil, "cell line 2", nil},
		{"bad arguments", "%%distributed --workers -1\n1\n", nil, "want 1 to 64", nil},
		{"timeout stops the workers", `%%distributed --workers 1 --timeout 2s
import "time"
time.Sleep(time.Minute)
`, nil, "stopped", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			out := &recOutput{}
			_, err := s.Execute(ctx, tc.cell, out)
			if tc.wantErr != "" {
				var ee *interp.EvalError
				if !errors.As(err, &ee) || !strings.Contains(ee.Value, tc.wantErr) {
					t.Fatalf("Execute(%s) = %v, want an EvalError containing %q\noutput:\n%s", tc.name, err, tc.wantErr, out)
				}
				return
			}
			if err != nil {
				t.Fatalf("Execute(%s) = %v\noutput:\n%s", tc.name, err, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			for w, want := range tc.count {
				if n := strings.Count(out.String(), w); n != want {
					t.Errorf("%q appears %d times, want %d:\n%s", w, n, want, out)
				}
			}
		})
	}
}

// TestEnsureOnPath: the kernel puts its own directory first on PATH when `godist` on PATH
// is another binary or none (godist install --prefix), once.
func TestEnsureOnPath(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	exe, _ = filepath.EvalSymlinks(exe)
	t.Setenv("PATH", "/nonexistent-dir")
	added, err := ensureOnPath()
	if err != nil || added != filepath.Dir(exe) {
		t.Fatalf("ensureOnPath() = %q, %v; want %q", added, err, filepath.Dir(exe))
	}
	if want := filepath.Dir(exe) + string(os.PathListSeparator) + "/nonexistent-dir"; os.Getenv("PATH") != want {
		t.Fatalf("PATH = %q, want %q", os.Getenv("PATH"), want)
	}
	if added, _ := ensureOnPath(); added != "" {
		t.Errorf("a second ensureOnPath added %q again", added)
	}
}
