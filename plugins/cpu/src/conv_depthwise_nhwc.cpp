// The channels-last depthwise kernel's choice (conv_depthwise.hpp: dw_nhwc_ok, dw_nhwc_rows):
// AVX-512's 16 channels a vector, else AVX2's 8 (conv_depthwise_nhwc_avx512.cpp / _avx2.cpp).
#include "conv_depthwise.hpp"
#include "cpu_info.hpp"

namespace nxrt::cpu {

bool dw_nhwc_ok(const ConvShape& s) {
#if defined(__x86_64__)
  const Isa isa = active_isa();
  return (isa == Isa::avx512 || isa == Isa::avx2) && s.group == s.in_c && s.out_c == s.in_c && s.k_h == s.k_w &&
         (s.k_h == 3 || s.k_h == 5) && s.dil_h == 1 && s.dil_w == 1 && s.stride_h == s.stride_w &&
         (s.stride_w == 1 || s.stride_w == 2) && s.pad_left <= s.k_w / 2 + 1 && s.out_w > 0;
#else
  (void)s;
  return false;
#endif
}

void dw_nhwc_rows(const ConvShape& s, const float* const* rows, int64_t cs, const float* wt, const float* bias,
                  float* out, int64_t out_rows, const ConvPostOps& post) {
#if defined(__x86_64__)
  if (active_isa() == Isa::avx512) dw_nhwc_rows_avx512(s, rows, cs, wt, bias, out, out_rows, post);
  else dw_nhwc_rows_avx2(s, rows, cs, wt, bias, out, out_rows, post);
#else
  (void)s, (void)rows, (void)cs, (void)wt, (void)bias, (void)out, (void)out_rows, (void)post;
#endif
}

}  // namespace nxrt::cpu
