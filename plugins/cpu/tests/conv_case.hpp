// A float conv test case: random x, W ([OC][IC/g][KH][KW]), bias and residual from seeds
// seed .. seed + 3, the post-ops with that residual when asked for, and the reference output
// (conv2d_reference) the kernel under test is checked against.
#pragma once
#include <vector>

#include "conv.hpp"
#include "util.hpp"

namespace nxrt::cpu::test {

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
