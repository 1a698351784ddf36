// Ops that sort: TopK (the largest or smallest k along an axis, always in
// sorted order, ties broken by the lower index) and Unique (sorted or in
// order of first occurrence, with indices, inverse and counts).
#include <algorithm>
#include <numeric>
#include <vector>

#include "ops.hpp"

namespace nxrt::cpu {
namespace {

constexpr nxrt_dtype kTopKTypes[] = {NXRT_DTYPE_FLOAT32, NXRT_DTYPE_FLOAT64, NXRT_DTYPE_INT32, NXRT_DTYPE_INT64};

// -------------------------------------------------------------------- TopK

std::unique_ptr<Kernel> topk_create(const Node& n, CpuSession&, bool k_input) {
  const int64_t axis = n.attr_int("axis", -1);
  const bool largest = n.attr_int("largest", 1) != 0;
  const int64_t k_attr = n.attr_int("k", 0);
  return make_kernel([axis, largest, k_attr, k_input](Context& ctx) {
    ConstTensorView x = ctx.input(0);
    int64_t k = k_attr;
    if (k_input) {
      const auto kv = read_ints(ctx.input(1), "TopK", "K");
      if (kv.size() != 1) sdk::fail(NXRT_INVALID_ARGUMENT, "TopK: K must have one element");
      k = kv[0];
    }
    const int64_t r = int64_t(x.rank());
    const int64_t a = norm_axis(axis, r, "TopK");
    const int64_t len = x.dim(size_t(a));
    if (k < 0 || k > len) sdk::fail(NXRT_INVALID_ARGUMENT, "TopK: k {} out of range for axis of {}", k, len);
    int64_t outer = 1, inner = 1;
    for (int64_t i = 0; i < a; ++i) outer *= x.dim(size_t(i));
    for (int64_t i = a + 1; i < r; ++i) inner *= x.dim(size_t(i));
    std::vector<int64_t> od = x.dims();
    od[size_t(a)] = k;
    TensorView vals = ctx.output(0, x.dtype(), od);
    TensorView inds = ctx.output(1, NXRT_DTYPE_INT64, od);
    dispatch_type(x.dtype(), "TopK", [&](auto tag) {
      using T = decltype(tag);
      const T* xp = x.data<T>();
      T* vp = vals.data<T>();
      int64_t* ip = inds.data<int64_t>();
      std::vector<int64_t> order(static_cast<size_t>(len));
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t in = 0; in < inner; ++in) {
          const T* col = xp + o * len * inner + in;
          std::iota(order.begin(), order.end(), int64_t(0));
          auto cmp = [&](int64_t p, int64_t q) {
            const T u = col[p * inner], v = col[q * inner];
            if (u != v) return largest ? u > v : u < v;
            return p < q;
          };
          std::partial_sort(order.begin(), order.begin() + k, order.end(), cmp);
          for (int64_t j = 0; j < k; ++j) {
            const int64_t off = (o * k + j) * inner + in;
            vp[off] = col[order[size_t(j)] * inner];
            ip[off] = order[size_t(j)];
          }
        }
    });
  });
}

Check topk_check(const Node& n, bool k_input) {
  if (auto r = sdk::require_dtypes(n, kTopKTypes, 0, 1)) return r;
  if (n.output(0).dtype() != n.input(0).dtype() || n.output(1).dtype() != NXRT_DTYPE_INT64)
    return sdk::refuse(NXRT_REFUSE_DTYPE, "TopK: output dtypes");
  if (k_input)
    if (auto r = index_dtype(n, 1, "K", false)) return r;
  return known_attrs(n, {"axis", "largest", "sorted", "k"});
}

// ------------------------------------------------------------------ Unique

std::unique_ptr<Kernel> unique_create(const Node& n, CpuSession&) {
  const bool has_axis = n.has_attr("axis");
  const int64_t axis = n.attr_int("axis", 0);
  const bool sorted = n.attr_int("sorted", 1) != 0;
  const bool want1 = n.has_output(1), want2 = n.has_output(2), want3 = n.has_output(3);
  return make_kernel([has_axis, axis, sorted, want1, want2, want3](Context& ctx) {
    ConstTensorView x = ctx.input(0);
    int64_t outer = 1, len = x.numel(), inner = 1, a = 0;
    if (has_axis) {
      a = norm_axis(axis, int64_t(x.rank()), "Unique");
      len = x.dim(size_t(a));
      for (int64_t i = 0; i < a; ++i) outer *= x.dim(size_t(i));
      for (size_t i = size_t(a) + 1; i < x.rank(); ++i) inner *= x.dim(i);
    }
    dispatch_type(x.dtype(), "Unique", [&](auto tag) {
      using T = decltype(tag);
      const T* xp = x.data<T>();
      // Slice k = x[o, k, i] for all (o, i), compared in that order.
      auto cmp = [&](int64_t p, int64_t q) {
        for (int64_t o = 0; o < outer; ++o)
          for (int64_t i = 0; i < inner; ++i) {
            const T u = xp[(o * len + p) * inner + i], v = xp[(o * len + q) * inner + i];
            if (u < v) return -1;
            if (v < u) return 1;
          }
        return 0;
      };
      std::vector<int64_t> order(static_cast<size_t>(len));
      std::iota(order.begin(), order.end(), int64_t(0));
      std::stable_sort(order.begin(), order.end(), [&](int64_t p, int64_t q) { return cmp(p, q) < 0; });
      // Groups of equal slices (first member = first occurrence, thanks to the stable sort).
      std::vector<int64_t> first, count, group_of(static_cast<size_t>(len));
      for (size_t j = 0; j < order.size(); ++j) {
        if (j == 0 || cmp(order[j - 1], order[j]) != 0) {
          first.push_back(order[j]);
          count.push_back(0);
        }
        group_of[size_t(order[j])] = int64_t(first.size()) - 1;
        ++count.back();
      }
      // Output order: sorted (group order) or by first occurrence.
      const int64_t u = int64_t(first.size());
      std::vector<int64_t> rank(static_cast<size_t>(u));
      std::iota(rank.begin(), rank.end(), int64_t(0));
      if (!sorted) std::sort(rank.begin(), rank.end(), [&](int64_t p, int64_t q) { return first[size_t(p)] < first[size_t(q)]; });
      std::vector<int64_t> pos(static_cast<size_t>(u));
      for (int64_t j = 0; j < u; ++j) pos[size_t(rank[size_t(j)])] = j;
      std::vector<int64_t> od = has_axis ? x.dims() : std::vector<int64_t>{u};
      if (has_axis) od[size_t(a)] = u;
      TensorView y = ctx.output(0, x.dtype(), od);
      T* yp = y.data<T>();
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t j = 0; j < u; ++j)
          for (int64_t i = 0; i < inner; ++i) yp[(o * u + j) * inner + i] = xp[(o * len + first[size_t(rank[size_t(j)])]) * inner + i];
      if (want1) {
        TensorView t = ctx.output(1, NXRT_DTYPE_INT64, {u});
        for (int64_t j = 0; j < u; ++j) t.data<int64_t>()[j] = first[size_t(rank[size_t(j)])];
      }
      if (want2) {
        TensorView t = ctx.output(2, NXRT_DTYPE_INT64, {len});
        for (int64_t k = 0; k < len; ++k) t.data<int64_t>()[k] = pos[size_t(group_of[size_t(k)])];
      }
      if (want3) {
        TensorView t = ctx.output(3, NXRT_DTYPE_INT64, {u});
        for (int64_t j = 0; j < u; ++j) t.data<int64_t>()[j] = count[size_t(rank[size_t(j)])];
      }
    });
  });
}

}  // namespace

void register_sort_ops(Registry& r) {
  r.add(Def{"TopK", "", 1, 9, [](const Node& n) { return topk_check(n, false); },
            [](const Node& n, CpuSession& s) { return topk_create(n, s, false); }});
  r.add(Def{"TopK", "", 10, INT_MAX, [](const Node& n) { return topk_check(n, true); },
            [](const Node& n, CpuSession& s) { return topk_create(n, s, true); }});
  r.add(Def{"Unique", "", 11, INT_MAX,
            [](const Node& n) -> Check {
              if (auto c = sdk::require_dtypes(n, kNumeric, 0, 1)) return c;
              if (n.output(0).dtype() != n.input(0).dtype()) return sdk::refuse(NXRT_REFUSE_DTYPE, "Unique: output dtype");
              return known_attrs(n, {"axis", "sorted"});
            },
            unique_create});
}

}  // namespace nxrt::cpu
