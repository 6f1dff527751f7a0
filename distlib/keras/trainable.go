package keras

import (
	"fmt"

	"godist/distlib/keras/layers"
)

// SetTrainable freezes (false) or unfreezes (true) the whole model, like
// model.trainable = False in Keras: it sets every layer's flag (layers.TrainableLayer), and
// while the model is not trainable none of its weights train, whatever its layers say. A
// frozen weight is not in TrainableVariables, gets no gradient all-reduce and no optimizer
// update in Fit, and counts as non-trainable in Summary.
//
// Unlike Keras, no new Compile is needed: a change takes effect at the next Fit (a Fit
// under way keeps the set it started with), and at once in TrainableVariables and Summary.
// Under a mesh strategy (DataParallel, ModelParallel) or a ParameterServerStrategy the
// trainable set is fixed when the model is built: freeze layers before that, or Fit
// reports an error.
func (m *Model) SetTrainable(on bool) {
	for _, l := range m.layers {
		if t, ok := l.(layers.TrainableLayer); ok {
			t.SetTrainable(on)
		}
	}
	m.mu.Lock()
	m.frozen = !on
	m.mu.Unlock()
}

// Trainable reports whether the model trains (true unless SetTrainable(false)), like
// model.trainable.
func (m *Model) Trainable() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return !m.frozen
}

// fixTrainable applies the layers' trainable flags for the Fit that starts and keeps them
// until it ends (the returned func).
func (m *Model) fixTrainable() func() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.syncTrainableLocked(); err != nil {
		panic(err)
	}
	m.fitting = true
	return func() {
		m.mu.Lock()
		m.fitting = false
		m.mu.Unlock()
	}
}

// syncTrainableLocked recomputes which parameters train from the model's and the layers'
// flags, unless a Fit runs. m.mu is held.
func (m *Model) syncTrainableLocked() error {
	if !m.built || m.fitting {
		return nil
	}
	var changed []string
	for i := range m.params {
		p := &m.params[i]
		if want := p.declared && !m.frozen && layers.LayerTrainable(m.layers[p.layer]); want != p.trainable {
			changed = append(changed, p.name)
		}
	}
	if len(changed) == 0 {
		return nil
	}
	if m.store.fixedTrainable() {
		return fmt.Errorf("%w: model %s: the trainable flag of %s changed after the model was built; under %s the trainable "+
			"weights are fixed when the model is built: call SetTrainable before (before the first layer gets an input "+
			"shape or the model sees its first batch)", ErrInvalidArgument, m.name, changed[0], m.strategy.Name())
	}
	for i := range m.params {
		p := &m.params[i]
		p.trainable = p.declared && !m.frozen && layers.LayerTrainable(m.layers[p.layer])
	}
	m.mw.bucketer = nil // its gradient sizes follow the trainable set
	return nil
}
