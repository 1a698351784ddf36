// Pooling: MaxPool (float32, int8, uint8; Indices output with storage_order 0/1), AveragePool (pads, auto_pad,
// count_include_pad, ceil_mode, dilations), GlobalAveragePool,
// GlobalMaxPool, MaxUnpool; 1-3 spatial dims, NC... layout.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "ops.hpp"
#include "ops_pool.hpp"
#include "pooling.hpp"

namespace nxrt::cpu {

PoolAttrs read_pool_attrs(const Node& n) {
  PoolAttrs a;
  a.k = n.attr_ints("kernel_shape");
  const size_t sr = a.k.size();
  a.s = n.attr_ints("strides", std::vector<int64_t>(sr, 1));
  a.d = n.attr_ints("dilations", std::vector<int64_t>(sr, 1));
  a.pads = n.attr_ints("pads", std::vector<int64_t>(2 * sr, 0));
  a.auto_pad = n.attr_string("auto_pad", "NOTSET");
  a.ceil = n.attr_int("ceil_mode", 0) != 0;
  return a;
}

PoolShape pool_shape(const PoolAttrs& a, const std::vector<int64_t>& xd, const char* op, std::vector<int64_t>& od) {
  const size_t sr = a.k.size();
  if (xd.size() != sr + 2) sdk::fail(NXRT_INVALID_ARGUMENT, "{}: X {} must have rank {}", op, dims_str(xd), sr + 2);
  PoolShape s;
  s.batch = xd[0];
  s.channels = xd[1];
  s.spatial = int(sr);
  od = {xd[0], xd[1]};
  const size_t off = 3 - sr;
  for (size_t i = 0; i < sr; ++i) {
    const int64_t in = xd[2 + i], k = a.k[i], st = a.s[i], dl = a.d[i], ek = (k - 1) * dl + 1;
    int64_t out = 0, pb = 0, pe = 0;
    if (a.auto_pad == "VALID") {
      out = in >= ek ? (in - ek) / st + 1 : 0;
    } else if (a.auto_pad == "SAME_UPPER" || a.auto_pad == "SAME_LOWER") {
      out = (in + st - 1) / st;
      const int64_t total = std::max<int64_t>(0, (out - 1) * st + ek - in);
      pb = a.auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      pe = total - pb;
    } else {
      pb = a.pads[i];
      pe = a.pads[i + sr];
      const int64_t span = in + pb + pe - ek;
      if (span < 0) out = 0;
      else if (!a.ceil) out = span / st + 1;
      else {
        out = (span + st - 1) / st + 1;
        if ((out - 1) * st >= in + pb) --out;  // last window must start inside the input or left pad
      }
    }
    s.in[off + i] = in;
    s.out[off + i] = out;
    s.kernel[off + i] = k;
    s.stride[off + i] = st;
    s.dilation[off + i] = dl;
    s.pad_begin[off + i] = pb;
    s.pad_end[off + i] = pe;
    od.push_back(out);
  }
  return s;
}

namespace {

constexpr nxrt_dtype kPoolTypes[] = {NXRT_DTYPE_FLOAT32, NXRT_DTYPE_INT8, NXRT_DTYPE_UINT8};

// The kernel_shape / strides / dilations / pads / auto_pad checks shared by
// MaxPool and AveragePool (1-3 spatial dims).
Check pool_geometry_check(const Node& n) {
  const std::string op(n.op_type());
  auto ks = n.attr_ints("kernel_shape");
  if (ks.empty()) return sdk::refuse(NXRT_REFUSE_ATTRIBUTE, "{}: kernel_shape is required", op);
  const size_t sr = ks.size();
  if (sr > 3) return sdk::refuse(NXRT_REFUSE_SHAPE, "{} with {} spatial dims is not implemented (1-3)", op, sr);
  auto x = n.input(0);
  if (x.rank() >= 0 && x.rank() != int64_t(sr) + 2)
    return sdk::refuse(NXRT_REFUSE_SHAPE, "{}: X rank {} does not match kernel_shape", op, x.rank());
  const std::string ap = n.attr_string("auto_pad", "NOTSET");
  if (ap != "NOTSET" && ap != "VALID" && ap != "SAME_UPPER" && ap != "SAME_LOWER")
    return sdk::refuse(NXRT_REFUSE_ATTRIBUTE, "{}: auto_pad '{}' is not valid", op, ap);
  for (const char* name : {"strides", "dilations"}) {
    auto v = n.attr_ints(name);
    if (!v.empty() && v.size() != sr) return sdk::refuse(NXRT_REFUSE_ATTRIBUTE, "{}: {} has {} values, expected {}", op, name, v.size(), sr);
    for (auto e : v) if (e < 1) return sdk::refuse(NXRT_REFUSE_ATTRIBUTE, "{}: {} value {} < 1", op, name, e);
  }
  auto pads = n.attr_ints("pads");
  if (!pads.empty() && pads.size() != 2 * sr) return sdk::refuse(NXRT_REFUSE_ATTRIBUTE, "{}: pads has {} values, expected {}", op, pads.size(), 2 * sr);
  for (auto p : pads) if (p < 0) return sdk::refuse(NXRT_REFUSE_ATTRIBUTE, "{}: negative pad {}", op, p);
  for (auto k : ks) if (k < 1) return sdk::refuse(NXRT_REFUSE_ATTRIBUTE, "{}: kernel size {} < 1", op, k);
  return std::nullopt;
}

// ---------------------------------------------------------------- MaxPool

Check maxpool_check(const Node& n) {
  auto ok = [](nxrt_dtype t) {
    for (auto k : kPoolTypes) if (k == t) return true;
    return false;
  };
  if (!ok(n.input(0).dtype())) return sdk::refuse(NXRT_REFUSE_DTYPE, "MaxPool input 0 is {}", sdk::dtype_name(n.input(0).dtype()));
  if (n.output(0).dtype() != n.input(0).dtype()) return sdk::refuse(NXRT_REFUSE_DTYPE, "MaxPool: Y's dtype differs from X's");
  if (n.has_output(1) && n.output(1).dtype() != NXRT_DTYPE_INT64)
    return sdk::refuse(NXRT_REFUSE_DTYPE, "MaxPool: Indices is {}, not int64", sdk::dtype_name(n.output(1).dtype()));
  const int64_t order = n.attr_int("storage_order", 0);
  if (order != 0 && order != 1) return sdk::refuse(NXRT_REFUSE_ATTRIBUTE, "MaxPool: storage_order {} (0 or 1)", order);
  return pool_geometry_check(n);
}

std::unique_ptr<Kernel> maxpool_create(const Node& n, CpuSession& session) {
  const PoolAttrs a = read_pool_attrs(n);
  const bool with_indices = n.has_output(1);
  const bool column_major = n.attr_int("storage_order", 0) == 1;
  ThreadPool* pool = session.pool();
  return make_kernel([a, with_indices, column_major, pool](Context& ctx) {
    ConstTensorView x = ctx.input(0);
    std::vector<int64_t> od;
    const PoolShape s = pool_shape(a, x.dims(), "MaxPool", od);
    TensorView y = ctx.output(0, x.dtype(), od);
    if (with_indices) {
      TensorView idx = ctx.output(1, NXRT_DTYPE_INT64, od);
      if (y.numel() == 0) return;
      switch (x.dtype()) {
        case NXRT_DTYPE_FLOAT32: max_pool_with_indices(s, column_major, x.data<float>(), y.data<float>(), idx.data<int64_t>(), pool); break;
        case NXRT_DTYPE_INT8: max_pool_with_indices(s, column_major, x.data<int8_t>(), y.data<int8_t>(), idx.data<int64_t>(), pool); break;
        case NXRT_DTYPE_UINT8: max_pool_with_indices(s, column_major, x.data<uint8_t>(), y.data<uint8_t>(), idx.data<int64_t>(), pool); break;
        default: sdk::fail(NXRT_INVALID_ARGUMENT, "MaxPool: dtype {}", sdk::dtype_name(x.dtype()));
      }
      return;
    }
    if (y.numel() == 0) return;
    switch (x.dtype()) {
      case NXRT_DTYPE_FLOAT32: max_pool(s, x.data<float>(), y.data<float>(), pool); break;
      case NXRT_DTYPE_INT8: max_pool(s, x.data<int8_t>(), y.data<int8_t>(), pool); break;
      case NXRT_DTYPE_UINT8: max_pool(s, x.data<uint8_t>(), y.data<uint8_t>(), pool); break;
      default: sdk::fail(NXRT_INVALID_ARGUMENT, "MaxPool: dtype {}", sdk::dtype_name(x.dtype()));
    }
  });
}

// ------------------------------------------------------------ AveragePool

Check avgpool_check(const Node& n) {
  if (auto r = sdk::require_dtypes(n, kF32)) return r;
  if (auto r = known_attrs(n, {"kernel_shape", "strides", "dilations", "pads", "auto_pad", "ceil_mode", "count_include_pad"}))
    return r;
  return pool_geometry_check(n);
}

std::unique_ptr<Kernel> avgpool_create(const Node& n, CpuSession& session) {
  const PoolAttrs a = read_pool_attrs(n);
  const bool include_pad = n.attr_int("count_include_pad", 0) != 0;
  ThreadPool* pool = session.pool();
  return make_kernel([a, include_pad, pool](Context& ctx) {
    ConstTensorView x = ctx.input(0);
    std::vector<int64_t> od;
    const PoolShape ps = pool_shape(a, x.dims(), "AveragePool", od);
    TensorView y = ctx.output(0, NXRT_DTYPE_FLOAT32, od);
    if (y.numel() == 0) return;
    average_pool(ps, include_pad, x.data<float>(), y.data<float>(), pool);
  });
}

// ------------------------------------------------------ GlobalAveragePool

std::unique_ptr<Kernel> gap_create(const Node&, CpuSession& session) {
  ThreadPool* pool = session.pool();
  return make_kernel([pool](Context& ctx) {
    ConstTensorView x = ctx.input(0);
    if (x.rank() < 2) sdk::fail(NXRT_INVALID_ARGUMENT, "GlobalAveragePool: X {} must have rank >= 2", dims_str(x.dims()));
    std::vector<int64_t> od = {x.dim(0), x.dim(1)};
    int64_t spatial = 1;
    for (size_t i = 2; i < x.rank(); ++i) {
      od.push_back(1);
      spatial *= x.dim(i);
    }
    TensorView y = ctx.output(0, NXRT_DTYPE_FLOAT32, od);
    global_average_pool(x.dim(0) * x.dim(1), spatial, x.data<float>(), y.data<float>(), pool);
  });
}

// ----------------------------------------------------------- GlobalMaxPool

std::unique_ptr<Kernel> gmp_create(const Node&, CpuSession& s) {
  ThreadPool* pool = s.pool();
  return make_kernel([pool](Context& ctx) {
    ConstTensorView x = ctx.input(0);
    if (x.rank() < 2) sdk::fail(NXRT_INVALID_ARGUMENT, "GlobalMaxPool: X {} must have rank >= 2", dims_str(x.dims()));
    std::vector<int64_t> od = {x.dim(0), x.dim(1)};
    od.resize(x.rank(), 1);
    TensorView y = ctx.output(0, NXRT_DTYPE_FLOAT32, od);
    const int64_t planes = x.dim(0) * x.dim(1);
    if (planes == 0) return;
    global_max_pool(planes, x.numel() / planes, x.data<float>(), y.data<float>(), pool);
  });
}

// --------------------------------------------------------------- MaxUnpool

std::unique_ptr<Kernel> maxunpool_create(const Node& n, CpuSession&) {
  const std::vector<int64_t> ks = n.attr_ints("kernel_shape");
  const size_t sr = ks.size();
  const std::vector<int64_t> st = n.attr_ints("strides", std::vector<int64_t>(sr, 1));
  const std::vector<int64_t> pads = n.attr_ints("pads", std::vector<int64_t>(2 * sr, 0));
  return make_kernel([ks, st, pads, sr](Context& ctx) {
    ConstTensorView x = ctx.input(0), ind = ctx.input(1);
    if (x.rank() != sr + 2 || ind.dims() != x.dims()) sdk::fail(NXRT_INVALID_ARGUMENT, "MaxUnpool: X {} / I {}", dims_str(x.dims()), dims_str(ind.dims()));
    // Indices are flat over MaxPool's input, i.e. the default unpooled shape; with an explicit
    // output_shape each element keeps its coordinates (the rest of the output is zero).
    std::vector<int64_t> dd = {x.dim(0), x.dim(1)};
    for (size_t i = 0; i < sr; ++i) dd.push_back((x.dim(2 + i) - 1) * st[i] + ks[i] - pads[i] - pads[i + sr]);
    std::vector<int64_t> od = dd;
    if (auto os = ctx.optional_input(2); os && os->numel() > 0) {
      od = read_ints(*os, "MaxUnpool", "output_shape");
      if (od.size() != x.rank()) sdk::fail(NXRT_INVALID_ARGUMENT, "MaxUnpool: output_shape rank");
    }
    TensorView y = ctx.output(0, NXRT_DTYPE_FLOAT32, od);
    float* yp = y.data<float>();
    std::fill(yp, yp + y.numel(), 0.f);
    const float* xp = x.data<float>();
    const int64_t* ip = ind.data<int64_t>();
    const int64_t total = sdk::element_count(dd);
    const auto ost = contiguous_strides(od);
    for (int64_t i = 0; i < x.numel(); ++i) {
      if (ip[i] < 0 || ip[i] >= total) sdk::fail(NXRT_INVALID_ARGUMENT, "MaxUnpool: index {} out of range", ip[i]);
      int64_t rem = ip[i], off = 0;
      bool inside = true;
      for (size_t d = dd.size(); d-- > 0;) {
        const int64_t c = rem % dd[d];
        rem /= dd[d];
        if (c >= od[d]) inside = false;
        off += c * ost[d];
      }
      if (inside) yp[off] = xp[i];
    }
  });
}

Check maxunpool_check(const Node& n) {
  if (auto r = input_dtype_is(n, 0, NXRT_DTYPE_FLOAT32, "X")) return r;
  if (auto r = input_dtype_is(n, 1, NXRT_DTYPE_INT64, "I")) return r;
  if (auto r = input_dtype_is(n, 2, NXRT_DTYPE_INT64, "output_shape")) return r;
  if (auto r = known_attrs(n, {"kernel_shape", "pads", "strides"})) return r;
  const auto ks = n.attr_ints("kernel_shape");
  if (ks.empty()) return sdk::refuse(NXRT_REFUSE_ATTRIBUTE, "MaxUnpool: kernel_shape is required");
  const auto st = n.attr_ints("strides"), pads = n.attr_ints("pads");
  if ((!st.empty() && st.size() != ks.size()) || (!pads.empty() && pads.size() != 2 * ks.size()))
    return sdk::refuse(NXRT_REFUSE_ATTRIBUTE, "MaxUnpool: strides/pads do not match kernel_shape");
  return std::nullopt;
}

}  // namespace

void register_pool_ops(Registry& r) {
  r.add(Def{"MaxPool", "", 1, INT_MAX, maxpool_check, maxpool_create});
  r.add(Def{"AveragePool", "", 1, INT_MAX, avgpool_check, avgpool_create});
  r.add(Def{"GlobalAveragePool", "", 1, INT_MAX, [](const Node& n) { return sdk::require_dtypes(n, kF32); }, gap_create});
  r.add(Def{"GlobalMaxPool", "", 1, INT_MAX, [](const Node& n) { return sdk::require_dtypes(n, kF32); }, gmp_create});
  r.add(Def{"MaxUnpool", "", 9, INT_MAX, maxunpool_check, maxunpool_create});
}

}  // namespace nxrt::cpu
