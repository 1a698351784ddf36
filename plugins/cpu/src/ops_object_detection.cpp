// Object detection: NonMaxSuppression (greedy, per batch and class;
// non_max_suppression.cpp) and RoiAlign (avg; roi_align.cpp). float32.
#include <cstring>
#include <string>

#include "non_max_suppression.hpp"
#include "ops.hpp"
#include "roi_align.hpp"

namespace nxrt::cpu {
namespace {

// ------------------------------------------------------- NonMaxSuppression

std::unique_ptr<Kernel> nms_create(const Node& n, CpuSession&) {
  const bool center = n.attr_int("center_point_box", 0) != 0;
  return make_kernel([center](Context& ctx) {
    ConstTensorView boxes = ctx.input(0), scores = ctx.input(1);
    NmsParams p;
    p.center_point_box = center;
    if (auto t = ctx.optional_input(2); t && t->numel() > 0)
      p.max_output_boxes_per_class = read_ints(*t, "NonMaxSuppression", "max_output_boxes_per_class")[0];
    if (auto t = ctx.optional_input(3); t && t->numel() > 0) p.iou_threshold = t->data<float>()[0];
    if (auto t = ctx.optional_input(4); t && t->numel() > 0) {
      p.score_threshold = t->data<float>()[0];
      p.has_score_threshold = true;
    }
    if (boxes.rank() != 3 || boxes.dim(2) != 4 || scores.rank() != 3 || scores.dim(0) != boxes.dim(0) || scores.dim(2) != boxes.dim(1))
      sdk::fail(NXRT_INVALID_ARGUMENT, "NonMaxSuppression: boxes {} and scores {} do not match", dims_str(boxes.dims()), dims_str(scores.dims()));
    const int64_t B = boxes.dim(0), S = boxes.dim(1), C = scores.dim(1);
    const std::vector<int64_t> sel = non_max_suppression(boxes.data<float>(), scores.data<float>(), B, C, S, p);
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
    RoiAlignParams p;
    p.output_height = oh;
    p.output_width = ow;
    p.sampling_ratio = sr;
    p.spatial_scale = scale;
    p.half_pixel = half_pixel;
    roi_align_avg(xp, C, H, W, rp, batch.data(), R, p, yp, pool);
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
