// Shape arithmetic shared by the op families: element counts, dense strides,
// axis normalisation, numpy broadcasting, constant axes.
#pragma once
#include "ops.hpp"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <vector>

namespace nxrt::vk {

inline int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (auto d : s) n *= d;
  return n;
}
inline Shape dense_strides(const Shape& s) {
  Shape st(s.size(), 1);
  for (int i = int(s.size()) - 2; i >= 0; --i) st[size_t(i)] = st[size_t(i) + 1] * s[size_t(i) + 1];
  return st;
}
inline int64_t norm_axis(int64_t a, int64_t rank) { return a < 0 ? a + rank : a; }

// Numpy broadcasting of two shapes; fails on incompatible dims.
inline Shape broadcast(const Shape& a, const Shape& b) {
  size_t r = std::max(a.size(), b.size());
  Shape o(r);
  for (size_t i = 0; i < r; ++i) {
    int64_t x = i + a.size() >= r ? a[i + a.size() - r] : 1;
    int64_t y = i + b.size() >= r ? b[i + b.size() - r] : 1;
    if (x != y && x != 1 && y != 1) sdk::fail(NXRT_INVALID_ARGUMENT, "shapes cannot broadcast ({} vs {})", x, y);
    o[i] = x == 1 ? y : x;
  }
  return o;
}

// The shape function of ops whose output has the first input's shape.
inline void same_shape(const IrGraph&, const IrNode&, const std::vector<const Shape*>& in, std::vector<Shape>& out) {
  out[0] = *in[0];
}

// Axes for Reduce*, Squeeze, Unsqueeze: the attribute, or constant input 1
// (nullopt when that input is not a constant the IR holds).
inline std::optional<std::vector<int64_t>> axes_of(const IrGraph& g, const IrNode& n, bool from_input) {
  if (!from_input) return attr_ints(n, "axes");
  auto v = g.in(n, 1);
  if (!v) return std::vector<int64_t>{};
  return const_ints(v);
}

}  // namespace nxrt::vk
