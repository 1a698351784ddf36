// Resize's float32 one-pass path over the last two axes (nearest and bilinear, what models
// use): each output row from at most two input rows, each of them resized along x once per
// run of output rows that read it. ops_resize.cpp computes the taps (every coordinate mode)
// and takes this path where they stay inside the input; its double-precision separable
// passes do the rest.
#pragma once
#include <cstdint>
#include <span>

#include "thread_pool.hpp"

namespace nxrt::cpu {

// One output row or column: source i0 with weight w0, plus i1 with w1 (two taps), or i0 alone
// (single: nearest, or an output on a sample).
struct ResizeTap {
  int64_t i0 = 0, i1 = 0;
  float w0 = 1.f, w1 = 0.f;
  bool single = true;
};

// y[p][oy][ox] for planes p of H x W floats into OH x OW (OH = ty.size(), OW = tx.size()):
// along x h(iy)[ox] = tx.w0 * x[p][iy][tx.i0] + tx.w1 * x[p][iy][tx.i1] (a single tap: w1 = 0,
// i1 = i0), then y = ty.w0 * h(ty.i0) + ty.w1 * h(ty.i1), or h(ty.i0) for a single tap; single
// taps both ways copy values. Rounded once per product (float, not the passes' double).
void resize_planes_f32(const float* x, float* y, int64_t planes, int64_t H, int64_t W, std::span<const ResizeTap> ty,
                       std::span<const ResizeTap> tx, ThreadPool* pool);

}  // namespace nxrt::cpu
