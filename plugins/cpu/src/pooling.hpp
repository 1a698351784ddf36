// MaxPool and AveragePool (1-3 spatial dims, dilations, asymmetric pads;
// ceil_mode is folded into the output shape), GlobalAveragePool and
// GlobalMaxPool, NC... layout.
#pragma once
#include <cstdint>

#include "thread_pool.hpp"

namespace nxrt::cpu {

struct PoolShape {
  int64_t batch = 1, channels = 1;
  int spatial = 2;                 // 1..3
  int64_t in[3] = {1, 1, 1};       // spatial input dims (unused ones 1)
  int64_t out[3] = {1, 1, 1};
  int64_t kernel[3] = {1, 1, 1};
  int64_t stride[3] = {1, 1, 1};
  int64_t dilation[3] = {1, 1, 1};
  int64_t pad_begin[3] = {0, 0, 0};
  int64_t pad_end[3] = {0, 0, 0};  // read by average_pool only (max_pool ignores padding)
};

template <typename T>
void max_pool(const PoolShape& s, const T* x, T* y, ThreadPool* pool);

// Whether max_pool_plane_rows takes `s`: 2-D (in[0], out[0] and kernel[0] 1), undilated.
bool max_pool_rows_ok(const PoolShape& s);
// Output rows [oh0, oh1) of one float plane (row oh at y + oh * out[2]) from input rows held
// at x + (ih - row0) * pitch (pitch >= in[2]): every row those outputs' windows read,
// clipped to [0, in[1]), must be there. For a pool fused after the producer of its rows
// (conv2d_max_pool): blocks of rows as they are made, at the producer's row pitch.
void max_pool_plane_rows(const PoolShape& s, const float* x, int64_t pitch, int64_t row0, float* y, int64_t oh0,
                         int64_t oh1);

// MaxPool with its Indices output: indices[i] is the flat index into x (batch
// and channel included) of the first maximum of window i, the spatial part
// row-major (storage_order 0) or column-major (storage_order 1: the first
// spatial dim varies fastest). A NaN is taken as the maximum. A window
// entirely in the padding gives the lowest value and index -1.
template <typename T>
void max_pool_with_indices(const PoolShape& s, bool column_major, const T* x, T* y, int64_t* indices, ThreadPool* pool);

// The 2-D max pool of 8-bit x held channels-last ([batch][in[1]][in[2]][channels] bytes: the
// channels-last 8-bit conv's output, QConv::run_channels_last) into y's NCHW planes, as
// max_pool gives them from the NCHW x; 16 output pixels a byte transpose
// (pooling_channels_last.cpp). Where max_pool_channels_last_ok: AVX-512 BW, 2-D, channels in 16s.
bool max_pool_channels_last_ok(const PoolShape& s);
template <typename T>
void max_pool_channels_last(const PoolShape& s, const T* x, T* y, ThreadPool* pool);

// AveragePool (1-3 spatial dims, dilations): the mean of the window's
// elements inside the input, or, with count_include_pad, divided by the
// number of window positions inside the padded extent (pad_begin / pad_end).
// Sums in double.
void average_pool(const PoolShape& s, bool count_include_pad, const float* x, float* y, ThreadPool* pool);

// y[n][c] = mean over the `spatial` elements of x[n][c][...].
void global_average_pool(int64_t planes, int64_t spatial, const float* x, float* y, ThreadPool* pool);

// y[n][c] = max over the `spatial` elements of x[n][c][...]; NaN if any is NaN
// (-inf when spatial is 0).
void global_max_pool(int64_t planes, int64_t spatial, const float* x, float* y, ThreadPool* pool);

}  // namespace nxrt::cpu
