#include "spatial_geometry.hpp"

#include <algorithm>
#include <string>

namespace nxrt::vk {

using sdk::refuse;

Geo geometry(const IrNode& n, const Shape& x, int64_t kh, int64_t kw, bool ceil_mode) {
  Geo g{};
  bool one_d = x.size() == 3;
  g.H = one_d ? 1 : x[2];
  g.W = one_d ? x[2] : x[3];
  g.KH = kh;
  g.KW = kw;
  auto strides = attr_ints(n, "strides");
  auto dil = attr_ints(n, "dilations");
  auto pads = attr_ints(n, "pads");
  auto at = [&](const std::vector<int64_t>& v, size_t i2, size_t i1, int64_t d) {
    if (v.empty()) return d;
    return one_d ? (i1 == SIZE_MAX ? d : v[i1]) : v[i2];
  };
  g.sh = at(strides, 0, SIZE_MAX, 1);
  g.sw = at(strides, 1, 0, 1);
  g.dh = at(dil, 0, SIZE_MAX, 1);
  g.dw = at(dil, 1, 0, 1);
  g.ph0 = at(pads, 0, SIZE_MAX, 0);
  g.pw0 = at(pads, 1, 0, 0);
  g.ph1 = at(pads, 2, SIZE_MAX, 0);
  g.pw1 = at(pads, 3, 1, 0);
  std::string ap = attr_s(n, "auto_pad", "NOTSET");
  auto same = [&](int64_t in, int64_t k, int64_t s, int64_t d, int64_t& p0, int64_t& p1, bool upper) {
    int64_t out = (in + s - 1) / s;
    int64_t total = std::max<int64_t>(0, (out - 1) * s + (k - 1) * d + 1 - in);
    p0 = upper ? total / 2 : total - total / 2;
    p1 = total - p0;
  };
  if (ap == "VALID") {
    g.ph0 = g.pw0 = g.ph1 = g.pw1 = 0;
  } else if (ap == "SAME_UPPER" || ap == "SAME_LOWER") {
    bool up = ap == "SAME_UPPER";
    if (!one_d) same(g.H, g.KH, g.sh, g.dh, g.ph0, g.ph1, up);
    same(g.W, g.KW, g.sw, g.dw, g.pw0, g.pw1, up);
  }
  auto outdim = [&](int64_t in, int64_t k, int64_t s, int64_t d, int64_t p0, int64_t p1) {
    int64_t span = in + p0 + p1 - ((k - 1) * d + 1);
    if (span < 0) return int64_t(0);
    return (ceil_mode ? (span + s - 1) / s : span / s) + 1;
  };
  g.OH = outdim(g.H, g.KH, g.sh, g.dh, g.ph0, g.ph1);
  g.OW = outdim(g.W, g.KW, g.sw, g.dw, g.pw0, g.pw1);
  return g;
}
Shape spatial_out(const Shape& x, int64_t c, const Geo& g) {
  if (x.size() == 3) return {x[0], c, g.OW};
  return {x[0], c, g.OH, g.OW};
}

R check_spatial_attrs(const IrGraph& g, const IrNode& n, size_t want_pads_per_dim) {
  auto x = g.in(n, 0);
  if (!x || x->rank < 0) return refuse(NXRT_REFUSE_SHAPE, "{} needs a known input rank", n.op);
  if (x->rank != 3 && x->rank != 4) return refuse(NXRT_REFUSE_SHAPE, "{} supports 1-D and 2-D spatial inputs, got rank {}", n.op, x->rank);
  size_t sp = size_t(x->rank - 2);
  for (const char* a : {"strides", "dilations", "kernel_shape"}) {
    auto v = attr_ints(n, a);
    if (!v.empty() && v.size() != sp) return refuse(NXRT_REFUSE_ATTRIBUTE, "{} attribute {} has {} entries for {} spatial dims", n.op, a, v.size(), sp);
    for (auto e : v) if (e <= 0) return refuse(NXRT_REFUSE_ATTRIBUTE, "{} attribute {} has a non-positive entry", n.op, a);
  }
  auto pads = attr_ints(n, "pads");
  if (!pads.empty() && pads.size() != sp * want_pads_per_dim) return refuse(NXRT_REFUSE_ATTRIBUTE, "{} pads has {} entries", n.op, pads.size());
  for (auto p : pads) if (p < 0) return refuse(NXRT_REFUSE_ATTRIBUTE, "{} has negative pads", n.op);
  std::string ap = attr_s(n, "auto_pad", "NOTSET");
  if (ap != "NOTSET" && ap != "VALID" && ap != "SAME_UPPER" && ap != "SAME_LOWER")
    return refuse(NXRT_REFUSE_ATTRIBUTE, "{} auto_pad '{}' is not implemented", n.op, ap);
  return std::nullopt;
}

}  // namespace nxrt::vk
