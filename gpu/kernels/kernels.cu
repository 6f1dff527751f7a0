// godist's CUDA kernels (float32). Compiled to PTX for sm_80 and sm_90 by gen.sh
// (`go generate ./gpu/kernels`); the PTX is committed and embedded by kernels.go, whose
// table (table.go) must list every kernel here with the same parameters: the Go test
// TestTableMatchesPTX parses the PTX's .entry lines and fails on any drift.
//
// Each kernel names its CPU reference, the Go code whose results it must reproduce.
// Sizes are int (the Go helpers refuse sizes over 2^31-1). Compiled with -fmad=false so that
// a*b+c rounds like the Go code on amd64 (no fused multiply-add), which makes the
// element-wise and optimizer kernels bit-identical to the CPU.

#include <math.h>

#define GRID_STRIDE(i, n) \
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < (n); \
       i += (long long)blockDim.x * gridDim.x)

extern "C" {

// ---- fill / cast --------------------------------------------------------------------

// fill_f32: x[i] = v. CPU: tensor.Fill / a loop.
__global__ void fill_f32(float* x, float v, int n) {
  GRID_STRIDE(i, n) x[i] = v;
}

// cast_i32_f32: dst[i] = float(src[i]) (class indices to float32 labels). CPU: float32(v).
__global__ void cast_i32_f32(const int* src, float* dst, int n) {
  GRID_STRIDE(i, n) dst[i] = (float)src[i];
}

// cast_f32_i32: dst[i] = int(src[i]) truncated toward zero. CPU: int32(v).
__global__ void cast_f32_i32(const float* src, int* dst, int n) {
  GRID_STRIDE(i, n) dst[i] = (int)src[i];
}

// ---- element-wise (CPU: distlib/tensor/elementwise.go applyBinary, Scale) ---------------

__global__ void add_f32(const float* a, const float* b, float* z, int n) {
  GRID_STRIDE(i, n) z[i] = a[i] + b[i];
}

__global__ void sub_f32(const float* a, const float* b, float* z, int n) {
  GRID_STRIDE(i, n) z[i] = a[i] - b[i];
}

__global__ void mul_f32(const float* a, const float* b, float* z, int n) {
  GRID_STRIDE(i, n) z[i] = a[i] * b[i];
}

// scale_f32: z = s*x. CPU: tensor.Scale.
__global__ void scale_f32(const float* x, float s, float* z, int n) {
  GRID_STRIDE(i, n) z[i] = x[i] * s;
}

// axpy_f32: y += a*x (gradient accumulation). CPU: y[i] += a*x[i].
__global__ void axpy_f32(float a, const float* x, float* y, int n) {
  GRID_STRIDE(i, n) y[i] = y[i] + a * x[i];
}

// relu bit trick of distlib/tensor/elementwise.go reluTo: clears negatives (and -0, -NaN)
// and keeps +NaN, like the CPU.
__device__ __forceinline__ float relu1(float v) {
  int u = __float_as_int(v);
  return __int_as_float(u & ~(u >> 31));
}

// relu_f32: y = max(x, 0). CPU: tensor.ReLU (reluTo).
__global__ void relu_f32(const float* x, float* y, int n) {
  GRID_STRIDE(i, n) y[i] = relu1(x[i]);
}

// relu_grad_f32: dx = g where the ReLU output y > 0 (or +NaN), else 0, with reluGrad's
// bit mask. CPU: reluGrad.
__global__ void relu_grad_f32(const float* g, const float* y, float* dx, int n) {
  GRID_STRIDE(i, n) {
    int m = (-__float_as_int(y[i])) >> 31;  // all ones when y > 0
    dx[i] = __int_as_float(__float_as_int(g[i]) & m);
  }
}

// bias_add_f32: y[r, c] = x[r, c] + b[c] for x [rows, cols]. CPU: tensor.BiasAdd.
__global__ void bias_add_f32(const float* x, const float* b, float* y, int rows, int cols) {
  long long n = (long long)rows * cols;
  GRID_STRIDE(i, n) y[i] = x[i] + b[i % cols];
}

// bias_relu_f32: y = relu(x + b) (fused). CPU: tensor.Dense(x, w, b, relu=true)'s epilogue.
__global__ void bias_relu_f32(const float* x, const float* b, float* y, int rows, int cols) {
  long long n = (long long)rows * cols;
  GRID_STRIDE(i, n) y[i] = relu1(x[i] + b[i % cols]);
}

// bias_grad_f32: db[c] = sum over rows of g[r, c] (the bias gradient). CPU: sumRows in
// distlib/tensor/nn.go. Launch: block (32, 8), grid (ceil(cols/32)); deterministic.
__global__ void bias_grad_f32(const float* g, float* db, int rows, int cols) {
  __shared__ float part[8][33];
  int c = blockIdx.x * 32 + threadIdx.x;
  float s = 0.0f;
  if (c < cols) {
    for (int r = threadIdx.y; r < rows; r += 8) s += g[(long long)r * cols + c];
  }
  part[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y == 0 && c < cols) {
    float t = part[0][threadIdx.x];
    for (int k = 1; k < 8; k++) t += part[k][threadIdx.x];
    db[c] = t;
  }
}

// ---- row reductions (block per row; blockDim.x a power of two <= 1024) -----------------

// gomax is Go's max for float32: a NaN in either operand gives NaN (fmaxf would drop it).
__device__ __forceinline__ float gomax(float a, float b) {
  return (a != a || b != b) ? a + b : fmaxf(a, b);
}

__device__ float block_sum(float v, float* sh) {
  sh[threadIdx.x] = v;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) sh[threadIdx.x] += sh[threadIdx.x + s];
    __syncthreads();
  }
  float r = sh[0];
  __syncthreads();
  return r;
}

__device__ float block_max(float v, float* sh) {
  sh[threadIdx.x] = v;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) sh[threadIdx.x] = gomax(sh[threadIdx.x], sh[threadIdx.x + s]);
    __syncthreads();
  }
  float r = sh[0];
  __syncthreads();
  return r;
}

// row_sum_f32: out[r] = sum of x[r, :]. CPU: tensor.ReduceSum(x, axis 1).
__global__ void row_sum_f32(const float* x, float* out, int rows, int cols) {
  extern __shared__ float sh[];
  int r = blockIdx.x;
  if (r >= rows) return;
  const float* row = x + (long long)r * cols;
  float s = 0.0f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) s += row[c];
  s = block_sum(s, sh);
  if (threadIdx.x == 0) out[r] = s;
}

// row_max_f32: out[r] = max of x[r, :], NaN if the row has one. CPU: tensor.ReduceMax(x, axis 1).
__global__ void row_max_f32(const float* x, float* out, int rows, int cols) {
  extern __shared__ float sh[];
  int r = blockIdx.x;
  if (r >= rows) return;
  const float* row = x + (long long)r * cols;
  float m = -INFINITY;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) m = gomax(m, row[c]);
  m = block_max(m, sh);
  if (threadIdx.x == 0) out[r] = m;
}

// ---- softmax cross-entropy, sparse labels, from logits ---------------------------------

// softmax_xent_f32: for logits [rows, cols] and float class labels [rows], writes the
// log-probabilities logp [rows, cols] (kept for the backward pass) and loss[r] =
// -logp[r, label[r]]. A label that is not an integer in [0, cols) sets *bad to row+1 (the
// first such row found by any block; check it after the launch) and its loss to NaN.
// CPU: tensor.SparseSoftmaxCrossEntropyWithLogits (softmaxRaw with logOut).
// Launch: one block per row, blockDim a power of two, blockDim*4 bytes of shared memory.
__global__ void softmax_xent_f32(const float* logits, const float* labels, float* logp,
                                 float* loss, int* bad, int rows, int cols) {
  extern __shared__ float sh[];
  int r = blockIdx.x;
  if (r >= rows) return;
  const float* x = logits + (long long)r * cols;
  float* lp = logp + (long long)r * cols;
  float m = -INFINITY;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) m = gomax(m, x[c]);
  m = block_max(m, sh);
  float s = 0.0f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) s += expf(x[c] - m);
  s = block_sum(s, sh);
  float ls = logf(s);
  for (int c = threadIdx.x; c < cols; c += blockDim.x) lp[c] = x[c] - m - ls;
  __syncthreads();
  if (threadIdx.x == 0) {
    float lv = labels[r];
    int l = (int)lv;
    if (!((float)l == lv && l >= 0 && l < cols)) {
      atomicCAS(bad, 0, r + 1);
      loss[r] = __int_as_float(0x7fc00000);
    } else {
      loss[r] = -lp[l];
    }
  }
}

// softmax_xent_grad_f32: dlogits[r, c] = g[r] * (exp(logp[r, c]) - [c == label[r]]).
// CPU: the gradient closure of tensor.SparseSoftmaxCrossEntropyWithLogits.
__global__ void softmax_xent_grad_f32(const float* g, const float* logp, const float* labels,
                                      float* dlogits, int rows, int cols) {
  long long n = (long long)rows * cols;
  GRID_STRIDE(i, n) {
    int r = (int)(i / cols), c = (int)(i % cols);
    float gi = g[r];
    float v = gi * expf(logp[i]);
    if (c == (int)labels[r]) v -= gi;
    dlogits[i] = v;
  }
}

// ---- conv2d, NHWC input, HWIO filter (for cuBLAS sgemm) --------------------------------
// Geometry as distlib/tensor/conv.go windowGeom: output [n, oh, ow, o]; padTop/padLeft
// from TensorFlow's "same" rule (0 for "valid").

// im2col_f32: cols [n*oh*ow, kh*kw*c], row r = output position, column (ky, kx, ci), zeros
// for padding. CPU: im2col in distlib/tensor/conv.go. Then y = cols x K[kh*kw*c, o].
__global__ void im2col_f32(const float* x, float* cols, int n, int h, int w, int c, int kh,
                           int kw, int stride, int padTop, int padLeft, int oh, int ow) {
  long long kc = (long long)kh * kw * c;
  long long total = (long long)n * oh * ow * kc;
  GRID_STRIDE(i, total) {
    long long r = i / kc;
    int k = (int)(i % kc);
    int ci = k % c, kx = (k / c) % kw, ky = k / (c * kw);
    int ox = (int)(r % ow), oy = (int)((r / ow) % oh), b = (int)(r / ((long long)ow * oh));
    int iy = oy * stride - padTop + ky, ix = ox * stride - padLeft + kx;
    float v = 0.0f;
    if (iy >= 0 && iy < h && ix >= 0 && ix < w) v = x[(((long long)b * h + iy) * w + ix) * c + ci];
    cols[i] = v;
  }
}

// col2im_f32: dx[b, iy, ix, ci] = sum of the cols entries that im2col copied from there (the
// adjoint of im2col; one thread per dx element gathering, so no atomics and deterministic).
// dx is overwritten. CPU: col2im in distlib/tensor/conv.go.
__global__ void col2im_f32(const float* cols, float* dx, int n, int h, int w, int c, int kh,
                           int kw, int stride, int padTop, int padLeft, int oh, int ow) {
  long long kc = (long long)kh * kw * c;
  long long total = (long long)n * h * w * c;
  GRID_STRIDE(i, total) {
    int ci = (int)(i % c);
    int ix = (int)((i / c) % w), iy = (int)((i / ((long long)c * w)) % h);
    int b = (int)(i / ((long long)c * w * h));
    float s = 0.0f;
    for (int ky = 0; ky < kh; ky++) {
      int ty = iy + padTop - ky;
      if (ty < 0 || ty % stride != 0) continue;
      int oy = ty / stride;
      if (oy >= oh) continue;
      for (int kx = 0; kx < kw; kx++) {
        int tx = ix + padLeft - kx;
        if (tx < 0 || tx % stride != 0) continue;
        int ox = tx / stride;
        if (ox >= ow) continue;
        long long r = ((long long)b * oh + oy) * ow + ox;
        s += cols[r * kc + ((long long)ky * kw + kx) * c + ci];
      }
    }
    dx[i] = s;
  }
}

// conv2d_direct_f32: y[b, oy, ox, o] = sum over (ky, kx, ci) of x * k[ky, kx, ci, o] (a
// cross-correlation, as TensorFlow), direct, for small c where im2col would waste memory.
// CPU: tensor.Conv2D.
__global__ void conv2d_direct_f32(const float* x, const float* k, float* y, int n, int h,
                                  int w, int c, int kh, int kw, int o, int stride, int padTop,
                                  int padLeft, int oh, int ow) {
  long long total = (long long)n * oh * ow * o;
  GRID_STRIDE(i, total) {
    int oc = (int)(i % o);
    long long r = i / o;
    int ox = (int)(r % ow), oy = (int)((r / ow) % oh), b = (int)(r / ((long long)ow * oh));
    float s = 0.0f;
    for (int ky = 0; ky < kh; ky++) {
      int iy = oy * stride - padTop + ky;
      if (iy < 0 || iy >= h) continue;
      for (int kx = 0; kx < kw; kx++) {
        int ix = ox * stride - padLeft + kx;
        if (ix < 0 || ix >= w) continue;
        const float* xp = x + (((long long)b * h + iy) * w + ix) * c;
        const float* kp = k + ((long long)(ky * kw + kx) * c) * o + oc;
        for (int ci = 0; ci < c; ci++) s += xp[ci] * kp[(long long)ci * o];
      }
    }
    y[i] = s;
  }
}

// ---- max-pool (NHWC), argmax indices -----------------------------------------------------

// maxpool_f32: y[b, oy, ox, ci] = max over the size x size window (clipped to the input);
// arg = the flat index into x of the first maximum in (iy, ix) scan order, exactly as
// maxPoolRaw in distlib/tensor/conv.go (CPU: tensor.MaxPool2D).
__global__ void maxpool_f32(const float* x, float* y, int* arg, int n, int h, int w, int c,
                            int size, int stride, int padTop, int padLeft, int oh, int ow) {
  long long total = (long long)n * oh * ow * c;
  GRID_STRIDE(i, total) {
    int ci = (int)(i % c);
    long long r = i / c;
    int ox = (int)(r % ow), oy = (int)((r / ow) % oh), b = (int)(r / ((long long)ow * oh));
    int y0 = oy * stride - padTop, x0 = ox * stride - padLeft;
    int ylo = max(y0, 0), yhi = min(y0 + size, h), xlo = max(x0, 0), xhi = min(x0 + size, w);
    long long base = (long long)b * h * w * c;
    long long best = base + ((long long)ylo * w + xlo) * c + ci;
    float m = x[best];
    for (int iy = ylo; iy < yhi; iy++) {
      for (int ix = xlo; ix < xhi; ix++) {
        long long off = base + ((long long)iy * w + ix) * c + ci;
        float v = x[off];
        if (v > m) {
          m = v;
          best = off;
        } else if (v != v) {
          m = v;  // as maxPoolRaw (Go's max): NaN from here on, the index frozen
        }
      }
    }
    y[i] = m;
    arg[i] = (int)best;
  }
}

// maxpool_grad_f32: dx[arg[i]] += dy[i] for each output i; dx must be zeroed first (fill_f32).
// Atomic adds: windows that overlap (stride < size) may send several outputs to one input.
// CPU: the gradient closure of tensor.MaxPool2D.
__global__ void maxpool_grad_f32(const float* dy, const int* arg, float* dx, int nout) {
  GRID_STRIDE(i, nout) atomicAdd(dx + arg[i], dy[i]);
}

// ---- fused optimizer updates (CPU: distlib/optim/optim.go, same arithmetic order) -----

// sgd_f32: w -= lr*g. CPU: Spec.sgd with momentum 0.
__global__ void sgd_f32(float* w, const float* g, float lr, int n) {
  GRID_STRIDE(i, n) w[i] -= lr * g[i];
}

// sgd_momentum_f32: v = m*v - lr*g; w += v, or with nesterov != 0, w += m*v - lr*g.
// CPU: Spec.sgd with momentum.
__global__ void sgd_momentum_f32(float* w, const float* g, float* v, float lr, float m,
                                 int nesterov, int n) {
  GRID_STRIDE(i, n) {
    float gi = g[i];
    float vi = m * v[i] - lr * gi;
    v[i] = vi;
    if (nesterov)
      w[i] += m * vi - lr * gi;
    else
      w[i] += vi;
  }
}

// adam_f32: Keras 3's Adam step t. alpha = lr*sqrt(1-beta2^t)/(1-beta1^t) is computed on the
// host in float64 (kernels.AdamAlpha) exactly as Spec.adam; b1 = 1-beta1, b2 = 1-beta2:
// m += (g-m)*b1; v += (g*g-v)*b2; w -= alpha*m/(sqrt(v)+eps). CPU: Spec.adam.
__global__ void adam_f32(float* w, const float* g, float* m, float* v, float alpha, float b1,
                         float b2, float eps, int n) {
  GRID_STRIDE(i, n) {
    float gi = g[i];
    float mi = m[i] + (gi - m[i]) * b1;
    float vi = v[i] + (gi * gi - v[i]) * b2;
    m[i] = mi;
    v[i] = vi;
    w[i] -= alpha * mi / (sqrtf(vi) + eps);
  }
}

// rmsprop_f32: Keras 3's RMSprop: v = rho*v + (1-rho)*g*g; inc = lr*g/sqrt(v+eps); with
// momentum != 0 (mom non-null) mom = momentum*mom + inc and w -= mom, else w -= inc.
// CPU: Spec.rmsprop.
__global__ void rmsprop_f32(float* w, const float* g, float* v, float* mom, float lr, float rho,
                            float eps, float momentum, int n) {
  GRID_STRIDE(i, n) {
    float gi = g[i];
    float vi = rho * v[i] + (1.0f - rho) * gi * gi;
    v[i] = vi;
    float inc = lr * gi / sqrtf(vi + eps);
    if (momentum != 0.0f) {
      float mi = momentum * mom[i] + inc;
      mom[i] = mi;
      w[i] -= mi;
    } else {
      w[i] -= inc;
    }
  }
}

}  // extern "C"
