package keras

import (
	"godist/distlib/tensor"
	"godist/internal/simd"
)

// applyReplicaTerms ends a step of several local replicas whose strategy handed their
// gradients over as terms (ReplicaTermsSummer.SumTerms, tensors in the order of
// trainStep's lists: the nTrain gradients, then the statistics): every replica's
// optimizer sums them in replica order as it reads them, on the replica's goroutine, as
// the strategy's all-reduce would have summed them (bit for bit), without writing the
// sums; the statistics are summed in the same order.
func (m *Model) applyReplicaTerms(terms [][][]float32, nTrain int) (stats, error) {
	grads := make([][]gradTerms, len(m.vars))
	vars := make([][]*tensor.Variable, len(m.vars))
	for c := range m.vars {
		grads[c] = make([]gradTerms, nTrain)
		for i := range nTrain {
			grads[c][i] = terms[i]
		}
		vars[c] = m.variables(c, true)
	}
	if err := m.optimizer.applyTerms(grads, vars); err != nil {
		return stats{}, err
	}
	m.counters.replicaTermSteps.Add(1)
	return statsFrom(sumInOrder(terms[nTrain])), nil
}

// sumInOrder returns terms[0] + terms[1] + ..., added in that order (as the strategies'
// reductions and the optimizer's ApplyTerms add them).
func sumInOrder(terms [][]float32) []float32 {
	sums := append([]float32(nil), terms[0]...)
	for _, t := range terms[1:] {
		simd.AddTo(sums, t)
	}
	return sums
}
