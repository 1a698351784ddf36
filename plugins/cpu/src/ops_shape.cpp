// Data movement: Transpose, Reshape, Flatten, Identity, Squeeze, Unsqueeze,
// Concat. Any fixed-size element type. Outputs are copies (the ABI has no
// aliasing), so they cost one memcpy.
#include <algorithm>
#include <cstring>

#include "ops.hpp"
#include "transpose.hpp"

namespace nxrt::cpu {
namespace {


void copy_bytes(const ConstTensorView& x, TensorView& y) {
  if (x.bytes() && y.raw() != x.raw()) std::memmove(y.raw(), x.raw(), x.bytes());
}

Check data_types(const Node& n, size_t data_inputs = SIZE_MAX) {
  if (auto r = sdk::require_dtypes(n, kAllFixed, 0, data_inputs)) return r;
  return same_dtype(n, data_inputs);
}

Check axes_types(const Node& n) {
  if (auto c = data_types(n, 1)) return c;
  return input_dtype_is(n, 1, NXRT_DTYPE_INT64, "axes");
}

// ------------------------------------------------------------ Transpose

std::unique_ptr<Kernel> transpose_create(const Node& n, CpuSession& s) {
  const bool has_perm = n.has_attr("perm");
  const std::vector<int64_t> perm = n.attr_ints("perm");
  ThreadPool* pool = s.pool();
  return make_kernel([has_perm, perm, pool](Context& ctx) {
    ConstTensorView x = ctx.input(0);
    const size_t r = x.rank();
    std::vector<int64_t> p = perm;
    if (!has_perm) {
      p.resize(r);
      for (size_t i = 0; i < r; ++i) p[i] = int64_t(r - 1 - i);
    }
    if (p.size() != r) sdk::fail(NXRT_INVALID_ARGUMENT, "Transpose: perm has {} entries for rank {}", p.size(), r);
    std::vector<bool> seen(r, false);
    std::vector<int64_t> od(r);
    for (size_t i = 0; i < r; ++i) {
      int64_t a = p[i] < 0 ? p[i] + int64_t(r) : p[i];
      if (a < 0 || a >= int64_t(r) || seen[size_t(a)]) sdk::fail(NXRT_INVALID_ARGUMENT, "Transpose: perm {} is not a permutation", dims_str(p));
      seen[size_t(a)] = true;
      p[i] = a;
      od[i] = x.dim(size_t(a));
    }
    TensorView y = ctx.output(0, x.dtype(), od);
    if (y.numel() == 0) return;
    transpose(x.raw(), y.raw(), sdk::dtype_size(x.dtype()), x.dims(), p, pool);
  });
}

// -------------------------------------------------------------- Reshape

std::unique_ptr<Kernel> reshape_create(const Node& n, CpuSession&) {
  const bool allowzero = n.attr_int("allowzero", 0) != 0;
  return make_kernel([allowzero](Context& ctx) {
    ConstTensorView x = ctx.input(0), shape = ctx.input(1);
    if (shape.rank() != 1) sdk::fail(NXRT_INVALID_ARGUMENT, "Reshape: shape must be 1-D, got {}", dims_str(shape.dims()));
    const int64_t* sp = shape.data<int64_t>();
    std::vector<int64_t> od(size_t(shape.dim(0)));
    int64_t known = 1, infer = -1;
    for (size_t i = 0; i < od.size(); ++i) {
      int64_t v = sp[i];
      if (v == 0 && !allowzero) {
        if (i >= x.rank()) sdk::fail(NXRT_INVALID_ARGUMENT, "Reshape: shape {} copies dim {} of a rank-{} input", dims_str(std::span(sp, od.size())), i, x.rank());
        v = x.dim(i);
      }
      if (v == -1) {
        if (infer >= 0) sdk::fail(NXRT_INVALID_ARGUMENT, "Reshape: more than one -1 in shape");
        infer = int64_t(i);
        continue;
      }
      if (v < 0) sdk::fail(NXRT_INVALID_ARGUMENT, "Reshape: invalid dim {}", v);
      od[i] = v;
      known *= v;
    }
    if (infer >= 0) {
      if (known == 0 || x.numel() % known != 0)
        sdk::fail(NXRT_INVALID_ARGUMENT, "Reshape: cannot infer -1 reshaping {} to {}", dims_str(x.dims()), dims_str(std::span(sp, od.size())));
      od[size_t(infer)] = x.numel() / known;
    }
    if (sdk::element_count(od) != x.numel())
      sdk::fail(NXRT_INVALID_ARGUMENT, "Reshape: {} elements cannot take shape {}", x.numel(), dims_str(od));
    TensorView y = ctx.output(0, x.dtype(), od);
    copy_bytes(x, y);
  });
}

// -------------------------------------------------------------- Flatten

std::unique_ptr<Kernel> flatten_create(const Node& n, CpuSession&) {
  const int64_t axis = n.attr_int("axis", 1);
  return make_kernel([axis](Context& ctx) {
    ConstTensorView x = ctx.input(0);
    const int64_t r = int64_t(x.rank());
    const int64_t a = norm_axis(axis, r, "Flatten", true);
    int64_t outer = 1;
    for (int64_t i = 0; i < a; ++i) outer *= x.dim(size_t(i));
    int64_t inner = 1;
    for (int64_t i = a; i < r; ++i) inner *= x.dim(size_t(i));
    TensorView y = ctx.output(0, x.dtype(), {outer, inner});
    copy_bytes(x, y);
  });
}

std::unique_ptr<Kernel> identity_create(const Node&, CpuSession&) {
  return make_kernel([](Context& ctx) {
    ConstTensorView x = ctx.input(0);
    TensorView y = ctx.output(0, x.dtype(), x.dims());
    copy_bytes(x, y);
  });
}

// ---------------------------------------------------- Squeeze/Unsqueeze

std::vector<int64_t> axes_from(Context& ctx, bool from_input, const std::vector<int64_t>& attr, bool& given) {
  if (!from_input) {
    given = !attr.empty();
    return attr;
  }
  auto t = ctx.optional_input(1);
  given = t.has_value();
  if (!t) return {};
  const int64_t* p = t->data<int64_t>();
  return std::vector<int64_t>(p, p + t->numel());
}

std::unique_ptr<Kernel> squeeze_create(const Node& n, bool from_input) {
  const std::vector<int64_t> attr = n.attr_ints("axes");
  return make_kernel([attr, from_input](Context& ctx) {
    ConstTensorView x = ctx.input(0);
    bool given = false;
    auto axes = axes_from(ctx, from_input, attr, given);
    const int64_t r = int64_t(x.rank());
    std::vector<bool> drop(size_t(r), false);
    if (!given) {
      for (int64_t i = 0; i < r; ++i) drop[size_t(i)] = x.dim(size_t(i)) == 1;
    } else {
      for (auto a : axes) {
        const int64_t k = norm_axis(a, r, "Squeeze");
        if (x.dim(size_t(k)) != 1) sdk::fail(NXRT_INVALID_ARGUMENT, "Squeeze: dim {} of {} is not 1", k, dims_str(x.dims()));
        drop[size_t(k)] = true;
      }
    }
    std::vector<int64_t> od;
    for (int64_t i = 0; i < r; ++i)
      if (!drop[size_t(i)]) od.push_back(x.dim(size_t(i)));
    TensorView y = ctx.output(0, x.dtype(), od);
    copy_bytes(x, y);
  });
}

std::unique_ptr<Kernel> unsqueeze_create(const Node& n, bool from_input) {
  const std::vector<int64_t> attr = n.attr_ints("axes");
  return make_kernel([attr, from_input](Context& ctx) {
    ConstTensorView x = ctx.input(0);
    bool given = false;
    auto axes = axes_from(ctx, from_input, attr, given);
    const int64_t r = int64_t(x.rank()) + int64_t(axes.size());
    std::vector<bool> ins(size_t(r), false);
    for (auto a : axes) {
      const int64_t k = norm_axis(a, r, "Unsqueeze");
      if (ins[size_t(k)]) sdk::fail(NXRT_INVALID_ARGUMENT, "Unsqueeze: axis {} repeated", a);
      ins[size_t(k)] = true;
    }
    std::vector<int64_t> od;
    size_t j = 0;
    for (int64_t i = 0; i < r; ++i) od.push_back(ins[size_t(i)] ? 1 : x.dim(j++));
    TensorView y = ctx.output(0, x.dtype(), od);
    copy_bytes(x, y);
  });
}

// --------------------------------------------------------------- Concat

std::unique_ptr<Kernel> concat_create(const Node& n, CpuSession&) {
  const int64_t axis = n.attr_int("axis", 0);
  return make_kernel([axis](Context& ctx) {
    const size_t k = ctx.input_count();
    if (k == 0) sdk::fail(NXRT_INVALID_ARGUMENT, "Concat: no inputs");
    std::vector<ConstTensorView> in;
    for (size_t i = 0; i < k; ++i) in.push_back(ctx.input(i));
    const int64_t r = int64_t(in[0].rank());
    const int64_t a = norm_axis(axis, r, "Concat");
    std::vector<int64_t> od = in[0].dims();
    od[size_t(a)] = 0;
    for (auto& t : in) {
      if (int64_t(t.rank()) != r || t.dtype() != in[0].dtype()) sdk::fail(NXRT_INVALID_ARGUMENT, "Concat: inputs differ in rank or dtype");
      for (int64_t i = 0; i < r; ++i)
        if (i != a && t.dim(size_t(i)) != in[0].dim(size_t(i)))
          sdk::fail(NXRT_INVALID_ARGUMENT, "Concat: {} and {} differ outside axis {}", dims_str(in[0].dims()), dims_str(t.dims()), a);
      od[size_t(a)] += t.dim(size_t(a));
    }
    TensorView y = ctx.output(0, in[0].dtype(), od);
    const size_t es = sdk::dtype_size(in[0].dtype());
    int64_t outer = 1, inner = 1;
    for (int64_t i = 0; i < a; ++i) outer *= od[size_t(i)];
    for (int64_t i = a + 1; i < r; ++i) inner *= od[size_t(i)];
    const size_t out_row = size_t(od[size_t(a)] * inner) * es;
    size_t col = 0;
    for (auto& t : in) {
      const size_t row = size_t(t.dim(size_t(a)) * inner) * es;
      for (int64_t o = 0; o < outer; ++o)
        std::memcpy(static_cast<char*>(y.raw()) + size_t(o) * out_row + col, static_cast<const char*>(t.raw()) + size_t(o) * row, row);
      col += row;
    }
  });
}

}  // namespace

void register_shape_ops(Registry& r) {
  r.add(Def{"Transpose", "", 1, INT_MAX, [](const Node& n) { return data_types(n); }, transpose_create});
  r.add(Def{"Reshape", "", 5, INT_MAX,
            [](const Node& n) {
              if (auto c = data_types(n, 1)) return c;
              return input_dtype_is(n, 1, NXRT_DTYPE_INT64, "shape");
            },
            reshape_create});
  r.add(Def{"Flatten", "", 1, INT_MAX, [](const Node& n) { return data_types(n); }, flatten_create});
  r.add(Def{"Identity", "", 1, INT_MAX, [](const Node& n) { return data_types(n); }, identity_create});
  r.add(Def{"Squeeze", "", 1, 12, [](const Node& n) { return data_types(n); },
            [](const Node& n, CpuSession&) { return squeeze_create(n, false); }});
  r.add(Def{"Squeeze", "", 13, INT_MAX, [](const Node& n) { return axes_types(n); },
            [](const Node& n, CpuSession&) { return squeeze_create(n, true); }});
  r.add(Def{"Unsqueeze", "", 1, 12, [](const Node& n) { return data_types(n); },
            [](const Node& n, CpuSession&) { return unsqueeze_create(n, false); }});
  r.add(Def{"Unsqueeze", "", 13, INT_MAX, [](const Node& n) { return axes_types(n); },
            [](const Node& n, CpuSession&) { return unsqueeze_create(n, true); }});
  r.add(Def{"Concat", "", 4, INT_MAX, [](const Node& n) { return data_types(n); }, concat_create});
}

}  // namespace nxrt::cpu
