package distribute

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"godist/distlib/device"
	"godist/distlib/tensor"
	"godist/internal/syncbuf"
)

// splitCPU resets the devices and splits the CPU into n logical devices for one test.
func splitCPU(t *testing.T, n int) {
	t.Helper()
	device.Reset()
	cfg := make([]device.LogicalDeviceConfiguration, n)
	if err := device.SetLogicalDeviceConfiguration(device.ListPhysicalDevices("CPU")[0], cfg); err != nil {
		t.Fatalf("SetLogicalDeviceConfiguration(%d) = %v", n, err)
	}
	t.Cleanup(device.Reset)
}

// cpu returns the full name of logical CPU i.
func cpu(i int) string { return fmt.Sprintf("%sCPU:%d", device.LocalPrefix, i) }

// captureLog sends the package log to a buffer for one test.
func captureLog(t *testing.T) *syncbuf.Buffer {
	t.Helper()
	buf := &syncbuf.Buffer{}
	old := SetLogOutput(buf)
	t.Cleanup(func() { SetLogOutput(old) })
	return buf
}

// recoverErr runs fn and returns the error it panicked with (nil if none).
func recoverErr(fn func()) (err error) {
	defer func() {
		if p := recover(); p != nil {
			if e, ok := p.(error); ok {
				err = e
				return
			}
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	fn()
	return nil
}

// withTimeout runs fn and fails the test if it does not return within d.
func withTimeout(t *testing.T, d time.Duration, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("did not finish within %v", d)
	}
}

func vec(vs ...float32) *tensor.Tensor { return tensor.MustNew([]int{len(vs)}, vs) }

func mat(rows, cols int, vs ...float32) *tensor.Tensor {
	return tensor.MustNew([]int{rows, cols}, vs)
}

func equalData(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func closeData(a, b []float32, rel float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		d := float64(a[i] - b[i])
		if d < 0 {
			d = -d
		}
		m := float64(b[i])
		if m < 0 {
			m = -m
		}
		if d > rel*max(m, 1e-3) {
			return false
		}
	}
	return true
}

func wantPanic(t *testing.T, name string, target error, contains string, fn func()) {
	t.Helper()
	err := recoverErr(fn)
	if err == nil {
		t.Fatalf("%s did not panic", name)
	}
	if target != nil && !errors.Is(err, target) {
		t.Fatalf("%s panicked with %v; want an error wrapping %v", name, err, target)
	}
	if contains != "" && !strings.Contains(err.Error(), contains) {
		t.Fatalf("%s error %q does not mention %q", name, err, contains)
	}
}

func closeAbs(a, b []float32, tol float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Abs(float64(a[i]-b[i])) > tol {
			return false
		}
	}
	return true
}
