// AveragePool (1-3 spatial dims, pads, auto_pad, count_include_pad,
// ceil_mode, dilations), GlobalMaxPool, LogSoftmax, Hardmax,
// InstanceNormalization, RoiAlign (avg) and MaxUnpool. float32.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "ops_more.hpp"

namespace nxrt::cpu {
namespace {

constexpr nxrt_dtype kF32[] = {NXRT_DTYPE_FLOAT32};

// ------------------------------------------------------------ AveragePool

struct AvgArgs {
  std::vector<int64_t> k, s, d, pads;
  std::string auto_pad;
  bool ceil = false, include_pad = false;
};

Check avgpool_check(const Node& n) {
  if (auto r = sdk::require_dtypes(n, kF32)) return r;
  if (auto r = known_attrs(n, {"kernel_shape", "strides", "dilations", "pads", "auto_pad", "ceil_mode", "count_include_pad"}))
    return r;
  return pool_geometry_check(n);
}

std::unique_ptr<Kernel> avgpool_create(const Node& n, CpuSession& session) {
  AvgArgs a;
  a.k = n.attr_ints("kernel_shape");
  const size_t sr = a.k.size();
  a.s = n.attr_ints("strides", std::vector<int64_t>(sr, 1));
  a.d = n.attr_ints("dilations", std::vector<int64_t>(sr, 1));
  a.pads = n.attr_ints("pads", std::vector<int64_t>(2 * sr, 0));
  a.auto_pad = n.attr_string("auto_pad", "NOTSET");
  a.ceil = n.attr_int("ceil_mode", 0) != 0;
  a.include_pad = n.attr_int("count_include_pad", 0) != 0;
  ThreadPool* pool = session.pool();
  return make_kernel([a, pool](Context& ctx) {
    ConstTensorView x = ctx.input(0);
    const size_t sr = a.k.size();
    if (x.rank() != sr + 2) sdk::fail(NXRT_INVALID_ARGUMENT, "AveragePool: X {} must have rank {}", dims_str(x.dims()), sr + 2);
    // Right-aligned into 3 spatial dims (unused ones: size 1, kernel 1).
    int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1}, k[3] = {1, 1, 1}, st[3] = {1, 1, 1}, dl[3] = {1, 1, 1}, pb[3] = {0, 0, 0},
            pe[3] = {0, 0, 0};
    std::vector<int64_t> od = {x.dim(0), x.dim(1)};
    const size_t off = 3 - sr;
    for (size_t i = 0; i < sr; ++i) {
      const size_t j = off + i;
      in[j] = x.dim(2 + i);
      k[j] = a.k[i];
      st[j] = a.s[i];
      dl[j] = a.d[i];
      const int64_t ek = (k[j] - 1) * dl[j] + 1;
      if (a.auto_pad == "VALID") {
        out[j] = in[j] >= ek ? (in[j] - ek) / st[j] + 1 : 0;
      } else if (a.auto_pad == "SAME_UPPER" || a.auto_pad == "SAME_LOWER") {
        out[j] = (in[j] + st[j] - 1) / st[j];
        const int64_t total = std::max<int64_t>(0, (out[j] - 1) * st[j] + ek - in[j]);
        pb[j] = a.auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
        pe[j] = total - pb[j];
      } else {
        pb[j] = a.pads[i];
        pe[j] = a.pads[i + sr];
        const int64_t span = in[j] + pb[j] + pe[j] - ek;
        if (span < 0) out[j] = 0;
        else if (!a.ceil) out[j] = span / st[j] + 1;
        else {
          out[j] = (span + st[j] - 1) / st[j] + 1;
          if ((out[j] - 1) * st[j] >= in[j] + pb[j]) --out[j];
        }
      }
      od.push_back(out[j]);
    }
    TensorView y = ctx.output(0, NXRT_DTYPE_FLOAT32, od);
    if (y.numel() == 0) return;
    const float* xp = x.data<float>();
    float* yp = y.data<float>();
    const int64_t planes = x.dim(0) * x.dim(1), isz = in[0] * in[1] * in[2], osz = out[0] * out[1] * out[2];
    const bool inc = a.include_pad;
    const int parts = int(std::min<int64_t>(planes, threads_for(pool, double(planes * osz) * double(k[0] * k[1] * k[2]))));
    parallel_ranges(pool, planes, parts, [&](int64_t p0, int64_t p1) {
      for (int64_t p = p0; p < p1; ++p) {
        const float* xs = xp + p * isz;
        float* ys = yp + p * osz;
        for (int64_t oz = 0; oz < out[0]; ++oz)
          for (int64_t oy = 0; oy < out[1]; ++oy)
            for (int64_t ox = 0; ox < out[2]; ++ox) {
              double sum = 0;
              int64_t cnt = 0, cnt_pad = 0;
              for (int64_t kz = 0; kz < k[0]; ++kz) {
                const int64_t iz = oz * st[0] - pb[0] + kz * dl[0];
                if (iz < -pb[0] || iz >= in[0] + pe[0]) continue;
                const bool vz = iz >= 0 && iz < in[0];
                for (int64_t ky = 0; ky < k[1]; ++ky) {
                  const int64_t iy = oy * st[1] - pb[1] + ky * dl[1];
                  if (iy < -pb[1] || iy >= in[1] + pe[1]) continue;
                  const bool vy = vz && iy >= 0 && iy < in[1];
                  for (int64_t kx = 0; kx < k[2]; ++kx) {
                    const int64_t ix = ox * st[2] - pb[2] + kx * dl[2];
                    if (ix < -pb[2] || ix >= in[2] + pe[2]) continue;
                    ++cnt_pad;
                    if (vy && ix >= 0 && ix < in[2]) {
                      sum += xs[(iz * in[1] + iy) * in[2] + ix];
                      ++cnt;
                    }
                  }
                }
              }
              const int64_t div = inc ? cnt_pad : cnt;
              ys[(oz * out[1] + oy) * out[2] + ox] = div ? float(sum / double(div)) : 0.f;
            }
      }
    });
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
    const int64_t sp = x.numel() / planes;
    const float* xp = x.data<float>();
    float* yp = y.data<float>();
    const int parts = threads_for(pool, double(x.numel()), 1 << 17);
    parallel_ranges(pool, planes, parts, [&](int64_t b, int64_t e) {
      for (int64_t p = b; p < e; ++p) {
        float m = -std::numeric_limits<float>::infinity();
        const float* r = xp + p * sp;
        for (int64_t i = 0; i < sp; ++i) m = (r[i] > m || std::isnan(r[i])) && !std::isnan(m) ? r[i] : m;
        yp[p] = m;
      }
    });
  });
}

// ----------------------------------------------------- LogSoftmax, Hardmax

// Splits x around `axis`: opset < 13 coerces to 2-D at axis (inner = 1).
void softmax_geometry(const ConstTensorView& x, int64_t axis, bool coerce, const char* op, int64_t& outer, int64_t& n, int64_t& inner) {
  const int64_t r = int64_t(x.rank());
  const int64_t a = norm_axis(axis, r, op, coerce);
  outer = 1;
  n = 1;
  inner = 1;
  for (int64_t i = 0; i < a; ++i) outer *= x.dim(size_t(i));
  if (coerce) {
    for (int64_t i = a; i < r; ++i) n *= x.dim(size_t(i));
  } else {
    n = x.dim(size_t(a));
    for (int64_t i = a + 1; i < r; ++i) inner *= x.dim(size_t(i));
  }
}

std::unique_ptr<Kernel> logsoftmax_create(const Node& n, CpuSession& s, bool coerce, bool hard) {
  const int64_t axis = n.attr_int("axis", coerce ? 1 : -1);
  ThreadPool* pool = s.pool();
  return make_kernel([axis, coerce, hard, pool](Context& ctx) {
    ConstTensorView x = ctx.input(0);
    TensorView y = ctx.output(0, NXRT_DTYPE_FLOAT32, x.dims());
    if (x.numel() == 0) return;
    int64_t outer = 0, len = 0, inner = 0;
    softmax_geometry(x, axis, coerce, hard ? "Hardmax" : "LogSoftmax", outer, len, inner);
    const float* xp = x.data<float>();
    float* yp = y.data<float>();
    const int parts = threads_for(pool, double(x.numel()) * 4, 65536.0);
    const int64_t cols = outer * inner;
    parallel_ranges(pool, cols, parts, [&](int64_t b, int64_t e) {
      for (int64_t col = b; col < e; ++col) {
        const int64_t o = col / inner, in = col % inner;
        const float* xr = xp + o * len * inner + in;
        float* yr = yp + o * len * inner + in;
        float m = -std::numeric_limits<float>::infinity();
        int64_t arg = 0;
        for (int64_t i = 0; i < len; ++i)
          if (xr[i * inner] > m) {
            m = xr[i * inner];
            arg = i;
          }
        if (hard) {
          for (int64_t i = 0; i < len; ++i) yr[i * inner] = i == arg ? 1.f : 0.f;
          continue;
        }
        double sum = 0;
        for (int64_t i = 0; i < len; ++i) sum += std::exp(double(xr[i * inner]) - double(m));
        const double ls = std::log(sum) + double(m);
        for (int64_t i = 0; i < len; ++i) yr[i * inner] = float(double(xr[i * inner]) - ls);
      }
    });
  });
}

// --------------------------------------------------- InstanceNormalization

std::unique_ptr<Kernel> instnorm_create(const Node& n, CpuSession& s) {
  const double eps = n.attr_float("epsilon", 1e-5f);
  ThreadPool* pool = s.pool();
  return make_kernel([eps, pool](Context& ctx) {
    ConstTensorView x = ctx.input(0), sc = ctx.input(1), bi = ctx.input(2);
    if (x.rank() < 2) sdk::fail(NXRT_INVALID_ARGUMENT, "InstanceNormalization: X {} must have rank >= 2", dims_str(x.dims()));
    const int64_t nb = x.dim(0), ch = x.dim(1);
    if (sc.numel() != ch || bi.numel() != ch)
      sdk::fail(NXRT_INVALID_ARGUMENT, "InstanceNormalization: scale/B must have {} elements", ch);
    TensorView y = ctx.output(0, NXRT_DTYPE_FLOAT32, x.dims());
    const int64_t planes = nb * ch;
    if (planes == 0) return;
    const int64_t sp = x.numel() / planes;
    const float* xp = x.data<float>();
    const float* scp = sc.data<float>();
    const float* bp = bi.data<float>();
    float* yp = y.data<float>();
    const int parts = threads_for(pool, double(x.numel()) * 3, 65536.0);
    parallel_ranges(pool, planes, parts, [&](int64_t b, int64_t e) {
      for (int64_t p = b; p < e; ++p) {
        const float* r = xp + p * sp;
        double mean = 0;
        for (int64_t i = 0; i < sp; ++i) mean += r[i];
        mean /= double(sp);
        double var = 0;
        for (int64_t i = 0; i < sp; ++i) var += (r[i] - mean) * (r[i] - mean);
        var /= double(sp);
        const double g = double(scp[p % ch]) / std::sqrt(var + eps), bb = bp[p % ch];
        float* o = yp + p * sp;
        for (int64_t i = 0; i < sp; ++i) o[i] = float((r[i] - mean) * g + bb);
      }
    });
  });
}

// ---------------------------------------------------------------- RoiAlign

std::unique_ptr<Kernel> roialign_create(const Node& n, CpuSession& s, bool legacy_default) {
  const std::string ctm = n.attr_string("coordinate_transformation_mode", legacy_default ? "output_half_pixel" : "half_pixel");
  const bool half_pixel = ctm == "half_pixel";
  const int64_t oh = n.attr_int("output_height", 1), ow = n.attr_int("output_width", 1), sr = n.attr_int("sampling_ratio", 0);
  const double scale = n.attr_float("spatial_scale", 1.f);
  ThreadPool* pool = s.pool();
  return make_kernel([half_pixel, oh, ow, sr, scale, pool](Context& ctx) {
    ConstTensorView x = ctx.input(0), rois = ctx.input(1), bi = ctx.input(2);
    if (x.rank() != 4 || rois.rank() != 2 || rois.dim(1) != 4 || bi.numel() != rois.dim(0))
      sdk::fail(NXRT_INVALID_ARGUMENT, "RoiAlign: X {}, rois {}, batch_indices {}", dims_str(x.dims()), dims_str(rois.dims()), dims_str(bi.dims()));
    const int64_t N = x.dim(0), C = x.dim(1), H = x.dim(2), W = x.dim(3), R = rois.dim(0);
    const auto batch = read_ints(bi, "RoiAlign", "batch_indices");
    TensorView y = ctx.output(0, NXRT_DTYPE_FLOAT32, {R, C, oh, ow});
    const float* xp = x.data<float>();
    const float* rp = rois.data<float>();
    float* yp = y.data<float>();
    for (auto b : batch)
      if (b < 0 || b >= N) sdk::fail(NXRT_INVALID_ARGUMENT, "RoiAlign: batch index {} out of range", b);
    const int parts = int(std::min<int64_t>(R * C, threads_for(pool, double(R * C * oh * ow) * 16, 65536.0)));
    parallel_for(pool, parts, [&](int64_t part) {
      int64_t b0 = 0, b1 = 0;
      split_range(R * C, parts, part, b0, b1);
      for (int64_t rc = b0; rc < b1; ++rc) {
        const int64_t r = rc / C, c = rc % C;
        const float* roi = rp + r * 4;
        const double off = half_pixel ? 0.5 : 0.0;
        const double sw = roi[0] * scale - off, sh = roi[1] * scale - off, ew = roi[2] * scale - off, eh = roi[3] * scale - off;
        double rw = ew - sw, rh = eh - sh;
        if (!half_pixel) {
          rw = std::max(rw, 1.0);
          rh = std::max(rh, 1.0);
        }
        const double bh = rh / double(oh), bw = rw / double(ow);
        const int64_t gh = sr > 0 ? sr : int64_t(std::ceil(rh / double(oh))), gw = sr > 0 ? sr : int64_t(std::ceil(rw / double(ow)));
        const double count = double(std::max<int64_t>(gh * gw, 1));
        const float* plane = xp + (batch[size_t(r)] * C + c) * H * W;
        for (int64_t ph = 0; ph < oh; ++ph)
          for (int64_t pw = 0; pw < ow; ++pw) {
            double acc = 0;
            for (int64_t iy = 0; iy < gh; ++iy) {
              double yy = sh + double(ph) * bh + (double(iy) + 0.5) * bh / double(gh);
              for (int64_t ix = 0; ix < gw; ++ix) {
                double xx = sw + double(pw) * bw + (double(ix) + 0.5) * bw / double(gw);
                if (yy < -1.0 || yy > double(H) || xx < -1.0 || xx > double(W)) continue;
                double ty = std::max(yy, 0.0), tx = std::max(xx, 0.0);
                int64_t yl = int64_t(ty), xl = int64_t(tx), yh = 0, xh = 0;
                if (yl >= H - 1) {
                  yh = yl = H - 1;
                  ty = double(yl);
                } else {
                  yh = yl + 1;
                }
                if (xl >= W - 1) {
                  xh = xl = W - 1;
                  tx = double(xl);
                } else {
                  xh = xl + 1;
                }
                const double ly = ty - double(yl), lx = tx - double(xl), hy = 1 - ly, hx = 1 - lx;
                acc += hy * hx * plane[yl * W + xl] + hy * lx * plane[yl * W + xh] + ly * hx * plane[yh * W + xl] + ly * lx * plane[yh * W + xh];
              }
            }
            yp[(rc * oh + ph) * ow + pw] = float(acc / count);
          }
      }
    });
  });
}

Check roialign_check(const Node& n) {
  if (auto r = sdk::require_dtypes(n, kF32, 0, 2)) return r;
  if (auto r = index_dtype(n, 2, "batch_indices", false)) return r;
  if (auto r = known_attrs(n, {"coordinate_transformation_mode", "mode", "output_height", "output_width", "sampling_ratio", "spatial_scale"}))
    return r;
  if (n.attr_string("mode", "avg") != "avg") return sdk::refuse(NXRT_REFUSE_ATTRIBUTE, "RoiAlign: only mode avg is implemented");
  const std::string ctm = n.attr_string("coordinate_transformation_mode", "half_pixel");
  if (ctm != "half_pixel" && ctm != "output_half_pixel") return sdk::refuse(NXRT_REFUSE_ATTRIBUTE, "RoiAlign: coordinate_transformation_mode '{}'", ctm);
  return std::nullopt;
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

void register_pool_more_ops(Registry& r) {
  r.add(Def{"MaxUnpool", "", 9, INT_MAX, maxunpool_check, maxunpool_create});
  r.add(Def{"RoiAlign", "", 10, 15, roialign_check, [](const Node& n, CpuSession& s) { return roialign_create(n, s, true); }});
  r.add(Def{"RoiAlign", "", 16, INT_MAX, roialign_check, [](const Node& n, CpuSession& s) { return roialign_create(n, s, false); }});
  r.add(Def{"AveragePool", "", 1, INT_MAX, avgpool_check, avgpool_create});
  r.add(Def{"GlobalMaxPool", "", 1, INT_MAX, [](const Node& n) { return sdk::require_dtypes(n, kF32); }, gmp_create});
  r.add(Def{"LogSoftmax", "", 1, 12,
            [](const Node& n) -> Check {
              if (auto c = sdk::require_dtypes(n, kF32)) return c;
              return known_attrs(n, {"axis"});
            },
            [](const Node& n, CpuSession& s) { return logsoftmax_create(n, s, true, false); }});
  r.add(Def{"LogSoftmax", "", 13, INT_MAX,
            [](const Node& n) -> Check {
              if (auto c = sdk::require_dtypes(n, kF32)) return c;
              return known_attrs(n, {"axis"});
            },
            [](const Node& n, CpuSession& s) { return logsoftmax_create(n, s, false, false); }});
  r.add(Def{"Hardmax", "", 1, 12,
            [](const Node& n) -> Check {
              if (auto c = sdk::require_dtypes(n, kF32)) return c;
              return known_attrs(n, {"axis"});
            },
            [](const Node& n, CpuSession& s) { return logsoftmax_create(n, s, true, true); }});
  r.add(Def{"Hardmax", "", 13, INT_MAX,
            [](const Node& n) -> Check {
              if (auto c = sdk::require_dtypes(n, kF32)) return c;
              return known_attrs(n, {"axis"});
            },
            [](const Node& n, CpuSession& s) { return logsoftmax_create(n, s, false, true); }});
  r.add(Def{"InstanceNormalization", "", 6, INT_MAX,
            [](const Node& n) -> Check {
              if (auto c = sdk::require_dtypes(n, kF32)) return c;
              return known_attrs(n, {"epsilon"});
            },
            instnorm_create});
}

}  // namespace nxrt::cpu
