// MobileNet's inverted-residual block claimed as one group and run in row bands
// (conv_inverted_residual.hpp): [expand 1x1 Conv -> act] -> depthwise KxK Conv -> [act] ->
// [project 1x1 Conv -> [Add] -> [act]], act: Relu | Clip | HardSwish, at least two Convs.
//
// Claimed only when the result cannot differ from the nodes' and the bands pay:
//   * every Conv has a static input shape, constant float32 weights and bias (or none),
//     and each reads the previous one's chain output through input 0, its sole reader;
//   * the expand and project Convs are plain 1x1 (stride 1, no pad, group 1, 2-D), the
//     depthwise one has one channel per group, equal strides and a direct kernel on this CPU
//     (dw_direct_ok: 3x3, 5x5 or 7x7);
//   * unless the block runs channels-last (inverted_residual_nhwc_ok), neither 1x1 Conv has
//     so few pixels that alone it would run as the transposed product (conv_uses_transposed:
//     MobileNetV2's 7x7 blocks), which planar bands cannot do; such a project Conv is left
//     out of the block (expand + depthwise still fuse).
#include <cstring>

#include "conv_depthwise.hpp"
#include "conv_inverted_residual.hpp"
#include "fusion_view.hpp"
#include "gemm.hpp"
#include "ops.hpp"

namespace nxrt::cpu {
using namespace fusion;

namespace {

// The shape of a 2-D float Conv with a static X and constant weights and bias; nullopt otherwise.
std::optional<ConvShape> static_conv_shape(const Node& n) {
  if (!is_op(n, "Conv") || n.input_count() < 2 || n.output_count() != 1 || !n.has_output(0)) return std::nullopt;
  auto x = n.input(0), w = n.input(1);
  if (!x.present() || !x.static_shape() || x.rank() != 4 || x.dtype() != NXRT_DTYPE_FLOAT32) return std::nullopt;
  if (!w.present() || !w.is_constant() || w.dtype() != NXRT_DTYPE_FLOAT32) return std::nullopt;
  if (n.input_count() > 2 && n.input(2).present()) {
    auto b = n.input(2);
    if (!b.is_constant() || b.dtype() != NXRT_DTYPE_FLOAT32) return std::nullopt;
  }
  try {
    ConstTensorView wt = w.constant();
    ConvShape s = conv_shape(read_conv_attrs(n, 1), x.dims(), wt.dims(), "Conv");
    if (n.input_count() > 2 && n.input(2).present() && n.input(2).constant().numel() != s.out_c) return std::nullopt;
    return s;
  } catch (const sdk::Error&) {
    return std::nullopt;
  }
}

bool is_plain_pointwise(const ConvShape& s) { return s.group == 1 && conv_is_pointwise(s); }

bool is_banded_depthwise(const ConvShape& s) {
  return s.stride_h == s.stride_w && dw_direct_ok(s);
}

struct Block {
  std::optional<Chain> expand, project;
  Chain dw;
  ConvShape expand_shape, dw_shape, project_shape;
  std::vector<size_t> nodes() const {
    std::vector<size_t> v;
    for (const Chain* c : {expand ? &*expand : nullptr, &dw, project ? &*project : nullptr})
      if (c) v.insert(v.end(), c->nodes.begin(), c->nodes.end());
    return v;
  }
};

// The Conv reading the chain's output through input 0 as its sole reader, when `ok` allows it.
template <typename Ok>
std::optional<size_t> next_conv(const sdk::Graph& g, const ViewIndex& ix, const Chain& c, Ok ok) {
  Node last = g.node(c.nodes.back());
  if (last.output_count() != 1 || !last.has_output(0)) return std::nullopt;
  auto use = sole_use(ix, last.output(0).raw());
  if (!use || use->second != 0 || !ok(use->first) || !is_op(g.node(use->first), "Conv")) return std::nullopt;
  return use->first;
}

// The block's shapes as the kernel reads them (dw, has_expand, expand_in_c, has_project,
// project_out_c), for inverted_residual_nhwc_ok and the kernel itself.
InvertedResidual block_shapes(const Block& b) {
  InvertedResidual r;
  r.dw = b.dw_shape;
  r.has_expand = b.expand.has_value();
  r.expand_in_c = r.has_expand ? b.expand_shape.in_c : 0;
  r.has_project = b.project.has_value();
  r.project_out_c = r.has_project ? b.project_shape.out_c : 0;
  return r;
}

template <typename Ok>
std::optional<Block> match_block(const sdk::Graph& g, const ViewIndex& ix, size_t head, Ok ok) {
  Block b;
  auto hs = static_conv_shape(g.node(head));
  if (!hs) return std::nullopt;
  size_t dw = head;
  if (is_plain_pointwise(*hs)) {
    b.expand = follow_chain(g, ix, head, ok);
    b.expand_shape = *hs;
    if (b.expand->add_other_slot >= 0) return std::nullopt;
    auto d = next_conv(g, ix, *b.expand, ok);
    if (!d) return std::nullopt;
    dw = *d;
  }
  auto ds = static_conv_shape(g.node(dw));
  if (!ds || !is_banded_depthwise(*ds)) return std::nullopt;
  if (b.expand && (ds->in_c != hs->out_c || ds->in_h != hs->out_h || ds->in_w != hs->out_w || ds->batch != hs->batch))
    return std::nullopt;
  b.dw = follow_chain(g, ix, dw, ok);
  b.dw_shape = *ds;
  if (b.dw.add_other_slot < 0)
    if (auto p = next_conv(g, ix, b.dw, ok)) {
      auto ps = static_conv_shape(g.node(*p));
      if (ps && is_plain_pointwise(*ps) && ps->in_c == ds->out_c && ps->in_h == ds->out_h && ps->in_w == ds->out_w &&
          ps->batch == ds->batch) {
        b.project = follow_chain(g, ix, *p, ok);
        b.project_shape = *ps;
      }
    }
  // Channels-last the 1x1 convs are transposed products already (channels along the GEMM's
  // panels), whatever the pixel count: MobileNetV2's 7x7 stage runs as blocks too.
  if (b.expand && b.project && inverted_residual_nhwc_ok(block_shapes(b))) return b;
  // Planar, few pixels: alone, those 1x1 convs run as the transposed product, which bands of
  // rows cannot do. A project conv that would is left out (the expand and the depthwise conv
  // still run as one).
  if (b.project && conv_uses_transposed(b.project_shape)) b.project.reset();
  if (!b.expand && !b.project) return std::nullopt;
  if (b.expand && conv_uses_transposed(b.expand_shape)) return std::nullopt;
  return b;
}

// What nxrt inspect adds for a channels-last block's GEMM layouts (gemm_pixels_layout).
std::string pixels_layout_note(const InvertedResidual& b) {
  const bool tail64 = gemm_pixels_layout(b.dw.in_c) == PixelsLayout::tail64 ||
                      gemm_pixels_layout(b.project_out_c) == PixelsLayout::tail64;
  return tail64 ? " (last 64 columns on 6 x 64 tiles)" : "";
}

}  // namespace

std::vector<size_t> follow_conv_block(const sdk::Graph& g, const ViewIndex& ix, size_t head,
                                      const std::function<bool(size_t)>& ok) {
  auto b = match_block(g, ix, head, ok);
  return b ? b->nodes() : std::vector<size_t>{};
}

std::unique_ptr<Kernel> create_conv_block_kernel(const sdk::Graph& sg, CpuSession& session, sdk::Prepacked& pp) {
  const size_t count = sg.node_count();
  size_t convs = 0;
  std::optional<size_t> head;
  for (size_t i = 0; i < count; ++i)
    if (is_op(sg.node(i), "Conv")) {
      ++convs;
      if (!head) head = i;  // nodes arrive in model order: the block's first Conv first
    }
  if (convs < 2) return nullptr;
  const ViewIndex ix = index_view(sg);
  auto b = match_block(sg, ix, *head, [](size_t) { return true; });
  if (!b || b->nodes().size() != count)
    sdk::fail(NXRT_UNSUPPORTED, "group of {} nodes with {} Convs is not an inverted-residual block this plugin fuses",
              count, convs);
  const Chain& last_chain = b->project ? *b->project : b->dw;
  Node last = sg.node(last_chain.nodes.back());
  if (sg.output_count() != 1 || sg.output(0).raw() != last.output(0).raw())
    sdk::fail(NXRT_UNSUPPORTED, "fused Conv block must have exactly one output, its last value ({} outputs)",
              sg.output_count());

  struct State {
    InvertedResidual block;
    int x = 0, residual = -1;
    std::vector<int64_t> x_dims, out_dims;
  } st;
  Node first = sg.node(*head);
  st.x = group_input_index(sg, first.input(0));
  if (last_chain.add_other_slot >= 0)
    st.residual = group_input_index(sg, sg.node(last_chain.nodes[1]).input(size_t(last_chain.add_other_slot)));
  st.x_dims.assign(first.input(0).dims().begin(), first.input(0).dims().end());
  auto od = last.output(0).dims();
  st.out_dims.assign(od.begin(), od.end());

  // Weights and biases are read from the prepacked copies only, unless the same value is
  // also a run-time input of the group (then the host must keep it).
  const nxrt_value* runtime_x = first.input(0).raw();
  const nxrt_value* runtime_res =
      st.residual >= 0 ? sg.node(last_chain.nodes[1]).input(size_t(last_chain.add_other_slot)).raw() : nullptr;
  auto runtime = [&](const sdk::Value& v) { return v.raw() == runtime_x || v.raw() == runtime_res; };
  InvertedResidual& blk = st.block;
  pp.param("gemm_mr", kGemmMR);
  // Packs one Conv's weights (1x1 as GEMM A, depthwise as given) and copies its bias; the
  // host may then free them.
  // (Channels-last, the packed A of the 1x1 convs is not made: packed_w false.)
  auto take = [&](const Chain& c, const ConvShape& s, const char* name, const float*& w, const float*& bias,
                  ConvPostOps& post, bool packed_w) {
    Node n = sg.node(c.nodes.front());
    auto wv = n.input(1);
    ConstTensorView wt = wv.constant();
    pp.param(fmt::format("{}_out_c", name), s.out_c);
    pp.param(fmt::format("{}_in_c_per_group", name), s.icg());
    pp.param(fmt::format("{}_k", name), s.k_h * 16 + s.k_w);
    w = nullptr;
    if (packed_w)
      w = pp.buffer<float>(fmt::format("{}_w", name), packed_conv_floats(s), [&](std::span<float> dst) {
            pack_conv_weights_into(s, static_cast<const float*>(wt.raw()), dst.data());
          }).data();
    if (!runtime(wv)) pp.capture(wv);
    bias = nullptr;
    if (n.input_count() > 2 && n.input(2).present()) {
      auto bv = n.input(2);
      ConstTensorView bt = bv.constant();
      bias = pp.buffer<float>(fmt::format("{}_b", name), size_t(bt.numel()), [&](std::span<float> dst) {
               if (!dst.empty()) std::memcpy(dst.data(), bt.raw(), dst.size() * sizeof(float));
             }).data();
      if (!runtime(bv)) pp.capture(bv);
    }
    post.clamp = c.clamp;
    post.lo = c.lo;
    post.hi = c.hi;
    post.hardswish = c.hardswish;
  };
  blk = block_shapes(*b);
  // The layout depends on the CPU: a blob made with the other one is recompiled, not misread.
  blk.nhwc = inverted_residual_nhwc_ok(blk);
  pp.param("channels_last", blk.nhwc ? 1 : 0);
  take(b->dw, b->dw_shape, "dw", blk.dw_w, blk.dw_b, blk.dw_post, !blk.nhwc);
  if (blk.has_expand) take(*b->expand, b->expand_shape, "expand", blk.expand_w, blk.expand_b, blk.expand_post, !blk.nhwc);
  if (blk.has_project)
    take(*b->project, b->project_shape, "project", blk.project_w, blk.project_b, blk.project_post, !blk.nhwc);
  if (blk.nhwc) {
    auto raw = [&](const Chain& c) { return static_cast<const float*>(sg.node(c.nodes.front()).input(1).constant().raw()); };
    const InvertedResidualNhwcSizes z = inverted_residual_nhwc_sizes(blk);
    const float* ew = raw(*b->expand);
    const float* pw = raw(*b->project);
    const float* dw = raw(b->dw);
    const float* db = blk.dw_b;  // the copy take() made (or null)
    // Each layout of W^T (gemm_pixels_layout) has its own buffer name: a blob packed in
    // another is recompiled, not misread.
    const std::string expand_name = fmt::format("expand_wt{}", gemm_pixels_layout_tag(gemm_pixels_layout(blk.dw.in_c)));
    const std::string project_name =
        fmt::format("project_wt{}", gemm_pixels_layout_tag(gemm_pixels_layout(blk.project_out_c)));
    blk.expand_wt = pp.buffer<float>(expand_name, z.expand_wt, [&](std::span<float> dst) {
      pack_inverted_residual_nhwc(blk, ew, nullptr, nullptr, nullptr, dst.data(), nullptr, nullptr, nullptr);
    }).data();
    blk.project_wt = pp.buffer<float>(project_name, z.project_wt, [&](std::span<float> dst) {
      pack_inverted_residual_nhwc(blk, nullptr, pw, nullptr, nullptr, nullptr, dst.data(), nullptr, nullptr);
    }).data();
    blk.dw_wn = pp.buffer<float>("dw_wn", z.dw_wn, [&](std::span<float> dst) {
      pack_inverted_residual_nhwc(blk, nullptr, nullptr, dw, nullptr, nullptr, nullptr, dst.data(), nullptr);
    }).data();
    blk.dw_bn = pp.buffer<float>("dw_bn", z.dw_bn, [&](std::span<float> dst) {
      pack_inverted_residual_nhwc(blk, nullptr, nullptr, nullptr, db, nullptr, nullptr, nullptr, dst.data());
    }).data();
  }
  ThreadPool* pool = session.pool();
  std::string description =
      fmt::format("inverted-residual block{} in bands of {} rows: {}depthwise {}x{}{}{}{}",
                  blk.nhwc ? " channels-last" : "", inverted_residual_band_rows(blk, pool ? pool->threads() : 1),
                  blk.has_expand ? "1x1 expand + " : "", blk.dw.k_h, blk.dw.k_w, blk.dw.stride_h > 1 ? " stride 2" : "",
                  blk.has_project ? " + 1x1 project" : "",
                  blk.nhwc ? pixels_layout_note(blk) : "");
  return make_kernel([st = std::move(st), pool](Context& ctx) {
    ConstTensorView x = ctx.input(size_t(st.x));
    if (!std::equal(x.dims().begin(), x.dims().end(), st.x_dims.begin(), st.x_dims.end()))
      sdk::fail(NXRT_INVALID_ARGUMENT, "Conv block: input {} is not the shape the kernel was created for {}",
                dims_str(x.dims()), dims_str(st.x_dims));
    const float* res = nullptr;
    if (st.residual >= 0) {
      ConstTensorView r = ctx.input(size_t(st.residual));
      if (!std::equal(r.dims().begin(), r.dims().end(), st.out_dims.begin(), st.out_dims.end()))
        sdk::fail(NXRT_INVALID_ARGUMENT, "Conv block: the added input {} does not have the block's output shape {}",
                  dims_str(r.dims()), dims_str(st.out_dims));
      res = r.data<float>();
    }
    TensorView y = ctx.output(0, NXRT_DTYPE_FLOAT32, st.out_dims);
    if (y.numel() == 0) return;
    inverted_residual(st.block, x.data<float>(), res, y.data<float>(), pool);
  }, std::move(description));
}

}  // namespace nxrt::cpu
