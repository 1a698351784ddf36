#include "non_max_suppression.hpp"

#include <algorithm>

namespace nxrt::cpu {
namespace {

void corners(const float* b, bool center, float& y1, float& x1, float& y2, float& x2) {
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
}

}  // namespace

float box_iou(const float* a, const float* b, bool center) {
  float ay1, ax1, ay2, ax2, by1, bx1, by2, bx2;
  corners(a, center, ay1, ax1, ay2, ax2);
  corners(b, center, by1, bx1, by2, bx2);
  const float aa = (ay2 - ay1) * (ax2 - ax1), ab = (by2 - by1) * (bx2 - bx1);
  if (aa <= 0 || ab <= 0) return 0.f;
  const float ih = std::max(0.f, std::min(ay2, by2) - std::max(ay1, by1));
  const float iw = std::max(0.f, std::min(ax2, bx2) - std::max(ax1, bx1));
  const float inter = ih * iw;
  return inter / (aa + ab - inter);
}

std::vector<int64_t> non_max_suppression(const float* bp, const float* sp, int64_t B, int64_t C, int64_t S, const NmsParams& p) {
  std::vector<int64_t> sel;
  std::vector<int64_t> order;
  std::vector<int64_t> kept;
  const int64_t max_out = p.max_output_boxes_per_class;
  for (int64_t b = 0; b < B && max_out > 0; ++b)
    for (int64_t c = 0; c < C; ++c) {
      const float* sc = sp + (b * C + c) * S;
      order.clear();
      for (int64_t i = 0; i < S; ++i)
        if (!p.has_score_threshold || sc[i] > p.score_threshold) order.push_back(i);
      std::stable_sort(order.begin(), order.end(), [&](int64_t u, int64_t v) { return sc[u] > sc[v]; });
      kept.clear();
      for (int64_t i : order) {
        if (int64_t(kept.size()) >= max_out) break;
        bool ok = true;
        for (int64_t k : kept)
          if (box_iou(bp + (b * S + i) * 4, bp + (b * S + k) * 4, p.center_point_box) > p.iou_threshold) {
            ok = false;
            break;
          }
        if (!ok) continue;
        kept.push_back(i);
        sel.insert(sel.end(), {b, c, i});
      }
    }
  return sel;
}

}  // namespace nxrt::cpu
