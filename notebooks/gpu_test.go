package notebooks

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// checkGPU checks 08-gpu.ipynb. Without a GPU (this machine, CI) the first output says so
// and why, placement falls back to the CPU and says so, and every GPU cell says what it
// skipped. With one, the first GPU is split into two logical GPUs, a matmul placed on /GPU:0
// runs there, and the course's CNN reaches the CPU run's accuracy band on one GPU and on
// MirroredStrategy over the two logical GPUs, within 0.005 of each other (the same global batch).
func checkGPU(t *testing.T, nb *notebook) {
	wantNoErrors(t, nb)
	first := findCell(t, nb, `ListPhysicalDevices("GPU")`)
	place := findCell(t, nb, `device.With("/GPU:0"`)
	split := findCell(t, nb, "SetLogicalDeviceConfiguration(gpus[0]")
	one := findCell(t, nb, "NewOneDeviceStrategy(\"/gpu:0\")")
	two := findCell(t, nb, "mirrored := distribute.NewMirroredStrategy")
	if strings.HasPrefix(cellAt(t, nb, first).Stream("stdout"), "Num GPUs Available: 0\n") {
		wantStdout(t, nb, first, `^Num GPUs Available: 0\ngpu: no GPU: .*libcuda\.so\.1.*\nNo GPU on this machine: the GPU cells below skip their work\.\n$`)
		wantStdout(t, nb, split, `^skipped \(no GPU\): SetLogicalDeviceConfiguration`)
		wantStdout(t, nb, place, `^Executing op MatMul in device /job:localhost/replica:0/task:0/device:CPU:0\nc lives on /job:localhost/replica:0/task:0/device:CPU:0\n`)
		wantOutput(t, nb, place, `/GPU:0 \(no GPU devices are available in this process\); soft placement puts it on /job:localhost/replica:0/task:0/device:CPU:0`)
		wantStdout(t, nb, one, `^skipped \(no GPU\): trainCNN\(distribute.NewOneDeviceStrategy`)
		wantStdout(t, nb, two, `^skipped \(no GPU\): trainCNN\(distribute.NewMirroredStrategy`)
		return
	}
	wantStdout(t, nb, first, `^Num GPUs Available: [1-9]\d*\ngpu: [1-9]\d* GPU\(s\): GPU:0 `)
	wantStdout(t, nb, split, `^[1-9]\d* Physical GPUs, [2-9]\d* Logical GPUs\n/job:localhost/replica:0/task:0/device:GPU:0\n/job:localhost/replica:0/task:0/device:GPU:1\n`)
	wantStdout(t, nb, place, `^Executing op MatMul in device /job:localhost/replica:0/task:0/device:GPU:0\nc lives on /job:localhost/replica:0/task:0/device:GPU:0\n`)
	// The CPU run of the same cells (OneDevice /cpu:0, Mirrored on two logical CPUs) measured
	// 0.9555 for both (2026-11-26).
	wantStdout(t, nb, one, `(?m)^one GPU: test accuracy 0\.9[3-9]\d\d$`)
	wantStdout(t, nb, two, `(?m)^two logical GPUs: test accuracy 0\.9[3-9]\d\d \(one GPU: 0\.\d{4}\)$`)
	m := regexp.MustCompile(`test accuracy (0\.\d{4}) \(one GPU: (0\.\d{4})\)`).FindStringSubmatch(cellAt(t, nb, two).Stream("stdout"))
	if m != nil {
		a, _ := strconv.ParseFloat(m[1], 64)
		b, _ := strconv.ParseFloat(m[2], 64)
		if d := a - b; d > 0.005 || d < -0.005 {
			t.Errorf("two logical GPUs reach %.4f, one GPU %.4f: more than 0.005 apart with the same global batch", a, b)
		}
	}
}
