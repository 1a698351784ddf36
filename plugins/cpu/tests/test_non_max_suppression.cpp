// NonMaxSuppression: IoU of both box encodings and the greedy selection of
// the ONNX reference examples.
#include <doctest/doctest.h>

#include <vector>

#include "non_max_suppression.hpp"

using namespace nxrt::cpu;

TEST_CASE("box_iou: corner order, center encoding, disjoint and empty boxes") {
  const float a[4] = {0, 0, 1, 1}, b[4] = {0, 0.5f, 1, 1.5f}, b_flipped[4] = {1, 1.5f, 0, 0.5f};
  CHECK(box_iou(a, b, false) == doctest::Approx(1.0 / 3.0));  // overlap 0.5, union 1.5
  CHECK(box_iou(a, b_flipped, false) == doctest::Approx(1.0 / 3.0));
  CHECK(box_iou(a, a, false) == 1.f);
  const float far[4] = {5, 5, 6, 6}, empty[4] = {0, 0, 0, 1};
  CHECK(box_iou(a, far, false) == 0.f);
  CHECK(box_iou(a, empty, false) == 0.f);
  const float ca[4] = {0.5f, 0.5f, 1, 1}, cb[4] = {1.0f, 0.5f, 1, 1};  // [xc, yc, w, h]
  CHECK(box_iou(ca, cb, true) == doctest::Approx(1.0 / 3.0));
}

TEST_CASE("non_max_suppression: suppression by IoU, score threshold, limits, classes") {
  // ONNX's nonmaxsuppression_suppress_by_IOU boxes: three overlapping near x = 0,
  // two near x = 10, one at x = 100.
  const std::vector<float> boxes = {0, 0, 1, 1, 0, 0.1f, 1, 1.1f, 0, -0.1f, 1, 0.9f,
                                    0, 10, 1, 11, 0, 10.1f, 1, 11.1f, 0, 100, 1, 101};
  const std::vector<float> scores = {0.9f, 0.75f, 0.6f, 0.95f, 0.5f, 0.3f};
  NmsParams p;
  p.max_output_boxes_per_class = 3;
  p.iou_threshold = 0.5f;
  CHECK(non_max_suppression(boxes.data(), scores.data(), 1, 1, 6, p) == std::vector<int64_t>{0, 0, 3, 0, 0, 0, 0, 0, 5});
  p.has_score_threshold = true;
  p.score_threshold = 0.4f;
  CHECK(non_max_suppression(boxes.data(), scores.data(), 1, 1, 6, p) == std::vector<int64_t>{0, 0, 3, 0, 0, 0});
  p.has_score_threshold = false;
  p.max_output_boxes_per_class = 2;
  CHECK(non_max_suppression(boxes.data(), scores.data(), 1, 1, 6, p) == std::vector<int64_t>{0, 0, 3, 0, 0, 0});
  p.max_output_boxes_per_class = 0;
  CHECK(non_max_suppression(boxes.data(), scores.data(), 1, 1, 6, p).empty());
  // IoU threshold 1: nothing is suppressed; 2 classes, the second ranks the boxes in reverse.
  p.max_output_boxes_per_class = 6;
  p.iou_threshold = 1.f;
  const std::vector<float> two = {0.9f, 0.75f, 0.6f, 0.95f, 0.5f, 0.3f, 0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f};
  const auto sel = non_max_suppression(boxes.data(), two.data(), 1, 2, 6, p);
  CHECK(sel == std::vector<int64_t>{0, 0, 3, 0, 0, 0, 0, 0, 1, 0, 0, 2, 0, 0, 4, 0, 0, 5,
                                    0, 1, 5, 0, 1, 4, 0, 1, 3, 0, 1, 2, 0, 1, 1, 0, 1, 0});
}

TEST_CASE("non_max_suppression: equal scores keep the lower index first; batches are separate") {
  const std::vector<float> boxes = {0, 0, 1, 1, 0, 5, 1, 6,   // batch 0
                                    0, 0, 1, 1, 0, 0, 1, 1};  // batch 1: identical boxes
  const std::vector<float> scores = {0.5f, 0.5f, 0.5f, 0.5f};
  NmsParams p;
  p.max_output_boxes_per_class = 10;
  p.iou_threshold = 0.5f;
  CHECK(non_max_suppression(boxes.data(), scores.data(), 2, 1, 2, p) == std::vector<int64_t>{0, 0, 0, 0, 0, 1, 1, 0, 0});
}
