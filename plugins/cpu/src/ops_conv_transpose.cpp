// ConvTranspose (1-3 spatial dims, groups, strides, dilations, pads,
// output_padding, output_shape, auto_pad): the output geometry; the direct
// scatter is conv_transpose() in conv_transpose.cpp. float32.
#include <algorithm>
#include <string>

#include "conv_transpose.hpp"
#include "ops.hpp"

namespace nxrt::cpu {
namespace {

Check deconv_check(const Node& n) {
  if (auto r = sdk::require_dtypes(n, kF32)) return r;
  if (auto r = known_attrs(n, {"auto_pad", "dilations", "group", "kernel_shape", "output_padding", "output_shape", "pads", "strides"}))
    return r;
  auto w = n.input(1);
  if (w.rank() < 0) return sdk::refuse(NXRT_REFUSE_SHAPE, "ConvTranspose: W rank unknown");
  const int64_t sr = w.rank() - 2;
  if (sr < 1 || sr > 3) return sdk::refuse(NXRT_REFUSE_SHAPE, "ConvTranspose with {} spatial dims is not implemented (1-3)", sr);
  const std::string ap = n.attr_string("auto_pad", "NOTSET");
  if (ap != "NOTSET" && ap != "VALID" && ap != "SAME_UPPER" && ap != "SAME_LOWER")
    return sdk::refuse(NXRT_REFUSE_ATTRIBUTE, "ConvTranspose: auto_pad '{}'", ap);
  for (const char* name : {"dilations", "strides", "kernel_shape", "output_padding", "output_shape"}) {
    auto v = n.attr_ints(name);
    if (!v.empty() && int64_t(v.size()) != sr) return sdk::refuse(NXRT_REFUSE_ATTRIBUTE, "ConvTranspose: {} has {} values for {} spatial dims", name, v.size(), sr);
  }
  auto pads = n.attr_ints("pads");
  if (!pads.empty() && int64_t(pads.size()) != 2 * sr) return sdk::refuse(NXRT_REFUSE_ATTRIBUTE, "ConvTranspose: pads has {} values", pads.size());
  for (auto v : n.attr_ints("strides")) if (v < 1) return sdk::refuse(NXRT_REFUSE_ATTRIBUTE, "ConvTranspose: stride {} < 1", v);
  for (auto v : n.attr_ints("dilations")) if (v < 1) return sdk::refuse(NXRT_REFUSE_ATTRIBUTE, "ConvTranspose: dilation {} < 1", v);
  if (n.attr_int("group", 1) < 1) return sdk::refuse(NXRT_REFUSE_ATTRIBUTE, "ConvTranspose: group < 1");
  return std::nullopt;
}

struct DeconvArgs {
  std::vector<int64_t> s, d, pads, out_pad, out_shape;
  std::string auto_pad;
  int64_t group = 1;
};

std::unique_ptr<Kernel> deconv_create(const Node& n, CpuSession& session) {
  const size_t sr = size_t(n.input(1).rank() - 2);
  DeconvArgs a;
  a.s = n.attr_ints("strides", std::vector<int64_t>(sr, 1));
  a.d = n.attr_ints("dilations", std::vector<int64_t>(sr, 1));
  a.pads = n.attr_ints("pads", std::vector<int64_t>(2 * sr, 0));
  a.out_pad = n.attr_ints("output_padding", std::vector<int64_t>(sr, 0));
  a.out_shape = n.attr_ints("output_shape");
  a.auto_pad = n.attr_string("auto_pad", "NOTSET");
  a.group = n.attr_int("group", 1);
  ThreadPool* pool = session.pool();
  return make_kernel([a, sr, pool](Context& ctx) {
    ConstTensorView x = ctx.input(0), w = ctx.input(1);
    auto b = ctx.optional_input(2);
    if (x.rank() != sr + 2 || w.rank() != sr + 2) sdk::fail(NXRT_INVALID_ARGUMENT, "ConvTranspose: X {} / W {} ranks", dims_str(x.dims()), dims_str(w.dims()));
    const int64_t N = x.dim(0), C = x.dim(1), G = a.group;
    if (C != w.dim(0) || C % G) sdk::fail(NXRT_INVALID_ARGUMENT, "ConvTranspose: X has {} channels, W {}", C, dims_str(w.dims()));
    const int64_t Mg = w.dim(1), M = Mg * G;
    if (b && b->numel() != M) sdk::fail(NXRT_INVALID_ARGUMENT, "ConvTranspose: B must have {} values", M);
    int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1}, k[3] = {1, 1, 1}, st[3] = {1, 1, 1}, dl[3] = {1, 1, 1}, pb[3] = {0, 0, 0};
    std::vector<int64_t> od = {N, M};
    const size_t off = 3 - sr;
    for (size_t i = 0; i < sr; ++i) {
      const size_t j = off + i;
      in[j] = x.dim(2 + i);
      k[j] = w.dim(2 + i);
      st[j] = a.s[i];
      dl[j] = a.d[i];
      const int64_t full = st[j] * (in[j] - 1) + a.out_pad[i] + (k[j] - 1) * dl[j] + 1;
      if (!a.out_shape.empty()) {
        out[j] = a.out_shape[i];
        if (a.auto_pad == "SAME_UPPER" || a.auto_pad == "SAME_LOWER") {
          const int64_t total = std::max<int64_t>(0, full - out[j]);
          pb[j] = a.auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
        } else {
          pb[j] = a.pads[i];
        }
      } else if (a.auto_pad == "SAME_UPPER" || a.auto_pad == "SAME_LOWER") {
        out[j] = in[j] * st[j];
        const int64_t total = std::max<int64_t>(0, full - out[j]);
        pb[j] = a.auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      } else if (a.auto_pad == "VALID") {
        out[j] = full;
      } else {
        pb[j] = a.pads[i];
        out[j] = full - a.pads[i] - a.pads[i + sr];
      }
      if (out[j] < 0) sdk::fail(NXRT_INVALID_ARGUMENT, "ConvTranspose: negative output size");
      od.push_back(out[j]);
    }
    TensorView y = ctx.output(0, NXRT_DTYPE_FLOAT32, od);
    if (y.numel() == 0) return;
    ConvTransposeShape cs;
    cs.batch = N;
    cs.in_channels = C;
    cs.group_out_channels = Mg;
    cs.groups = G;
    for (size_t d = 0; d < 3; ++d) {
      cs.in[d] = in[d];
      cs.out[d] = out[d];
      cs.kernel[d] = k[d];
      cs.stride[d] = st[d];
      cs.dilation[d] = dl[d];
      cs.pad_begin[d] = pb[d];
    }
    conv_transpose(cs, x.data<float>(), w.data<float>(), b ? b->data<float>() : nullptr, y.data<float>(), pool);
  });
}



}  // namespace

void register_conv_transpose_ops(Registry& r) {
  r.add(Def{"ConvTranspose", "", 1, INT_MAX, deconv_check, deconv_create});
}

}  // namespace nxrt::cpu
