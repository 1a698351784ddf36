// Object detection: NonMaxSuppression (greedy, per batch and class) and
// RoiAlign (avg). float32.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "ops.hpp"

namespace nxrt::cpu {
namespace {

// ------------------------------------------------------- NonMaxSuppression

std::unique_ptr<Kernel> nms_create(const Node& n, CpuSession&) {
  const bool center = n.attr_int("center_point_box", 0) != 0;
  return make_kernel([center](Context& ctx) {
    TensorView boxes = ctx.input(0), scores = ctx.input(1);
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

// ---------------------------------------------------------------- RoiAlign

std::unique_ptr<Kernel> roialign_create(const Node& n, CpuSession& s, bool legacy_default) {
  const std::string ctm = n.attr_string("coordinate_transformation_mode", legacy_default ? "output_half_pixel" : "half_pixel");
  const bool half_pixel = ctm == "half_pixel";
  const int64_t oh = n.attr_int("output_height", 1), ow = n.attr_int("output_width", 1), sr = n.attr_int("sampling_ratio", 0);
  const double scale = n.attr_float("spatial_scale", 1.f);
  ThreadPool* pool = s.pool();
  return make_kernel([half_pixel, oh, ow, sr, scale, pool](Context& ctx) {
    TensorView x = ctx.input(0), rois = ctx.input(1), bi = ctx.input(2);
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

}  // namespace

void register_object_detection_ops(Registry& r) {
  r.add(Def{"NonMaxSuppression", "", 10, INT_MAX, nms_check, nms_create});
  r.add(Def{"RoiAlign", "", 10, 15, roialign_check, [](const Node& n, CpuSession& s) { return roialign_create(n, s, true); }});
  r.add(Def{"RoiAlign", "", 16, INT_MAX, roialign_check, [](const Node& n, CpuSession& s) { return roialign_create(n, s, false); }});
}

}  // namespace nxrt::cpu
