package keras

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"

	"godist/distlib/distribute"
)

// Elastic training (distribute.WithElastic): when a step fails because a worker was lost,
// the remaining workers regroup (distribute.ElasticWorkers) and the step is retried with
// its global batch split among them. A worker one step behind (its all-reduce failed where
// another's completed) takes the variables, optimizer state and step statistics after that
// step from one that completed it, and skips the batch in hand: the others trained it.

// runElastic runs step, regrouping the workers and running it again each time it fails
// because a worker was lost; when this worker was one step behind, it takes the state after
// the step instead and returns that step's statistics.
func (e *syncTrainer) runElastic(ctx context.Context, step func() (stats, error)) (st stats, err error) {
	for {
		done := e.m.stepCount()
		st, err = step()
		if err == nil {
			e.last = st
			return st, nil
		}
		if e.paths.elastic == nil || ctx.Err() != nil || !e.paths.elastic.Regroupable(err) {
			return stats{}, err
		}
		behind, got, err := e.regroup(ctx, done, err)
		if err != nil {
			return stats{}, err
		}
		if behind {
			e.last = got
			return got, nil
		}
	}
}

// syncWorkers is Model.syncWorkers, the wait for the other workers at an epoch's end,
// regrouping them (elastic training) when one was lost, so that no worker leaves an epoch
// or Fit while another still needs it. After Fit's last epoch (last), too few workers left
// is no error: every step is done, and the workers gone had completed them too or are lost
// (a worker that completed this wait has left Fit, and one that completes it knows every
// worker completed every step).
func (e *syncTrainer) syncWorkers(ctx context.Context, epoch int, last bool) error {
	for {
		err := e.m.syncWorkers(ctx)
		if err == nil && e.paths.elastic != nil {
			// Workers that asked to join come in now, at the next epoch.
			var changed bool
			last := e.last
			changed, err = e.paths.elastic.Admit(ctx, epoch+1, func() ([]byte, error) { return e.m.encodeElasticState(last), nil })
			if changed {
				e.m.mw.groupChanged()
			}
		}
		if err == nil || e.paths.elastic == nil || ctx.Err() != nil || !e.paths.elastic.Regroupable(err) {
			return err
		}
		_, _, err = e.regroup(ctx, e.m.stepCount(), err)
		var few *distribute.TooFewWorkersError
		if last && errors.As(err, &few) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// regroup regroups the workers after cause stopped this worker with done steps completed.
// behind reports that this worker was one step behind: it now holds the state after the
// step the others completed, whose statistics are st.
func (e *syncTrainer) regroup(ctx context.Context, done int64, cause error) (behind bool, st stats, err error) {
	m := e.m
	last := e.last
	rg, err := e.paths.elastic.Regroup(ctx, done, cause, func() ([]byte, error) {
		return m.encodeElasticState(last), nil
	})
	if err != nil {
		return false, stats{}, err
	}
	m.mw.groupChanged()
	if rg.State != nil {
		if st, err = m.restoreElasticState(rg.State); err != nil {
			return false, stats{}, err
		}
	}
	m.mu.Lock()
	m.step = rg.Done
	m.mu.Unlock()
	return rg.State != nil, st, nil
}

func (e *syncTrainer) elastic() bool { return e.paths.elastic != nil }

// regroupAfter regroups the workers after err (a validation's) when it says a worker was
// lost; again reports that what failed can run again.
func (e *syncTrainer) regroupAfter(ctx context.Context, err error) (again bool, rerr error) {
	if e.paths.elastic == nil || ctx.Err() != nil || !e.paths.elastic.Regroupable(err) {
		return false, nil
	}
	if _, _, err := e.regroup(ctx, e.m.stepCount(), err); err != nil {
		return false, err
	}
	return true, nil
}

// join joins an elastic job (nothing otherwise) before Fit's first epoch: a worker admitted
// at another's epoch's end takes the state there and starts at the next epoch.
func (e *syncTrainer) join(ctx context.Context) error {
	if e.paths.elastic == nil {
		return nil
	}
	a, err := e.paths.elastic.Join(ctx)
	if err != nil || a.State == nil {
		return err
	}
	if _, err := e.m.restoreElasticState(a.State); err != nil {
		return err
	}
	e.m.mw.joined = a.Epoch
	return nil
}

// stepCount returns the number of training steps the model has started.
func (m *Model) stepCount() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.step
}

// elasticStats is a step's statistics as a regroup moves them.
type elasticStats struct {
	LossSum float64      `json:"loss_sum"`
	N       float64      `json:"n"`
	Metrics [][2]float64 `json:"metrics"`
}

// encodeElasticState serializes the model's state (as a backup holds it) and the statistics
// st of the last step, for a worker one step behind.
func (m *Model) encodeElasticState(st stats) []byte {
	state := m.encodeState(m.optimizer, 0, 0)
	js, _ := json.Marshal(elasticStats{st.lossSum, st.n, st.metrics})
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(state)))
	return append(append(out, state...), js...)
}

// restoreElasticState loads what encodeElasticState wrote on another worker.
func (m *Model) restoreElasticState(b []byte) (stats, error) {
	const what = "the state from the worker that completed the step"
	if len(b) < 8 || binary.LittleEndian.Uint64(b) > uint64(len(b)-8) {
		return stats{}, fmt.Errorf("%w: %s is truncated (%d bytes)", ErrBackup, what, len(b))
	}
	n := int(binary.LittleEndian.Uint64(b))
	st, err := decodeBackup(b[8:8+n], what)
	if err != nil {
		return stats{}, err
	}
	var es elasticStats
	if err := json.Unmarshal(b[8+n:], &es); err != nil {
		return stats{}, fmt.Errorf("%w: %s: its step statistics: %v", ErrBackup, what, err)
	}
	if err := m.restoreState(m.optimizer, what, st); err != nil {
		return stats{}, err
	}
	return stats{lossSum: es.LossSum, n: es.N, metrics: es.Metrics}, nil
}
