// Command elastic is one worker of an elastic MultiWorkerMirroredStrategy job
// (distribute.WithElastic(3, 0)) for bench/hosts/elastic.sh: the worker of TF_CONFIG trains
// keras Fit of the peer CNN (bench/multiworker's model: Conv2D 1->32 3x3 + ReLU, MaxPool 2,
// Flatten, Dense 5408->64 + ReLU, Dense 64->10, Adam 1e-3) on synthetic data, global
// batches of -batch split among the workers (the DATA auto-shard policy), so that a lost
// worker's share goes to the others.
//
// After every step it prints one JSON line on stdout:
//
//	{"rank":R,"step":S,"t":UNIX_NS,"workers":W}
//
// R is its TF_CONFIG index, S the global step number (from 1, over epochs), t the step's end
// and W the workers training at that point. Worker -victim prints {"rank":R,"killed":UNIX_NS}
// at the end of global step -kill-at and kills itself with SIGKILL, as a lost host would
// vanish: no message to the others, its sockets closed by the kernel.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime"
	"syscall"
	"time"

	"godist/bench/internal/peer"
	"godist/distlib/data"
	"godist/distlib/distribute"
	"godist/distlib/keras"
)

func main() {
	epochs := flag.Int("epochs", 3, "epochs")
	steps := flag.Int("steps", 20, "steps per epoch (the dataset holds that many global batches)")
	batch := flag.Int("batch", 192, "global batch size (192: 48 a worker of 4, 64 a worker of 3)")
	victim := flag.Int("victim", -1, "TF_CONFIG index of the worker that kills itself (-1: none)")
	killAt := flag.Int("kill-at", 30, "global step at whose end the victim kills itself")
	minW := flag.Int("min", 3, "WithElastic's min")
	flag.Parse()
	if err := run(*epochs, *steps, *batch, *victim, *killAt, *minW); err != nil {
		fmt.Fprintln(os.Stderr, "elastic:", err)
		os.Exit(1)
	}
}

func run(epochs, steps, batch, victim, killAt, minW int) error {
	if epochs < 1 || steps < 1 || batch < 1 {
		return fmt.Errorf("-epochs %d -steps %d -batch %d: want at least 1 each", epochs, steps, batch)
	}
	// One P: the kernels run on one thread (as bench/multiworker under fit.sh).
	runtime.GOMAXPROCS(1)
	s := distribute.NewMultiWorkerMirroredStrategy(distribute.WithElastic(minW, 0),
		distribute.WithCommunicationTimeout(60*time.Second))
	defer s.Close()
	rank, _ := s.Extended().Worker()

	rows := steps * batch
	xs, ys := peer.Images(rows)
	ds := data.FromTensorSlices(xs, ys).Batch(batch, false).WithOptions(data.Options{AutoShardPolicy: data.AutoShardData})
	var m *keras.Model
	s.Scope(func() {
		keras.SetRandomSeed(0)
		m = peer.CNN()
		m.Compile(keras.Adam(1e-3), keras.SparseCategoricalCrossentropy(true))
	})

	epoch := 0
	enc := json.NewEncoder(os.Stdout) // stdout is unbuffered: each line is out before a kill
	cb := keras.LambdaCallback{
		OnEpochBegin: func(e int, _ keras.Logs) { epoch = e },
		OnTrainBatchEnd: func(b int, _ keras.Logs) {
			now := time.Now().UnixNano()
			step := epoch*steps + b + 1
			_, n := s.Extended().Worker()
			_ = enc.Encode(map[string]any{"rank": rank, "step": step, "t": now, "workers": n})
			if rank == victim && step == killAt {
				_ = enc.Encode(map[string]any{"rank": rank, "killed": time.Now().UnixNano()})
				_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
				time.Sleep(time.Minute)
			}
		},
	}
	m.Fit(ds, keras.Epochs(epochs), keras.StepsPerEpoch(steps), keras.Verbose(0), keras.Callbacks(cb))
	_, n := s.Extended().Worker()
	fmt.Fprintf(os.Stderr, "elastic: worker %d done, %d workers at the end\n", rank, n)
	return nil
}
