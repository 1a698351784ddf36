// Spatial geometry of Conv and the windowed pools (1-D and 2-D): strides,
// dilations, explicit or auto pads, output size; and their common attribute check.
#pragma once
#include "op_kernel.hpp"

namespace nxrt::vk {

struct Geo {
  int64_t H, W, KH, KW, sh, sw, dh, dw, ph0, pw0, ph1, pw1, OH, OW;
};
// From attributes and input/kernel sizes (a 1-D input has H = KH = 1).
Geo geometry(const IrNode& n, const Shape& x, int64_t kh, int64_t kw, bool ceil_mode);
// [N, c, OW] or [N, c, OH, OW].
Shape spatial_out(const Shape& x, int64_t c, const Geo& g);
// Known input rank 3 or 4; strides/dilations/kernel_shape/pads sized for the
// spatial dims and positive (pads non-negative); a known auto_pad.
R check_spatial_attrs(const IrGraph& g, const IrNode& n, size_t want_pads_per_dim = 2);

}  // namespace nxrt::vk
