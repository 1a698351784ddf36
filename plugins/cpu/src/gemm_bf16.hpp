// bfloat16 fast-math GEMM (session option cpu.precision=bf16; never the default).
//
// A and B are rounded to bfloat16 (nearest even, as VCVTNEPS2BF16 does: subnormals become
// zero) and their products summed in float32 by AVX-512 BF16's VDPBF16PS, which multiplies
// two pairs per lane per instruction: twice the multiply-adds of an FMA per cycle, at
// bfloat16's 8-bit mantissa (relative error ~2^-9 per operand).
//
// Layout: K is taken in pairs (K2 = ceil(K / 2); an odd K's last pair has a zero second half)
// and a pair of bfloat16 occupies one 4-byte slot, so the packed A ([tile][K2][8] slots) and
// B ([panel][K2][w] slots) have the fp32 layouts of gemm.hpp with K2 for K: the fp32
// driver runs them unchanged with the bf16 micro-kernel.
#pragma once
#include <cstddef>
#include <cstdint>

#include "gemm.hpp"

namespace nxrt::cpu {

inline int64_t bf16_pairs(int64_t K) { return (K + 1) / 2; }
// Slots (4 bytes each) of a packed A / B.
inline size_t packed_a_bf16_slots(int64_t M, int64_t K) { return packed_a_floats(M, bf16_pairs(K)); }
inline size_t packed_b_bf16_slots(int64_t K, int64_t N) { return packed_b_floats(bf16_pairs(K), N); }

// float -> bfloat16 bits, round to nearest even, subnormals to signed zero, NaN stays NaN.
uint16_t to_bf16(float x);
float from_bf16(uint16_t b);
// Stores the pair (lo: the even k, hi: the odd one) into a 4-byte slot (lo in the low half,
// as VCVTNEPS2BF16 and VDPBF16PS order a pair's elements).
void store_bf16_pair(float* slot, uint16_t lo, uint16_t hi);

// True when this CPU has AVX-512 BF16 and this build has the kernel (x86-64).
bool gemm_bf16_supported();
const char* gemm_bf16_kernel_name();  // "avx512bf16-8x48"

// B(k, n) = trans ? b[n*ldb + k] : b[k*ldb + n], packed into dst (packed_b_bf16_slots).
void pack_b_bf16(const float* b, int64_t ldb, bool trans, int64_t K, int64_t N, float* dst);
// A(m, k) = alpha * (trans ? a[k*lda + m] : a[m*lda + k]) into dst (packed_a_bf16_slots),
// split over the pool by row tiles. Needs gemm_bf16_supported().
void pack_a_bf16_parallel(const float* a, int64_t lda, bool trans, int64_t M, int64_t K, float alpha, float* dst,
                          ThreadPool* pool);
// C[M, N] = epilogue(A * B) as gemm_packed, from the bf16 packings. Needs gemm_bf16_supported().
void gemm_packed_bf16(int64_t M, int64_t N, int64_t K, const float* packed_a, const float* packed_b, float* c,
                      int64_t ldc, const GemmEpilogue& ep, ThreadPool* pool);

// --- internal (gemm_bf16_avx512.cpp): the micro-kernel (kc counts pairs) and one A tile's packing.
GemmTileFn gemm_tile_bf16();  // null unless gemm_bf16_supported()
using GemmPackABf16Fn = void (*)(const float* a, int64_t lda, int64_t mr, int64_t K, float alpha, float* dst);
GemmPackABf16Fn gemm_pack_a_bf16_tile();  // row-major A; null unless gemm_bf16_supported()

}  // namespace nxrt::cpu
