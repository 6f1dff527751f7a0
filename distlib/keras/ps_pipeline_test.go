package keras

import (
	"math"
	"testing"

	"godist/distlib/data"
	"godist/distlib/distribute"
	"godist/distlib/tensor"
)

// Fit under ParameterServerStrategy, synchronous (the default) and pipelined, trains the
// MNIST model to about the accuracy of one process (0.914 after one epoch).
//
// With one worker, the pipelined steps read variables exactly one step stale, and training
// is deterministic: 0.906 in 24 runs of 24, idle or with both cores kept busy (2026-11-27).
// With two workers, the pushes of the two are asynchronous, as in TensorFlow: a worker the
// scheduler starves computes on values the other has moved on from, by as many steps as
// the other took meanwhile. Synchronous, that costs little (0.885-0.922 in 24 runs); pipelined,
// each worker is also a step behind itself, and accuracy after one epoch spread over
// 0.795-0.907 in 24 runs and fell to 0.771 once in CI beside other test binaries. So that
// case is held to having trained (at least 0.6; chance is 0.1) and to its exactly-once
// count, and the pipeline's accuracy to the one-worker case's band.
func TestPSFitPipelineAccuracy(t *testing.T) {
	train, test := mnistSmall(t)
	SetRandomSeed(1)
	local := mnistModel()
	local.Fit(train, Epochs(1), Verbose(0))
	want := local.Evaluate(test, Verbose(0))["accuracy"]
	for _, tt := range []struct {
		name         string
		nps, workers int
		opts         []FitOption
		band         float64 // of one process's accuracy; 0: only the floor
	}{
		{"default", 1, 2, nil, 0.05},
		{"synchronous 2 ps", 2, 2, []FitOption{PSPipeline(false)}, 0.05},
		{"pipelined", 1, 1, []FitOption{PSPipeline(true)}, 0.05},
		{"pipelined 2 ps", 2, 1, []FitOption{PSPipeline(true)}, 0.05},
		{"pipelined 2 workers", 1, 2, []FitOption{PSPipeline(true)}, 0},
		{"pipelined 2 workers 2 ps", 2, 2, []FitOption{PSPipeline(true)}, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, servers := psStrategy(t, tt.nps, tt.workers, distribute.WithVariablePartitioner(distribute.NewFixedShardsPartitioner(tt.nps)))
			SetRandomSeed(1)
			var m *Model
			s.Scope(func() { m = mnistModel() })
			h := m.Fit(train, optionArgs(append([]FitOption{Epochs(1), Verbose(0), StepsPerExecution(4)}, tt.opts...))...)
			got := m.Evaluate(test, Verbose(0))["accuracy"]
			t.Logf("accuracy: one process %.3f, %s %.3f", want, tt.name, got)
			switch {
			case tt.band == 0 && got < 0.6:
				t.Errorf("accuracy %s = %.3f, want >= 0.6 (one process: %.3f)", tt.name, got, want)
			case tt.band > 0 && math.Abs(got-want) > tt.band:
				t.Errorf("accuracy %s = %.3f, want within %.2f of one process's %.3f", tt.name, got, tt.band, want)
			}
			// Every batch's gradients were applied exactly once per variable shard (no
			// duplicates without failures, none lost to the pipeline).
			steps := h.Params["steps"]
			var applied int64
			for _, srv := range servers {
				applied += srv.Stats().Applied
			}
			if wantApplied := int64(steps * 4 * tt.nps); applied != wantApplied {
				t.Errorf("%s: %d updates applied on the ps tasks, want %d (%d steps x 4 variables x %d shards)", tt.name, applied, wantApplied, steps, tt.nps)
			}
		})
	}
}

func TestPSArgsRoundTrip(t *testing.T) {
	x, y := tensor.Zeros(2, 3), tensor.Zeros(2)
	batches := []data.Element{{x, y}, {x, y}}
	tests := []struct {
		mode  psTrainMode
		seeds []uint64
	}{
		{psTrainMode{}, []uint64{1, 2}},
		{psTrainMode{pipeline: true, fit: 1<<63 + 12345}, []uint64{math.MaxUint64, 0}},
	}
	for _, tt := range tests {
		mode, gb, seeds, err := psUnpackArgs(psArgs(tt.mode, batches, tt.seeds))
		if err != nil || mode != tt.mode || len(gb) != 2 || seeds[0] != tt.seeds[0] || seeds[1] != tt.seeds[1] {
			t.Errorf("psUnpackArgs(psArgs(%+v, %v)) = %+v, %d batches, %v, %v; want the same back", tt.mode, tt.seeds, mode, len(gb), seeds, err)
		}
	}
	if _, _, _, err := psUnpackArgs([]*tensor.Tensor{tensor.Zeros(2, 4), x, y}); err == nil {
		t.Error("psUnpackArgs with a header of shape [2 4] for 1 batch succeeded, want an error (the header has n+2 rows)")
	}
}
