package tensor

// ExpandDims returns t with a dimension of size 1 inserted at axis, like tf.expand_dims
// (axis -1 appends one: NumPy's x[..., None], the custom training tutorial's
// train_images[..., None]). The values are shared, as Reshape's.
func ExpandDims(t *Tensor, axis int) *Tensor {
	if t == nil {
		panic(argErr("ExpandDims", "input is nil"))
	}
	r := len(t.shape)
	a := axis
	if a < 0 {
		a += r + 1
	}
	if a < 0 || a > r {
		panic(argErr("ExpandDims", "axis %d is out of range for a tensor of rank %d (use -%d..%d)", axis, r, r+1, r))
	}
	shape := make([]int, 0, r+1)
	shape = append(shape, t.shape[:a]...)
	shape = append(shape, 1)
	shape = append(shape, t.shape[a:]...)
	return Reshape(t, shape...)
}

// Squeeze returns t without the dimensions of size 1 at axes (all of them when none is
// given), like tf.squeeze; an axis whose size is not 1 is an error naming it.
func Squeeze(t *Tensor, axes ...int) *Tensor {
	if t == nil {
		panic(argErr("Squeeze", "input is nil"))
	}
	r := len(t.shape)
	drop := make([]bool, r)
	if len(axes) == 0 {
		for i, d := range t.shape {
			drop[i] = d == 1
		}
	}
	for _, axis := range axes {
		a := axis
		if a < 0 {
			a += r
		}
		if a < 0 || a >= r {
			panic(argErr("Squeeze", "axis %d is out of range for shape %v", axis, t.shape))
		}
		if t.shape[a] != 1 {
			panic(shapeErr("Squeeze", "cannot squeeze axis %d of shape %v: its size is %d, not 1", axis, t.shape, t.shape[a]))
		}
		drop[a] = true
	}
	shape := []int{}
	for i, d := range t.shape {
		if !drop[i] {
			shape = append(shape, d)
		}
	}
	return Reshape(t, shape...)
}
