// Ops that give the data a new shape or report the shape: Shape, Size,
// Reshape, Flatten, Squeeze, Unsqueeze, Identity, Dropout 7-11 (Y = X).
// Any fixed-size element type. Outputs are copies (the ABI has no aliasing),
// so they cost one memcpy.
#include <algorithm>
#include <cstring>

#include "ops.hpp"

namespace nxrt::cpu {
namespace {

void copy_bytes(const ConstTensorView& x, TensorView& y) {
  if (x.bytes() && y.raw() != x.raw()) std::memmove(y.raw(), x.raw(), x.bytes());
}

Check axes_types(const Node& n) {
  if (auto c = movable_types(n, 1)) return c;
  return input_dtype_is(n, 1, NXRT_DTYPE_INT64, "axes");
}

// -------------------------------------------------------------- Shape, Size

std::unique_ptr<Kernel> shape_create(const Node& n, CpuSession&) {
  const int64_t start = n.attr_int("start", 0);
  const bool has_end = n.has_attr("end");
  const int64_t end = n.attr_int("end", 0);
  return make_kernel([start, has_end, end](Context& ctx) {
    ConstTensorView x = ctx.input(0);
    const int64_t r = int64_t(x.rank());
    auto clampi = [r](int64_t v) { return std::clamp(v < 0 ? v + r : v, int64_t(0), r); };
    const int64_t s = clampi(start), e = has_end ? clampi(end) : r;
    const int64_t cnt = std::max<int64_t>(0, e - s);
    TensorView y = ctx.output(0, NXRT_DTYPE_INT64, {cnt});
    for (int64_t i = 0; i < cnt; ++i) y.data<int64_t>()[i] = x.dim(size_t(s + i));
  });
}

std::unique_ptr<Kernel> size_create(const Node&, CpuSession&) {
  return make_kernel([](Context& ctx) {
    ConstTensorView x = ctx.input(0);
    TensorView y = ctx.output(0, NXRT_DTYPE_INT64, std::span<const int64_t>());
    y.data<int64_t>()[0] = x.numel();
  });
}

Check shape_check(const Node& n) {
  if (auto r = sdk::require_dtypes(n, kAllMovable)) return r;
  return known_attrs(n, {"start", "end"});
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
      // A shape computed at run time may hold any int64s: their product must not overflow (fuzz_model_session).
      if (__builtin_mul_overflow(known, v, &known))
        sdk::fail(NXRT_INVALID_ARGUMENT, "Reshape: shape {} has more elements than a tensor may hold", dims_str(std::span(sp, od.size())));
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

// ----------------------------------------------------------------- Dropout

// Dropout 7-11 (no training_mode input): Y = X, mask all true. Dropout 12+,
// which may be random, is in ops_random.cpp.
Check dropout_check(const Node& n) {
  if (auto r = sdk::require_dtypes(n, kAllFixed, 0, 1)) return r;
  if (auto r = known_attrs(n, {"ratio", "seed"})) return r;
  if (n.has_output(1) && n.output(1).dtype() != NXRT_DTYPE_BOOL)
    return sdk::refuse(NXRT_REFUSE_DTYPE, "Dropout: mask output is {}, only bool is implemented", sdk::dtype_name(n.output(1).dtype()));
  return std::nullopt;
}

std::unique_ptr<Kernel> dropout_create(const Node& n, CpuSession&) {
  const bool mask = n.has_output(1);
  return make_kernel([mask](Context& ctx) {
    ConstTensorView x = ctx.input(0);
    TensorView y = ctx.output(0, x.dtype(), x.dims());
    if (x.bytes()) std::memcpy(y.raw(), x.raw(), x.bytes());
    if (mask) {
      TensorView m = ctx.output(1, NXRT_DTYPE_BOOL, x.dims());
      bool* mp = m.data<bool>();
      std::fill(mp, mp + m.numel(), true);
    }
  });
}

}  // namespace

void register_shape_ops(Registry& r) {
  r.add(Def{"Shape", "", 1, INT_MAX, shape_check, shape_create});
  r.add(Def{"Size", "", 1, INT_MAX, [](const Node& n) { return sdk::require_dtypes(n, kAllMovable); }, size_create});
  r.add(Def{"Reshape", "", 5, INT_MAX,
            [](const Node& n) {
              if (auto c = movable_types(n, 1)) return c;
              return input_dtype_is(n, 1, NXRT_DTYPE_INT64, "shape");
            },
            reshape_create});
  r.add(Def{"Flatten", "", 1, INT_MAX, [](const Node& n) { return movable_types(n, SIZE_MAX); }, flatten_create});
  r.add(Def{"Identity", "", 1, INT_MAX, [](const Node& n) { return movable_types(n, SIZE_MAX); }, identity_create});
  r.add(Def{"Squeeze", "", 1, 12, [](const Node& n) { return movable_types(n, SIZE_MAX); },
            [](const Node& n, CpuSession&) { return squeeze_create(n, false); }});
  r.add(Def{"Squeeze", "", 13, INT_MAX, [](const Node& n) { return axes_types(n); },
            [](const Node& n, CpuSession&) { return squeeze_create(n, true); }});
  r.add(Def{"Unsqueeze", "", 1, 12, [](const Node& n) { return movable_types(n, SIZE_MAX); },
            [](const Node& n, CpuSession&) { return unsqueeze_create(n, false); }});
  r.add(Def{"Unsqueeze", "", 13, INT_MAX, [](const Node& n) { return axes_types(n); },
            [](const Node& n, CpuSession&) { return unsqueeze_create(n, true); }});
  r.add(Def{"Dropout", "", 7, 11, dropout_check, dropout_create});
}

}  // namespace nxrt::cpu
