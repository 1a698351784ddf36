// The kernel math of kernel_math.hpp (the same source the CUDA kernels compile) against
// independent double-precision references: broadcasting and transpose index arithmetic,
// activations, the split-row softmax / layer-norm / reduction combines (rows split over
// "threads" as the kernels split them), and the im2col addressing of convolutions.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include "kernel_math.hpp"

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

using namespace nxrt::cuda::math;

namespace {

std::vector<int64_t> unravel(int64_t i, const std::vector<int64_t>& dims) {
  std::vector<int64_t> idx(dims.size());
  for (size_t k = dims.size(); k-- > 0;) {
    idx[k] = i % dims[k];
    i /= dims[k];
  }
  return idx;
}

int64_t ravel(const std::vector<int64_t>& idx, const std::vector<int64_t>& dims) {
  int64_t r = 0;
  for (size_t k = 0; k < dims.size(); ++k) r = r * dims[k] + idx[k];
  return r;
}

// Numpy broadcasting by multi-indices: the input element read for output index `out`.
int64_t numpy_source(int64_t out, const std::vector<int64_t>& in_dims, const std::vector<int64_t>& out_dims) {
  auto oi = unravel(out, out_dims);
  std::vector<int64_t> ii(in_dims.size());
  for (size_t k = 0; k < in_dims.size(); ++k) {
    size_t o = k + out_dims.size() - in_dims.size();
    ii[k] = in_dims[k] == 1 ? 0 : oi[o];
  }
  return ravel(ii, in_dims);
}

// Splits [0, n) over `threads` strided partials as the kernels do, folds each with add,
// then combines the partials pairwise (tree) with combine.
template <typename V, typename Add, typename Combine>
V split_fold(int64_t n, int threads, V init, Add add, Combine combine) {
  std::vector<V> part(size_t(threads), init);
  for (int t = 0; t < threads; ++t)
    for (int64_t i = t; i < n; i += threads) part[size_t(t)] = add(part[size_t(t)], i);
  for (int stride = threads / 2; stride > 0; stride /= 2)
    for (int t = 0; t < stride; ++t) part[size_t(t)] = combine(part[size_t(t)], part[size_t(t + stride)]);
  return part[0];
}

}  // namespace

TEST_CASE("broadcast strides read the element numpy broadcasting reads") {
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> cases = {
      {{3, 1, 5}, {2, 3, 4, 5}}, {{1}, {4, 3}}, {{4, 1}, {4, 6}}, {{6}, {2, 3, 6}}, {{2, 1, 1, 7}, {2, 5, 3, 7}}, {{}, {3, 2}}};
  for (auto& [in, out] : cases) {
    Strides s = broadcast_strides(in.data(), int(in.size()), out.data(), int(out.size()));
    int64_t total = 1;
    for (auto d : out) total *= d;
    for (int64_t i = 0; i < total; ++i) REQUIRE(offset_of(i, s) == numpy_source(i, in, out));
  }
}

TEST_CASE("transpose view reads input[perm-mapped index]") {
  const std::vector<int64_t> dims = {2, 3, 4, 5};
  const std::vector<std::vector<int64_t>> perms = {{0, 2, 1, 3}, {0, 2, 3, 1}, {3, 2, 1, 0}, {1, 0, 3, 2}};
  for (auto& perm : perms) {
    Strides v = transpose_view(dims.data(), 4, perm.data());
    std::vector<int64_t> out_dims(4);
    for (int i = 0; i < 4; ++i) out_dims[size_t(i)] = dims[size_t(perm[size_t(i)])];
    for (int64_t i = 0; i < 120; ++i) {
      auto oi = unravel(i, out_dims);
      std::vector<int64_t> ii(4);
      for (int k = 0; k < 4; ++k) ii[size_t(perm[size_t(k)])] = oi[size_t(k)];
      REQUIRE(offset_of(i, v) == ravel(ii, dims));
    }
  }
}

TEST_CASE("unary and binary ops match their definitions") {
  for (float x : {-3.5f, -1.f, -0.25f, 0.f, 0.5f, 2.f, 7.f}) {
    CHECK(unary(Unary::Relu, x, 0, 0) == (x > 0 ? x : 0));
    CHECK(unary(Unary::Sigmoid, x, 0, 0) == doctest::Approx(1.0 / (1.0 + std::exp(-double(x)))).epsilon(1e-6));
    CHECK(unary(Unary::Erf, x, 0, 0) == doctest::Approx(std::erf(double(x))).epsilon(1e-6));
    CHECK(unary(Unary::Gelu, x, 0, 0) == doctest::Approx(0.5 * x * (1 + std::erf(x / std::sqrt(2.0)))).epsilon(1e-6));
    CHECK(unary(Unary::Clip, x, 0.f, 6.f) == std::min(6.f, std::max(0.f, x)));
    CHECK(unary(Unary::LeakyRelu, x, 0.1f, 0) == doctest::Approx(x >= 0 ? x : 0.1 * x));
    CHECK(unary(Unary::HardSwish, x, 0, 0) == doctest::Approx(x * std::min(1.0, std::max(0.0, x / 6.0 + 0.5))));
    CHECK(binary(Binary::Pow, 2.f, x) == doctest::Approx(std::pow(2.0, double(x))).epsilon(1e-6));
    CHECK(binary(Binary::Max, x, 1.f) == std::max(x, 1.f));
  }
}

TEST_CASE("split-row softmax equals the two-pass double softmax") {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.f, 4.f);
  for (int64_t n : {1, 3, 128, 1000, 3072}) {
    std::vector<float> x(static_cast<size_t>(n));
    for (auto& v : x) v = nd(rng);
    x[size_t(n / 2)] = 80.f;  // a large logit: the running max must rescale
    MaxSum m = split_fold(n, 256, MaxSum{}, [&](MaxSum a, int64_t i) { return maxsum_add(a, x[size_t(i)]); },
                          [](MaxSum a, MaxSum b) { return maxsum_combine(a, b); });
    double mx = -1e30, sum = 0;
    for (float v : x) mx = std::max(mx, double(v));
    for (float v : x) sum += std::exp(double(v) - mx);
    for (int64_t i = 0; i < n; ++i) {
      const double want = std::exp(double(x[size_t(i)]) - mx) / sum;
      REQUIRE(softmax_value(x[size_t(i)], m, false) == doctest::Approx(want).epsilon(1e-5));
      REQUIRE(softmax_value(x[size_t(i)], m, true) == doctest::Approx(double(x[size_t(i)]) - mx - std::log(sum)).epsilon(1e-5));
    }
  }
}

TEST_CASE("split-row layer normalization equals the double reference") {
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(3.f, 2.f);
  for (int64_t n : {1, 7, 768, 1024}) {
    std::vector<float> x(static_cast<size_t>(n)), scale(static_cast<size_t>(n)), bias(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) x[size_t(i)] = nd(rng), scale[size_t(i)] = 0.5f + float(i % 5) * 0.1f, bias[size_t(i)] = float(i % 3) - 1.f;
    Welford w = split_fold(n, 256, Welford{}, [&](Welford a, int64_t i) { return welford_add(a, x[size_t(i)]); },
                           [](Welford a, Welford b) { return welford_combine(a, b); });
    double mean = 0, var = 0;
    for (float v : x) mean += v;
    mean /= double(n);
    for (float v : x) var += (v - mean) * (v - mean);
    var /= double(n);
    for (int64_t i = 0; i < n; ++i) {
      const double want = (x[size_t(i)] - mean) / std::sqrt(var + 1e-5) * scale[size_t(i)] + bias[size_t(i)];
      REQUIRE(layernorm_value(x[size_t(i)], w, 1e-5f, scale[size_t(i)], bias[size_t(i)]) == doctest::Approx(want).epsilon(1e-4));
    }
  }
}

TEST_CASE("split reductions equal the double reference for every Reduce op") {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> ud(0.5f, 1.5f);
  for (int64_t n : {1, 5, 49, 768}) {
    std::vector<float> x(static_cast<size_t>(n));
    for (auto& v : x) v = ud(rng) * (rng() % 2 ? 1.f : -1.f);
    double sum = 0, sq = 0, l1 = 0, prod = 1, mx = -1e30, mn = 1e30;
    for (float v : x) sum += v, sq += double(v) * v, l1 += std::fabs(v), prod *= v, mx = std::max(mx, double(v)), mn = std::min(mn, double(v));
    double lse = 0;
    for (float v : x) lse += std::exp(v - mx);
    lse = std::log(lse) + mx;
    const std::vector<std::pair<Reduce, double>> want = {{Reduce::Sum, sum},   {Reduce::Mean, sum / double(n)}, {Reduce::Max, mx},
                                                         {Reduce::Min, mn},    {Reduce::Prod, prod},           {Reduce::SumSquare, sq},
                                                         {Reduce::L1, l1},     {Reduce::L2, std::sqrt(sq)},    {Reduce::LogSumExp, lse}};
    for (auto& [op, w] : want) {
      const float shift = op == Reduce::LogSumExp ? float(mx) : 0.f;
      float acc = split_fold(n, 32, reduce_init(op), [&](float a, int64_t i) { return reduce_add(op, a, x[size_t(i)], shift); },
                             [&](float a, float b) { return reduce_combine(op, a, b); });
      INFO("op " << int(op) << " n " << n);
      CHECK(reduce_final(op, acc, n, shift) == doctest::Approx(w).epsilon(1e-5));
    }
  }
}

TEST_CASE("im2col addressing gives the direct convolution") {
  Conv2d g;
  g.n = 2, g.c = 3, g.h = 7, g.w = 6, g.k = 4, g.kh = 3, g.kw = 2, g.sh = 2, g.sw = 1, g.ph = 1, g.pw = 0, g.peh = 1, g.pew = 1;
  g.dh = 1, g.dw = 2;
  g.oh = conv_out_size(g.h, g.kh, g.sh, g.ph, g.peh, g.dh);
  g.ow = conv_out_size(g.w, g.kw, g.sw, g.pw, g.pew, g.dw);
  CHECK(g.oh == 4);
  CHECK(g.ow == 5);
  std::vector<float> x(static_cast<size_t>(g.n * g.c * g.h * g.w)), w(static_cast<size_t>(g.k * g.c * g.kh * g.kw));
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(int(i * 7 % 13) - 6);
  for (size_t i = 0; i < w.size(); ++i) w[i] = float(int(i * 5 % 11) - 5) * 0.5f;
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t k = 0; k < g.k; ++k)
      for (int64_t oy = 0; oy < g.oh; ++oy)
        for (int64_t ox = 0; ox < g.ow; ++ox) {
          double direct = 0, via = 0;
          for (int64_t c = 0; c < g.c; ++c)
            for (int64_t ky = 0; ky < g.kh; ++ky)
              for (int64_t kx = 0; kx < g.kw; ++kx) {
                const int64_t y = oy * g.sh - g.ph + ky * g.dh, xx = ox * g.sw - g.pw + kx * g.dw;
                const double wv = w[size_t(((k * g.c + c) * g.kh + ky) * g.kw + kx)];
                if (y >= 0 && y < g.h && xx >= 0 && xx < g.w) direct += wv * x[size_t(((n * g.c + c) * g.h + y) * g.w + xx)];
                const int64_t src = im2col_source(g, n, c, ky, kx, oy, ox);
                if (src >= 0) via += wv * x[size_t(src)];
              }
          REQUIRE(via == direct);
        }
}

// ------------------------------------------------- per-element kernel bodies

namespace {

// A deterministic fill with small integers (exact float sums) and a few negatives.
std::vector<float> filled(size_t n, int mul, int mod, int shift) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = float(int(i * size_t(mul) % size_t(mod)) - shift);
  return v;
}

Conv2d geometry(int64_t n, int64_t c, int64_t h, int64_t w, int64_t k, int64_t kh, int64_t kw, int64_t sh, int64_t sw,
                std::vector<int64_t> pads, int64_t dh, int64_t dw, int64_t group) {
  Conv2d g;
  g.n = n, g.c = c, g.h = h, g.w = w, g.k = k, g.kh = kh, g.kw = kw, g.sh = sh, g.sw = sw, g.dh = dh, g.dw = dw, g.group = group;
  g.ph = pads[0], g.pw = pads[1], g.peh = pads[2], g.pew = pads[3];
  g.oh = conv_out_size(h, kh, sh, g.ph, g.peh, dh);
  g.ow = conv_out_size(w, kw, sw, g.pw, g.pew, dw);
  return g;
}

// ONNX Conv by its definition (zero padding, groups, dilations), in double.
double conv_reference(const Conv2d& g, const std::vector<float>& x, const std::vector<float>& w, int64_t n, int64_t k, int64_t oy,
                      int64_t ox) {
  const int64_t cg = g.c / g.group, grp = k / (g.k / g.group);
  double acc = 0;
  for (int64_t ci = 0; ci < cg; ++ci)
    for (int64_t ky = 0; ky < g.kh; ++ky)
      for (int64_t kx = 0; kx < g.kw; ++kx) {
        const int64_t y = oy * g.sh - g.ph + ky * g.dh, xx = ox * g.sw - g.pw + kx * g.dw;
        if (y < 0 || y >= g.h || xx < 0 || xx >= g.w) continue;
        acc += double(x[size_t(((n * g.c + grp * cg + ci) * g.h + y) * g.w + xx)]) * w[size_t(((k * cg + ci) * g.kh + ky) * g.kw + kx)];
      }
  return acc;
}

}  // namespace

TEST_CASE("gather reads the indexed row, negative indices from the end, out of range as -1") {
  const int64_t outer = 3, axis = 5, inner = 4;
  const std::vector<int64_t> idx = {0, -1, 4, 7, -6, 2};
  for (int64_t i = 0; i < outer * int64_t(idx.size()) * inner; ++i) {
    const int64_t in = i % inner, j = (i / inner) % int64_t(idx.size()), o = i / (inner * int64_t(idx.size()));
    const int64_t r = idx[size_t(j)] < 0 ? idx[size_t(j)] + axis : idx[size_t(j)];
    const int64_t want = (r < 0 || r >= axis) ? -1 : (o * axis + r) * inner + in;
    REQUIRE(gather_source(i, axis, inner, int64_t(idx.size()), [&](int64_t k) { return idx[size_t(k)]; }) == want);
  }
}

TEST_CASE("direct convolution (grouped, depthwise, dilated, asymmetric pads) equals the ONNX definition") {
  const std::vector<Conv2d> cases = {geometry(2, 4, 7, 6, 6, 3, 2, 2, 1, {1, 0, 2, 1}, 1, 2, 2),   // grouped
                                     geometry(1, 3, 9, 9, 3, 3, 3, 2, 2, {1, 1, 1, 1}, 1, 1, 3),   // depthwise, stride 2
                                     geometry(1, 2, 5, 5, 4, 1, 1, 1, 1, {0, 0, 0, 0}, 1, 1, 1)};  // pointwise
  for (const Conv2d& g : cases) {
    const auto x = filled(size_t(g.n * g.c * g.h * g.w), 7, 13, 6);
    const auto w = filled(size_t(g.k * (g.c / g.group) * g.kh * g.kw), 5, 11, 5);
    for (int64_t i = 0; i < g.n * g.k * g.oh * g.ow; ++i) {
      const int64_t ox = i % g.ow, oy = (i / g.ow) % g.oh, k = (i / (g.ow * g.oh)) % g.k, n = i / (g.ow * g.oh * g.k);
      const float got = conv_direct_element(i, g, [&](int64_t s) { return x[size_t(s)]; }, [&](int64_t s) { return w[size_t(s)]; }, 0.5f);
      REQUIRE(double(got) == conv_reference(g, x, w, n, k, oy, ox) + 0.5);
    }
  }
}

TEST_CASE("im2col then GEMM (the cuBLASLt path's layout) equals the ONNX convolution") {
  const Conv2d g = geometry(2, 3, 6, 7, 4, 3, 3, 2, 1, {1, 2, 0, 1}, 2, 1, 1);
  const auto x = filled(size_t(g.n * g.c * g.h * g.w), 3, 17, 8);
  const auto w = filled(size_t(g.k * g.c * g.kh * g.kw), 7, 9, 4);
  const int64_t rows = g.c * g.kh * g.kw, cols = g.oh * g.ow;
  for (int64_t img = 0; img < g.n; ++img) {
    std::vector<float> col(size_t(rows * cols));
    for (int64_t i = 0; i < rows * cols; ++i) {
      const int64_t s = im2col_element(i, g, img, 0);
      col[size_t(i)] = s < 0 ? 0.f : x[size_t(s)];
    }
    // out[img] (k x cols) = W (k x rows) * col (rows x cols), row-major as launch_conv runs it.
    for (int64_t k = 0; k < g.k; ++k)
      for (int64_t p = 0; p < cols; ++p) {
        double acc = 0;
        for (int64_t r = 0; r < rows; ++r) acc += double(w[size_t(k * rows + r)]) * col[size_t(r * cols + p)];
        REQUIRE(acc == conv_reference(g, x, w, img, k, p / g.ow, p % g.ow));
      }
  }
}

TEST_CASE("max and average pooling (with and without count_include_pad) equal the ONNX definition") {
  for (bool include : {false, true}) {
    const Conv2d g = geometry(1, 2, 7, 6, 2, 3, 2, 2, 2, {1, 0, 1, 1}, 1, 1, 1);
    const auto x = filled(size_t(g.n * g.c * g.h * g.w), 5, 23, 11);
    for (int64_t i = 0; i < g.n * g.c * g.oh * g.ow; ++i) {
      const int64_t ox = i % g.ow, oy = (i / g.ow) % g.oh, nc = i / (g.ow * g.oh);
      double mx = -1e30, sum = 0;
      int valid = 0;
      for (int64_t ky = 0; ky < g.kh; ++ky)
        for (int64_t kx = 0; kx < g.kw; ++kx) {
          const int64_t y = oy * g.sh - g.ph + ky, xx = ox * g.sw - g.pw + kx;
          if (y < 0 || y >= g.h || xx < 0 || xx >= g.w) continue;
          const double v = x[size_t((nc * g.h + y) * g.w + xx)];
          mx = std::max(mx, v), sum += v, ++valid;
        }
      // ceil_mode 0: every window lies inside the padded input, so with pads it is kh*kw.
      const double avg = sum / (include ? double(g.kh * g.kw) : double(valid));
      auto load = [&](int64_t s) { return x[size_t(s)]; };
      REQUIRE(double(pool_element(i, g, load, true, include)) == mx);
      REQUIRE(double(pool_element(i, g, load, false, include)) == doctest::Approx(avg).epsilon(1e-6));
    }
  }
}

TEST_CASE("reductions over any axes through the outer/inner views equal direct loops") {
  const std::vector<int64_t> dims = {2, 3, 4};
  const auto x = filled(24, 5, 7, 3);
  const Strides in = dense(dims.data(), 3);
  for (const auto& axes : {std::vector<int>{1}, std::vector<int>{0, 2}, std::vector<int>{0, 1, 2}}) {
    Strides outer, inner;
    int64_t n_inner = 1, n_out = 1;
    for (int i = 0; i < 3; ++i) {
      const bool red = std::find(axes.begin(), axes.end(), i) != axes.end();
      Strides& s = red ? inner : outer;
      s.dims[s.rank] = in.dims[i], s.strides[s.rank] = in.strides[i], ++s.rank;
      (red ? n_inner : n_out) *= in.dims[i];
    }
    for (Reduce op : {Reduce::Sum, Reduce::Max, Reduce::Mean, Reduce::LogSumExp}) {
      for (int64_t o = 0; o < n_out; ++o) {
        // The output's kept coordinates, then every reduced coordinate, by multi-index.
        double sum = 0, mx = -1e30;
        std::vector<double> vals;
        for (int64_t e = 0; e < 24; ++e) {
          auto idx = unravel(e, dims);
          int64_t kept = 0;
          for (int i = 0; i < 3; ++i)
            if (std::find(axes.begin(), axes.end(), i) == axes.end()) kept = kept * dims[size_t(i)] + idx[size_t(i)];
          if (kept != o) continue;
          vals.push_back(x[size_t(e)]);
          sum += x[size_t(e)], mx = std::max(mx, double(x[size_t(e)]));
        }
        double lse = 0;
        for (double v : vals) lse += std::exp(v - mx);
        lse = std::log(lse) + mx;
        const double want = op == Reduce::Sum ? sum : op == Reduce::Max ? mx : op == Reduce::Mean ? sum / double(vals.size()) : lse;
        REQUIRE(int64_t(vals.size()) == n_inner);
        REQUIRE(reduce_element(o, outer, inner, n_inner, op, [&](int64_t s) { return x[size_t(s)]; }) ==
                doctest::Approx(want).epsilon(1e-6));
      }
    }
  }
  CHECK(batchnorm_value(3.f, 2.f, 1.f, 1.f, 4.f, 0.f) == doctest::Approx(3.f));  // (3-1)/2*2+1
}
