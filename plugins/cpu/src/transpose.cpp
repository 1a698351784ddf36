#include "transpose.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "cpu_info.hpp"
#if defined(__x86_64__)
#include "transpose16_avx512.hpp"
#endif

namespace nxrt::cpu {

namespace {

template <typename T>
void copy_strided(const T* src, int64_t stride, T* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = src[i * stride];
}

// `rows` consecutive output rows of `inner` elements whose sources start one
// element apart (the row dim is contiguous in the input): reads `rows`
// neighbours at once instead of one element per cache line per row.
template <typename T>
void gather_rows(const T* src, int64_t stride, T* dst, int64_t inner, int64_t rows) {
  for (int64_t i = 0; i < inner; ++i) {
    const T* s = src + i * stride;
    for (int64_t r = 0; r < rows; ++r) dst[r * inner + i] = s[r];
  }
}

struct Plan {
  int nd = 0;
  std::vector<int64_t> odims, istride;  // per output dim: size and input stride (elements)
};

#if defined(__x86_64__)
// out[r * ldo + c] = in[c * ldi + r] for r in [r0, r1), c in [c0, c0 + nc), nc <= 16: 16 x 16
// tiles of 4-byte elements transposed in registers. The 16 input rows are read along their
// length, 16 streams the prefetcher follows; each tile's output rows are written as runs of
// nc elements.
__attribute__((target("avx512f"))) void transpose_rows16_avx512(const float* in, int64_t ldi, float* out, int64_t ldo,
                                                                int64_t c0, int64_t nc, int64_t r0, int64_t r1) {
  const __mmask16 cm = __mmask16((1u << nc) - 1u);
  for (int64_t r = r0; r < r1; r += 16) {
    const int64_t nr = std::min<int64_t>(16, r1 - r);
    const __mmask16 rm = __mmask16((1u << nr) - 1u);
    __m512 t[16];
    for (int64_t i = 0; i < 16; ++i)
      t[i] = i < nc ? _mm512_maskz_loadu_ps(rm, in + (c0 + i) * ldi + r) : _mm512_setzero_ps();
    avx512::transpose16x16(t);
    for (int64_t j = 0; j < nr; ++j) _mm512_mask_storeu_ps(out + (r + j) * ldo + c0, cm, t[j]);
  }
}
#endif

}  // namespace

void transpose(const void* in, void* out, size_t es, std::span<const int64_t> in_dims, std::span<const int64_t> perm,
               ThreadPool* pool) {
  const size_t r = in_dims.size();
  if (perm.size() != r) throw std::invalid_argument("transpose: perm rank mismatch");
  int64_t total = 1;
  for (auto d : in_dims) total *= d;
  if (total == 0) return;
  std::vector<int64_t> istr(r);
  int64_t m = 1;
  for (size_t i = r; i-- > 0;) {
    istr[i] = m;
    m *= in_dims[i];
  }
  // Output dims with their input strides; drop size-1 dims and merge dims
  // that are contiguous in both layouts.
  Plan p;
  for (size_t k = 0; k < r; ++k) {
    const int64_t n = in_dims[size_t(perm[k])];
    if (n == 1) continue;
    const int64_t s = istr[size_t(perm[k])];
    if (p.nd > 0 && p.istride.back() == s * n) {
      p.odims.back() *= n;
      p.istride.back() = s;
    } else {
      p.odims.push_back(n);
      p.istride.push_back(s);
      ++p.nd;
    }
  }
  if (p.nd <= 1 && (p.nd == 0 || p.istride[0] == 1)) {
    std::memcpy(out, in, size_t(total) * es);
    return;
  }
  const int nd = p.nd;
  const int64_t inner = p.odims[size_t(nd - 1)], istep = p.istride[size_t(nd - 1)];
  const int64_t outer = total / inner;
#if defined(__x86_64__)
  // 4-byte elements whose last two output dims are a 2-D transpose of the input (the row dim
  // contiguous there, the inner one strided): 16 x 16 tiles in registers. The row gathers below
  // read one element per input row and line, 144 interleaved streams for YOLO's [1, 144, 2100]
  // head transpose, too many for the prefetcher: 261 us there on 1 thread.
  if (es == 4 && nd >= 2 && istep != 1 && p.istride[size_t(nd - 2)] == 1 && active_isa() == Isa::avx512 &&
      inner >= 16 && p.odims[size_t(nd - 2)] >= 16) {
    const int64_t R = p.odims[size_t(nd - 2)], C = inner, planes = total / (R * C);
    constexpr int64_t kRowChunk = 512;  // output rows an item walks (2 KB of each input row)
    const int64_t cblocks = (C + 15) / 16, rchunks = (R + kRowChunk - 1) / kRowChunk;
    const int64_t items = planes * cblocks * rchunks;
    auto run = [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        const int64_t plane = i / (cblocks * rchunks), cb = i / rchunks % cblocks, rc = i % rchunks;
        int64_t off = 0;  // the plane's first input element: its index in the outer dims
        for (int64_t d = nd - 3, rem = plane; d >= 0; --d) {
          off += rem % p.odims[size_t(d)] * p.istride[size_t(d)];
          rem /= p.odims[size_t(d)];
        }
        const int64_t c0 = cb * 16;
        transpose_rows16_avx512(static_cast<const float*>(in) + off, istep, static_cast<float*>(out) + plane * R * C,
                                C, c0, std::min<int64_t>(16, C - c0), rc * kRowChunk,
                                std::min(R, (rc + 1) * kRowChunk));
      }
    };
    parallel_ranges(pool, items, threads_for(pool, double(total), 1 << 16), run);
    return;
  }
#endif
  // The row dim contiguous in the input while the inner one is strided (a 2-D
  // transpose at the bottom, e.g. attention's K to [heads, d, S]): blocks of rows.
  const bool blocked = istep != 1 && nd >= 2 && p.istride[size_t(nd - 2)] == 1 &&
                       (es == 1 || es == 2 || es == 4 || es == 8);
  constexpr int64_t kRowBlock = 16;
  auto rows = [&](int64_t o0, int64_t o1) {
    std::vector<int64_t> idx(size_t(nd), 0);
    int64_t rem = o0, off = 0;
    for (int i = nd - 2; i >= 0; --i) {
      idx[size_t(i)] = rem % p.odims[size_t(i)];
      rem /= p.odims[size_t(i)];
      off += idx[size_t(i)] * p.istride[size_t(i)];
    }
    for (int64_t o = o0; o < o1;) {
      char* dst = static_cast<char*>(out) + size_t(o * inner) * es;
      const char* src = static_cast<const char*>(in) + size_t(off) * es;
      const int64_t run =
          blocked ? std::min({kRowBlock, o1 - o, p.odims[size_t(nd - 2)] - idx[size_t(nd - 2)]}) : 1;
      if (run > 1) {
        switch (es) {
          case 1: gather_rows(reinterpret_cast<const uint8_t*>(src), istep, reinterpret_cast<uint8_t*>(dst), inner, run); break;
          case 2: gather_rows(reinterpret_cast<const uint16_t*>(src), istep, reinterpret_cast<uint16_t*>(dst), inner, run); break;
          case 4: gather_rows(reinterpret_cast<const uint32_t*>(src), istep, reinterpret_cast<uint32_t*>(dst), inner, run); break;
          default: gather_rows(reinterpret_cast<const uint64_t*>(src), istep, reinterpret_cast<uint64_t*>(dst), inner, run); break;
        }
      } else if (istep == 1) {
        std::memcpy(dst, src, size_t(inner) * es);
      } else {
        switch (es) {
          case 1: copy_strided(reinterpret_cast<const uint8_t*>(src), istep, reinterpret_cast<uint8_t*>(dst), inner); break;
          case 2: copy_strided(reinterpret_cast<const uint16_t*>(src), istep, reinterpret_cast<uint16_t*>(dst), inner); break;
          case 4: copy_strided(reinterpret_cast<const uint32_t*>(src), istep, reinterpret_cast<uint32_t*>(dst), inner); break;
          case 8: copy_strided(reinterpret_cast<const uint64_t*>(src), istep, reinterpret_cast<uint64_t*>(dst), inner); break;
          default:
            for (int64_t i = 0; i < inner; ++i) std::memcpy(dst + size_t(i) * es, src + size_t(i * istep) * es, es);
        }
      }
      for (int64_t step = 0; step < run; ++step, ++o) {
        for (int i = nd - 2; i >= 0; --i) {
          off += p.istride[size_t(i)];
          if (++idx[size_t(i)] < p.odims[size_t(i)]) break;
          off -= p.istride[size_t(i)] * p.odims[size_t(i)];
          idx[size_t(i)] = 0;
        }
      }
    }
  };
  // A strided gather (the innermost output dim is not contiguous in the input,
  // e.g. attention's K to [heads, d, S]) touches a cache line per element:
  // ~4x a memcpy's cost per element, so a second thread pays from 4x fewer.
  const int t = threads_for(pool, double(total), istep == 1 ? 1 << 17 : 1 << 15);
  if (t <= 1 || outer < 2) {
    rows(0, outer);
    return;
  }
  parallel_for(pool, t, [&](int64_t i) {
    int64_t s, e;
    split_range(outer, t, i, s, e);
    rows(s, e);
  });
}

}  // namespace nxrt::cpu
