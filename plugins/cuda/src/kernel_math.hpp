// Kernel math shared by the CUDA kernels (kernels.cu) and the host unit tests
// (tests/test_kernel_math.cpp): index arithmetic, broadcasting, activations, and the
// per-row math of softmax, layer normalization and reductions. Every function is
// NXRT_HD (__host__ __device__ under nvcc, plain inline under a host compiler), so the
// code a GPU runs is the code the CPU tests check. Arithmetic is float32; float16
// tensors are converted at load/store by the kernels.
#pragma once
#include <cstdint>

#if defined(__CUDACC__)
#define NXRT_HD __host__ __device__ __forceinline__
#else
#define NXRT_HD inline
#endif

#include <cmath>

namespace nxrt::cuda::math {

constexpr int kMaxRank = 8;

// Dims and element strides of a tensor (or of an input broadcast to the output's rank:
// stride 0 on a broadcast axis). Passed by value to kernels.
struct Strides {
  int rank = 0;
  int64_t dims[kMaxRank] = {};
  int64_t strides[kMaxRank] = {};
};

// Row-major strides of `dims` (rank entries).
NXRT_HD Strides dense(const int64_t* dims, int rank) {
  Strides s;
  s.rank = rank;
  int64_t acc = 1;
  for (int i = rank - 1; i >= 0; --i) {
    s.dims[i] = dims[i];
    s.strides[i] = acc;
    acc *= dims[i];
  }
  return s;
}

// The strides with which input `in` (in_rank dims, numpy-aligned to the right) is read
// for each element of an output of `out_rank` dims: 0 where the input has size 1 or
// lacks the axis. The caller has checked that the shapes broadcast.
NXRT_HD Strides broadcast_strides(const int64_t* in_dims, int in_rank, const int64_t* out_dims, int out_rank) {
  Strides s;
  s.rank = out_rank;
  int64_t acc = 1;
  for (int o = out_rank - 1, i = in_rank - 1; o >= 0; --o, --i) {
    s.dims[o] = out_dims[o];
    if (i >= 0 && in_dims[i] != 1) {
      s.strides[o] = acc;
      acc *= in_dims[i];
    } else {
      s.strides[o] = 0;
      if (i >= 0) acc *= in_dims[i];
    }
  }
  return s;
}

// The source offset of output element `linear` (row-major over s.dims) read through
// strides s: broadcasting, transposes (permuted strides) and slices (strided views).
NXRT_HD int64_t offset_of(int64_t linear, const Strides& s) {
  int64_t off = 0;
  for (int i = s.rank - 1; i >= 0; --i) {
    const int64_t d = s.dims[i];
    const int64_t c = d ? linear % d : 0;
    linear = d ? linear / d : 0;
    off += c * s.strides[i];
  }
  return off;
}

// Transpose: output axis i is input axis perm[i]; the returned view reads the input
// with output-ordered dims and the input strides permuted.
NXRT_HD Strides transpose_view(const int64_t* in_dims, int rank, const int64_t* perm) {
  Strides in = dense(in_dims, rank);
  Strides v;
  v.rank = rank;
  for (int i = 0; i < rank; ++i) {
    v.dims[i] = in.dims[perm[i]];
    v.strides[i] = in.strides[perm[i]];
  }
  return v;
}

// ------------------------------------------------------------ element-wise

enum class Unary : int { Identity, Relu, Sigmoid, Tanh, Exp, Log, Sqrt, Neg, Abs, Erf, Clip, LeakyRelu, HardSwish, Gelu, Reciprocal };
enum class Binary : int { Add, Sub, Mul, Div, Pow, Max, Min };

// alpha/beta: Clip min/max, LeakyRelu alpha.
NXRT_HD float unary(Unary op, float x, float alpha, float beta) {
  switch (op) {
    case Unary::Identity: return x;
    case Unary::Relu: return x > 0.f ? x : 0.f;
    case Unary::Sigmoid: return 1.f / (1.f + expf(-x));
    case Unary::Tanh: return tanhf(x);
    case Unary::Exp: return expf(x);
    case Unary::Log: return logf(x);
    case Unary::Sqrt: return sqrtf(x);
    case Unary::Neg: return -x;
    case Unary::Abs: return fabsf(x);
    case Unary::Erf: return erff(x);
    case Unary::Clip: return x < alpha ? alpha : (x > beta ? beta : x);
    case Unary::LeakyRelu: return x >= 0.f ? x : alpha * x;
    case Unary::HardSwish: {
      float t = x / 6.f + 0.5f;
      t = t < 0.f ? 0.f : (t > 1.f ? 1.f : t);
      return x * t;
    }
    case Unary::Gelu: return 0.5f * x * (1.f + erff(x * 0.70710678118654752f));
    case Unary::Reciprocal: return 1.f / x;
  }
  return x;
}

NXRT_HD float binary(Binary op, float a, float b) {
  switch (op) {
    case Binary::Add: return a + b;
    case Binary::Sub: return a - b;
    case Binary::Mul: return a * b;
    case Binary::Div: return a / b;
    case Binary::Pow: return powf(a, b);
    case Binary::Max: return a > b ? a : b;
    case Binary::Min: return a < b ? a : b;
  }
  return a;
}

// --------------------------------------------------------------- row math
// A "row" is `n` contiguous elements: softmax and layer normalization over the last
// axes, reductions over the inner block. The kernels split a row over a block's threads
// and combine partial results with the same combine functions.

// Running (max, sum of exp(x - max)) pair: combining two partials rescales the sums.
struct MaxSum {
  float max = -INFINITY;
  float sum = 0.f;
};
NXRT_HD MaxSum maxsum_add(MaxSum a, float x) {
  if (x > a.max) {
    a.sum = a.sum * expf(a.max - x) + 1.f;
    a.max = x;
  } else {
    a.sum += expf(x - a.max);
  }
  return a;
}
NXRT_HD MaxSum maxsum_combine(MaxSum a, MaxSum b) {
  if (b.sum == 0.f) return a;
  if (a.sum == 0.f) return b;
  MaxSum r;
  r.max = a.max > b.max ? a.max : b.max;
  r.sum = a.sum * expf(a.max - r.max) + b.sum * expf(b.max - r.max);
  return r;
}
// Softmax (log_softmax) of x given the row's MaxSum.
NXRT_HD float softmax_value(float x, MaxSum m, bool log) {
  return log ? (x - m.max) - logf(m.sum) : expf(x - m.max) / m.sum;
}

// Welford mean/variance: numerically stable and combinable across threads.
struct Welford {
  float mean = 0.f;
  float m2 = 0.f;
  float count = 0.f;
};
NXRT_HD Welford welford_add(Welford w, float x) {
  w.count += 1.f;
  const float d = x - w.mean;
  w.mean += d / w.count;
  w.m2 += d * (x - w.mean);
  return w;
}
NXRT_HD Welford welford_combine(Welford a, Welford b) {
  if (b.count == 0.f) return a;
  if (a.count == 0.f) return b;
  Welford r;
  r.count = a.count + b.count;
  const float d = b.mean - a.mean;
  r.mean = a.mean + d * (b.count / r.count);
  r.m2 = a.m2 + b.m2 + d * d * (a.count * b.count / r.count);
  return r;
}
NXRT_HD float welford_variance(Welford w) { return w.count > 0.f ? w.m2 / w.count : 0.f; }
// Layer normalization of x given the row's statistics, scale and bias.
NXRT_HD float layernorm_value(float x, Welford w, float epsilon, float scale, float bias) {
  return (x - w.mean) * (1.f / sqrtf(welford_variance(w) + epsilon)) * scale + bias;
}

enum class Reduce : int { Sum, Mean, Max, Min, Prod, SumSquare, L1, L2, LogSumExp };
NXRT_HD float reduce_init(Reduce op) {
  switch (op) {
    case Reduce::Max: return -INFINITY;
    case Reduce::Min: return INFINITY;
    case Reduce::Prod: return 1.f;
    default: return 0.f;
  }
}
// Adds element x to accumulator a (LogSumExp accumulates exp(x - shift); see reduce_final).
NXRT_HD float reduce_add(Reduce op, float a, float x, float shift) {
  switch (op) {
    case Reduce::Max: return x > a ? x : a;
    case Reduce::Min: return x < a ? x : a;
    case Reduce::Prod: return a * x;
    case Reduce::SumSquare:
    case Reduce::L2: return a + x * x;
    case Reduce::L1: return a + fabsf(x);
    case Reduce::LogSumExp: return a + expf(x - shift);
    default: return a + x;
  }
}
// Combines two partial accumulators.
NXRT_HD float reduce_combine(Reduce op, float a, float b) {
  switch (op) {
    case Reduce::Max: return b > a ? b : a;
    case Reduce::Min: return b < a ? b : a;
    case Reduce::Prod: return a * b;
    default: return a + b;
  }
}
NXRT_HD float reduce_final(Reduce op, float a, int64_t n, float shift) {
  switch (op) {
    case Reduce::Mean: return n ? a / float(n) : NAN;
    case Reduce::L2: return sqrtf(a);
    case Reduce::LogSumExp: return logf(a) + shift;
    default: return a;
  }
}

// ------------------------------------------------------------ conv geometry

// 2-D convolution / pooling geometry (NCHW), shared by im2col, direct conv and pools.
struct Conv2d {
  int64_t n = 1, c = 1, h = 1, w = 1;          // input
  int64_t k = 1, oh = 1, ow = 1;               // output channels and spatial size
  int64_t kh = 1, kw = 1, sh = 1, sw = 1;      // kernel and strides
  int64_t ph = 0, pw = 0, dh = 1, dw = 1;      // begin pads and dilations
  int64_t peh = 0, pew = 0;                    // end pads (AveragePool count_include_pad)
  int64_t group = 1;
};
NXRT_HD int64_t conv_out_size(int64_t in, int64_t kernel, int64_t stride, int64_t pad_begin, int64_t pad_end, int64_t dilation) {
  return (in + pad_begin + pad_end - dilation * (kernel - 1) - 1) / stride + 1;
}

// im2col matrix element (row = (ci, ky, kx) of one group, col = (oy, ox)) for image n.
// Out-of-bounds taps read zero.
NXRT_HD int64_t im2col_source(const Conv2d& g, int64_t n, int64_t ci, int64_t ky, int64_t kx, int64_t oy, int64_t ox) {
  const int64_t y = oy * g.sh - g.ph + ky * g.dh;
  const int64_t x = ox * g.sw - g.pw + kx * g.dw;
  if (y < 0 || y >= g.h || x < 0 || x >= g.w) return -1;
  return ((n * g.c + ci) * g.h + y) * g.w + x;
}


// ------------------------------------------------------- per-element kernel bodies
// What one CUDA thread computes for output element i, with loads passed in (float16 or
// float32 device loads in the kernels, plain arrays in the tests).

// Gather: the source element of output i (x viewed as [outer, axis_dim, inner], n_idx
// indices), or -1 for an index out of range (the kernel writes zero).
template <typename Index>
NXRT_HD int64_t gather_source(int64_t i, int64_t axis_dim, int64_t inner, int64_t n_idx, Index idx) {
  const int64_t in = i % inner, j = (i / inner) % n_idx, o = i / (inner * n_idx);
  int64_t r = int64_t(idx(j));
  if (r < 0) r += axis_dim;
  return (r >= 0 && r < axis_dim) ? (o * axis_dim + r) * inner + in : -1;
}

// im2col: the input element of col element i ([(c/group)*kh*kw, oh*ow] of image `image`,
// group `group`), or -1 for padding.
NXRT_HD int64_t im2col_element(int64_t i, const Conv2d& g, int64_t image, int64_t group) {
  const int64_t cg = g.c / g.group, cols = g.oh * g.ow;
  const int64_t p = i % cols, row = i / cols;
  const int64_t kx = row % g.kw, ky = (row / g.kw) % g.kh, ci = row / (g.kw * g.kh);
  return im2col_source(g, image, group * cg + ci, ky, kx, p / g.ow, p % g.ow);
}

// Direct (grouped, depthwise) convolution of output element i ([n, k, oh, ow]), before the
// activation; weights [k, c/group, kh, kw].
template <typename LoadX, typename LoadW>
NXRT_HD float conv_direct_element(int64_t i, const Conv2d& g, LoadX x, LoadW w, float bias) {
  const int64_t cg = g.c / g.group, kg = g.k / g.group;
  const int64_t ox = i % g.ow, oy = (i / g.ow) % g.oh, ko = (i / (g.ow * g.oh)) % g.k, n = i / (g.ow * g.oh * g.k);
  const int64_t grp = ko / kg;
  float acc = bias;
  for (int64_t ci = 0; ci < cg; ++ci)
    for (int64_t ky = 0; ky < g.kh; ++ky)
      for (int64_t kx = 0; kx < g.kw; ++kx) {
        const int64_t src = im2col_source(g, n, grp * cg + ci, ky, kx, oy, ox);
        if (src >= 0) acc += x(src) * w(((ko * cg + ci) * g.kh + ky) * g.kw + kx);
      }
  return acc;
}

// Max or average pooling of output element i ([n, c, oh, ow]); count_include_pad counts
// the padded positions of the average's window (end pads included).
template <typename LoadX>
NXRT_HD float pool_element(int64_t i, const Conv2d& g, LoadX x, bool max, bool count_include_pad) {
  const int64_t ox = i % g.ow, oy = (i / g.ow) % g.oh, nc = i / (g.ow * g.oh);
  float acc = max ? -INFINITY : 0.f;
  int64_t count = 0;
  for (int64_t ky = 0; ky < g.kh; ++ky)
    for (int64_t kx = 0; kx < g.kw; ++kx) {
      const int64_t yy = oy * g.sh - g.ph + ky, xx = ox * g.sw - g.pw + kx;
      if (yy >= 0 && yy < g.h && xx >= 0 && xx < g.w) {
        const float v = x((nc * g.h + yy) * g.w + xx);
        acc = max ? (v > acc ? v : acc) : acc + v;
        ++count;
      } else if (count_include_pad && yy < g.h + g.peh && xx < g.w + g.pew) {
        ++count;  // a pad position inside the padded input: counts as a zero
      }
    }
  return max ? acc : (count ? acc / float(count) : 0.f);
}

// Reduction of output element o: the input elements offset_of(o, outer) + offset_of(r, inner)
// for r < n_inner (LogSumExp shifted by the maximum for range).
template <typename LoadX>
NXRT_HD float reduce_element(int64_t o, const Strides& outer, const Strides& inner, int64_t n_inner, Reduce op, LoadX x) {
  const int64_t base = offset_of(o, outer);
  float shift = 0.f;
  if (op == Reduce::LogSumExp) {
    shift = -INFINITY;
    for (int64_t r = 0; r < n_inner; ++r) {
      const float v = x(base + offset_of(r, inner));
      shift = v > shift ? v : shift;
    }
    if (!(shift > -INFINITY && shift < INFINITY)) shift = 0.f;
  }
  float acc = reduce_init(op);
  for (int64_t r = 0; r < n_inner; ++r) acc = reduce_add(op, acc, x(base + offset_of(r, inner)), shift);
  return reduce_final(op, acc, n_inner, shift);
}

// Inference batch normalization of one element of channel ch.
NXRT_HD float batchnorm_value(float x, float scale, float bias, float mean, float var, float epsilon) {
  return (x - mean) * (1.f / sqrtf(var + epsilon)) * scale + bias;
}

}  // namespace nxrt::cuda::math
