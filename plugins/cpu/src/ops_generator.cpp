// Ops that create a tensor from attributes or scalars: Constant,
// ConstantOfShape, Range, EyeLike, and the Hann/Hamming/Blackman windows
// (window.cpp).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "ops.hpp"
#include "window.hpp"

namespace nxrt::cpu {
namespace {

// ---------------------------------------------------------------- Constant

std::unique_ptr<Kernel> constant_create(const Node& n, CpuSession&) {
  struct C {
    nxrt_dtype dt = NXRT_DTYPE_FLOAT32;
    std::vector<int64_t> dims;
    std::vector<unsigned char> bytes;
  } c;
  auto put = [&c](nxrt_dtype dt, std::vector<int64_t> dims, const void* p, size_t bytes) {
    c.dt = dt;
    c.dims = std::move(dims);
    c.bytes.assign(static_cast<const unsigned char*>(p), static_cast<const unsigned char*>(p) + bytes);
  };
  if (auto a = n.attr("value")) {
    ConstTensorView t = a->tensor();
    put(t.dtype(), t.dims(), t.raw(), t.bytes());
  } else if (auto a = n.attr("value_float")) {
    const float v = a->f();
    put(NXRT_DTYPE_FLOAT32, {}, &v, 4);
  } else if (auto a = n.attr("value_floats")) {
    const auto v = a->floats();
    put(NXRT_DTYPE_FLOAT32, {int64_t(v.size())}, v.data(), v.size() * 4);
  } else if (auto a = n.attr("value_int")) {
    const int64_t v = a->i();
    put(NXRT_DTYPE_INT64, {}, &v, 8);
  } else if (auto a = n.attr("value_ints")) {
    const auto v = a->ints();
    put(NXRT_DTYPE_INT64, {int64_t(v.size())}, v.data(), v.size() * 8);
  } else {
    sdk::fail(NXRT_UNSUPPORTED, "Constant: no supported value attribute");
  }
  return make_kernel([c](Context& ctx) {
    TensorView y = ctx.output(0, c.dt, c.dims);
    if (!c.bytes.empty()) std::memcpy(y.raw(), c.bytes.data(), c.bytes.size());
  });
}

Check constant_check(const Node& n) {
  if (auto r = known_attrs(n, {"value", "value_float", "value_floats", "value_int", "value_ints"})) return r;
  if (n.attribute_count() != 1) return sdk::refuse(NXRT_REFUSE_ATTRIBUTE, "Constant: exactly one value attribute expected");
  return sdk::require_dtypes(n, kAllFixed);
}

// --------------------------------------------------------- ConstantOfShape

std::unique_ptr<Kernel> cos_create(const Node& n, CpuSession&) {
  nxrt_dtype dt = NXRT_DTYPE_FLOAT32;
  uint64_t value = 0;
  if (auto a = n.attr("value")) {
    ConstTensorView t = a->tensor();
    if (t.numel() != 1) sdk::fail(NXRT_INVALID_ARGUMENT, "ConstantOfShape: value must have one element");
    dt = t.dtype();
    std::memcpy(&value, t.raw(), sdk::dtype_size(dt));
  }
  return make_kernel([dt, value](Context& ctx) {
    const std::vector<int64_t> shape = read_ints(ctx.input(0), "ConstantOfShape", "shape");
    for (auto v : shape)
      if (v < 0) sdk::fail(NXRT_INVALID_ARGUMENT, "ConstantOfShape: negative dim in {}", dims_str(shape));
    TensorView y = ctx.output(0, dt, shape);
    const int64_t cnt = y.numel();
    const size_t es = sdk::dtype_size(dt);
    char* p = static_cast<char*>(y.raw());
    if (value == 0) {
      std::memset(p, 0, size_t(cnt) * es);
      return;
    }
    for (int64_t i = 0; i < cnt; ++i) std::memcpy(p + size_t(i) * es, &value, es);
  });
}

Check cos_check(const Node& n) {
  if (auto r = index_dtype(n, 0, "shape", false)) return r;
  auto o = n.output(0);
  bool ok = false;
  for (auto t : kAllFixed) ok = ok || t == o.dtype();
  if (!ok) return sdk::refuse(NXRT_REFUSE_DTYPE, "ConstantOfShape output is {}", sdk::dtype_name(o.dtype()));
  return known_attrs(n, {"value"});
}

// ------------------------------------------------------------------- Range

std::unique_ptr<Kernel> range_create(const Node&, CpuSession&) {
  return make_kernel([](Context& ctx) {
    ConstTensorView s = ctx.input(0), l = ctx.input(1), dl = ctx.input(2);
    if (s.numel() != 1 || l.numel() != 1 || dl.numel() != 1) sdk::fail(NXRT_INVALID_ARGUMENT, "Range: inputs must be scalars");
    dispatch_type(s.dtype(), "Range", [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_same_v<T, bool>) {
        sdk::fail(NXRT_INVALID_ARGUMENT, "Range: bool");
      } else {
        const T start = s.data<T>()[0], limit = l.data<T>()[0], delta = dl.data<T>()[0];
        if (delta == T(0)) sdk::fail(NXRT_INVALID_ARGUMENT, "Range: delta is 0");
        int64_t cnt = 0;
        if constexpr (std::is_floating_point_v<T>) {
          const double c = std::max(0.0, std::ceil((double(limit) - double(start)) / double(delta)));
          // Checked before the conversion, which is undefined past int64 (UBSan, fuzz_model_session).
          if (!(c < 0x1p62)) sdk::fail(NXRT_INVALID_ARGUMENT, "Range: {} elements are more than a tensor may hold", c);
          cnt = int64_t(c);
        } else {
          const int64_t span = int64_t(limit) - int64_t(start), dd = int64_t(delta);
          if ((span > 0 && dd > 0) || (span < 0 && dd < 0)) cnt = (span + dd - (dd > 0 ? 1 : -1)) / dd;
        }
        TensorView y = ctx.output(0, s.dtype(), {cnt});
        T* p = y.data<T>();
        for (int64_t i = 0; i < cnt; ++i) p[i] = T(start + T(i) * delta);
      }
    });
  });
}

// ----------------------------------------------------------------- EyeLike

std::unique_ptr<Kernel> eyelike_create(const Node& n, CpuSession&) {
  const int64_t k = n.attr_int("k", 0);
  const nxrt_dtype dt = n.output(0).dtype();
  return make_kernel([k, dt](Context& ctx) {
    ConstTensorView x = ctx.input(0);
    if (x.rank() != 2) sdk::fail(NXRT_INVALID_ARGUMENT, "EyeLike: input must be 2-D");
    TensorView y = ctx.output(0, dt, x.dims());
    if (y.bytes()) std::memset(y.raw(), 0, y.bytes());
    dispatch_type(dt, "EyeLike", [&](auto tag) {
      using T = decltype(tag);
      T* yp = static_cast<T*>(y.raw());
      for (int64_t i = 0; i < x.dim(0); ++i) {
        const int64_t j = i + k;
        if (j >= 0 && j < x.dim(1)) yp[i * x.dim(1) + j] = T(1);
      }
    });
  });
}

// ----------------------------------------------------------------- windows

std::unique_ptr<Kernel> window_create(const Node& n, CpuSession&, WindowKind w) {
  const bool periodic = n.attr_int("periodic", 1) != 0;
  const nxrt_dtype dt = n.output(0).dtype();
  return make_kernel([periodic, dt, w](Context& ctx) {
    const auto sv = read_ints(ctx.input(0), "Window", "size");
    if (sv.size() != 1 || sv[0] < 0) sdk::fail(NXRT_INVALID_ARGUMENT, "Window: size must be a non-negative scalar");
    const int64_t size = sv[0];
    TensorView y = ctx.output(0, dt, {size});
    if (dt == NXRT_DTYPE_FLOAT32) window(w, size, periodic, y.data<float>());
    else window(w, size, periodic, y.data<double>());
  });
}

Check window_check(const Node& n) {
  if (auto r = index_dtype(n, 0, "size")) return r;
  const auto t = n.output(0).dtype();
  if (t != NXRT_DTYPE_FLOAT32 && t != NXRT_DTYPE_FLOAT64) return sdk::refuse(NXRT_REFUSE_DTYPE, "{} output is {}", n.op_type(), sdk::dtype_name(t));
  return known_attrs(n, {"periodic", "output_datatype"});
}

}  // namespace

void register_generator_ops(Registry& r) {
  r.add(Def{"Constant", "", 1, INT_MAX, constant_check, constant_create});
  r.add(Def{"ConstantOfShape", "", 9, INT_MAX, cos_check, cos_create});
  r.add(Def{"Range", "", 11, INT_MAX,
            [](const Node& n) -> Check {
              if (auto c = sdk::require_dtypes(n, {NXRT_DTYPE_FLOAT32, NXRT_DTYPE_FLOAT64, NXRT_DTYPE_INT16, NXRT_DTYPE_INT32,
                                                   NXRT_DTYPE_INT64}))
                return c;
              return same_dtype(n);
            },
            range_create});
  r.add(Def{"EyeLike", "", 9, INT_MAX,
            [](const Node& n) -> Check {
              if (auto c = sdk::require_dtypes(n, kNumBool)) return c;
              return known_attrs(n, {"k", "dtype"});
            },
            eyelike_create});
  r.add(Def{"HannWindow", "", 17, INT_MAX, window_check, [](const Node& n, CpuSession& s) { return window_create(n, s, WindowKind::Hann); }});
  r.add(Def{"HammingWindow", "", 17, INT_MAX, window_check,
            [](const Node& n, CpuSession& s) { return window_create(n, s, WindowKind::Hamming); }});
  r.add(Def{"BlackmanWindow", "", 17, INT_MAX, window_check,
            [](const Node& n, CpuSession& s) { return window_create(n, s, WindowKind::Blackman); }});
}

}  // namespace nxrt::cpu
