// A float conv test case: random x, W ([OC][IC/g][KH][KW]), bias and residual from seeds
// seed .. seed + 3, the post-ops with that residual when asked for, and the reference output
// (conv2d_reference) the kernel under test is checked against.
#pragma once
#include <vector>

#include "conv.hpp"
#include "pooling.hpp"
#include "util.hpp"

namespace nxrt::cpu::test {

// A fused Clip(lo, hi) (Relu6: 0, 6).
inline ConvPostOps clamp_post(float lo, float hi) {
  ConvPostOps p;
  p.clamp = true;
  p.lo = lo;
  p.hi = hi;
  return p;
}

// A 2-D max pool over a conv's output: kernel k, stride st, pad p at the start (and, with
// ceil, the last partial window kept).
inline PoolShape pool_over(const ConvShape& s, int64_t k, int64_t st, int64_t p, bool ceil = false) {
  PoolShape ps;
  ps.batch = s.batch;
  ps.channels = s.out_c;
  ps.in[1] = s.out_h;
  ps.in[2] = s.out_w;
  for (int i = 1; i < 3; ++i) {
    ps.kernel[i] = k;
    ps.stride[i] = st;
    ps.pad_begin[i] = ps.pad_end[i] = p;
    const int64_t span = ps.in[i] + 2 * p - k;
    ps.out[i] = (ceil ? (span + st - 1) / st : span / st) + 1;
    if (ceil && (ps.out[i] - 1) * st >= ps.in[i] + p) --ps.out[i];
  }
  return ps;
}

struct ConvCase {
  std::vector<float> x, w, b, res, want;
  ConvPostOps post;
  const float* bias() const { return with_bias ? b.data() : nullptr; }
  bool with_bias = true;

  ConvCase(const ConvShape& s, uint32_t seed, const ConvPostOps& post_in = {}, bool with_residual = false,
           bool bias_too = true)
      : x(random_floats(size_t(s.batch * s.in_c * s.in_h * s.in_w), seed)),
        w(random_floats(size_t(s.out_c * s.icg() * s.k_h * s.k_w), seed + 1)),
        b(random_floats(size_t(s.out_c), seed + 2)),
        res(random_floats(size_t(s.batch * s.out_c * s.out_h * s.out_w), seed + 3, -2.f, 2.f)),
        want(res.size()),
        post(post_in),
        with_bias(bias_too) {
    if (with_residual) post.residual = res.data();
    conv2d_reference(s, x.data(), w.data(), bias(), want.data(), post);
  }
  // The output buffer a kernel writes (a value it must overwrite everywhere).
  std::vector<float> output() const { return std::vector<float>(want.size(), 123.f); }
};

}  // namespace nxrt::cpu::test
