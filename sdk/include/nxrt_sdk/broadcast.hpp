// Shape helpers and numpy-style (ONNX multidirectional) broadcasting.
//
// Thread class: pure functions over values; safe from any thread, no shared state.
// Ownership: results are returned by value; the helpers keep no pointer to their arguments.
// Failures: a shape pair that does not broadcast is an NXRT_INVALID_ARGUMENT exception
// (fail()), which the SDK turns into the kernel's status.
#pragma once
#include "graph.hpp"
#include "kernel_registry.hpp"
#include "tensor.hpp"

#include <algorithm>
#include <optional>
#include <span>
#include <vector>

namespace nxrt::sdk {

// The broadcast of two shapes: right-aligned, each pair of dims equal or one of them 1.
inline std::vector<int64_t> broadcast_shape(std::span<const int64_t> a, std::span<const int64_t> b) {
  const size_t rank = std::max(a.size(), b.size());
  std::vector<int64_t> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1)
      fail(NXRT_INVALID_ARGUMENT, "shapes do not broadcast: dim {} of the output is {} in one input and {} in the other", i, da, db);
    out[i] = da == 1 ? db : da;
  }
  return out;
}

// The element strides of an input of shape `in` read at the positions of `out` (a broadcast of
// it): 0 where the input repeats (a dim of 1, or a missing leading dim).
inline std::vector<int64_t> broadcast_strides(std::span<const int64_t> in, std::span<const int64_t> out) {
  if (in.size() > out.size()) fail(NXRT_INVALID_ARGUMENT, "a rank-{} input cannot broadcast to rank {}", in.size(), out.size());
  std::vector<int64_t> strides(out.size(), 0);
  int64_t step = 1;
  for (size_t k = in.size(); k-- > 0;) {
    size_t o = k + (out.size() - in.size());
    if (in[k] != 1 && in[k] != out[o]) fail(NXRT_INVALID_ARGUMENT, "dim {} of size {} cannot broadcast to {}", k, in[k], out[o]);
    strides[o] = in[k] == 1 ? 0 : step;
    step *= in[k];
  }
  return strides;
}

// Calls f(out_index, a_index, b_index) for every element of `out`, in row-major order, with the
// element indices of inputs a and b (shapes `a`, `b` broadcast to `out`).
template <typename F>
void for_each_broadcast(std::span<const int64_t> out, std::span<const int64_t> a, std::span<const int64_t> b, F&& f) {
  const auto sa = broadcast_strides(a, out), sb = broadcast_strides(b, out);
  const int64_t n = element_count(out);
  if (n == 0) return;
  const size_t rank = out.size();
  std::vector<int64_t> pos(rank, 0);
  int64_t ia = 0, ib = 0;
  for (int64_t i = 0; i < n; ++i) {
    f(i, ia, ib);
    for (size_t d = rank; d-- > 0;) {  // odometer step: carry into the next dim
      ia += sa[d];
      ib += sb[d];
      if (++pos[d] < out[d]) break;
      ia -= sa[d] * out[d];
      ib -= sb[d] * out[d];
      pos[d] = 0;
    }
  }
}

// For get_capability: a refusal when two inputs' known dims cannot broadcast. Unknown ranks and
// symbolic dims (dynamic shapes) pass here and are checked by broadcast_shape at run time.
inline std::optional<Refusal> check_broadcast(const Node& n, size_t first = 0, size_t second = 1) {
  Value a = n.input(first), b = n.input(second);
  if (!a.present() || !b.present() || a.rank() < 0 || b.rank() < 0) return std::nullopt;
  auto da = a.dims(), db = b.dims();
  const size_t rank = std::max(da.size(), db.size());
  for (size_t i = 0; i < rank; ++i) {
    int64_t x = i < rank - da.size() ? 1 : da[i - (rank - da.size())];
    int64_t y = i < rank - db.size() ? 1 : db[i - (rank - db.size())];
    if (x > 1 && y > 1 && x != y)
      return refuse(NXRT_REFUSE_SHAPE, "{} inputs do not broadcast: {} vs {} at output dim {}", n.op_type(), x, y, i);
  }
  return std::nullopt;
}

}  // namespace nxrt::sdk
