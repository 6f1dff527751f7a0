package keras

import (
	"math"
	"path/filepath"
	"testing"

	"godist/distlib/keras/layers"
	"godist/distlib/tensor"
)

// TestGlobalAveragePooling: GlobalAveragePooling1D is tf.reduce_mean(x, axis=1) (the
// parameter-server tutorial's mean of the Embedding's vectors) and 2D the mean over height
// and width; models with them train, save and load.
func TestGlobalAveragePooling(t *testing.T) {
	x := tensor.MustNew([]int{1, 2, 3}, []float32{1, 2, 3, 5, 6, 7})
	if got := layers.GlobalAveragePooling1D().Forward(x, nil, false, 0).Data(); len(got) != 3 || got[0] != 3 || got[2] != 5 {
		t.Errorf("GlobalAveragePooling1D of [[1 2 3] [5 6 7]] = %v, want [3 4 5]", got)
	}
	img := tensor.MustNew([]int{1, 2, 2, 2}, []float32{1, 10, 2, 20, 3, 30, 4, 40})
	if got := layers.GlobalAveragePooling2D().Forward(img, nil, false, 0).Data(); len(got) != 2 || got[0] != 2.5 || got[1] != 25 {
		t.Errorf("GlobalAveragePooling2D = %v, want [2.5 25]", got)
	}
	if _, _, err := layers.GlobalAveragePooling2D().Build([]int{3, 4}, 0); err == nil {
		t.Error("GlobalAveragePooling2D built on (3, 4): no error")
	}
	ids := tensor.MustNew([]int{8, 3}, []float32{1, 2, 3, 4, 5, 6, 1, 4, 7, 2, 5, 7, 3, 6, 7, 1, 2, 7, 4, 5, 6, 3, 2, 1})
	labels := tensor.MustNew([]int{8, 1}, []float32{1, 0, 1, 0, 0, 1, 0, 1})
	SetRandomSeed(1)
	m := Sequential(layers.Embedding(8, 4, layers.InputShape(3)), layers.GlobalAveragePooling1D(), layers.Dense(1))
	quiet(m)
	m.Compile(Adam(0.05), BinaryCrossentropy(true), "accuracy")
	h := m.Fit(ids, labels, Epochs(20), BatchSize(8), Verbose(0))
	if l := h.History["loss"]; !(l[19] < l[0]) {
		t.Errorf("loss %v does not fall", l)
	}
	path := filepath.Join(t.TempDir(), "m.keras")
	if err := m.Save(path); err != nil {
		t.Fatal(err)
	}
	back, err := LoadModel(path)
	if err != nil {
		t.Fatal(err)
	}
	a, b := m.Predict(ids, Verbose(0)).Data(), back.Predict(ids, Verbose(0)).Data()
	for i := range a {
		if math.Abs(float64(a[i]-b[i])) > 1e-6 {
			t.Fatalf("loaded model predicts %v, saved %v", b, a)
		}
	}
}
