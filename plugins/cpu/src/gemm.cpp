#include "gemm.hpp"

#include <cassert>

#include <algorithm>
#include <cstring>

#include "cpu_info.hpp"
#include "gemm_bf16.hpp"
#include "hard_swish.hpp"
#include "scratch.hpp"

namespace nxrt::cpu {

// pack_a's 8-row tile and pack_b's transposed 8 columns, by 8 x 8 register transposes.
static GemmPackAFn pack8_vector() {
  static const GemmPackAFn fn = active_isa() != Isa::generic ? gemm_pack_a_avx2() : nullptr;
  return fn;
}

// Tiles [t0, t1) of pack_a.
static void pack_a_tiles(const float* a, int64_t lda, bool trans, int64_t M, int64_t K, float alpha, float* dst,
                         int64_t t0, int64_t t1) {
  const GemmPackAFn vec = pack8_vector();
  for (int64_t t = t0; t < t1; ++t) {
    float* d = dst + t * kGemmMR * K;
    const int64_t m0 = t * kGemmMR, mr = std::min<int64_t>(kGemmMR, M - m0);
    if (!trans && vec) {
      vec(a + m0 * lda, lda, mr, K, alpha, d, kGemmMR);
      continue;
    }
    if (!trans) {
      for (int64_t m = 0; m < mr; ++m) {
        const float* src = a + (m0 + m) * lda;
        for (int64_t k = 0; k < K; ++k) d[k * kGemmMR + m] = alpha * src[k];
      }
    } else {
      for (int64_t k = 0; k < K; ++k) {
        const float* src = a + k * lda + m0;
        for (int64_t m = 0; m < mr; ++m) d[k * kGemmMR + m] = alpha * src[m];
      }
    }
    for (int64_t m = mr; m < kGemmMR; ++m)
      for (int64_t k = 0; k < K; ++k) d[k * kGemmMR + m] = 0.f;
  }
}

void pack_a(const float* a, int64_t lda, bool trans, int64_t M, int64_t K, float alpha, float* dst) {
  pack_a_tiles(a, lda, trans, M, K, alpha, dst, 0, gemm_tiles(M));
}

void pack_a_parallel(const float* a, int64_t lda, bool trans, int64_t M, int64_t K, float alpha, float* dst,
                     ThreadPool* pool) {
  const int64_t tiles = gemm_tiles(M);
  // A copy, bound by memory: worth a second thread from ~32K floats (a 128 x 768
  // activation: ~10 us of the ~0.5 ms its GEMM takes on 2 threads).
  parallel_ranges(pool, tiles, threads_for(pool, double(M) * double(K), 1 << 15),
                  [&](int64_t t0, int64_t t1) { pack_a_tiles(a, lda, trans, M, K, alpha, dst, t0, t1); });
}

void pack_b(const float* b, int64_t ldb, bool trans, int64_t K, int64_t N, float* dst, int64_t p0, int64_t p1) {
  const GemmPackAFn vec = pack8_vector();
  if (p1 < 0) p1 = gemm_panels(N);
  for (int64_t p = p0; p < p1; ++p) {
    const int64_t n0 = p * kGemmNR, w = gemm_panel_width(N, p), cols = std::min(kGemmNR, N - n0);
    float* d = dst + p * kGemmNR * K;
    if (!trans) {
      for (int64_t k = 0; k < K; ++k) {
        const float* src = b + k * ldb + n0;
        float* row = d + k * w;
        std::memcpy(row, src, size_t(cols) * sizeof(float));
        for (int64_t j = cols; j < w; ++j) row[j] = 0.f;
      }
    } else if (vec) {  // 8 columns at a time, transposed in registers (w is a multiple of 16)
      for (int64_t j0 = 0; j0 < w; j0 += 8)
        vec(b + (n0 + j0) * ldb, ldb, std::clamp<int64_t>(cols - j0, 0, 8), K, 1.f, d + j0, w);
    } else {
      for (int64_t j = 0; j < cols; ++j) {
        const float* src = b + (n0 + j) * ldb;
        for (int64_t k = 0; k < K; ++k) d[k * w + j] = src[k];
      }
      for (int64_t k = 0; k < K; ++k)
        for (int64_t j = cols; j < w; ++j) d[k * w + j] = 0.f;
    }
  }
}

void pack_b_parallel(const float* b, int64_t ldb, bool trans, int64_t K, int64_t N, float* dst, ThreadPool* pool) {
  const int64_t panels = gemm_panels(N);
  parallel_ranges(pool, panels, threads_for(pool, double(K) * double(N), 1 << 16),
                  [&](int64_t p0, int64_t p1) { pack_b(b, ldb, trans, K, N, dst, p0, p1); });
}

// ------------------------------------------------------------ generic tile

static void tile_generic(int64_t kc, const float* a, const float* b, int64_t w, int64_t ldb, bool b_unpacked,
                         float* c, int64_t ldc, int64_t mr, int64_t ncols, const GemmTileStore& st) {
  float acc[kGemmMR][kGemmNR];
  for (int64_t m = 0; m < kGemmMR; ++m)
    for (int64_t j = 0; j < kGemmNR; ++j) acc[m][j] = 0.f;
  const int64_t jn = b_unpacked ? ncols : w;
  for (int64_t k = 0; k < kc; ++k) {
    const float* bk = b + k * ldb;
    const float* ak = a + k * kGemmMR;
    for (int64_t m = 0; m < mr; ++m) {
      const float am = ak[m];
      for (int64_t j = 0; j < jn; ++j) acc[m][j] += am * bk[j];
    }
  }
  for (int64_t m = 0; m < mr; ++m) {
    float* cr = c + m * ldc;
    const float rb = st.row_bias ? st.row_bias[m] : 0.f;
    for (int64_t j = 0; j < ncols; ++j) {
      float v = acc[m][j] + rb;
      if (st.col_bias) v += st.col_bias[j];
      if (st.accumulate) v += cr[j];
      if (st.residual) v += st.residual[m * st.ldr + j];
      if (st.clamp) {
        v = v < st.lo ? st.lo : v;
        v = v > st.hi ? st.hi : v;
      }
      if (st.hardswish) v = hard_swish(v);
      cr[j] = v;
    }
  }
}

GemmTileFn gemm_tile_generic() { return &tile_generic; }

GemmTileFn gemm_tile_for(int isa) {
  GemmTileFn f = nullptr;
  if (isa == int(Isa::avx512)) f = gemm_tile_avx512();
  if (isa == int(Isa::avx2)) f = gemm_tile_avx2();
  return f ? f : gemm_tile_generic();
}

const char* gemm_kernel_name_for(int isa) {
  const GemmTileFn f = gemm_tile_for(isa);
  return f == gemm_tile_generic() ? "generic" : f == gemm_tile_avx512() ? "avx512f-8x48" : "avx2-4x24";
}

GemmTileFn gemm_tile_active() {
  static const GemmTileFn fn = gemm_tile_for(int(active_isa()));
  return fn;
}

const char* gemm_kernel_name() { return gemm_kernel_name_for(int(active_isa())); }

// ------------------------------------------------------------- the driver

namespace {

// gemm_pack_a_and_multiply: each thread packs A itself up to this size (see there).
constexpr size_t kPrivateABytes = size_t(2) << 20;

struct Rect {
  int64_t t0, t1, p0, p1;
};

// The store of every row tile of one (column panel at n0, K block): the epilogue's
// column-wise parts, the bias only in the first block, the clamp / HardSwish only in
// the final one. The caller sets the row-wise parts per tile.
GemmTileStore block_store(const GemmEpilogue& ep, int64_t n0, bool first, bool final) {
  GemmTileStore st;
  st.accumulate = ep.accumulate || !first;
  st.col_bias = first && ep.col_bias ? ep.col_bias + n0 : nullptr;
  st.ldr = ep.ldr;
  st.clamp = final && ep.clamp;
  st.hardswish = final && ep.hardswish;
  st.lo = ep.lo;
  st.hi = ep.hi;
  return st;
}

// B is packed (ldb <= 0) or a plain row-major matrix with row stride ldb.
void gemm_rect(int64_t M, int64_t N, int64_t K, const float* pa, const float* pb, int64_t ldb, float* c,
               int64_t ldc, const GemmEpilogue& ep, const Rect& r, GemmTileFn fn) {
  const bool unpacked = ldb > 0;
  const int64_t KC = gemm_kc_for(fn);
  // Packed B slices (KC x 48) are read from memory once, by the first row tile
  // that uses them. The first half of the row tiles of one slice fetch the next
  // slice into L2 in even shares, so that read finds it there and the fetch
  // ends well before (weights larger than the cache: nxrt_cpu_gemm_peak's mlp
  // layers went from ~70% to ~85% of peak on a shared Zen 5).
  const int64_t fetchers = std::max<int64_t>(1, (r.t1 - r.t0) / 2);
  // One panel: every A block is read once (Winograd's U against a few tiles, weights against
  // few pixels), so A is the stream, not B; each tile fetches the block kAheadTiles on (on
  // AVX-512 non-temporally: read once, it need not stay in L2 or L3). Not
  // for an A of under 128 KB: that one stays in L2 for the next call (det_fpn's 64-80
  // channel Winograd layers run their tiles 48 at a time against the same U: 2-6% slower).
  constexpr int64_t kAheadTiles = 2;
  const bool a_streams = r.t1 - r.t0 > kAheadTiles && (r.t1 - r.t0) * kGemmMR * K >= (32 << 10);
  const bool stream_a = r.p1 - r.p0 == 1 && a_streams;
  // B read in place (a 1x1 conv's x) has no slices to fetch: the first panel of each group
  // fetches A ahead instead, the weights' first read (the others find them in L2).
  // MobileNetV3's 480 -> 112 and 672 -> 112 projects @14 in the model: 120 -> 105, 167 -> 147 us.
  const bool stream_a_first = unpacked && a_streams;
  // A last panel of 1..4 columns goes to the narrow kernel (float32 micro-kernels only: its
  // results are theirs bit for bit; bf16 packs A differently).
  static const GemmNarrowFn narrow_fn =
      gemm_tile_active() != gemm_tile_generic() ? gemm_narrow_avx2() : nullptr;
  const GemmNarrowFn narrow = fn == gemm_tile_active() ? narrow_fn : nullptr;
  auto next_slice = [&](int64_t g0, int64_t g1, int64_t k0, int64_t p, int64_t& np, int64_t& nk) {
    if (p + 1 < g1) np = p + 1, nk = k0;
    else if (k0 + KC < K) np = g0, nk = k0 + KC;
    else if (g1 < r.p1) np = g1, nk = 0;
    else return false;
    return true;
  };
  // Panels are taken in groups (NC = kGemmNcPanels * 48 columns) so the C
  // block of a group stays in L2 across the K blocks; within a K block the
  // B panel slice (KC x 48) is reused by every row tile.
  for (int64_t g0 = r.p0; g0 < r.p1; g0 += kGemmNcPanels) {
    const int64_t g1 = std::min(r.p1, g0 + kGemmNcPanels);
    for (int64_t k0 = 0; k0 < K || k0 == 0; k0 += KC) {
      const int64_t kc = std::min(KC, K - k0);
      const bool first = k0 == 0, final = k0 + KC >= K;
      for (int64_t p = g0; p < g1; ++p) {
        const int64_t n0 = p * kGemmNR, w = gemm_panel_width(N, p), cols = std::min(kGemmNR, N - n0);
        const float* bp = unpacked ? pb + k0 * ldb + n0 : pb + n0 * K + k0 * w;
        GemmTileStore st = block_store(ep, n0, first, final);
        int64_t np = 0, nk = 0, lines = 0, share = 0;
        const char* next = nullptr;
        if (!unpacked && !stream_a && next_slice(g0, g1, k0, p, np, nk)) {
          const int64_t nw = gemm_panel_width(N, np);
          lines = std::min(KC, K - nk) * nw / 16;  // 16 floats per line
          share = (lines + fetchers - 1) / fetchers;
          next = reinterpret_cast<const char*>(pb + np * kGemmNR * K + nk * nw);
        }
        if (narrow && cols <= 4) {
          const int64_t m0 = r.t0 * kGemmMR;
          st.row_bias = first && ep.row_bias ? ep.row_bias + m0 : nullptr;
          st.residual = first && ep.residual ? ep.residual + m0 * ep.ldr + n0 : nullptr;
          narrow(kc, pa + m0 * K + k0 * kGemmMR, kGemmMR * K, r.t1 - r.t0, bp, unpacked ? ldb : w, c + m0 * ldc + n0,
                 ldc, std::min(M, r.t1 * kGemmMR) - m0, cols, st);
          continue;
        }
        for (int64_t t = r.t0; t < r.t1; ++t) {
          const int64_t m0 = t * kGemmMR, mr = std::min(kGemmMR, M - m0);
          st.row_bias = first && ep.row_bias ? ep.row_bias + m0 : nullptr;
          st.residual = first && ep.residual ? ep.residual + m0 * ep.ldr + n0 : nullptr;
          if (stream_a || (stream_a_first && p == g0)) {
            int64_t at = t + kAheadTiles, ak = k0;
            if (at >= r.t1) at -= r.t1 - r.t0, ak += KC;
            const bool any = ak < K;
            st.prefetch = any ? reinterpret_cast<const char*>(pa + at * kGemmMR * K + ak * kGemmMR) : nullptr;
            st.prefetch_lines = any ? std::min(KC, K - ak) * kGemmMR / 16 : 0;
            st.prefetch_nta = stream_a;  // one panel: this A block is not read again
          } else {
            const int64_t l0 = std::min(lines, (t - r.t0) * share);
            st.prefetch = next ? next + l0 * 64 : nullptr;
            st.prefetch_lines = std::min(lines - l0, share);
          }
          fn(kc, pa + m0 * K + k0 * kGemmMR, bp, w, unpacked ? ldb : w, unpacked, c + m0 * ldc + n0, ldc, mr, cols,
             st);
        }
      }
      if (K == 0) break;
    }
  }
}

// Thread i's share of a GEMM split into t contiguous panel ranges over all row tiles (packed B
// with at least two panels per thread): each thread streams only its share of B (its slices
// stay in its own L2), its next-slice prefetch chain runs unbroken over the whole range (a
// task edge restarts it cold), and no B panel is read by two threads. The dynamic grid of
// gemm_driver has 4 tasks per thread, each starting on a slice nobody prefetched.
// The ranges are equal in work, not in panels: a panel counts its 16-column vectors times the
// row tiles, and a range may start or end inside a panel (at a row tile). 11 panels on 2
// threads were 6 / 4 2/3 (ResNet-18's 7x7x512 layers: one thread idle 20% of the GEMM); now
// 15.9 / 16.1 vectors x 7 tiles. run(rect) is called for each piece, in order.
template <typename F>
void panel_share(int64_t M, int64_t N, int t, int64_t i, F&& run) {
  const int64_t tiles = gemm_tiles(M), panels = gemm_panels(N);
  const int64_t per_tile_row = (N + 15) / 16, total = per_tile_row * tiles;
  int64_t u0, u1;  // work units: (panel, row tile) pairs weighted by the panel's vectors
  split_range(total, t, i, u0, u1);
  // Walk the panels, cutting at the row tile where the unit range starts / ends.
  int64_t at = 0;
  for (int64_t p = 0; p < panels && at < u1; ++p) {
    const int64_t vec = (gemm_panel_width(N, p) + 15) / 16, span = vec * tiles;
    const int64_t a = std::max(u0, at), b = std::min(u1, at + span);
    if (a < b) {
      // Row tiles [ta, tb) of panel p; rounding to the nearest tile keeps ranges disjoint.
      const int64_t ta = (a - at + vec / 2) / vec, tb = b == at + span ? tiles : (b - at + vec / 2) / vec;
      if (ta < tb) {
        // Whole panels after this one join the rect while it covers all row tiles.
        int64_t q = p + 1, end = at + span;
        if (ta == 0 && tb == tiles)
          while (q < panels) {
            const int64_t qs = (gemm_panel_width(N, q) + 15) / 16 * tiles;
            if (end + qs > u1) break;
            end += qs;
            ++q;
          }
        run(Rect{ta, tb, p, q});
        at = end;
        p = q - 1;
        continue;
      }
    }
    at += span;
  }
}

void gemm_driver(int64_t M, int64_t N, int64_t K, const float* pa, const float* pb, int64_t ldb, float* c,
                 int64_t ldc, const GemmEpilogue& ep, ThreadPool* pool, GemmTileFn fn) {
  if (M <= 0 || N <= 0) return;
  const int64_t tiles = gemm_tiles(M), panels = gemm_panels(N);
  const int t = threads_for(pool, double(M) * double(N) * double(K));
  if (t <= 1) {
    gemm_rect(M, N, K, pa, pb, ldb, c, ldc, ep, Rect{0, tiles, 0, panels}, fn);
    return;
  }
  // Packed B with at least two panels per thread: one contiguous panel range per thread.
  if (ldb <= 0 && panels >= 2 * int64_t(t)) {
    parallel_for(pool, t, [&](int64_t i) {
      panel_share(M, N, t, i, [&](const Rect& r) { gemm_rect(M, N, K, pa, pb, ldb, c, ldc, ep, r, fn); });
    });
    return;
  }
  // Otherwise tasks form a grid over (tiles, panels); several per thread so the
  // dynamic claiming evens out uneven pieces. Prefer splitting N (disjoint B panels).
  const int64_t want = int64_t(t) * 4;
  int64_t tn = std::min(panels, want);
  int64_t tm = std::min(tiles, std::max<int64_t>(1, (want + tn - 1) / tn));
  if (tn * tm < t) tm = std::min(tiles, (int64_t(t) + tn - 1) / tn);
  parallel_for(pool, tn * tm, [&](int64_t i) {
    Rect r;
    split_range(panels, tn, i % tn, r.p0, r.p1);
    split_range(tiles, tm, i / tn, r.t0, r.t1);
    gemm_rect(M, N, K, pa, pb, ldb, c, ldc, ep, r, fn);
  });
}

}  // namespace

void gemm_packed_serial(int64_t M, int64_t N, int64_t K, const float* pa, const float* pb, float* c, int64_t ldc,
                        const GemmEpilogue& ep) {
  if (M <= 0 || N <= 0) return;
  gemm_rect(M, N, K, pa, pb, 0, c, ldc, ep, Rect{0, gemm_tiles(M), 0, gemm_panels(N)}, gemm_tile_active());
}

GemmRowsTileFn gemm_rows_tile_active() {
  static const GemmRowsTileFn fn = active_isa() == Isa::avx512 ? gemm_rows_tile_avx512()
                                   : active_isa() == Isa::avx2 ? gemm_rows_tile_avx2()
                                                               : nullptr;
  return fn;
}

void gemm_rows_serial(int64_t M, int64_t N, int64_t K, const float* pa, const float* const* rows, int64_t col0,
                      float* c, int64_t ldc, const GemmEpilogue& ep) {
  const GemmRowsTileFn fn = gemm_rows_tile_active();
  if (M <= 0 || N <= 0 || !fn) return;
  // K in equal blocks of at most 160 rows: a stem's K = 147 in one pass instead of 128 + 19
  // (each pass stores and reloads C), 288 as 2 x 144. The slice, 160 x 48 floats, stays in
  // L1 with its A tile (7x7 stem and 3x3 / 5x5 convs of 32-64 channels: 1-5% faster than
  // blocks of 128; blocks of up to 192 were 7% slower with 128 output channels).
  constexpr int64_t kMaxKc = 160;
  const int64_t kblocks = std::max<int64_t>(1, (K + kMaxKc - 1) / kMaxKc);
  const int64_t KC = std::max<int64_t>(1, (K + kblocks - 1) / kblocks), tiles = gemm_tiles(M);
  for (int64_t n0 = 0; n0 < N; n0 += kGemmNR) {
    const int64_t cols = std::min(kGemmNR, N - n0);
    for (int64_t k0 = 0; k0 < K || k0 == 0; k0 += KC) {
      const int64_t kc = std::min(KC, K - k0);
      const bool first = k0 == 0, final = k0 + KC >= K;
      GemmTileStore st = block_store(ep, n0, first, final);
      for (int64_t t = 0; t < tiles; ++t) {
        const int64_t m0 = t * kGemmMR;
        st.row_bias = first && ep.row_bias ? ep.row_bias + m0 : nullptr;
        // The next tile's A slice (the next K block's first at the last tile) into L2 as this
        // one runs: with A over L2 every panel reads it from L3 or memory, a tile's
        // slice at a time (a run the hardware prefetcher starts late).
        const int64_t nt = t + 1 < tiles ? t + 1 : 0, nk = t + 1 < tiles ? k0 : k0 + KC;
        st.prefetch = reinterpret_cast<const char*>(pa + nt * kGemmMR * K + nk * kGemmMR);
        st.prefetch_lines = nk < K ? std::min(KC, K - nk) * kGemmMR / 16 : 0;
        fn(kc, pa + m0 * K + k0 * kGemmMR, rows + k0, col0 + n0, c + m0 * ldc + n0, ldc, std::min(kGemmMR, M - m0), cols,
           st);
      }
      if (K == 0) break;
    }
  }
}

GemmPixelsPanelFn gemm_pixels_panel_active() {
  static const GemmPixelsPanelFn fn = active_isa() == Isa::avx512 ? gemm_pixels_panel_avx512()
                                      : active_isa() == Isa::avx2 ? gemm_pixels_panel_avx2()
                                                                  : nullptr;
  return fn;
}

// The pixel-pointer GEMMs' driver: panel p (of `panels`) is at(p) = {first column, width,
// packed B, panel function}; K blocks of <= max_kc, one panel call each.
struct PixelPanel {
  int64_t n0, w;
  const float* b;
  GemmPixelsPanelFn fn;
};
template <typename PanelAt>
static void pixels_serial(int64_t panels, PanelAt&& at, int64_t max_kc, int64_t M, int64_t N, int64_t K,
                          const float* const* arows, const int32_t* aoff, float* c, int64_t ldc,
                          const GemmEpilogue& ep) {
  if (M <= 0 || N <= 0) return;
  const int64_t kblocks = std::max<int64_t>(1, (K + max_kc - 1) / max_kc);
  const int64_t KC = std::max<int64_t>(1, (K + kblocks - 1) / kblocks);
  // Every row tile of a slice fetches a share of the next slice into L2: the weights are read
  // from memory once, a slice at a time. (All tiles rather than gemm_rect's first half: with
  // 7 tiles, ResNet-18's 512-channel 7x7 convs, weights cold, ran 1.26-1.39 -> 1.16-1.20 ms.)
  for (int64_t p = 0; p < panels; ++p) {
    const PixelPanel pp = at(p);
    if (!pp.fn) return;
    const int64_t cols = std::min(pp.w, N - pp.n0);
    for (int64_t k0 = 0; k0 < K || k0 == 0; k0 += KC) {
      const int64_t kc = std::min(KC, K - k0);
      const bool first = k0 == 0, final = k0 + KC >= K;
      GemmTileStore st = block_store(ep, pp.n0, first, final);
      // The next slice: this panel's next K block, else the next panel's first.
      const int64_t np = final ? p + 1 : p, nk = final ? 0 : k0 + KC;
      if (np < panels) {
        const PixelPanel next = at(np);
        st.prefetch = reinterpret_cast<const char*>(next.b + nk * next.w);
        st.prefetch_lines = std::min(KC, K - nk) * next.w / 16;
      } else {
        st.prefetch = nullptr;
        st.prefetch_lines = 0;
      }
      pp.fn(kc, arows, aoff + k0, pp.b + k0 * pp.w, pp.w, c + pp.n0, ldc, M, cols, st);
      if (K == 0) break;
    }
  }
}

void gemm_pixels_serial(int64_t M, int64_t N, int64_t K, const float* const* arows, const int32_t* aoff,
                        const float* pb, float* c, int64_t ldc, const GemmEpilogue& ep) {
  const GemmPixelsPanelFn fn = gemm_pixels_panel_active();
  // The B slice, 160 x 48 floats, in L1 with the pixels' lines (AVX2: 128, for 32 KB L1s).
  const int64_t max_kc = fn == gemm_pixels_panel_avx2() ? kGemmKcAvx2 : 160;
  auto at = [&](int64_t p) { return PixelPanel{p * kGemmNR, gemm_panel_width(N, p), pb + p * kGemmNR * K, fn}; };
  pixels_serial(gemm_panels(N), at, max_kc, M, N, K, arows, aoff, c, ldc, ep);
}

void gemm_pixels64_serial(int64_t M, int64_t N, int64_t K, const float* const* arows, const int32_t* aoff,
                          const float* b64, float* c, int64_t ldc, const GemmEpilogue& ep) {
  const GemmPixelsPanelFn fn = gemm_pixels64_panel_avx512();
  auto at = [&](int64_t p) { return PixelPanel{p * 64, 64, b64 + p * 64 * K, fn}; };
  pixels_serial(gemm_panels64(N), at, 160, M, N, K, arows, aoff, c, ldc, ep);
}

bool gemm_pixels_tail64(int64_t N) {
  return N >= 64 && N % kGemmNR == 16 && active_isa() == Isa::avx512 && gemm_pixels64_panel_avx512() &&
         gemm_pixels_panel_active() == gemm_pixels_panel_avx512();
}

void pack_b_tail64(const float* b, int64_t ldb, bool trans, int64_t K, int64_t N, float* dst) {
  const int64_t q = N / kGemmNR, n0 = (q - 1) * kGemmNR;  // panels [0, q - 1) 48 wide, then 64
  pack_b(b, ldb, trans, K, N, dst, 0, q - 1);
  float* d = dst + n0 * K;
  for (int64_t k = 0; k < K; ++k)
    for (int64_t j = 0; j < 64; ++j) d[k * 64 + j] = trans ? b[(n0 + j) * ldb + k] : b[k * ldb + n0 + j];
}

void gemm_pixels_tail64_serial(int64_t M, int64_t N, int64_t K, const float* const* arows, const int32_t* aoff,
                               const float* pb, float* c, int64_t ldc, const GemmEpilogue& ep) {
  const int64_t q = N / kGemmNR;
  const GemmPixelsPanelFn fn48 = gemm_pixels_panel_avx512(), fn64 = gemm_pixels64_panel_avx512();
  auto at = [&](int64_t p) {
    const bool last = p + 1 == q;
    return PixelPanel{p * kGemmNR, last ? 64 : kGemmNR, pb + p * kGemmNR * K, last ? fn64 : fn48};
  };
  pixels_serial(q, at, 160, M, N, K, arows, aoff, c, ldc, ep);
}

PixelsLayout gemm_pixels_layout(int64_t N) {
  return gemm_pixels_tail64(N) ? PixelsLayout::tail64 : PixelsLayout::panels48;
}

const char* gemm_pixels_layout_tag(PixelsLayout l) {
  return l == PixelsLayout::tail64 ? "_tail64" : "";
}

size_t gemm_pixels_packed_floats(PixelsLayout l, int64_t K, int64_t N) {
  return l == PixelsLayout::tail64 ? packed_b_tail64_floats(K, N) : packed_b_floats(K, N);
}

void gemm_pixels_pack(PixelsLayout l, const float* b, int64_t ldb, bool trans, int64_t K, int64_t N, float* dst) {
  if (l == PixelsLayout::tail64) pack_b_tail64(b, ldb, trans, K, N, dst);
  else pack_b(b, ldb, trans, K, N, dst);
}

void gemm_pixels_run(PixelsLayout l, int64_t M, int64_t N, int64_t K, const float* const* arows, const int32_t* aoff,
                     const float* pb, float* c, int64_t ldc, const GemmEpilogue& ep) {
  if (l == PixelsLayout::tail64) gemm_pixels_tail64_serial(M, N, K, arows, aoff, pb, c, ldc, ep);
  else gemm_pixels_serial(M, N, K, arows, aoff, pb, c, ldc, ep);
}

void gemm_packed(int64_t M, int64_t N, int64_t K, const float* pa, const float* pb, float* c, int64_t ldc,
                 const GemmEpilogue& ep, ThreadPool* pool) {
  gemm_driver(M, N, K, pa, pb, 0, c, ldc, ep, pool, gemm_tile_active());
}

int gemm_packed_share(int64_t M, int64_t N, int64_t K, const float* pa, const float* pb, float* c, int64_t ldc,
                      const GemmEpilogue& ep, int t, int64_t i, GemmRegion done[3]) {
  int n = 0;
  if (M <= 0 || N <= 0) return 0;
  panel_share(M, N, t, i, [&](const Rect& r) {
    gemm_rect(M, N, K, pa, pb, 0, c, ldc, ep, r, gemm_tile_active());
    assert(n < 3);  // panel_share cuts only its first and last panel at row tiles
    done[n++] = GemmRegion{r.t0 * kGemmMR, std::min(M, r.t1 * kGemmMR), r.p0 * kGemmNR, std::min(N, r.p1 * kGemmNR)};
  });
  return n;
}

void gemm_pack_a_and_multiply(int64_t M, int64_t N, int64_t K, const GemmPackA& A, const float* pb, float* c,
                              int64_t ldc, const GemmEpilogue& ep, ThreadPool* pool) {
  if (M <= 0 || N <= 0) return;
  const GemmTileFn fn = A.bf16 ? gemm_tile_bf16() : gemm_tile_active();
  const int64_t KS = A.bf16 ? bf16_pairs(K) : K;  // slots per packed row
  const size_t slots = packed_a_floats(M, KS);
  auto pack = [&](float* dst, ThreadPool* p) {
    if (A.bf16) pack_a_bf16_parallel(A.a, A.lda, A.trans, M, K, A.alpha, dst, p);
    else pack_a_parallel(A.a, A.lda, A.trans, M, K, A.alpha, dst, p);
  };
  const int t = threads_for(pool, double(M) * double(N) * double(KS));
  if (t > 1 && gemm_panels(N) >= 2 * int64_t(t) && slots * sizeof(float) <= kPrivateABytes) {
    parallel_for(pool, t, [&](int64_t i) {
      float* mine = scratch_floats(kScratchA, slots);
      pack(mine, nullptr);
      panel_share(M, N, t, i, [&](const Rect& r) { gemm_rect(M, N, KS, mine, pb, 0, c, ldc, ep, r, fn); });
    });
    return;
  }
  float* pa = scratch_floats(kScratchA, slots);
  pack(pa, pool);
  gemm_driver(M, N, KS, pa, pb, 0, c, ldc, ep, pool, fn);
}

void gemm_packed_with(GemmTileFn fn, int64_t M, int64_t N, int64_t K, const float* pa, const float* pb, float* c,
                      int64_t ldc, const GemmEpilogue& ep, ThreadPool* pool) {
  gemm_driver(M, N, K, pa, pb, 0, c, ldc, ep, pool, fn);
}

void gemm_packed_a(int64_t M, int64_t N, int64_t K, const float* pa, const float* b, int64_t ldb, float* c,
                   int64_t ldc, const GemmEpilogue& ep, ThreadPool* pool) {
  gemm_driver(M, N, K, pa, b, ldb, c, ldc, ep, pool, gemm_tile_active());
}

void sgemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* a, int64_t lda,
           const float* b, int64_t ldb, float beta, float* c, int64_t ldc, ThreadPool* pool) {
  if (M <= 0 || N <= 0) return;
  GemmEpilogue ep;
  if (beta != 0.f) {
    ep.accumulate = true;
    if (beta != 1.f)
      for (int64_t m = 0; m < M; ++m)
        for (int64_t n = 0; n < N; ++n) c[m * ldc + n] *= beta;
  }
  float* pa = scratch_floats(kScratchA, packed_a_floats(M, K));
  float* pb = scratch_floats(kScratchB, packed_b_floats(K, N));
  pack_a_parallel(a, lda, trans_a, M, K, alpha, pa, pool);
  pack_b_parallel(b, ldb, trans_b, K, N, pb, pool);
  gemm_packed(M, N, K, pa, pb, c, ldc, ep, pool);
}

}  // namespace nxrt::cpu
