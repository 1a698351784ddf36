// AVX-512 VNNI kernel of the 8-bit GEMM (gemm_int8.hpp): vpdpwssd multiplies the int16 pairs
// and adds them to the int32 accumulator in one instruction (wrapping, not the saturating
// vpdpwssds), 16 columns (a whole panel) per zmm. One call computes kQTileGroup row tiles
// against the same B slice (6 accumulators each), so every B vector loaded feeds 6 x
// kQTileGroup multiply-adds and the A pairs come as embedded broadcasts. Target attribute;
// used only when CPUID reports AVX-512 F/BW and VNNI and the ISA is not capped below avx512.
#include <algorithm>

#include "cpu_info.hpp"
#include "gemm_int8.hpp"
#include "q_store_fast_avx512.hpp"
#include "simd.hpp"

#if defined(__x86_64__)
// GCC 12's AVX-512 headers pass an "undefined" vector to the masked builtins behind the
// 512 -> 256 casts, which -Wmaybe-uninitialized reports at every use.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

namespace nxrt::cpu {
namespace {

#define NXRT_VNNI __attribute__((target("avx512f,avx512bw,avx512vnni")))

template <int NT>
NXRT_VNNI void tiles_vnni(int64_t kcp, const uint32_t* a, int64_t a_next, const uint32_t* b, int32_t* const* acc,
                          bool load) {
  __m512i c[NT][kQMR];
#pragma GCC unroll 3
  for (int t = 0; t < NT; ++t)
#pragma GCC unroll 6
    for (int m = 0; m < kQMR; ++m) c[t][m] = load ? _mm512_loadu_si512(acc[t] + m * kQNR) : _mm512_setzero_si512();
  // One pointer per tile, so each broadcast is a constant offset from it.
  const uint32_t* at[NT];
  for (int t = 0; t < NT; ++t) at[t] = a + t * a_next;
  for (int64_t k = 0; k < kcp; ++k) {
    _mm_prefetch(reinterpret_cast<const char*>(b + 8 * kQNR), _MM_HINT_T0);
    const __m512i bv = _mm512_load_si512(b);
#pragma GCC unroll 3
    for (int t = 0; t < NT; ++t) {
#pragma GCC unroll 6
      for (int m = 0; m < kQMR; ++m) c[t][m] = _mm512_dpwssd_epi32(c[t][m], _mm512_set1_epi32(int(at[t][m])), bv);
      at[t] += kQMR;
    }
    b += kQNR;
  }
#pragma GCC unroll 3
  for (int t = 0; t < NT; ++t)
#pragma GCC unroll 6
    for (int m = 0; m < kQMR; ++m) _mm512_storeu_si512(acc[t] + m * kQNR, c[t][m]);
}

void tile_vnni(int64_t kcp, const uint32_t* a, const uint32_t* b, int32_t* acc, bool load) {
  int32_t* const accs[1] = {acc};
  tiles_vnni<1>(kcp, a, 0, b, accs, load);
}

#define NXRT_BW __attribute__((target("avx512f,avx512bw,avx512vl")))

// Each run's columns by a masked load (masked-off lanes are not read): 16 lanes at stride 1;
// at stride 2 the even lanes of 32, compressed by a word permute.
NXRT_BW void pack_runs_avx512(const int16_t* base, const int64_t* koff, int64_t K, const QPanelRuns& runs, int64_t k0,
                              int64_t kc, uint32_t* dst) {
  const bool s2 = runs.stride == 2;
  __mmask32 mask[kQNR];
  int64_t at[kQNR];
  q_run_masks(runs, mask, at);
  const __m512i evens = _mm512_set_epi16(62, 60, 58, 56, 54, 52, 50, 48, 46, 44, 42, 40, 38, 36, 34, 32, 30, 28, 26, 24,
                                         22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  for (int64_t i = 0; i < kc; ++i) {
    const int64_t ka = 2 * (k0 + i);
    const int16_t* r0 = base + koff[ka];
    const int16_t* r1 = ka + 1 < K ? base + koff[ka + 1] : nullptr;
    __m256i v0, v1;
    if (!s2) {
      v0 = v1 = _mm256_setzero_si256();
      for (int r = 0; r < runs.n; ++r) {
        v0 = _mm256_or_si256(v0, _mm256_maskz_loadu_epi16(__mmask16(mask[r]), r0 + at[r]));
        if (r1) v1 = _mm256_or_si256(v1, _mm256_maskz_loadu_epi16(__mmask16(mask[r]), r1 + at[r]));
      }
    } else {
      __m512i w0 = _mm512_setzero_si512(), w1 = _mm512_setzero_si512();
      for (int r = 0; r < runs.n; ++r) {
        w0 = _mm512_or_si512(w0, _mm512_maskz_loadu_epi16(mask[r], r0 + at[r]));
        if (r1) w1 = _mm512_or_si512(w1, _mm512_maskz_loadu_epi16(mask[r], r1 + at[r]));
      }
      v0 = _mm512_castsi512_si256(_mm512_permutexvar_epi16(evens, w0));
      v1 = _mm512_castsi512_si256(_mm512_permutexvar_epi16(evens, w1));
    }
    avx2_store_int16_pairs(v0, v1, dst + i * kQNR);
  }
}

template <bool SIGNED>
NXRT_BW inline __m256i widen_minus(__m128i b, __mmask16 valid, __m256i z) {
  return _mm256_maskz_sub_epi16(valid, SIGNED ? _mm256_cvtepi8_epi16(b) : _mm256_cvtepu8_epi16(b), z);
}

// 8-bit x in place (stride 1): masked byte loads, widened, minus the zero point on the
// columns the runs cover (the others stay 0).
template <bool SIGNED>
NXRT_BW void pack_runs8_avx512(const void* base_v, int32_t zp, const int64_t* koff, int64_t K, const QPanelRuns& runs,
                               int64_t k0, int64_t kc, uint32_t* dst) {
  const char* base = static_cast<const char*>(base_v);
  __mmask16 mask[kQNR];
  int64_t at[kQNR];
  for (int r = 0; r < runs.n; ++r) {
    mask[r] = __mmask16(((1u << (runs.col[r + 1] - runs.col[r])) - 1u) << runs.col[r]);
    at[r] = runs.off[r] - runs.col[r];
  }
  const __mmask16 valid = __mmask16((1u << runs.col[runs.n]) - 1u);
  const __m256i z = _mm256_set1_epi16(int16_t(zp));
  for (int64_t i = 0; i < kc; ++i) {
    const int64_t ka = 2 * (k0 + i);
    const char* r0 = base + koff[ka];
    const char* r1 = ka + 1 < K ? base + koff[ka + 1] : nullptr;
    __m128i b0 = _mm_setzero_si128(), b1 = _mm_setzero_si128();
    for (int r = 0; r < runs.n; ++r) {
      b0 = _mm_or_si128(b0, _mm_maskz_loadu_epi8(mask[r], r0 + at[r]));
      if (r1) b1 = _mm_or_si128(b1, _mm_maskz_loadu_epi8(mask[r], r1 + at[r]));
    }
    avx2_store_int16_pairs(widen_minus<SIGNED>(b0, valid, z), r1 ? widen_minus<SIGNED>(b1, valid, z) : _mm256_setzero_si256(),
                dst + i * kQNR);
  }
}

NXRT_BW void pack_runs8_dispatch(const void* base, bool is_signed, int32_t zp, const int64_t* koff, int64_t K,
                                 const QPanelRuns& runs, int64_t k0, int64_t kc, uint32_t* dst) {
  if (is_signed) pack_runs8_avx512<true>(base, zp, koff, K, runs, k0, kc, dst);
  else pack_runs8_avx512<false>(base, zp, koff, K, runs, k0, kc, dst);
}

#define NXRT_AVX512_STORE __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl")))

// round_half_even(d) + zp, saturated to [qlo, qhi], then clamped to [lo, hi] (integers in double).
NXRT_AVX512_STORE inline __m512d requant16(__m512d d, __m512d zp, __m512d qlo, __m512d qhi, __m512d lo, __m512d hi) {
  d = _mm512_add_pd(_mm512_roundscale_pd(d, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), zp);
  d = _mm512_min_pd(_mm512_max_pd(d, qlo), qhi);
  return _mm512_min_pd(_mm512_max_pd(d, lo), hi);
}

// The QOutput store of the AVX2 version (gemm_int8_avx2.cpp), one 16-column tile row per
// vector: the same operations in the same order and precision, masked tails.
// `panels` blocks of 16 columns (block j's rows at acc + j * kQMR * kQNR, the last one `cols`
// wide) per row, so the row's constants are set once for all of them (by_row only when
// panels > 1: the channel is the row).
// KEPT: panel j's columns filtered by keep[j], the first kept one written to column col_at[j]
// (q_store_kept_avx512; by_row, `cols` unused).
// FAST: the float shortcut's instantiation (the epilogue has one, `fast_m`), the exact path kept
// for the vectors with a lane inside its margin; the loop then holds no test of the epilogue's kind.
template <bool KEPT, bool FAST>
NXRT_AVX512_STORE inline void store_panels_impl(const QEpilogue& e, const int32_t* acc, int64_t r0, int64_t r1,
                                                int64_t panels, int64_t cols, bool by_row, int64_t ch0, void* y,
                                                int64_t ldy, const uint16_t* keep, const int64_t* col_at,
                                                int64_t tile_stride) {
  const __mmask16 m_last = cols >= 16 ? __mmask16(0xffff) : __mmask16((1u << cols) - 1u);
  const bool has_bias = !e.bias.empty(), fb = !e.float_bias.empty(), sc = e.type != QType::I32;
  __m512i bias = _mm512_setzero_si512();
  __m512d s_lo = _mm512_setzero_pd(), s_hi = _mm512_setzero_pd();
  __m512 fbias = _mm512_setzero_ps();
  if (!by_row) {  // channels along the columns (one panel): loaded once, masked to its columns
    if (has_bias) bias = _mm512_maskz_loadu_epi32(m_last, e.bias.data() + ch0);
    if (sc) {
      s_lo = _mm512_maskz_loadu_pd(__mmask8(m_last), e.scale.data() + ch0);
      s_hi = _mm512_maskz_loadu_pd(__mmask8(m_last >> 8), e.scale.data() + ch0 + 8);
    }
    if (fb) fbias = _mm512_maskz_loadu_ps(m_last, e.float_bias.data() + ch0);
  }
  const bool u8 = e.type == QType::U8;
  const __m512d zp = _mm512_set1_pd(double(e.zero_point));
  const __m512d qlo = _mm512_set1_pd(u8 ? 0.0 : -128.0), qhi = _mm512_set1_pd(u8 ? 255.0 : 127.0);
  const __m512d lo = _mm512_set1_pd(double(e.lo)), hi = _mm512_set1_pd(double(e.hi));
  const double lo2 = std::max(u8 ? 0.0 : -128.0, double(e.lo)), hi2 = std::min(u8 ? 255.0 : 127.0, double(e.hi));
  const bool one_clamp = lo2 <= hi2;
  // clamp(round(d) + zp, lo2, hi2) = round(clamp(d, lo2 - zp, hi2 - zp)) + zp for integer
  // bounds (round is monotonic and keeps integers), and vcvtpd2dq rounds half to even.
  const __m512d qlo2 = _mm512_set1_pd(lo2 - double(e.zero_point)), qhi2 = _mm512_set1_pd(hi2 - double(e.zero_point));
  const __m512i zpi = _mm512_set1_epi32(e.zero_point);
  const __m512 flo = _mm512_set1_ps(e.flo), fhi = _mm512_set1_ps(e.fhi);
  const bool fq = e.type != QType::F32 && e.q_scale > 0.f;  // the float value, then QuantizeLinear
  const __m512 qs = _mm512_set1_ps(fq ? e.q_scale : 1.f), fzp = _mm512_set1_ps(float(e.zero_point));
  const __m512 fqlo = _mm512_set1_ps(u8 ? 0.f : -128.f), fqhi = _mm512_set1_ps(u8 ? 255.f : 127.f);
  // The float shortcut (q_fast_path): per channel m, b and the margin, the clamp before
  // rounding (which holds the integer clamp after it unless fast_two_clamps), in float
  // (integers of at most 400 + |zero point|: exact).
  __m512 fm = _mm512_setzero_ps(), fbq = _mm512_setzero_ps(), flim = _mm512_setzero_ps();
  if (FAST && !by_row) {
    fm = _mm512_maskz_loadu_ps(m_last, e.fast_m.data() + ch0);
    fbq = _mm512_maskz_loadu_ps(m_last, e.fast_b.data() + ch0);
    flim = _mm512_maskz_loadu_ps(m_last, e.fast_lim.data() + ch0);
  }
  const QFastConsts fast_k = FAST ? q_fast_consts(e) : QFastConsts{};
  __mmask16 kept[kQWide] = {};
  bool packs[kQWide] = {};
  int64_t lane0_at[kQWide] = {};  // where lane 0 goes (after the packing, if any)
  if constexpr (KEPT)
    for (int64_t j = 0; j < panels; ++j) {
      const uint32_t k = keep[j];
      packs[j] = ((k + (k & (0u - k))) & k) != 0;  // not one run of bits
      kept[j] = packs[j] ? __mmask16((1u << __builtin_popcount(k)) - 1u) : __mmask16(k);
      lane0_at[j] = packs[j] || !k ? col_at[j] : col_at[j] - __builtin_ctz(k);
    }
  for (int64_t r = r0; r < r1; ++r) {
    if (by_row) {
      const size_t c = size_t(ch0 + r - r0);
      if (has_bias) bias = _mm512_set1_epi32(e.bias[c]);
      if (sc) s_lo = s_hi = _mm512_set1_pd(e.scale[c]);
      if (fb) fbias = _mm512_set1_ps(e.float_bias[c]);
      if (FAST) {
        fm = _mm512_set1_ps(e.fast_m[c]);
        fbq = _mm512_set1_ps(e.fast_b[c]);
        flim = _mm512_set1_ps(e.fast_lim[c]);
      }
    }
    for (int64_t j = 0; j < panels; ++j) {
      __mmask16 m = j + 1 < panels ? __mmask16(0xffff) : m_last;
      // Row r of the tile r / kQMR (rows of several tiles: tile_stride apart).
      __m512i v = _mm512_loadu_si512(acc + (r / kQMR) * tile_stride + j * kQMR * kQNR + (r % kQMR) * kQNR);
      int64_t at = (r - r0) * ldy + 16 * j;
      if constexpr (KEPT) {
        m = kept[j];
        at = (r - r0) * ldy + lane0_at[j];
        // Every step below works lane by lane: pack the kept lanes first where they have a gap.
        if (packs[j]) v = _mm512_maskz_compress_epi32(keep[j], v);
      }
      // The bias add wraps as the scalar one.
      v = _mm512_add_epi32(v, bias);
      if (!FAST && e.type == QType::I32) {  // FAST: 8-bit outputs only
        _mm512_mask_storeu_epi32(static_cast<int32_t*>(y) + at, m, v);
        continue;
      }
      if constexpr (FAST) {
        // Every lane clear of the half-integers by the margin: the exact path rounds it the same way.
        __m128i b;
        if (q_fast_bytes(fast_k, v, fm, fbq, flim, m, b)) [[likely]] {
          if (m == 0xffff) _mm_storeu_si128(reinterpret_cast<__m128i*>(static_cast<char*>(y) + at), b);
          else _mm_mask_storeu_epi8(static_cast<char*>(y) + at, m, b);
          continue;
        }
      }
      const __m512d dlo = _mm512_mul_pd(_mm512_cvtepi32_pd(_mm512_castsi512_si256(v)), s_lo);
      const __m512d dhi = _mm512_mul_pd(_mm512_cvtepi32_pd(_mm512_extracti64x4_epi64(v, 1)), s_hi);
      if (e.type == QType::F32 || fq) {
        __m512 f = _mm512_insertf32x8(_mm512_castps256_ps512(_mm512_cvtpd_ps(dlo)), _mm512_cvtpd_ps(dhi), 1);
        if (fb) f = _mm512_add_ps(f, fbias);
        f = _mm512_min_ps(fhi, _mm512_max_ps(flo, f));  // NaN stays: max/min return the second operand
        if (!fq) {
          _mm512_mask_storeu_ps(static_cast<float*>(y) + at, m, f);
          continue;
        }
        // QuantizeLinear: true division, nearest even, + zp, saturation (max gives the lowest for NaN).
        __m512 r = _mm512_roundscale_ps(_mm512_div_ps(f, qs), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        r = _mm512_min_ps(_mm512_max_ps(_mm512_add_ps(r, fzp), fqlo), fqhi);
        store_low_bytes(static_cast<char*>(y) + at, m, _mm512_cvtps_epi32(r));
        continue;
      }
      __m512i q;
      if (one_clamp) {  // [qlo, qhi] and [lo, hi] overlap: clamping to their intersection is the same
        const __m256i qa = _mm512_cvtpd_epi32(_mm512_min_pd(_mm512_max_pd(dlo, qlo2), qhi2));
        const __m256i qb = _mm512_cvtpd_epi32(_mm512_min_pd(_mm512_max_pd(dhi, qlo2), qhi2));
        q = _mm512_add_epi32(_mm512_inserti64x4(_mm512_castsi256_si512(qa), qb, 1), zpi);
      } else {
        const __m256i qa = _mm512_cvtpd_epi32(requant16(dlo, zp, qlo, qhi, lo, hi));
        const __m256i qb = _mm512_cvtpd_epi32(requant16(dhi, zp, qlo, qhi, lo, hi));
        q = _mm512_inserti64x4(_mm512_castsi256_si512(qa), qb, 1);
      }
      // vpmovdb keeps the low byte of each int32, as the scalar cast to Q.
      store_low_bytes(static_cast<char*>(y) + at, m, q);
    }
  }
}

// The shortcut's instantiation where q_fast_path set it up, else the exact one.
template <bool KEPT>
NXRT_AVX512_STORE inline void store_dispatch(const QEpilogue& e, const int32_t* acc, int64_t r0, int64_t r1,
                                             int64_t panels, int64_t cols, bool by_row, int64_t ch0, void* y,
                                             int64_t ldy, const uint16_t* keep, const int64_t* col_at,
                                             int64_t tile_stride) {
  if (!e.fast_m.empty())
    store_panels_impl<KEPT, true>(e, acc, r0, r1, panels, cols, by_row, ch0, y, ldy, keep, col_at, tile_stride);
  else
    store_panels_impl<KEPT, false>(e, acc, r0, r1, panels, cols, by_row, ch0, y, ldy, keep, col_at, tile_stride);
}

NXRT_AVX512_STORE void store_panels(const QEpilogue& e, const int32_t* acc, int64_t tile_stride, int64_t r0,
                                    int64_t r1, int64_t panels, int64_t cols, bool by_row, int64_t ch0, void* y,
                                    int64_t ldy) {
  store_dispatch<false>(e, acc, r0, r1, panels, cols, by_row, ch0, y, ldy, nullptr, nullptr, tile_stride);
}

NXRT_AVX512_STORE void store_kept(const QEpilogue& e, const int32_t* acc, int64_t tile_stride, int64_t r0, int64_t r1,
                                  int64_t panels, const uint16_t* keep, const int64_t* col_at, int64_t ch0, void* y,
                                  int64_t ldy) {
  store_dispatch<true>(e, acc, r0, r1, panels, kQNR, true, ch0, y, ldy, keep, col_at, tile_stride);
}

NXRT_AVX512_STORE void store_avx512(const QEpilogue& e, const int32_t* acc, int64_t r0, int64_t r1, int64_t cols,
                                    bool by_row, int64_t ch0, void* y, int64_t ldy) {
  store_panels(e, acc, 0, r0, r1, 1, cols, by_row, ch0, y, ldy);
}

// The CPU's extensions, read once (some getters are called per tile group).
bool has_bw() {
  static const bool ok = cpu_info().avx512bw;
  return ok;
}
bool has_bw_vnni() {
  static const bool ok = cpu_info().avx512bw && cpu_info().avx512vnni;
  return ok;
}

}  // namespace

QStoreFn q_store_avx512() { return has_bw() ? &store_avx512 : nullptr; }

QStorePanelsFn q_store_panels_avx512() { return q_store_avx512() ? &store_panels : nullptr; }
QStoreKeptFn q_store_kept_avx512() { return q_store_avx512() ? &store_kept : nullptr; }

QPackRunsFn q_pack_runs_avx512() { return has_bw() ? &pack_runs_avx512 : nullptr; }
QPackRuns8Fn q_pack_runs8_avx512() { return has_bw() ? &pack_runs8_dispatch : nullptr; }

QTileFn q_tile_vnni() { return has_bw_vnni() ? &tile_vnni : nullptr; }
QTileGroupFn q_tile_group_vnni(int nt) {
  static constexpr QTileGroupFn by_count[] = {nullptr, &tiles_vnni<1>, &tiles_vnni<2>, &tiles_vnni<3>};
  static_assert(kQTileGroup == 3);
  return has_bw_vnni() ? by_count[nt] : nullptr;
}

}  // namespace nxrt::cpu

#else
namespace nxrt::cpu {
QTileFn q_tile_vnni() { return nullptr; }
QTileGroupFn q_tile_group_vnni(int) { return nullptr; }
QPackRunsFn q_pack_runs_avx512() { return nullptr; }
QPackRuns8Fn q_pack_runs8_avx512() { return nullptr; }
QStoreFn q_store_avx512() { return nullptr; }
QStorePanelsFn q_store_panels_avx512() { return nullptr; }
QStoreKeptFn q_store_kept_avx512() { return nullptr; }
}  // namespace nxrt::cpu
#endif
