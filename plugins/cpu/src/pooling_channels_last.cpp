// max_pool_channels_last (pooling.hpp): per output pixel the max of its window's pixels, all
// channels a vector (64 a block), then 16 pixels a byte transpose into y's planes. After the
// channels-last 8-bit stem conv this replaces the conv's own transposes of its 4x larger output
// and a pool over NCHW planes.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <type_traits>

#include "cpu_info.hpp"
#include "pooling.hpp"
#include "scratch.hpp"

#if defined(__x86_64__)
// GCC 12's AVX-512 headers pass an "undefined" vector to the masked builtins.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "transpose_bytes_avx512.hpp"

namespace nxrt::cpu {
namespace {

#define NXRT_PCL __attribute__((target("avx512f,avx512bw,avx512vl")))

template <typename T>
NXRT_PCL inline __m512i vmax(__m512i a, __m512i b) {
  return std::is_same_v<T, uint8_t> ? _mm512_max_epu8(a, b) : _mm512_max_epi8(a, b);
}

// Output rows [oh0, oh1) of image xn (channels-last, C channels) into its planes yn, per block
// of 64 channels: per output row, the max over its window's input rows of each input column (a
// vector of the block's channels, into cols: one pass per row, loads in order), then per
// output pixel the max of its window's columns; 16 pixels a transpose. The geometry in locals:
// the byte stores may alias the shape, which the compiler would then read again every step.
template <typename T>
NXRT_PCL void pool_rows(const PoolShape& s, const T* xn, T* yn, int64_t oh0, int64_t oh1, uint8_t* cols) {
  const int64_t C = s.channels, IH = s.in[1], IW = s.in[2], OW = s.out[2], plane = s.out[1] * OW;
  const int64_t KH = s.kernel[1], KW = s.kernel[2], SH = s.stride[1], SW = s.stride[2];
  const int64_t DH = s.dilation[1], DW = s.dilation[2], PT = s.pad_begin[1], PL = s.pad_begin[2];
  const __m512i lowest = _mm512_set1_epi8(char(std::numeric_limits<T>::lowest()));
  alignas(64) uint8_t rows[16][64];
  for (int64_t c0 = 0; c0 < C; c0 += 64) {
    const int nv = int(std::min<int64_t>(4, (C - c0) / 16));
    const __mmask64 m = nv == 4 ? ~__mmask64(0) : (__mmask64(1) << (16 * nv)) - 1;
    for (int64_t oh = oh0; oh < oh1; ++oh) {
      bool first = true;
      for (int64_t kh = 0; kh < KH; ++kh) {
        const int64_t ih = oh * SH - PT + kh * DH;
        if (ih < 0 || ih >= IH) continue;
        const T* row = xn + ih * IW * C + c0;
        for (int64_t iw = 0; iw < IW; ++iw) {
          const __m512i v = _mm512_maskz_loadu_epi8(m, row + iw * C);
          uint8_t* d = cols + iw * 64;
          _mm512_store_si512(d, first ? v : vmax<T>(v, _mm512_load_si512(d)));
        }
        first = false;
      }
      if (first)  // no input row in the window: the lowest value, as max_pool gives
        for (int64_t iw = 0; iw < IW; ++iw) _mm512_store_si512(cols + iw * 64, lowest);
      for (int64_t ow0 = 0; ow0 < OW; ow0 += 16) {
        const int64_t n = std::min<int64_t>(16, OW - ow0);
        for (int64_t i = 0; i < n; ++i) {
          __m512i v = lowest;
          const int64_t iw0 = (ow0 + i) * SW - PL;
          for (int64_t kw = 0; kw < KW; ++kw) {
            const int64_t iw = iw0 + kw * DW;
            if (iw >= 0 && iw < IW) v = vmax<T>(v, _mm512_load_si512(cols + iw * 64));
          }
          _mm512_store_si512(rows[i], v);
        }
        avx512::store_pixels_transposed(rows[0], 64, n, nv, reinterpret_cast<char*>(yn + c0 * plane + oh * OW + ow0),
                                        plane);
      }
    }
  }
}

}  // namespace

bool max_pool_channels_last_ok(const PoolShape& s) {
  return avx512bw_active() && s.spatial == 2 && s.in[0] == 1 && s.out[0] == 1 && s.kernel[0] == 1 && s.channels % 16 == 0;
}

template <typename T>
void max_pool_channels_last(const PoolShape& s, const T* x, T* y, ThreadPool* pool) {
  static_assert(sizeof(T) == 1);
  if (!max_pool_channels_last_ok(s)) throw std::logic_error("max_pool_channels_last: not for this shape or CPU");
  const int64_t plane = s.out[1] * s.out[2], in_plane = s.in[1] * s.in[2], OH = s.out[1];
  const double work = double(s.batch * plane) * double(s.channels) * double(s.kernel[1] * s.kernel[2]) / 16.0;
  const int t = threads_for(pool, work);
  // Each thread a range of output rows of an image.
  const int64_t per = std::min<int64_t>(OH, t), tasks = s.batch * per;
  parallel_for(t <= 1 ? nullptr : pool, tasks, [&](int64_t i) {
    const int64_t n = i / per;
    int64_t r0, r1;
    split_range(OH, per, i % per, r0, r1);
    uint8_t* cols = reinterpret_cast<uint8_t*>(scratch_floats(kScratchA, size_t(s.in[2] * 16)));  // 64 bytes a column
    pool_rows(s, x + n * in_plane * s.channels, y + n * plane * s.channels, r0, r1, cols);
  });
}

template void max_pool_channels_last<uint8_t>(const PoolShape&, const uint8_t*, uint8_t*, ThreadPool*);
template void max_pool_channels_last<int8_t>(const PoolShape&, const int8_t*, int8_t*, ThreadPool*);

}  // namespace nxrt::cpu

#else
namespace nxrt::cpu {
bool max_pool_channels_last_ok(const PoolShape&) { return false; }
template <typename T>
void max_pool_channels_last(const PoolShape&, const T*, T*, ThreadPool*) {
  throw std::logic_error("max_pool_channels_last: not for this CPU");
}
template void max_pool_channels_last<uint8_t>(const PoolShape&, const uint8_t*, uint8_t*, ThreadPool*);
template void max_pool_channels_last<int8_t>(const PoolShape&, const int8_t*, int8_t*, ThreadPool*);
}  // namespace nxrt::cpu
#endif
