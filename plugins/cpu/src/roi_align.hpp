// RoiAlign (mode avg): each output bin is the mean of bilinear samples of the
// region of interest on its batch image's feature map.
#pragma once
#include <cstdint>

#include "thread_pool.hpp"

namespace nxrt::cpu {

struct RoiAlignParams {
  int64_t output_height = 1, output_width = 1;
  int64_t sampling_ratio = 0;  // samples per bin side; 0: ceil(roi size / output size)
  double spatial_scale = 1.0;
  bool half_pixel = true;      // half_pixel: roi coordinates shifted by -0.5; output_half_pixel: rois at least 1x1
};

// x: [batches][channels][height][width]; rois: [rois][4] as (x1, y1, x2, y2);
// batch[r] in [0, batches) (checked by the caller); y: [rois][channels][oh][ow].
void roi_align_avg(const float* x, int64_t channels, int64_t height, int64_t width, const float* rois,
                   const int64_t* batch, int64_t num_rois, const RoiAlignParams& p, float* y, ThreadPool* pool);

}  // namespace nxrt::cpu
