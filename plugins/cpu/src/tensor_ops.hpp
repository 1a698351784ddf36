// Data movement, indexing, casts and reductions (no ABI dependency): the math
// behind Gather, Slice, Expand, Tile, Pad, Split, Where, Cast, Reduce*,
// ArgMax/ArgMin and the broadcasting elementwise ops of
// ops_elementwise_{unary,binary}.cpp and ops_compare_logic.cpp.
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "thread_pool.hpp"

namespace nxrt::cpu {

// ------------------------------------------------------------ broadcasting

// numpy broadcasting of any number of shapes; false when incompatible.
bool broadcast_shapes(std::span<const std::vector<int64_t>> shapes, std::vector<int64_t>& out);

// Element strides of a tensor of `dims` read as `out_dims` (right-aligned; 0
// where the tensor is broadcast).
std::vector<int64_t> broadcast_strides(std::span<const int64_t> dims, std::span<const int64_t> out_dims);

// Calls row(o, n, off, inner) for every innermost row of the output: o is the
// output offset of the row, n its length, off[k] the element offset of input
// k at the row start and inner[k] its stride along the row. Adjacent
// dimensions that every input walks contiguously are merged first, so rows are
// as long as possible. Rows are spread over the pool when the output is big.
template <size_t N, typename Row>
void broadcast_rows(std::span<const int64_t> out_dims, const std::array<std::vector<int64_t>, N>& strides, ThreadPool* pool,
                    Row&& row) {
  // Merge dims (d, d+1) when every input has stride[d] == stride[d+1] * dim[d+1].
  std::vector<int64_t> dims;
  std::array<std::vector<int64_t>, N> st;
  for (size_t d = 0; d < out_dims.size(); ++d) {
    if (out_dims[d] == 1) continue;
    bool merge = !dims.empty();
    for (size_t k = 0; k < N && merge; ++k) merge = st[k].back() == strides[k][d] * out_dims[d];
    if (merge) {
      dims.back() *= out_dims[d];
      for (size_t k = 0; k < N; ++k) st[k].back() = strides[k][d];
    } else {
      dims.push_back(out_dims[d]);
      for (size_t k = 0; k < N; ++k) st[k].push_back(strides[k][d]);
    }
  }
  if (dims.empty()) {
    dims.push_back(1);
    for (size_t k = 0; k < N; ++k) st[k].push_back(0);
  }
  for (auto d : dims)
    if (d == 0) return;
  const size_t r = dims.size();
  const int64_t n = dims[r - 1];
  int64_t rows = 1;
  for (size_t d = 0; d + 1 < r; ++d) rows *= dims[d];
  std::array<int64_t, N> inner{};
  for (size_t k = 0; k < N; ++k) inner[k] = st[k][r - 1];
  auto run = [&](int64_t r0, int64_t r1) {
    std::array<int64_t, N> off{};
    for (int64_t rw = r0; rw < r1; ++rw) {
      int64_t rem = rw;
      off.fill(0);
      for (size_t d = r - 1; d-- > 0;) {
        const int64_t i = rem % dims[d];
        rem /= dims[d];
        for (size_t k = 0; k < N; ++k) off[k] += i * st[k][d];
      }
      row(rw * n, n, off.data(), inner.data());
    }
  };
  const int parts = threads_for(pool, double(rows) * double(n), 65536.0);
  parallel_ranges(pool, rows, parts, run);
}

// y = f(a, b) with broadcasting (y contiguous over od; a of ad, b of bd; a and
// b may have different element types).
template <typename TA, typename TB, typename R, typename F>
void broadcast_binary(const TA* a, std::span<const int64_t> ad, const TB* b, std::span<const int64_t> bd, R* y,
                      std::span<const int64_t> od, ThreadPool* pool, F f) {
  const std::array<std::vector<int64_t>, 2> st = {broadcast_strides(ad, od), broadcast_strides(bd, od)};
  broadcast_rows<2>(od, st, pool, [&](int64_t o, int64_t n, const int64_t* off, const int64_t* in) {
    const TA* ap = a + off[0];
    const TB* bp = b + off[1];
    R* yp = y + o;
    if (in[0] == 1 && in[1] == 1) {
      for (int64_t i = 0; i < n; ++i) yp[i] = f(ap[i], bp[i]);
    } else if (in[0] == 1 && in[1] == 0) {
      const TB bv = bp[0];
      for (int64_t i = 0; i < n; ++i) yp[i] = f(ap[i], bv);
    } else if (in[0] == 0 && in[1] == 1) {
      const TA av = ap[0];
      for (int64_t i = 0; i < n; ++i) yp[i] = f(av, bp[i]);
    } else {
      for (int64_t i = 0; i < n; ++i) yp[i] = f(ap[i * in[0]], bp[i * in[1]]);
    }
  });
}

// ---------------------------------------------------------- index-map copy

inline constexpr int64_t kFill = INT64_MIN;

// dst[i_0, ..., i_{r-1}] = src[maps[0][i_0] + ... + maps[r-1][i_{r-1}]] for an
// output of out_dims (maps[d].size() == out_dims[d]; entries are element
// offsets into src), or *fill (one element) where any map entry is kFill.
// Each row goes as the last map's runs (copies of consecutive elements, fills, repeats of
// one element) where they average 4+ elements, else element by element. esize is 1, 2, 4
// or 8.
void map_copy(const void* src, void* dst, size_t esize, std::span<const int64_t> out_dims,
              const std::vector<std::vector<int64_t>>& maps, const void* fill, ThreadPool* pool);

// Element strides of a contiguous tensor.
std::vector<int64_t> contiguous_strides(std::span<const int64_t> dims);

// ONNX Slice bounds on one axis of size dim (step != 0): normalises and clamps
// start in place, returns the element count.
int64_t slice_bounds(int64_t& start, int64_t end, int64_t step, int64_t dim);

// dst = src[start[d] + i * step[d], ...] for an output of out_dims.
void strided_slice(const void* src, void* dst, size_t esize, std::span<const int64_t> in_dims,
                   std::span<const int64_t> start, std::span<const int64_t> step, std::span<const int64_t> out_dims,
                   ThreadPool* pool);

// ONNX Gather along axis (indices may be negative); false when an index is out
// of range (nothing written). The output is dims[:axis] + indices + dims[axis+1:].
bool gather(const void* src, void* dst, size_t esize, std::span<const int64_t> dims, int64_t axis,
            std::span<const int64_t> indices, ThreadPool* pool);

// y = c ? a : b with numpy broadcasting of the three shapes to od.
void where(const bool* c, std::span<const int64_t> cd, const void* a, std::span<const int64_t> ad, const void* b,
           std::span<const int64_t> bd, void* y, size_t esize, std::span<const int64_t> od, ThreadPool* pool);

// ------------------------------------------------------------------- casts

enum class Elem { F32, F16, BF16, F64, I8, U8, I16, U16, I32, U32, I64, U64, Bool };

uint16_t float_to_half(float f);  // round to nearest even; overflow -> inf; NaN kept
float half_to_float(uint16_t h);

// float32 -> bfloat16 (the upper 16 bits of the float32): round to nearest
// even, or truncate (drop the low 16 bits, what ONNX 1.12's Cast test data
// holds). NaN stays a quiet NaN either way.
enum class Bf16Round { NearestEven, Truncate };
uint16_t float_to_bfloat16(float f, Bf16Round round);
float bfloat16_to_float(uint16_t b);

// dst[i] = (dt)src[i] with numpy's astype semantics for the supported pairs
// (float -> int truncates toward zero; -> bool is != 0); -> bfloat16 rounds
// as `bf16` says (from float64 through float32).
void cast(const void* src, Elem st, void* dst, Elem dt, int64_t n, Bf16Round bf16 = Bf16Round::NearestEven);

// -------------------------------------------------------------- reductions

enum class ReduceOp { Sum, Mean, Max, Min, Prod, SumSquare, L1, L2, LogSum, LogSumExp };

// y = reduce over the axes flagged in `reduce` of x (dims); y has x's dims with
// the reduced ones set to 1 (keepdims layout). Float accumulates in double,
// integers in int64. Max/Min propagate NaN.
template <typename T>
void reduce(ReduceOp op, const T* x, std::span<const int64_t> dims, const std::vector<bool>& reduce, T* y,
            ThreadPool* pool);

// y[outer, inner] = index of the max (min) along `axis`; first or last index
// on ties.
template <typename T>
void arg_reduce(bool is_max, bool last_index, const T* x, std::span<const int64_t> dims, int64_t axis, int64_t* y);

}  // namespace nxrt::cpu
