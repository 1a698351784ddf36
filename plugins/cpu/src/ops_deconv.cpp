// ConvTranspose (1-3 spatial dims, groups, strides, dilations, pads,
// output_padding, output_shape, auto_pad): a direct scatter, one thread per
// (image, output channel) plane, the inner loop running along the input row.
// NonMaxSuppression (greedy, per batch and class). float32.
#include <algorithm>
#include <cstring>
#include <string>

#include "ops_more.hpp"

namespace nxrt::cpu {
namespace {

constexpr nxrt_dtype kF32[] = {NXRT_DTYPE_FLOAT32};

Check deconv_check(const Node& n) {
  if (auto r = sdk::require_dtypes(n, kF32)) return r;
  if (auto r = known_attrs(n, {"auto_pad", "dilations", "group", "kernel_shape", "output_padding", "output_shape", "pads", "strides"}))
    return r;
  auto w = n.input(1);
  if (w.rank() < 0) return sdk::refuse(NXRT_REFUSE_SHAPE, "ConvTranspose: W rank unknown");
  const int64_t sr = w.rank() - 2;
  if (sr < 1 || sr > 3) return sdk::refuse(NXRT_REFUSE_SHAPE, "ConvTranspose with {} spatial dims is not implemented (1-3)", sr);
  const std::string ap = n.attr_string("auto_pad", "NOTSET");
  if (ap != "NOTSET" && ap != "VALID" && ap != "SAME_UPPER" && ap != "SAME_LOWER")
    return sdk::refuse(NXRT_REFUSE_ATTRIBUTE, "ConvTranspose: auto_pad '{}'", ap);
  for (const char* name : {"dilations", "strides", "kernel_shape", "output_padding", "output_shape"}) {
    auto v = n.attr_ints(name);
    if (!v.empty() && int64_t(v.size()) != sr) return sdk::refuse(NXRT_REFUSE_ATTRIBUTE, "ConvTranspose: {} has {} values for {} spatial dims", name, v.size(), sr);
  }
  auto pads = n.attr_ints("pads");
  if (!pads.empty() && int64_t(pads.size()) != 2 * sr) return sdk::refuse(NXRT_REFUSE_ATTRIBUTE, "ConvTranspose: pads has {} values", pads.size());
  for (auto v : n.attr_ints("strides")) if (v < 1) return sdk::refuse(NXRT_REFUSE_ATTRIBUTE, "ConvTranspose: stride {} < 1", v);
  for (auto v : n.attr_ints("dilations")) if (v < 1) return sdk::refuse(NXRT_REFUSE_ATTRIBUTE, "ConvTranspose: dilation {} < 1", v);
  if (n.attr_int("group", 1) < 1) return sdk::refuse(NXRT_REFUSE_ATTRIBUTE, "ConvTranspose: group < 1");
  return std::nullopt;
}

struct DeconvArgs {
  std::vector<int64_t> s, d, pads, out_pad, out_shape;
  std::string auto_pad;
  int64_t group = 1;
};

std::unique_ptr<Kernel> deconv_create(const Node& n, CpuSession& session) {
  const size_t sr = size_t(n.input(1).rank() - 2);
  DeconvArgs a;
  a.s = n.attr_ints("strides", std::vector<int64_t>(sr, 1));
  a.d = n.attr_ints("dilations", std::vector<int64_t>(sr, 1));
  a.pads = n.attr_ints("pads", std::vector<int64_t>(2 * sr, 0));
  a.out_pad = n.attr_ints("output_padding", std::vector<int64_t>(sr, 0));
  a.out_shape = n.attr_ints("output_shape");
  a.auto_pad = n.attr_string("auto_pad", "NOTSET");
  a.group = n.attr_int("group", 1);
  ThreadPool* pool = session.pool();
  return make_kernel([a, sr, pool](Context& ctx) {
    ConstTensorView x = ctx.input(0), w = ctx.input(1);
    auto b = ctx.optional_input(2);
    if (x.rank() != sr + 2 || w.rank() != sr + 2) sdk::fail(NXRT_INVALID_ARGUMENT, "ConvTranspose: X {} / W {} ranks", dims_str(x.dims()), dims_str(w.dims()));
    const int64_t N = x.dim(0), C = x.dim(1), G = a.group;
    if (C != w.dim(0) || C % G) sdk::fail(NXRT_INVALID_ARGUMENT, "ConvTranspose: X has {} channels, W {}", C, dims_str(w.dims()));
    const int64_t Mg = w.dim(1), M = Mg * G, Cg = C / G;
    if (b && b->numel() != M) sdk::fail(NXRT_INVALID_ARGUMENT, "ConvTranspose: B must have {} values", M);
    int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1}, k[3] = {1, 1, 1}, st[3] = {1, 1, 1}, dl[3] = {1, 1, 1}, pb[3] = {0, 0, 0};
    std::vector<int64_t> od = {N, M};
    const size_t off = 3 - sr;
    for (size_t i = 0; i < sr; ++i) {
      const size_t j = off + i;
      in[j] = x.dim(2 + i);
      k[j] = w.dim(2 + i);
      st[j] = a.s[i];
      dl[j] = a.d[i];
      const int64_t full = st[j] * (in[j] - 1) + a.out_pad[i] + (k[j] - 1) * dl[j] + 1;
      if (!a.out_shape.empty()) {
        out[j] = a.out_shape[i];
        if (a.auto_pad == "SAME_UPPER" || a.auto_pad == "SAME_LOWER") {
          const int64_t total = std::max<int64_t>(0, full - out[j]);
          pb[j] = a.auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
        } else {
          pb[j] = a.pads[i];
        }
      } else if (a.auto_pad == "SAME_UPPER" || a.auto_pad == "SAME_LOWER") {
        out[j] = in[j] * st[j];
        const int64_t total = std::max<int64_t>(0, full - out[j]);
        pb[j] = a.auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      } else if (a.auto_pad == "VALID") {
        out[j] = full;
      } else {
        pb[j] = a.pads[i];
        out[j] = full - a.pads[i] - a.pads[i + sr];
      }
      if (out[j] < 0) sdk::fail(NXRT_INVALID_ARGUMENT, "ConvTranspose: negative output size");
      od.push_back(out[j]);
    }
    TensorView y = ctx.output(0, NXRT_DTYPE_FLOAT32, od);
    if (y.numel() == 0) return;
    const float* xp = x.data<float>();
    const float* wp = w.data<float>();
    const float* bp = b ? b->data<float>() : nullptr;
    float* yp = y.data<float>();
    const int64_t isz = in[0] * in[1] * in[2], osz = out[0] * out[1] * out[2], ksz = k[0] * k[1] * k[2];
    const int64_t planes = N * M;
    const int parts = int(std::min<int64_t>(planes, threads_for(pool, double(N * C * isz) * double(Mg * ksz))));
    parallel_ranges(pool, planes, parts, [&](int64_t p0, int64_t p1) {
      for (int64_t p = p0; p < p1; ++p) {
        const int64_t nn = p / M, m = p % M, g = m / Mg, ml = m % Mg;
        float* yo = yp + p * osz;
        std::fill(yo, yo + osz, bp ? bp[m] : 0.f);
        for (int64_t icl = 0; icl < Cg; ++icl) {
          const int64_t ic = g * Cg + icl;
          const float* xi = xp + (nn * C + ic) * isz;
          const float* wk = wp + (ic * Mg + ml) * ksz;
          for (int64_t kz = 0; kz < k[0]; ++kz)
            for (int64_t ky = 0; ky < k[1]; ++ky)
              for (int64_t kx = 0; kx < k[2]; ++kx) {
                const float wv = wk[(kz * k[1] + ky) * k[2] + kx];
                // Input columns whose output column lands inside [0, out[2]).
                const int64_t cx = kx * dl[2] - pb[2];  // ox = ix * st + cx
                int64_t ix0 = cx >= 0 ? 0 : (-cx + st[2] - 1) / st[2];
                int64_t ix1 = out[2] - cx <= 0 ? 0 : std::min(in[2], (out[2] - cx + st[2] - 1) / st[2]);
                if (ix0 >= ix1) continue;
                for (int64_t iz = 0; iz < in[0]; ++iz) {
                  const int64_t oz = iz * st[0] - pb[0] + kz * dl[0];
                  if (oz < 0 || oz >= out[0]) continue;
                  for (int64_t iy = 0; iy < in[1]; ++iy) {
                    const int64_t oy = iy * st[1] - pb[1] + ky * dl[1];
                    if (oy < 0 || oy >= out[1]) continue;
                    const float* xr = xi + (iz * in[1] + iy) * in[2];
                    float* yr = yo + (oz * out[1] + oy) * out[2];
                    const int64_t s2 = st[2];
                    for (int64_t ix = ix0; ix < ix1; ++ix) yr[ix * s2 + cx] += wv * xr[ix];
                  }
                }
              }
        }
      }
    });
  });
}

// ------------------------------------------------------- NonMaxSuppression

std::unique_ptr<Kernel> nms_create(const Node& n, CpuSession&) {
  const bool center = n.attr_int("center_point_box", 0) != 0;
  return make_kernel([center](Context& ctx) {
    ConstTensorView boxes = ctx.input(0), scores = ctx.input(1);
    int64_t max_out = 0;
    float iou_th = 0.f, score_th = 0.f;
    bool has_score_th = false;
    if (auto t = ctx.optional_input(2); t && t->numel() > 0) max_out = read_ints(*t, "NonMaxSuppression", "max_output_boxes_per_class")[0];
    if (auto t = ctx.optional_input(3); t && t->numel() > 0) iou_th = t->data<float>()[0];
    if (auto t = ctx.optional_input(4); t && t->numel() > 0) {
      score_th = t->data<float>()[0];
      has_score_th = true;
    }
    if (boxes.rank() != 3 || boxes.dim(2) != 4 || scores.rank() != 3 || scores.dim(0) != boxes.dim(0) || scores.dim(2) != boxes.dim(1))
      sdk::fail(NXRT_INVALID_ARGUMENT, "NonMaxSuppression: boxes {} and scores {} do not match", dims_str(boxes.dims()), dims_str(scores.dims()));
    const int64_t B = boxes.dim(0), S = boxes.dim(1), C = scores.dim(1);
    const float* bp = boxes.data<float>();
    const float* sp = scores.data<float>();
    std::vector<int64_t> sel;
    std::vector<int64_t> order;
    std::vector<int64_t> kept;
    auto corners = [&](const float* b, float& y1, float& x1, float& y2, float& x2) {
      if (center) {
        x1 = b[0] - b[2] / 2;
        x2 = b[0] + b[2] / 2;
        y1 = b[1] - b[3] / 2;
        y2 = b[1] + b[3] / 2;
      } else {
        y1 = std::min(b[0], b[2]);
        y2 = std::max(b[0], b[2]);
        x1 = std::min(b[1], b[3]);
        x2 = std::max(b[1], b[3]);
      }
    };
    auto iou = [&](const float* a, const float* b) {
      float ay1, ax1, ay2, ax2, by1, bx1, by2, bx2;
      corners(a, ay1, ax1, ay2, ax2);
      corners(b, by1, bx1, by2, bx2);
      const float aa = (ay2 - ay1) * (ax2 - ax1), ab = (by2 - by1) * (bx2 - bx1);
      if (aa <= 0 || ab <= 0) return 0.f;
      const float ih = std::max(0.f, std::min(ay2, by2) - std::max(ay1, by1));
      const float iw = std::max(0.f, std::min(ax2, bx2) - std::max(ax1, bx1));
      const float inter = ih * iw;
      return inter / (aa + ab - inter);
    };
    for (int64_t b = 0; b < B && max_out > 0; ++b)
      for (int64_t c = 0; c < C; ++c) {
        const float* sc = sp + (b * C + c) * S;
        order.clear();
        for (int64_t i = 0; i < S; ++i)
          if (!has_score_th || sc[i] > score_th) order.push_back(i);
        std::stable_sort(order.begin(), order.end(), [&](int64_t p, int64_t q) { return sc[p] > sc[q]; });
        kept.clear();
        for (int64_t i : order) {
          if (int64_t(kept.size()) >= max_out) break;
          bool ok = true;
          for (int64_t k : kept)
            if (iou(bp + (b * S + i) * 4, bp + (b * S + k) * 4) > iou_th) {
              ok = false;
              break;
            }
          if (!ok) continue;
          kept.push_back(i);
          sel.insert(sel.end(), {b, c, i});
        }
      }
    TensorView y = ctx.output(0, NXRT_DTYPE_INT64, {int64_t(sel.size() / 3), 3});
    if (!sel.empty()) std::memcpy(y.raw(), sel.data(), sel.size() * 8);
  });
}

Check nms_check(const Node& n) {
  if (auto r = input_dtype_is(n, 0, NXRT_DTYPE_FLOAT32, "boxes")) return r;
  if (auto r = input_dtype_is(n, 1, NXRT_DTYPE_FLOAT32, "scores")) return r;
  if (auto r = input_dtype_is(n, 2, NXRT_DTYPE_INT64, "max_output_boxes_per_class")) return r;
  if (auto r = input_dtype_is(n, 3, NXRT_DTYPE_FLOAT32, "iou_threshold")) return r;
  if (auto r = input_dtype_is(n, 4, NXRT_DTYPE_FLOAT32, "score_threshold")) return r;
  return known_attrs(n, {"center_point_box"});
}

}  // namespace

void register_deconv_ops(Registry& r) {
  r.add(Def{"ConvTranspose", "", 1, INT_MAX, deconv_check, deconv_create});
  r.add(Def{"NonMaxSuppression", "", 10, INT_MAX, nms_check, nms_create});
}

}  // namespace nxrt::cpu
