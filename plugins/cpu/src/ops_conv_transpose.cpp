// ConvTranspose (1-3 spatial dims, groups, strides, dilations, pads,
// output_padding, output_shape, auto_pad): a direct scatter, one thread per
// (image, output channel) plane, the inner loop running along the input row.
// float32.
#include <algorithm>
#include <string>

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
    TensorView x = ctx.input(0), w = ctx.input(1);
    auto b = ctx.optional_input(2);
    if (x.rank() != sr + 2 || w.rank() != sr + 2) sdk::fail(NXRT_INVALID_ARGUMENT, "ConvTranspose: X {} / W {} ranks", dims_str(x.dims()), dims_str(w.dims()));
    const int64_t N = x.dim(0), C = x.dim(1), G = a.group;
    if (C != w.dim(0) || C % G) sdk::fail(NXRT_INVALID_ARGUMENT, "ConvTranspose: X has {} channels, W {}", C, dims_str(w.dims()));
    const int64_t Mg = w.dim(1), M = Mg * G, Cg = C / G;
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
    const float* xp = x.data<float>();
    const float* wp = w.data<float>();
    const float* bp = b ? b->data<float>() : nullptr;
    float* yp = y.data<float>();
    const int64_t isz = in[0] * in[1] * in[2], osz = out[0] * out[1] * out[2], ksz = k[0] * k[1] * k[2];
    const int64_t planes = N * M;
    const int parts = int(std::min<int64_t>(planes, threads_for(pool, double(N * C * isz) * double(Mg * ksz))));
    parallel_ranges(pool, planes, parts, [&](int64_t p0, int64_t p1) {
      for (int64_t p = p0; p < p1; ++p) {
        const int64_t nn = p / M, m = p % M, g = m / Mg, ml = m % Mg;
        float* yo = yp + p * osz;
        std::fill(yo, yo + osz, bp ? bp[m] : 0.f);
        for (int64_t icl = 0; icl < Cg; ++icl) {
          const int64_t ic = g * Cg + icl;
          const float* xi = xp + (nn * C + ic) * isz;
          const float* wk = wp + (ic * Mg + ml) * ksz;
          for (int64_t kz = 0; kz < k[0]; ++kz)
            for (int64_t ky = 0; ky < k[1]; ++ky)
              for (int64_t kx = 0; kx < k[2]; ++kx) {
                const float wv = wk[(kz * k[1] + ky) * k[2] + kx];
                // Input columns whose output column lands inside [0, out[2]).
                const int64_t cx = kx * dl[2] - pb[2];  // ox = ix * st + cx
                int64_t ix0 = cx >= 0 ? 0 : (-cx + st[2] - 1) / st[2];
                int64_t ix1 = out[2] - cx <= 0 ? 0 : std::min(in[2], (out[2] - cx + st[2] - 1) / st[2]);
                if (ix0 >= ix1) continue;
                for (int64_t iz = 0; iz < in[0]; ++iz) {
                  const int64_t oz = iz * st[0] - pb[0] + kz * dl[0];
                  if (oz < 0 || oz >= out[0]) continue;
                  for (int64_t iy = 0; iy < in[1]; ++iy) {
                    const int64_t oy = iy * st[1] - pb[1] + ky * dl[1];
                    if (oy < 0 || oy >= out[1]) continue;
                    const float* xr = xi + (iz * in[1] + iy) * in[2];
                    float* yr = yo + (oz * out[1] + oy) * out[2];
                    const int64_t s2 = st[2];
                    for (int64_t ix = ix0; ix < ix1; ++ix) yr[ix * s2 + cx] += wv * xr[ix];
                  }
                }
              }
        }
      }
    });
  });
}



}  // namespace

void register_conv_transpose_ops(Registry& r) {
  r.add(Def{"ConvTranspose", "", 1, INT_MAX, deconv_check, deconv_create});
}

}  // namespace nxrt::cpu
