package keras

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"godist/distlib/data"
	"godist/distlib/distribute"
	"godist/distlib/keras/layers"
	"godist/distlib/tensor"
	"godist/distlib/transport"
)

// countingData returns steps global batches of batch rows in which batch j is the one-hot
// vector j with target 1: under a linear model without bias and the mean squared error,
// batch j moves weight j only, by one SGD step 2*lr*(w-1) of the whole batch's mean loss.
// So the final weights count how often each global batch was trained, and how much of it:
// a batch trained twice, skipped, or trained without the share of a lost worker leaves
// its weight elsewhere.
func countingData(steps, batch int) *data.Dataset {
	x := make([]float32, steps*batch*steps)
	y := make([]float32, steps*batch)
	for i := range steps * batch {
		x[i*steps+i/batch] = 1
		y[i] = 1
	}
	return data.FromTensorSlices(tensor.MustNew([]int{steps * batch, steps}, x), tensor.MustNew([]int{steps * batch, 1}, y)).
		Batch(batch, false).WithOptions(data.Options{AutoShardPolicy: data.AutoShardData})
}

// sgdStep is one SGD step of countingData's batch on weight w.
func sgdStep(w, lr float32) float32 { return w - lr*(2*(w-1)) }

// elasticFit trains countingData on n elastic workers (WithElastic(min, 0)) in this process
// for epochs; worker victim's transport closes at the start of step killStep of epoch
// killEpoch, and its goroutine ends there (kill -9 as the others see it). It returns the
// weights of every worker after its first step and at the end (nil for the victim), and
// the errors of Fit (recovered panics).
func elasticFit(t *testing.T, n, min, epochs, steps, batch, victim, killEpoch, killStep int) (first, final [][]float32, errs []error) {
	t.Helper()
	splitCPU(t, n)
	const lr = 0.1
	ds := countingData(steps, batch)
	mems := transport.NewMem(n)
	first, final, errs = make([][]float32, n), make([][]float32, n), make([]error, n)
	var wg, built sync.WaitGroup
	built.Add(n)
	for w := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer mems[w].Close()
			defer func() {
				if p := recover(); p != nil {
					if e, ok := p.(error); ok {
						errs[w] = e
					} else {
						errs[w] = fmt.Errorf("%v", p)
					}
				}
			}()
			s := distribute.NewMultiWorkerMirroredStrategy(distribute.WithTransport(mems[w]),
				distribute.WithDevices(fmt.Sprintf("/cpu:%d", w)), distribute.WithCommunicationTimeout(20*time.Second),
				distribute.WithElastic(min, 0))
			defer s.Close()
			var m *Model
			inProcessScopes.Lock()
			s.Scope(func() {
				m = Sequential(layers.Dense(1, layers.UseBias(false)))
				m.Compile(SGD(lr), MeanSquaredError())
			})
			inProcessScopes.Unlock()
			// Fit looks for the strategy in scope: no worker may be in its scope then.
			built.Done()
			built.Wait()
			epoch := 0
			cb := LambdaCallback{
				OnEpochBegin: func(e int, _ Logs) { epoch = e },
				OnTrainBatchBegin: func(b int, _ Logs) {
					if w == victim && epoch == killEpoch && b == killStep {
						mems[w].Close()
						runtime.Goexit()
					}
				},
				OnTrainBatchEnd: func(b int, _ Logs) {
					if epoch == 0 && b == 0 {
						first[w] = append([]float32(nil), m.GetWeights()[0].Data()...)
					}
				},
			}
			m.Fit(ds, Epochs(epochs), Callbacks(cb), Verbose(0))
			final[w] = m.GetWeights()[0].Data()
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatalf("the %d workers did not finish within 60 s", n)
	}
	return first, final, errs
}

// checkTrainedOnce checks that weight j of final went through one SGD step per epoch from
// its value in first (weight 0, whose batch comes first, one step fewer).
func checkTrainedOnce(t *testing.T, who string, first, final []float32, epochs int) {
	t.Helper()
	for j := range final {
		want := first[j]
		for e := range epochs {
			if j > 0 || e > 0 {
				want = sgdStep(want, 0.1)
			}
		}
		if math.Abs(float64(final[j]-want)) > 1e-5 {
			t.Errorf("%s: weight %d is %v, want %v (its global batch trained once per epoch, whole)", who, j, final[j], want)
		}
	}
}

// kill -9 of one of three elastic workers mid-epoch, as the others see it: they regroup, go
// on with the global batches split between the two of them, and end with equal weights in
// which every global batch was trained exactly once, whole.
func TestElasticFitLosesAWorker(t *testing.T) {
	for _, c := range []struct {
		name                            string
		epochs, victim, killEp, killAt int
	}{
		{"mid-epoch", 1, 2, 0, 5},
		{"chief", 1, 0, 0, 5},
		{"second epoch's first step", 2, 1, 1, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			first, final, errs := elasticFit(t, 3, 2, c.epochs, 10, 6, c.victim, c.killEp, c.killAt)
			var left []int
			for w := range 3 {
				if w == c.victim {
					continue
				}
				left = append(left, w)
				if errs[w] != nil {
					t.Fatalf("worker %d: Fit failed: %v", w, errs[w])
				}
				checkTrainedOnce(t, fmt.Sprintf("worker %d", w), first[w], final[w], c.epochs)
			}
			if !slices.Equal(final[left[0]], final[left[1]]) {
				t.Errorf("the two workers left end with different weights:\n%v\n%v", final[left[0]], final[left[1]])
			}
		})
	}
}

// Below min the survivors stop, naming the lost worker.
func TestElasticFitBelowMin(t *testing.T) {
	_, _, errs := elasticFit(t, 2, 2, 1, 6, 4, 1, 0, 2)
	var tf *distribute.TooFewWorkersError
	if errs[0] == nil || !errors.As(errs[0], &tf) {
		t.Fatalf("worker 0: Fit error %v, want a TooFewWorkersError", errs[0])
	}
	if got := errs[0].Error(); !strings.Contains(got, "worker 1 was lost after step 2; 1 worker remains, fewer than the 2 of WithElastic") {
		t.Errorf("worker 0: error %q does not name the lost worker and the minimum", got)
	}
}
