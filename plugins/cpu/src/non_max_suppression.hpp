// NonMaxSuppression: greedy selection per (batch, class) of the highest
// scoring boxes whose IoU with every box already kept is <= iou_threshold.
#pragma once
#include <cstdint>
#include <vector>

namespace nxrt::cpu {

struct NmsParams {
  bool center_point_box = false;  // boxes are [x_center, y_center, w, h]; else [y1, x1, y2, x2] (any corner order)
  int64_t max_output_boxes_per_class = 0;
  float iou_threshold = 0.f;
  bool has_score_threshold = false;  // keep only scores > score_threshold
  float score_threshold = 0.f;
};

// Intersection over union of two boxes (0 when either has no area).
float box_iou(const float* a, const float* b, bool center_point_box);

// boxes: [batches][spatial][4], scores: [batches][classes][spatial]. Returns
// the selected (batch, class, box) triples, flattened, in batch, class, then
// descending score order (ties keep the lower box index first).
std::vector<int64_t> non_max_suppression(const float* boxes, const float* scores, int64_t batches, int64_t classes,
                                         int64_t spatial, const NmsParams& p);

}  // namespace nxrt::cpu
