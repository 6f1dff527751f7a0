package keras

import (
	"slices"
	"testing"

	"godist/distlib/data"
	"godist/distlib/tensor"
)

// TestFitUpdatesWeightsInPlace: Fit's optimizer writes the new weights where the old ones
// lie (its steps read them with StepValue), but never into a value handed out by Value:
// weights a callback kept at every batch's end still hold the values they had then.
func TestFitUpdatesWeightsInPlace(t *testing.T) {
	x, y := mwData(64)
	ds := data.FromTensorSlices(x, y).Batch(16, false)
	m := mwModel()
	m.Compile(Adam(1e-2), SparseCategoricalCrossentropy(true))
	m.Fit(ds, Epochs(1), Verbose(0)) // builds the model and its optimizer state

	// Between steps nothing holds the weights: the next steps update them where they lie.
	vars := m.TrainableVariables()
	before := make([]*float32, len(vars))
	for i, v := range vars {
		before[i] = &v.StepValue().Data()[0]
	}
	m.Fit(ds, Epochs(1), Verbose(0))
	for i, v := range vars {
		if &v.StepValue().Data()[0] != before[i] {
			t.Errorf("variable %s: Fit wrote its new values into new memory, want in place", v.Name())
		}
	}

	// A callback keeps the values at every batch's end, with a copy to compare.
	var kept, copies []*tensor.Tensor
	keep := LambdaCallback{OnTrainBatchEnd: func(int, Logs) {
		for _, v := range m.TrainableVariables() {
			w := v.Value()
			kept, copies = append(kept, w), append(copies, w.Clone())
		}
	}}
	m.Fit(ds, Epochs(2), Verbose(0), Callbacks(keep))
	if len(kept) != 8*len(vars) {
		t.Fatalf("kept %d values, want %d (8 steps of %d variables)", len(kept), 8*len(vars), len(vars))
	}
	for i := range kept {
		if !slices.Equal(kept[i].Data(), copies[i].Data()) {
			t.Fatalf("value %d kept by a callback changed after a later step of Fit", i)
		}
	}
	if slices.Equal(kept[0].Data(), kept[len(vars)].Data()) {
		t.Errorf("the first variable has the same values after steps 1 and 2: Fit did not train")
	}
}
