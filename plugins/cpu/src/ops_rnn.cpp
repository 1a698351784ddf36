// RNN, GRU, LSTM: forward, reverse and bidirectional, sequence_lens,
// initial_h/initial_c, peepholes, clip, linear_before_reset (GRU), layout 0/1,
// explicit activations with activation_alpha/beta per direction (resolved once
// at kernel creation, rnn_activation.hpp). Straight loops in double per time
// step (dot products over the input and hidden sizes). float32.
#include <algorithm>
#include <cmath>
#include <string>

#include "ops.hpp"
#include "rnn_activation.hpp"

namespace nxrt::cpu {
namespace {

enum class Cell { Rnn, Gru, Lstm };


int gates_of(Cell c) { return c == Cell::Rnn ? 1 : c == Cell::Gru ? 3 : 4; }

// The ONNX defaults: RNN f=Tanh; GRU f=Sigmoid, g=Tanh; LSTM f=Sigmoid, g=Tanh, h=Tanh.
std::vector<RnnActivationKind> default_activations(Cell c) {
  using K = RnnActivationKind;
  if (c == Cell::Rnn) return {K::Tanh};
  if (c == Cell::Gru) return {K::Sigmoid, K::Tanh};
  return {K::Sigmoid, K::Tanh, K::Tanh};
}

RnnActivations activations_of(const Node& n, Cell c) {
  const size_t D = n.attr_string("direction", "forward") == "bidirectional" ? 2 : 1;
  return resolve_rnn_activations(n.attr_strings("activations"), n.attr_floats("activation_alpha"),
                                 n.attr_floats("activation_beta"), default_activations(c), D);
}

Check rnn_check(const Node& n, Cell c) {
  if (auto r = sdk::require_dtypes(n, kF32, 0, 4)) return r;
  if (auto r = sdk::require_dtypes(n, kF32, 5)) return r;  // initial_h, initial_c, P and the outputs
  if (auto r = input_dtype_is(n, 4, NXRT_DTYPE_INT32, "sequence_lens")) return r;
  if (auto r = known_attrs(n, {"activation_alpha", "activation_beta", "activations", "clip", "direction", "hidden_size", "layout",
                               "linear_before_reset", "input_forget"}))
    return r;
  const std::string dir = n.attr_string("direction", "forward");
  if (dir != "forward" && dir != "reverse" && dir != "bidirectional")
    return sdk::refuse(NXRT_REFUSE_ATTRIBUTE, "{}: direction '{}'", n.op_type(), dir);
  if (auto acts = activations_of(n, c); !acts.error.empty())
    return sdk::refuse(NXRT_REFUSE_ATTRIBUTE, "{}: {}", n.op_type(), acts.error);
  if (n.attr_int("input_forget", 0) != 0) return sdk::refuse(NXRT_REFUSE_ATTRIBUTE, "LSTM: input_forget=1 is not implemented");
  if (!n.has_attr("hidden_size")) return sdk::refuse(NXRT_REFUSE_ATTRIBUTE, "{}: hidden_size is required", n.op_type());
  return std::nullopt;
}

std::unique_ptr<Kernel> rnn_create(const Node& n, CpuSession&, Cell cell) {
  const int64_t H = n.attr_int("hidden_size", 0);
  const std::string dir = n.attr_string("direction", "forward");
  const bool has_clip = n.has_attr("clip");
  const double clip = n.attr_float("clip", 0.f);
  const bool layout1 = n.attr_int("layout", 0) != 0;
  const bool lbr = n.attr_int("linear_before_reset", 0) != 0;
  const bool want_y = n.has_output(0), want_h = n.has_output(1), want_c = cell == Cell::Lstm && n.has_output(2);
  RnnActivations acts = activations_of(n, cell);
  if (!acts.error.empty()) sdk::fail(NXRT_INVALID_ARGUMENT, "{}: {}", n.op_type(), acts.error);
  const std::vector<RnnActivation> fns = std::move(acts.functions);
  const size_t per_dir = default_activations(cell).size();
  return make_kernel([=](Context& ctx) {
    ConstTensorView x = ctx.input(0), w = ctx.input(1), r = ctx.input(2);
    auto b = ctx.optional_input(3);
    auto lens_t = ctx.optional_input(4);
    auto h0 = ctx.optional_input(5);
    auto c0 = cell == Cell::Lstm ? ctx.optional_input(6) : std::nullopt;
    auto pp = cell == Cell::Lstm ? ctx.optional_input(7) : std::nullopt;
    if (x.rank() != 3) sdk::fail(NXRT_INVALID_ARGUMENT, "{}: X must be 3-D", "RNN");
    const int64_t T = layout1 ? x.dim(1) : x.dim(0), B = layout1 ? x.dim(0) : x.dim(1), I = x.dim(2);
    const int64_t D = dir == "bidirectional" ? 2 : 1, G = gates_of(cell);
    if (w.rank() != 3 || w.dim(0) != D || w.dim(1) != G * H || w.dim(2) != I || r.dim(1) != G * H || r.dim(2) != H)
      sdk::fail(NXRT_INVALID_ARGUMENT, "recurrent op: W {} / R {} do not match", dims_str(w.dims()), dims_str(r.dims()));
    std::vector<int64_t> lens(static_cast<size_t>(B), T);
    if (lens_t) {
      const int32_t* lp = lens_t->data<int32_t>();
      for (int64_t i = 0; i < B; ++i) lens[size_t(i)] = std::clamp<int64_t>(lp[i], 0, T);
    }
    const float* xp = x.data<float>();
    const float* wp = w.data<float>();
    const float* rp = r.data<float>();
    const float* bp = b ? b->data<float>() : nullptr;
    const float* pp_ = pp ? pp->data<float>() : nullptr;
    auto xat = [&](int64_t t, int64_t bb) { return xp + (layout1 ? (bb * T + t) : (t * B + bb)) * I; };
    std::vector<double> Y(static_cast<size_t>(T * D * B * H), 0.0), Hs(static_cast<size_t>(D * B * H), 0.0), Cs(static_cast<size_t>(D * B * H), 0.0);
    if (h0)  // [D, B, H], or [B, D, H] with layout 1
      for (int64_t d = 0; d < D; ++d)
        for (int64_t bb = 0; bb < B; ++bb)
          for (int64_t h = 0; h < H; ++h)
            Hs[size_t((d * B + bb) * H + h)] = h0->data<float>()[layout1 ? (bb * D + d) * H + h : (d * B + bb) * H + h];
    if (c0)
      for (int64_t d = 0; d < D; ++d)
        for (int64_t bb = 0; bb < B; ++bb)
          for (int64_t h = 0; h < H; ++h)
            Cs[size_t((d * B + bb) * H + h)] = c0->data<float>()[layout1 ? (bb * D + d) * H + h : (d * B + bb) * H + h];
    auto cl = [&](double v) { return has_clip ? std::clamp(v, -clip, clip) : v; };
    std::vector<double> gx(static_cast<size_t>(G * H)), gh(static_cast<size_t>(G * H)), zr(static_cast<size_t>(2 * H)),
        hn(static_cast<size_t>(H));
    for (int64_t d = 0; d < D; ++d) {
      const bool rev = dir == "reverse" || d == 1;
      const float* W = wp + d * G * H * I;
      const float* R = rp + d * G * H * H;
      const float* Wb = bp ? bp + d * 2 * G * H : nullptr;
      const float* Rb = bp ? Wb + G * H : nullptr;
      const float* P = pp_ ? pp_ + d * 3 * H : nullptr;
      // f, g, h of this direction (RNN: f; GRU: f, g; LSTM: f, g, h).
      const RnnActivation act_f = fns[size_t(d) * per_dir];
      const RnnActivation act_g = per_dir > 1 ? fns[size_t(d) * per_dir + 1] : act_f;
      const RnnActivation act_h = per_dir > 2 ? fns[size_t(d) * per_dir + 2] : act_f;
      for (int64_t bb = 0; bb < B; ++bb) {
        double* hs = Hs.data() + (d * B + bb) * H;
        double* cs = Cs.data() + (d * B + bb) * H;
        const int64_t len = lens[size_t(bb)];
        for (int64_t s = 0; s < len; ++s) {
          const int64_t t = rev ? len - 1 - s : s;
          const float* xt = xat(t, bb);
          for (int64_t g = 0; g < G * H; ++g) {
            double ax = Wb ? Wb[g] : 0.0, ah = Rb ? Rb[g] : 0.0;
            for (int64_t i = 0; i < I; ++i) ax += double(W[g * I + i]) * xt[i];
            for (int64_t i = 0; i < H; ++i) ah += double(R[g * H + i]) * hs[i];
            gx[size_t(g)] = ax;
            gh[size_t(g)] = ah;
          }
          if (cell == Cell::Gru)
            for (int64_t h = 0; h < H; ++h) {
              zr[size_t(h)] = act_f(cl(gx[size_t(h)] + gh[size_t(h)]));
              zr[size_t(H + h)] = act_f(cl(gx[size_t(H + h)] + gh[size_t(H + h)]));
            }
          for (int64_t h = 0; h < H; ++h) {
            if (cell == Cell::Rnn) {
              hn[size_t(h)] = act_f(cl(gx[size_t(h)] + gh[size_t(h)]));
            } else if (cell == Cell::Gru) {
              const double z = zr[size_t(h)], rr = zr[size_t(H + h)];
              double pre = 0;
              if (lbr) {
                pre = gx[size_t(2 * H + h)] + rr * gh[size_t(2 * H + h)];
              } else {
                // (r * H_{t-1}) R_h^T + Rb_h: recompute with the reset hidden state.
                double acc = Rb ? Rb[2 * H + h] : 0.0;
                for (int64_t i = 0; i < H; ++i) acc += double(R[(2 * H + h) * H + i]) * zr[size_t(H + i)] * hs[i];
                pre = gx[size_t(2 * H + h)] + acc;
              }
              const double hh = act_g(cl(pre));
              hn[size_t(h)] = (1 - z) * hh + z * hs[h];
            } else {
              const double ig = act_f(cl(gx[size_t(h)] + gh[size_t(h)] + (P ? P[h] * cs[h] : 0.0)));
              const double fg = act_f(cl(gx[size_t(2 * H + h)] + gh[size_t(2 * H + h)] + (P ? P[2 * H + h] * cs[h] : 0.0)));
              const double cg = act_g(cl(gx[size_t(3 * H + h)] + gh[size_t(3 * H + h)]));
              const double c = fg * cs[h] + ig * cg;
              const double og = act_f(cl(gx[size_t(H + h)] + gh[size_t(H + h)] + (P ? P[H + h] * c : 0.0)));
              cs[h] = c;
              hn[size_t(h)] = og * act_h(c);
            }
          }
          for (int64_t h = 0; h < H; ++h) {
            hs[h] = hn[size_t(h)];
            Y[size_t(((t * D + d) * B + bb) * H + h)] = hn[size_t(h)];
          }
        }
      }
    }
    if (want_y) {
      std::vector<int64_t> yd = layout1 ? std::vector<int64_t>{B, T, D, H} : std::vector<int64_t>{T, D, B, H};
      TensorView y = ctx.output(0, NXRT_DTYPE_FLOAT32, yd);
      float* yp = y.data<float>();
      for (int64_t t = 0; t < T; ++t)
        for (int64_t d = 0; d < D; ++d)
          for (int64_t bb = 0; bb < B; ++bb)
            for (int64_t h = 0; h < H; ++h) {
              const int64_t o = layout1 ? ((bb * T + t) * D + d) * H + h : ((t * D + d) * B + bb) * H + h;
              yp[o] = float(Y[size_t(((t * D + d) * B + bb) * H + h)]);
            }
    }
    auto put_state = [&](size_t idx, const std::vector<double>& st) {
      std::vector<int64_t> sd = layout1 ? std::vector<int64_t>{B, D, H} : std::vector<int64_t>{D, B, H};
      TensorView o = ctx.output(idx, NXRT_DTYPE_FLOAT32, sd);
      float* op = o.data<float>();
      for (int64_t d = 0; d < D; ++d)
        for (int64_t bb = 0; bb < B; ++bb)
          for (int64_t h = 0; h < H; ++h)
            op[layout1 ? (bb * D + d) * H + h : (d * B + bb) * H + h] = float(st[size_t((d * B + bb) * H + h)]);
    };
    if (want_h) put_state(1, Hs);
    if (want_c) put_state(2, Cs);
  });
}

}  // namespace

void register_rnn_ops(Registry& r) {
  r.add(Def{"RNN", "", 7, INT_MAX, [](const Node& n) { return rnn_check(n, Cell::Rnn); },
            [](const Node& n, CpuSession& s) { return rnn_create(n, s, Cell::Rnn); }});
  r.add(Def{"GRU", "", 7, INT_MAX, [](const Node& n) { return rnn_check(n, Cell::Gru); },
            [](const Node& n, CpuSession& s) { return rnn_create(n, s, Cell::Gru); }});
  r.add(Def{"LSTM", "", 7, INT_MAX, [](const Node& n) { return rnn_check(n, Cell::Lstm); },
            [](const Node& n, CpuSession& s) { return rnn_create(n, s, Cell::Lstm); }});
}

}  // namespace nxrt::cpu
