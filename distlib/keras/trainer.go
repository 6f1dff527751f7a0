package keras

import (
	"context"

	"godist/distlib/data"
	"godist/distlib/distribute"
)

// trainer runs Fit's training steps on the model's strategy; FitContext is the one loop
// around it (epochs, callbacks, progress, interrupts). The strategy decides which:
// replicas in sync (syncTrainer; its bucketed multi-worker path and a device mesh are ways
// of running one step), or functions a ClusterCoordinator schedules on remote workers
// against variables on parameter servers (psTrainer, for strategies that are
// distribute.Coordinated), or a device mesh's SPMD step (meshTrainer, for a model built under
// a keras distribution).
type trainer interface {
	// kind names the strategies the trainer trains under, for the Fit options only it
	// takes (runOption.trainer).
	kind() string
	// params adds the trainer's own entries to the History's Params.
	params(p map[string]int)
	// begin prepares a Fit of cfg over ds (the model is compiled).
	begin(ctx context.Context, cfg *runConfig, ds *data.Dataset) error
	// batchesPerStep is the number of batches one step trains on.
	batchesPerStep() int
	// step trains on batches and returns their statistics (done true), or schedules them
	// and returns the statistics of the scheduled steps finished so far in the epoch
	// (done false: the rest comes from epochEnd). With done true it keeps nothing of the
	// batches: Fit hands their storage back to the iterator for the next ones
	// (data.Iterator.Recycle).
	step(ctx context.Context, batches []data.Element) (st stats, done bool, err error)
	// epochEnd waits for the epoch's scheduled steps (steps batches in all), reporting
	// their progress, and returns the statistics step has not returned with done true.
	epochEnd(ctx context.Context, steps int, prog *progress) (stats, error)
	// end releases what begin took.
	end()
}

// trainerFor returns the trainer of m: the only place keras asks the strategy what it can
// do, through the seam's interfaces (distribute's capabilities), never by its concrete type.
// A model a keras distribution made trains on its device mesh whatever the strategy.
func (m *Model) trainerFor() trainer {
	if m.engine != nil {
		return &meshTrainer{syncTrainer{m: m}}
	}
	if c, ok := psSeamOf(m.strategy); ok {
		return &psTrainer{m: m, s: c}
	}
	e := &syncTrainer{m: m}
	ext := m.strategy.Extended()
	e.paths.terms, _ = ext.(distribute.ReplicaTermsSummer)
	e.paths.buckets, _ = ext.(distribute.GradientBucketing)
	e.paths.elastic, _ = ext.(distribute.ElasticWorkers)
	return e
}

// stepPaths are the ways of running one synchronous step the strategy offers besides its
// all-reduce (nil: not offered).
type stepPaths struct {
	terms   distribute.ReplicaTermsSummer // local replicas' gradients summed as the optimizer reads them
	buckets distribute.GradientBucketing  // one replica per worker: gradients reduced in buckets during backward
	elastic distribute.ElasticWorkers     // workers regrouped when one is lost, the step retried (elastic.go)
}

// syncTrainer runs every step at once on the strategy's replicas (and workers), in sync.
type syncTrainer struct {
	m       *Model
	paths   stepPaths
	metrics []*Metric
	global  int   // rows of the global batch whose share pickRows took last; 0: none
	last    stats // the last step's statistics (elastic: what a worker one step behind takes)
}

// rowPicker is implemented by trainers whose process trains on some rows of every batch:
// pickRows returns the function that picks them for Iterator.NextRows (so that only they
// are stacked), or nil when the process takes whole batches.
type rowPicker interface {
	pickRows() func(count int) (lo, hi int)
}

// pickRows: with several workers sharing every batch (AutoShardData), this worker's share,
// as workerShare takes it (BalanceWorkers' shares in training). Elastic workers take whole
// batches: after a regroup, the batch in hand is split again among the workers left.
func (e *syncTrainer) pickRows() func(count int) (lo, hi int) {
	m := e.m
	index, workers := m.strategy.Extended().Worker()
	if workers <= 1 || m.mw.train != shardData || e.paths.elastic != nil {
		return nil
	}
	return func(count int) (lo, hi int) {
		e.global = count
		return distribute.PartRows(m.mw.balance.shares(workers, count), index, index+1)
	}
}

// syncTrainerKind names the strategies syncTrainer trains under.
const syncTrainerKind = "a strategy whose replicas train in sync (such as MultiWorkerMirroredStrategy)"

func (e *syncTrainer) kind() string { return syncTrainerKind }

func (e *syncTrainer) params(map[string]int) {}

func (e *syncTrainer) begin(ctx context.Context, cfg *runConfig, _ *data.Dataset) error {
	e.metrics = e.m.compiledMetrics()
	e.m.mw.balance = workerBalance{enabled: cfg.balanceWorkers}
	return e.join(ctx)
}

func (e *syncTrainer) batchesPerStep() int { return 1 }

func (e *syncTrainer) step(ctx context.Context, batches []data.Element) (stats, bool, error) {
	global := e.global // set when pickRows' function took this batch's rows
	e.global = 0
	st, err := e.runElastic(ctx, func() (stats, error) {
		return e.m.trainStep(ctx, batches[0], e.metrics, global, e.paths)
	})
	return st, true, err
}

func (e *syncTrainer) epochEnd(context.Context, int, *progress) (stats, error) { return stats{}, nil }

func (e *syncTrainer) end() {}

// meshTrainer runs every step on the model's device mesh (variables laid out by a keras
// distribution, mesh_hook.go).
type meshTrainer struct{ syncTrainer }

// pickRows: the mesh's step takes whole batches (its data layout splits them).
func (e *meshTrainer) pickRows() func(count int) (lo, hi int) { return nil }

func (e *meshTrainer) step(ctx context.Context, batches []data.Element) (stats, bool, error) {
	if err := ctx.Err(); err != nil {
		return stats{}, false, err
	}
	x, y := splitXY("Fit", batches[0], true)
	if err := checkBatch("Fit", x, y); err != nil {
		return stats{}, false, err
	}
	e.m.ensureBuiltContext(ctx, x)
	st, err := e.m.meshTrainStep(ctx, x, y, e.metrics)
	return st, true, err
}
