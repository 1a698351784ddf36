// Resize (opset 11+), Upsample (7-9, Resize with asymmetric coordinates) and GridSample (16-19, 4-D): nearest (4 rounding modes), linear and cubic
// (cubic_coeff_a, exclude_outside), every coordinate transformation mode
// including tf_crop_and_resize (roi, extrapolation_value). Separable: one
// 1-D pass per axis whose mapping is not the identity, in double precision,
// as the ONNX reference composes its 1-D interpolations. float32. Nearest and
// linear over the last two axes (what models do) take a float32 one-pass path.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "ops.hpp"
#include "resize.hpp"

namespace nxrt::cpu {
namespace {

enum class Mode { Nearest, Linear, Cubic };
enum class Coord { HalfPixel, PytorchHalfPixel, AlignCorners, Asymmetric, TfCropAndResize };
enum class Round { PreferFloor, PreferCeil, Floor, Ceil };

struct ResizeArgs {
  Mode mode = Mode::Nearest;
  Coord coord = Coord::HalfPixel;
  Round round = Round::PreferFloor;
  double a = -0.75;
  bool exclude_outside = false;
  float extrapolation = 0.f;
};

std::optional<Coord> coord_of(const std::string& s) {
  if (s == "half_pixel") return Coord::HalfPixel;
  if (s == "pytorch_half_pixel") return Coord::PytorchHalfPixel;
  if (s == "align_corners") return Coord::AlignCorners;
  if (s == "asymmetric") return Coord::Asymmetric;
  if (s == "tf_crop_and_resize") return Coord::TfCropAndResize;
  return std::nullopt;
}

std::optional<Round> round_of(const std::string& s) {
  if (s == "round_prefer_floor") return Round::PreferFloor;
  if (s == "round_prefer_ceil") return Round::PreferCeil;
  if (s == "floor") return Round::Floor;
  if (s == "ceil") return Round::Ceil;
  return std::nullopt;
}

Check resize_check(const Node& n) {
  if (auto r = input_dtype_is(n, 0, NXRT_DTYPE_FLOAT32, "X")) return r;
  if (n.output(0).dtype() != NXRT_DTYPE_FLOAT32) return sdk::refuse(NXRT_REFUSE_DTYPE, "Resize: output is not float32");
  if (auto r = input_dtype_is(n, 1, NXRT_DTYPE_FLOAT32, "roi")) return r;
  if (auto r = input_dtype_is(n, 2, NXRT_DTYPE_FLOAT32, "scales")) return r;
  if (auto r = input_dtype_is(n, 3, NXRT_DTYPE_INT64, "sizes")) return r;
  if (auto r = known_attrs(n, {"mode", "coordinate_transformation_mode", "nearest_mode", "cubic_coeff_a", "exclude_outside",
                               "extrapolation_value", "antialias", "keep_aspect_ratio_policy"}))
    return r;
  const std::string mode = n.attr_string("mode", "nearest");
  if (mode != "nearest" && mode != "linear" && mode != "cubic") return sdk::refuse(NXRT_REFUSE_ATTRIBUTE, "Resize: mode '{}'", mode);
  const std::string ct = n.attr_string("coordinate_transformation_mode", "half_pixel");
  if (!coord_of(ct)) return sdk::refuse(NXRT_REFUSE_ATTRIBUTE, "Resize: coordinate_transformation_mode '{}' is not implemented", ct);
  const std::string nm = n.attr_string("nearest_mode", "round_prefer_floor");
  if (!round_of(nm)) return sdk::refuse(NXRT_REFUSE_ATTRIBUTE, "Resize: nearest_mode '{}'", nm);
  if (n.attr_int("antialias", 0) != 0) return sdk::refuse(NXRT_REFUSE_ATTRIBUTE, "Resize: antialias=1 is not implemented");
  if (n.attr_string("keep_aspect_ratio_policy", "stretch") != "stretch")
    return sdk::refuse(NXRT_REFUSE_ATTRIBUTE, "Resize: keep_aspect_ratio_policy other than stretch is not implemented");
  return std::nullopt;
}

// One output position of a 1-D pass: taps into the input axis, or the
// extrapolation value.
struct Taps {
  bool extrapolate = false;
  int count = 0;
  int64_t idx[4] = {0, 0, 0, 0};
  double w[4] = {0, 0, 0, 0};
};

std::vector<Taps> axis_taps(const ResizeArgs& a, int64_t in, int64_t out, double scale, double roi_s, double roi_e) {
  std::vector<Taps> taps(static_cast<size_t>(out));
  for (int64_t j = 0; j < out; ++j) {
    Taps& t = taps[size_t(j)];
    const double x = double(j);
    const double ow = scale * double(in);  // the reference's output width (fractional when scales are given)
    double xo = 0;
    switch (a.coord) {
      case Coord::AlignCorners: xo = ow == 1 ? 0.0 : x * double(in - 1) / (ow - 1); break;
      case Coord::Asymmetric: xo = x / scale; break;
      case Coord::TfCropAndResize:
        xo = ow == 1 ? (roi_e - roi_s) * double(in - 1) / 2 : x * (roi_e - roi_s) * double(in - 1) / (ow - 1);
        xo += roi_s * double(in - 1);
        if (xo < 0 || xo > double(in - 1)) t.extrapolate = true;
        break;
      case Coord::PytorchHalfPixel: xo = ow == 1 ? -0.5 : (x + 0.5) / scale - 0.5; break;
      case Coord::HalfPixel: xo = (x + 0.5) / scale - 0.5; break;
    }
    if (t.extrapolate) continue;
    auto clampi = [in](int64_t i) { return std::clamp(i, int64_t(0), in - 1); };
    const double fl = std::floor(xo);
    const int64_t base = int64_t(fl);
    if (xo == fl) {  // on a sample: that sample (every kernel has weight 1 there)
      t.count = 1;
      t.idx[0] = clampi(base);
      t.w[0] = 1;
      if (a.exclude_outside && (base < 0 || base >= in)) t.w[0] = std::numeric_limits<double>::quiet_NaN();  // the reference divides 0 by 0
      continue;
    }
    const double r = xo - fl;
    switch (a.mode) {
      case Mode::Nearest: {
        bool up = false;
        switch (a.round) {
          case Round::PreferFloor: up = r > 0.5; break;
          case Round::PreferCeil: up = r >= 0.5; break;
          case Round::Floor: up = false; break;
          case Round::Ceil: up = true; break;
        }
        t.count = 1;
        t.idx[0] = clampi(base + (up ? 1 : 0));
        t.w[0] = 1;
        break;
      }
      case Mode::Linear:
        t.count = 2;
        t.idx[0] = clampi(base);
        t.idx[1] = clampi(base + 1);
        t.w[0] = 1 - r;
        t.w[1] = r;
        if (a.exclude_outside) {
          double s = 0;
          for (int k = 0; k < 2; ++k) {
            const int64_t raw = base + k;
            if (raw < 0 || raw >= in) t.w[k] = 0;
            s += t.w[k];
          }
          for (int k = 0; k < 2; ++k) t.w[k] /= s;
        }
        break;
      case Mode::Cubic: {
        const double A = a.a, r1 = 1 - r;
        t.count = 4;
        t.w[0] = ((A * (r + 1) - 5 * A) * (r + 1) + 8 * A) * (r + 1) - 4 * A;
        t.w[1] = ((A + 2) * r - (A + 3)) * r * r + 1;
        t.w[2] = ((A + 2) * r1 - (A + 3)) * r1 * r1 + 1;
        t.w[3] = ((A * (r1 + 1) - 5 * A) * (r1 + 1) + 8 * A) * (r1 + 1) - 4 * A;
        double s = 0;
        for (int k = 0; k < 4; ++k) {
          const int64_t raw = base - 1 + k;
          t.idx[k] = clampi(raw);
          if (a.exclude_outside && (raw < 0 || raw >= in)) t.w[k] = 0;
          s += t.w[k];
        }
        if (a.exclude_outside)
          for (int k = 0; k < 4; ++k) t.w[k] /= s;
        break;
      }
    }
  }
  return taps;
}

bool identity_taps(const std::vector<Taps>& taps, int64_t in) {
  if (int64_t(taps.size()) != in) return false;
  for (size_t j = 0; j < taps.size(); ++j)
    if (taps[j].extrapolate || taps[j].count != 1 || taps[j].idx[0] != int64_t(j) || taps[j].w[0] != 1.0) return false;
  return true;
}

// The fast path for what models use (nearest and bilinear over the last two
// axes, every coordinate mode that stays inside the input): float32, one pass,
// each output row from at most two input rows. Nearest copies values, so it is
// bit-identical to the double passes; linear rounds once per product (float
// instead of double accumulation, a few ulp).
bool plane_taps_ok(const std::vector<Taps>& taps) {
  for (const Taps& t : taps)
    if (t.extrapolate || t.count < 1 || t.count > 2 || !std::isfinite(t.w[0]) || (t.count == 2 && !std::isfinite(t.w[1])))
      return false;
  return true;
}

bool resize_planes_fast(const ConstTensorView& x, TensorView& y, const std::vector<std::vector<Taps>>& taps,
                        ThreadPool* pool) {
  const size_t r = x.rank();
  if (r < 2) return false;
  for (size_t d = 0; d + 2 < r; ++d)
    if (!identity_taps(taps[d], x.dim(d))) return false;
  if (!plane_taps_ok(taps[r - 2]) || !plane_taps_ok(taps[r - 1])) return false;
  // A tap of weight 1 is a copy; any other is two taps (a count-1 tap of another weight: i1 = i0, w1 = 0).
  auto convert = [](const std::vector<Taps>& tv) {
    std::vector<ResizeTap> out(tv.size());
    for (size_t j = 0; j < tv.size(); ++j) {
      const Taps& t = tv[j];
      ResizeTap& o = out[j];
      o.single = t.count == 1 && t.w[0] == 1.0;
      o.i0 = t.idx[0];
      o.i1 = t.count == 2 ? t.idx[1] : t.idx[0];
      o.w0 = float(t.w[0]);
      o.w1 = t.count == 2 ? float(t.w[1]) : 0.f;
    }
    return out;
  };
  const int64_t H = x.dim(r - 2), W = x.dim(r - 1);
  resize_planes_f32(x.data<float>(), y.data<float>(), x.numel() / std::max<int64_t>(1, H * W), H, W,
                    convert(taps[r - 2]), convert(taps[r - 1]), pool);
  return true;
}

// Runs the separable passes: y (dims od) from x, axis d scaled by scale[d]
// (roi_s/roi_e: tf_crop_and_resize's box, else 0 and 1).
void resize_run(const ResizeArgs& a, const ConstTensorView& x, TensorView& y, const std::vector<int64_t>& od,
                const std::vector<double>& scale, const std::vector<double>& roi_s, const std::vector<double>& roi_e,
                ThreadPool* pool, const char* op) {
  if (y.numel() == 0) return;
  if (x.numel() == 0) sdk::fail(NXRT_INVALID_ARGUMENT, "{}: empty input, non-empty output", op);
  const size_t r = x.rank();
  if (a.mode != Mode::Cubic && !a.exclude_outside) {
    std::vector<std::vector<Taps>> taps(r);
    for (size_t d = 0; d < r; ++d) taps[d] = axis_taps(a, x.dim(d), od[d], scale[d], roi_s[d], roi_e[d]);
    if (resize_planes_fast(x, y, taps, pool)) return;
  }
  std::vector<int64_t> cur = x.dims();
  const float* xp = x.data<float>();
  std::vector<double> buf(xp, xp + x.numel()), next;
  for (size_t d = 0; d < r; ++d) {
    const auto taps = axis_taps(a, cur[d], od[d], scale[d], roi_s[d], roi_e[d]);
    if (identity_taps(taps, cur[d])) continue;
    int64_t outer = 1, inner = 1;
    for (size_t i = 0; i < d; ++i) outer *= cur[i];
    for (size_t i = d + 1; i < r; ++i) inner *= cur[i];
    const int64_t in = cur[d], out = od[d];
    next.assign(static_cast<size_t>(outer * out * inner), 0.0);
    const int parts = int(std::min<int64_t>(outer * out, threads_for(pool, double(outer * out * inner) * 4, 65536.0)));
    parallel_for(pool, parts, [&](int64_t c) {
      int64_t b = 0, e = 0;
      split_range(outer * out, parts, c, b, e);
      for (int64_t oj = b; oj < e; ++oj) {
        const int64_t o = oj / out, j = oj % out;
        const Taps& t = taps[size_t(j)];
        double* dst = next.data() + oj * inner;
        if (t.extrapolate) {
          std::fill(dst, dst + inner, double(a.extrapolation));
          continue;
        }
        for (int k = 0; k < t.count; ++k) {
          const double* src = buf.data() + (o * in + t.idx[k]) * inner;
          const double w = t.w[k];
          for (int64_t i = 0; i < inner; ++i) dst[i] += w * src[i];
        }
      }
    });
    buf.swap(next);
    cur[d] = out;
  }
  float* yp = y.data<float>();
  for (size_t i = 0; i < buf.size(); ++i) yp[i] = float(buf[i]);
}

std::unique_ptr<Kernel> resize_create(const Node& n, CpuSession& s) {
  ResizeArgs a;
  const std::string mode = n.attr_string("mode", "nearest");
  a.mode = mode == "linear" ? Mode::Linear : mode == "cubic" ? Mode::Cubic : Mode::Nearest;
  a.coord = *coord_of(n.attr_string("coordinate_transformation_mode", "half_pixel"));
  a.round = *round_of(n.attr_string("nearest_mode", "round_prefer_floor"));
  a.a = n.attr_float("cubic_coeff_a", -0.75f);
  a.exclude_outside = n.attr_int("exclude_outside", 0) != 0;
  a.extrapolation = n.attr_float("extrapolation_value", 0.f);
  ThreadPool* pool = s.pool();
  return make_kernel([a, pool](Context& ctx) {
    ConstTensorView x = ctx.input(0);
    const size_t r = x.rank();
    auto roi_t = ctx.optional_input(1);
    auto scales_t = ctx.optional_input(2);
    auto sizes_t = ctx.optional_input(3);
    if (scales_t && scales_t->numel() == 0) scales_t.reset();
    if (sizes_t && sizes_t->numel() == 0) sizes_t.reset();
    if (bool(scales_t) == bool(sizes_t)) sdk::fail(NXRT_INVALID_ARGUMENT, "Resize: exactly one of scales and sizes must be given");
    std::vector<double> roi_s(r, 0.0), roi_e(r, 1.0);
    if (a.coord == Coord::TfCropAndResize) {
      if (!roi_t || roi_t->numel() != int64_t(2 * r)) sdk::fail(NXRT_INVALID_ARGUMENT, "Resize: tf_crop_and_resize needs a roi of {} values", 2 * r);
      const float* rp = roi_t->data<float>();
      for (size_t d = 0; d < r; ++d) {
        roi_s[d] = rp[d];
        roi_e[d] = rp[d + r];
      }
    }
    std::vector<int64_t> od(r);
    std::vector<double> scale(r);
    if (scales_t) {
      if (scales_t->numel() != int64_t(r)) sdk::fail(NXRT_INVALID_ARGUMENT, "Resize: {} scales for rank {}", scales_t->numel(), r);
      const float* sp = scales_t->data<float>();
      for (size_t d = 0; d < r; ++d) {
        if (!(sp[d] > 0)) sdk::fail(NXRT_INVALID_ARGUMENT, "Resize: scale {} must be > 0", sp[d]);
        scale[d] = double(sp[d]);
        const double span = a.coord == Coord::TfCropAndResize ? roi_e[d] - roi_s[d] : 1.0;
        od[d] = int64_t(std::floor(double(x.dim(d)) * span * scale[d]));
      }
    } else {
      if (sizes_t->numel() != int64_t(r)) sdk::fail(NXRT_INVALID_ARGUMENT, "Resize: {} sizes for rank {}", sizes_t->numel(), r);
      const int64_t* zp = sizes_t->data<int64_t>();
      for (size_t d = 0; d < r; ++d) {
        if (zp[d] < 0) sdk::fail(NXRT_INVALID_ARGUMENT, "Resize: negative size {}", zp[d]);
        od[d] = zp[d];
        scale[d] = x.dim(d) ? double(od[d]) / double(x.dim(d)) : 1.0;
      }
    }
    TensorView y = ctx.output(0, NXRT_DTYPE_FLOAT32, od);
    resize_run(a, x, y, od, scale, roi_s, roi_e, pool, "Resize");
  });
}

// ---------------------------------------------------------------- Upsample

// Upsample (deprecated at opset 10): Resize with asymmetric coordinates and
// floor rounding for nearest; scales from the attribute (7-8) or input 1 (9).
// Each output dim is floor(input dim * scale).
Check upsample_check(const Node& n, bool scales_input) {
  if (auto r = input_dtype_is(n, 0, NXRT_DTYPE_FLOAT32, "X")) return r;
  if (n.output(0).dtype() != NXRT_DTYPE_FLOAT32) return sdk::refuse(NXRT_REFUSE_DTYPE, "Upsample: output is not float32");
  if (scales_input) {
    if (auto r = input_dtype_is(n, 1, NXRT_DTYPE_FLOAT32, "scales")) return r;
    if (auto r = known_attrs(n, {"mode"})) return r;
  } else if (auto r = known_attrs(n, {"mode", "scales"})) {
    return r;
  }
  const std::string mode = n.attr_string("mode", "nearest");
  if (mode != "nearest" && mode != "linear") return sdk::refuse(NXRT_REFUSE_ATTRIBUTE, "Upsample: mode '{}'", mode);
  return std::nullopt;
}

std::unique_ptr<Kernel> upsample_create(const Node& n, CpuSession& s, bool scales_input) {
  ResizeArgs a;
  a.mode = n.attr_string("mode", "nearest") == "linear" ? Mode::Linear : Mode::Nearest;
  a.coord = Coord::Asymmetric;
  a.round = Round::Floor;
  std::vector<double> attr_scales;
  if (!scales_input)
    for (float f : n.attr_floats("scales")) attr_scales.push_back(double(f));
  ThreadPool* pool = s.pool();
  return make_kernel([a, attr_scales, pool](Context& ctx) {
    ConstTensorView x = ctx.input(0);
    const size_t r = x.rank();
    std::vector<double> scale = attr_scales;
    if (ctx.input_count() > 1) {
      ConstTensorView st = ctx.input(1);
      const float* sp = st.data<float>();
      scale.assign(sp, sp + st.numel());
    }
    if (scale.size() != r) sdk::fail(NXRT_INVALID_ARGUMENT, "Upsample: {} scales for rank {}", scale.size(), r);
    std::vector<int64_t> od(r);
    for (size_t d = 0; d < r; ++d) {
      if (!(scale[d] >= 1)) sdk::fail(NXRT_INVALID_ARGUMENT, "Upsample: scale {} must be >= 1", scale[d]);
      od[d] = int64_t(std::floor(double(x.dim(d)) * scale[d]));
    }
    TensorView y = ctx.output(0, NXRT_DTYPE_FLOAT32, od);
    resize_run(a, x, y, od, scale, std::vector<double>(r, 0.0), std::vector<double>(r, 1.0), pool, "Upsample");
  });
}

// -------------------------------------------------------------- GridSample

enum class GsPad { Zeros, Border, Reflection };

double gs_reflect(double v, double twice_low, double twice_high) {
  if (twice_low == twice_high) return 0;
  const double mn = twice_low / 2, span = (twice_high - twice_low) / 2;
  v = std::fabs(v - mn);
  const double extra = std::fmod(v, span);
  const int64_t flips = int64_t(std::floor(v / span));
  return flips % 2 == 0 ? extra + mn : span - extra + mn;
}

// The padding mode applied to a (continuous or integer) source coordinate.
double gs_pad_coord(double c, int64_t size, GsPad pad, bool align) {
  if (pad == GsPad::Border) return std::clamp(c, 0.0, double(size - 1));
  if (pad == GsPad::Reflection) {
    c = align ? gs_reflect(c, 0, 2.0 * double(size - 1)) : gs_reflect(c, -1, 2.0 * double(size) - 1);
    return std::clamp(c, 0.0, double(size - 1));
  }
  return c;
}

std::unique_ptr<Kernel> gridsample_create(const Node& n, CpuSession& s) {
  const std::string mode = n.attr_string("mode", "bilinear");
  const int m = mode == "nearest" ? 0 : mode == "bicubic" ? 2 : 1;
  const std::string pm = n.attr_string("padding_mode", "zeros");
  const GsPad pad = pm == "border" ? GsPad::Border : pm == "reflection" ? GsPad::Reflection : GsPad::Zeros;
  const bool align = n.attr_int("align_corners", 0) != 0;
  ThreadPool* pool = s.pool();
  return make_kernel([m, pad, align, pool](Context& ctx) {
    ConstTensorView x = ctx.input(0), grid = ctx.input(1);
    if (x.rank() != 4 || grid.rank() != 4 || grid.dim(0) != x.dim(0) || grid.dim(3) != 2)
      sdk::fail(NXRT_INVALID_ARGUMENT, "GridSample: X {} and grid {} must be [N,C,H,W] and [N,Ho,Wo,2]", dims_str(x.dims()), dims_str(grid.dims()));
    const int64_t N = x.dim(0), C = x.dim(1), H = x.dim(2), W = x.dim(3), Ho = grid.dim(1), Wo = grid.dim(2);
    TensorView y = ctx.output(0, NXRT_DTYPE_FLOAT32, {N, C, Ho, Wo});
    if (y.numel() == 0) return;
    const float* xp = x.data<float>();
    const float* gp = grid.data<float>();
    float* yp = y.data<float>();
    auto unnorm = [align](double c, int64_t size) { return align ? (c + 1) / 2 * double(size - 1) : ((c + 1) * double(size) - 1) / 2; };
    auto cubic = [](double t, double w[4]) {
      const double A = -0.75;
      auto c1 = [A](double v) { return ((A + 2) * v - (A + 3)) * v * v + 1; };
      auto c2 = [A](double v) { return ((A * v - 5 * A) * v + 8 * A) * v - 4 * A; };
      w[0] = c2(t + 1);
      w[1] = c1(t);
      w[2] = c1(1 - t);
      w[3] = c2(2 - t);
    };
    const int parts = int(std::min<int64_t>(N * C, threads_for(pool, double(N * C * Ho * Wo) * 16, 65536.0)));
    parallel_for(pool, parts, [&](int64_t part) {
      int64_t b0 = 0, b1 = 0;
      split_range(N * C, parts, part, b0, b1);
      for (int64_t nc = b0; nc < b1; ++nc) {
        const int64_t nn = nc / C;
        const float* plane = xp + nc * H * W;
        // Reads a pixel; out of range: 0 (the coordinates were already padded for border/reflection).
        auto at = [&](int64_t yy, int64_t xx) -> double {
          return (xx >= 0 && xx < W && yy >= 0 && yy < H) ? double(plane[yy * W + xx]) : 0.0;
        };
        for (int64_t i = 0; i < Ho * Wo; ++i) {
          const float* g = gp + (nn * Ho * Wo + i) * 2;
          double v = 0;
          if (m == 2) {
            const double ix = unnorm(g[0], W), iy = unnorm(g[1], H);
            const double fx = std::floor(ix), fy = std::floor(iy);
            double wx[4], wy[4];
            cubic(ix - fx, wx);
            cubic(iy - fy, wy);
            for (int a = 0; a < 4; ++a)
              for (int b = 0; b < 4; ++b) {
                int64_t xx = int64_t(fx) - 1 + b, yy = int64_t(fy) - 1 + a;
                if (pad != GsPad::Zeros) {
                  xx = int64_t(gs_pad_coord(double(xx), W, pad, align));
                  yy = int64_t(gs_pad_coord(double(yy), H, pad, align));
                }
                v += wy[a] * wx[b] * at(yy, xx);
              }
          } else {
            const double ix = gs_pad_coord(unnorm(g[0], W), W, pad, align), iy = gs_pad_coord(unnorm(g[1], H), H, pad, align);
            if (m == 0) {
              v = at(int64_t(std::nearbyint(iy)), int64_t(std::nearbyint(ix)));
            } else {
              const double fx = std::floor(ix), fy = std::floor(iy), tx = ix - fx, ty = iy - fy;
              const int64_t x0 = int64_t(fx), y0 = int64_t(fy);
              v = (1 - ty) * ((1 - tx) * at(y0, x0) + tx * at(y0, x0 + 1)) + ty * ((1 - tx) * at(y0 + 1, x0) + tx * at(y0 + 1, x0 + 1));
            }
          }
          yp[nc * Ho * Wo + i] = float(v);
        }
      }
    });
  });
}

Check gridsample_check(const Node& n) {
  if (auto r = sdk::require_dtypes(n, {NXRT_DTYPE_FLOAT32})) return r;
  if (auto r = known_attrs(n, {"mode", "padding_mode", "align_corners"})) return r;
  const std::string mode = n.attr_string("mode", "bilinear");
  if (mode != "bilinear" && mode != "nearest" && mode != "bicubic") return sdk::refuse(NXRT_REFUSE_ATTRIBUTE, "GridSample: mode '{}'", mode);
  const std::string pm = n.attr_string("padding_mode", "zeros");
  if (pm != "zeros" && pm != "border" && pm != "reflection") return sdk::refuse(NXRT_REFUSE_ATTRIBUTE, "GridSample: padding_mode '{}'", pm);
  if (n.input(0).rank() >= 0 && n.input(0).rank() != 4) return sdk::refuse(NXRT_REFUSE_SHAPE, "GridSample: only 4-D input is implemented");
  return std::nullopt;
}

}  // namespace

void register_resize_ops(Registry& r) {
  r.add(Def{"Resize", "", 11, INT_MAX, resize_check, resize_create});
  r.add(Def{"Upsample", "", 7, 8, [](const Node& n) { return upsample_check(n, false); },
            [](const Node& n, CpuSession& s) { return upsample_create(n, s, false); }});
  r.add(Def{"Upsample", "", 9, 9, [](const Node& n) { return upsample_check(n, true); },
            [](const Node& n, CpuSession& s) { return upsample_create(n, s, true); }});
  r.add(Def{"GridSample", "", 16, 19, gridsample_check, gridsample_create});
}

}  // namespace nxrt::cpu
