package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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
		noPin   bool
		elastic int
		err     string
	}{
		{"", 2, 0, false, 0, ""},
		{"--workers 3", 3, 0, false, 0, ""},
		{"--workers=4 --timeout 1m", 4, time.Minute, false, 0, ""},
		{"--workers 2 --no-pin", 2, 0, true, 0, ""},
		{"--workers 3 --elastic 2", 3, 0, false, 2, ""},
		{"--workers 0", 0, 0, false, 0, "want 1 to 64"},
		{"--workers two", 0, 0, false, 0, "invalid value"},
		{"--timeout -1s", 0, 0, false, 0, "negative"},
		{"--workers 2 --elastic 3", 0, 0, false, 0, "--elastic 3: want the least number of workers to go on with, 1 to --workers (2)"},
		{"extra", 0, 0, false, 0, `unexpected argument "extra" (usage: %%distributed [--workers N] [--elastic MIN]`},
		{"--gpus 2", 0, 0, false, 0, "not defined"},
	} {
		a, err := parseDistributedArgs(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("parseDistributedArgs(%q) = %v, want an error containing %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || a.workers != tc.workers || a.timeout != tc.timeout || a.noPin != tc.noPin || a.elastic != tc.elastic {
			t.Errorf("parseDistributedArgs(%q) = %+v, %v; want %d workers, timeout %v, no-pin %v, elastic %d", tc.in, a, err, tc.workers, tc.timeout, tc.noPin, tc.elastic)
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
i, n := s.Extended().Worker()
v, err := distribute.BroadcastFromChief(s, []*tensor.Tensor{tensor.Scalar(float32(10 + i))})
fmt.Printf("worker %d of %d chief=%v got %v err=%v\n", i, n, s.Extended().IsChief(), v[0].Data(), err)
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
`, []string{"[worker 0] Epoch 1/2\n[worker 0] 8/8 ━━━━━━━━━━━━━━━━━━━━ ", "[worker 0] Epoch 2/2\n[worker 0] 8/8 ━━━━━━━━━━━━━━━━━━━━ "}, "",
			map[string]int{"Epoch 1/2": 1, "Epoch 2/2": 1, "/step - loss": 2}},
		{"compile error names the line", `%%distributed --workers 2
x := undefinedThing + 1
`, nil, "cell line 2", nil},
		{"bad arguments", "%%distributed --workers -1\n1\n", nil, "want 1 to 64", nil},
		{"os.Exit ends the worker with its code", "%%distributed --workers 1\nimport \"os\"\nos.Exit(3)\n", nil, "worker 0 (exit code 3)", nil},
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
			// The workers' output, before the cluster panel's text table.
			cellOut, _, _ := strings.Cut(out.String(), "\n%%distributed ")
			for _, w := range tc.want {
				if !strings.Contains(cellOut, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			for w, want := range tc.count {
				if n := strings.Count(cellOut, w); n != want {
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

// TestDistributedPanelText: without a widget front end, a %%distributed cell prints the
// cluster panel once at the end as a text table: every task with its address and final
// state, the failed task's last lines, and no godist-panel: progress line in the output.
func TestDistributedPanelText(t *testing.T) {
	if testing.Short() {
		t.Skip("builds godist and starts worker processes; skipped under -short")
	}
	t.Setenv("GODIST_BIN", kernelTestBinary(t))
	s, err := interp.New(interp.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, tc := range []struct {
		name, cell string
		wantErr    string
		table      []*regexp.Regexp
	}{
		{"two workers exit", `%%distributed --workers 2
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
`, "", []*regexp.Regexp{
			regexp.MustCompile(`(?m)^%%distributed --workers 2: done$`),
			regexp.MustCompile(`(?m)^task +address +state +epoch +step +samples/s \(last 10 s\) +last line$`),
			regexp.MustCompile(`(?m)^worker 0 +127\.0\.0\.1:\d+ +exited +2/2 +8/8 +\d+\.\d +loss: \[`),
			regexp.MustCompile(`(?m)^worker 1 +127\.0\.0\.1:\d+ +exited +2/2 +8/8 +\d+\.\d +loss: \[`),
		}},
		{"a failed worker's last lines", `%%distributed --workers 2
import (
	"fmt"
	"os"
	"strings"
	"time"
)
fmt.Println("working")
if strings.Contains(os.Getenv("TF_CONFIG"), ` + "`" + `"index":1` + "`" + `) {
	fmt.Println("about to fail")
	panic("worker one gives up")
}
time.Sleep(time.Minute)
`, "worker 1", []*regexp.Regexp{
			regexp.MustCompile(`(?m)^%%distributed --workers 2: failed: worker 1 \(exit code 1\) first; 1 other task (was stopped|failed) after it$`),
			regexp.MustCompile(`(?m)^worker 0 +127\.0\.0\.1:\d+ +stopped\b`),
			regexp.MustCompile(`(?m)^worker 1 +127\.0\.0\.1:\d+ +failed +in the cell, line 11:2$`),
			regexp.MustCompile(`(?m)^worker 1 failed; its last lines:\n  working\n  about to fail\n(  .*\n)*  .*worker one gives up`),
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			out := &recOutput{}
			_, err := s.Execute(ctx, tc.cell, out)
			if tc.wantErr == "" && err != nil {
				t.Fatalf("Execute = %v\noutput:\n%s", err, out)
			}
			if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("Execute = %v, want an error naming %q\noutput:\n%s", err, tc.wantErr, out)
			}
			if tc.wantErr != "" { // the error shows the root-cause block first, then worker 0
				var ee *interp.EvalError
				tb := ""
				if errors.As(err, &ee) {
					tb = strings.Join(ee.Traceback, "\n")
				}
				re := regexp.MustCompile(`^WorkerError: worker 1 \(exit code 1\) first.*\n` +
					`Root cause \(first observed failure\): task worker 1 failed: exit status 1\n  host: +127\.0\.0\.1:\d+\n` +
					`  exit code:  1\n  time: .*Z\n  last lines: \(\d+\)\n(    \| .*\n)*    \| .*worker one gives up[^\n]*\n(    \| .*\n)*` +
					`Other failures, after it \(1\):\n  task worker 0 \(127\.0\.0\.1:\d+\): `)
				t.Logf("the cell's traceback:\n%s", tb)
				if !re.MatchString(tb) {
					t.Errorf("the cell's traceback:\n%s\nwant it to match %s", tb, re)
				}
			}
			cellOut, table, ok := strings.Cut(out.String(), "\n%%distributed ")
			if !ok {
				t.Fatalf("no panel table at the end:\n%s", out)
			}
			table = "%%distributed " + table
			if strings.Contains(out.String(), "godist-panel:") {
				t.Errorf("the panel's progress lines reached the cell:\n%s", out)
			}
			if strings.Count(out.String(), "%%distributed --workers 2:") != 1 {
				t.Errorf("the table is not printed exactly once:\n%s", out)
			}
			for _, re := range tc.table {
				if !re.MatchString(table) {
					t.Errorf("table lacks %s:\n%s\n(cell output:\n%s)", re, table, cellOut)
				}
			}
		})
	}
}
