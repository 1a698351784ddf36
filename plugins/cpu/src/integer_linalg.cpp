#include "integer_linalg.hpp"

#include <algorithm>

namespace nxrt::cpu {

template <typename TA, typename TB>
void gemm_integer(int64_t M, int64_t N, int64_t K, const TA* a, const int32_t* a_zp, const TB* b, const int32_t* b_zp,
                  int32_t* c, ThreadPool* pool) {
  const int parts = threads_for(pool, double(M) * double(N) * double(K), 65536.0);
  parallel_ranges(pool, M, parts, [&](int64_t m0, int64_t m1) {
    for (int64_t m = m0; m < m1; ++m) {
      uint32_t* row = reinterpret_cast<uint32_t*>(c + m * N);  // unsigned: wrapping sums without UB
      std::fill(row, row + N, 0u);
      for (int64_t k = 0; k < K; ++k) {
        const uint32_t av = uint32_t(int32_t(a[m * K + k]) - a_zp[m]);
        const TB* brow = b + k * N;
        for (int64_t n = 0; n < N; ++n) row[n] += av * uint32_t(int32_t(brow[n]) - b_zp[n]);
      }
    }
  });
}

template <typename TX, typename TW>
void conv_integer(const ConvShape& s, const TX* x, int32_t x_zp, const TW* w, const int32_t* w_zp, int32_t* y,
                  ThreadPool* pool) {
  const int64_t icg = s.icg(), ocg = s.ocg(), out_plane = s.out_h * s.out_w, in_plane = s.in_h * s.in_w;
  const int64_t tasks = s.batch * s.out_c;
  const int parts = threads_for(pool, double(tasks) * double(out_plane) * double(s.gemm_k()), 65536.0);
  parallel_ranges(pool, tasks, parts, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t n = t / s.out_c, oc = t % s.out_c, g = oc / ocg;
      const TW* wk = w + oc * s.gemm_k();
      uint32_t* yp = reinterpret_cast<uint32_t*>(y + t * out_plane);
      for (int64_t oh = 0; oh < s.out_h; ++oh)
        for (int64_t ow = 0; ow < s.out_w; ++ow) {
          uint32_t acc = 0;
          for (int64_t ic = 0; ic < icg; ++ic) {
            const TX* xp = x + (n * s.in_c + g * icg + ic) * in_plane;
            for (int64_t kh = 0; kh < s.k_h; ++kh) {
              const int64_t ih = oh * s.stride_h - s.pad_top + kh * s.dil_h;
              if (ih < 0 || ih >= s.in_h) continue;
              for (int64_t kw = 0; kw < s.k_w; ++kw) {
                const int64_t iw = ow * s.stride_w - s.pad_left + kw * s.dil_w;
                if (iw < 0 || iw >= s.in_w) continue;
                const int32_t xv = int32_t(xp[ih * s.in_w + iw]) - x_zp;
                const int32_t wv = int32_t(wk[(ic * s.k_h + kh) * s.k_w + kw]) - w_zp[oc];
                acc += uint32_t(xv) * uint32_t(wv);
              }
            }
          }
          yp[oh * s.out_w + ow] = acc;
        }
    }
  });
}

#define NXRT_INT_LINALG(TA, TB)                                                                                      \
  template void gemm_integer<TA, TB>(int64_t, int64_t, int64_t, const TA*, const int32_t*, const TB*, const int32_t*, \
                                     int32_t*, ThreadPool*);                                                          \
  template void conv_integer<TA, TB>(const ConvShape&, const TA*, int32_t, const TB*, const int32_t*, int32_t*, ThreadPool*);
NXRT_INT_LINALG(uint8_t, uint8_t)
NXRT_INT_LINALG(uint8_t, int8_t)
NXRT_INT_LINALG(int8_t, uint8_t)
NXRT_INT_LINALG(int8_t, int8_t)
#undef NXRT_INT_LINALG

}  // namespace nxrt::cpu
