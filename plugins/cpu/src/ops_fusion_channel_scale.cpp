// Squeeze-excite's Mul folded into the 1x1 Conv after it: Mul(x, s) -> Conv 1x1 [-> Add]
// [-> Relu | Clip | HardSwish], s per channel of x ([N or 1, C, 1, 1] or [C, 1, 1]), claimed
// as one group whose conv applies s to the smaller operand it packs anyway
// (conv2d_channel_scaled): a copy of its packed weights (conv(x * s, W) = conv(x, W diag(s)))
// or, where it runs transposed on few pixels, x^T as it is packed. Either replaces the Mul's
// read and write of x, which on two threads also moved x between the cores (the block before
// it writes x in row bands on both; MobileNetV3's Muls ran 2-5x their 1-thread time there).
//
// Claimed only when that cannot change what runs or cost more:
//   * the Mul's output is read by the Conv alone (through X) and is not a graph output;
//   * x has a static [N, C, H, W] shape, the Mul's output the same, s a static per-channel
//     shape; both float32;
//   * the Conv is 2-D, 1x1, stride 1, unpadded, ungrouped, with constant float32 weights, and
//     conv_channel_scale_folds: transposed (few pixels), or W no larger than an image of x.
#include "conv.hpp"
#include "fusion_view.hpp"
#include "ops.hpp"

namespace nxrt::cpu {
using namespace fusion;

namespace {

// Which Mul input is x and which the per-channel scale; nullopt when the Mul is not that.
struct ScaleSlots {
  size_t x, scale;
};
std::optional<ScaleSlots> channel_scale_slots(const Node& mul) {
  if (!is_op(mul, "Mul") || mul.input_count() != 2 || mul.output_count() != 1 || !mul.has_output(0))
    return std::nullopt;
  const sdk::Value out = mul.output(0);
  if (!out.static_shape() || out.rank() != 4 || out.dtype() != NXRT_DTYPE_FLOAT32) return std::nullopt;
  const auto od = out.dims();
  for (size_t xs = 0; xs < 2; ++xs) {
    const sdk::Value x = mul.input(xs), s = mul.input(1 - xs);
    if (!x.present() || !s.present() || x.raw() == s.raw() || !same_static_shape(x, out)) continue;
    if (x.dtype() != NXRT_DTYPE_FLOAT32 || s.dtype() != NXRT_DTYPE_FLOAT32 || !s.static_shape()) continue;
    const auto sd = s.dims();
    const bool per_channel = (sd.size() == 4 && (sd[0] == 1 || sd[0] == od[0]) && sd[1] == od[1] && sd[2] == 1 &&
                              sd[3] == 1) ||
                             (sd.size() == 3 && sd[0] == od[1] && sd[1] == 1 && sd[2] == 1);
    if (per_channel) return ScaleSlots{xs, 1 - xs};
  }
  return std::nullopt;
}

// The Conv reading the Mul's output through X, when the scale folds into it
// (conv_channel_scale_folds: a plain 1x1 conv with constant float32 weights).
bool scale_folds_into(const Node& conv, const sdk::Value& x) {
  if (!is_op(conv, "Conv") || conv.input_count() < 2 || conv.output_count() != 1 || !conv.has_output(0))
    return false;
  const sdk::Value w = conv.input(1);
  if (!w.present() || !w.is_constant() || w.dtype() != NXRT_DTYPE_FLOAT32) return false;
  try {
    return conv_channel_scale_folds(conv_shape(read_conv_attrs(conv, 1), x.dims(), w.constant().dims(), "Conv"));
  } catch (const sdk::Error&) {
    return false;
  }
}

}  // namespace

std::vector<size_t> follow_channel_scale(const sdk::Graph& g, const ViewIndex& ix, size_t mul,
                                         const std::function<bool(size_t)>& ok) {
  const Node mn = g.node(mul);
  const auto slots = channel_scale_slots(mn);
  if (!slots) return {};
  const auto use = sole_use(ix, mn.output(0).raw());
  if (!use || use->second != 0 || !ok(use->first)) return {};
  if (!scale_folds_into(g.node(use->first), mn.input(slots->x))) return {};
  std::vector<size_t> nodes = {mul};
  const Chain c = follow_chain(g, ix, use->first, ok);
  nodes.insert(nodes.end(), c.nodes.begin(), c.nodes.end());
  return nodes;
}

std::unique_ptr<Kernel> create_channel_scale_kernel(const sdk::Graph& sg, CpuSession& session, sdk::Prepacked& pp) {
  const size_t count = sg.node_count();
  if (count < 2 || !is_op(sg.node(0), "Mul")) return nullptr;
  const ViewIndex ix = index_view(sg);
  const std::vector<size_t> nodes = follow_channel_scale(sg, ix, 0, [](size_t) { return true; });
  if (nodes.size() != count)
    sdk::fail(NXRT_UNSUPPORTED, "group of {} nodes is not a Mul -> 1x1 Conv chain this plugin fuses ({} on it)", count,
              nodes.size());
  const Node last = sg.node(nodes.back());
  if (sg.output_count() != 1 || sg.output(0).raw() != last.output(0).raw())
    sdk::fail(NXRT_UNSUPPORTED, "fused Mul+Conv group must have exactly one output, its last value ({} outputs)",
              sg.output_count());
  const Node mn = sg.node(0), cn = sg.node(nodes[1]);
  const ScaleSlots slots = *channel_scale_slots(mn);
  const Chain c = follow_chain(sg, ix, nodes[1], [](size_t) { return true; });
  ConvIo io;
  io.x = group_input_index(sg, mn.input(slots.x));
  io.channel_scale = group_input_index(sg, mn.input(slots.scale));
  io.w = group_input_index(sg, cn.input(1));
  io.b = cn.input_count() > 2 ? group_input_index(sg, cn.input(2)) : -1;
  if (c.add_other_slot >= 0) io.residual = group_input_index(sg, sg.node(c.nodes[1]).input(size_t(c.add_other_slot)));
  io.post.clamp = c.clamp;
  io.post.lo = c.lo;
  io.post.hi = c.hi;
  io.post.hardswish = c.hardswish;
  return make_conv_kernel(cn, session, io, pp);
}

}  // namespace nxrt::cpu
