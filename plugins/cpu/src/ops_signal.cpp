// Signal ops (opset 17): DFT, STFT, MelWeightMatrix. The math is in
// signal.cpp / fft.cpp (double precision, any length).
#include <cmath>

#include "ops.hpp"
#include "signal.hpp"

namespace nxrt::cpu {
namespace {

// One int32/int64 scalar (or one-element tensor).
int64_t read_scalar_int(const ConstTensorView& t, const char* op, const char* what) {
  const auto v = read_ints(t, op, what);
  if (v.size() != 1) sdk::fail(NXRT_INVALID_ARGUMENT, "{}: {} must be a scalar, got shape {}", op, what, dims_str(t.dims()));
  return v[0];
}

double read_scalar_float(const ConstTensorView& t, const char* op, const char* what) {
  if (t.numel() != 1) sdk::fail(NXRT_INVALID_ARGUMENT, "{}: {} must be a scalar, got shape {}", op, what, dims_str(t.dims()));
  if (t.dtype() == NXRT_DTYPE_FLOAT32) return double(t.data<float>()[0]);
  if (t.dtype() == NXRT_DTYPE_FLOAT64) return t.data<double>()[0];
  sdk::fail(NXRT_INVALID_ARGUMENT, "{}: {} must be float32 or float64, got {}", op, what, sdk::dtype_name(t.dtype()));
}

// --------------------------------------------------------------------- DFT

Check dft_check(const Node& n) {
  if (auto r = sdk::require_dtypes(n, kFloat, 0, 1)) return r;
  if (auto r = same_dtype(n, 1)) return r;
  if (n.output(0).dtype() != n.input(0).dtype()) return sdk::refuse(NXRT_REFUSE_DTYPE, "DFT: output dtype differs from input");
  if (auto r = index_dtype(n, 1, "dft_length")) return r;
  if (auto r = known_attrs(n, {"axis", "inverse", "onesided"})) return r;
  if (n.attr_int("axis", 1) < 1)
    return sdk::refuse(NXRT_REFUSE_ATTRIBUTE, "DFT: axis {} is not implemented (opset 17 axes count from 1, after the batch)",
                       n.attr_int("axis", 1));
  if (n.attr_int("inverse", 0) && n.attr_int("onesided", 0))
    return sdk::refuse(NXRT_REFUSE_ATTRIBUTE, "DFT: inverse with onesided=1 is not implemented");
  return std::nullopt;
}

std::unique_ptr<Kernel> dft_create(const Node& n, CpuSession&) {
  const int64_t axis = n.attr_int("axis", 1);
  const bool inverse = n.attr_int("inverse", 0) != 0, onesided = n.attr_int("onesided", 0) != 0;
  return make_kernel([axis, inverse, onesided](Context& ctx) {
    ConstTensorView x = ctx.input(0);
    const int64_t r = int64_t(x.rank());
    if (r < 3) sdk::fail(NXRT_INVALID_ARGUMENT, "DFT: input rank {} < 3 ([batch, signal dims..., 1 or 2])", r);
    const int64_t comps = x.dim(size_t(r - 1));
    if (comps != 1 && comps != 2) sdk::fail(NXRT_INVALID_ARGUMENT, "DFT: last dim is {}, must be 1 (real) or 2 (complex)", comps);
    if (axis > r - 2) sdk::fail(NXRT_INVALID_ARGUMENT, "DFT: axis {} out of range for input rank {}", axis, r);
    const int64_t n_in = x.dim(size_t(axis));
    int64_t n_fft = n_in;
    if (auto l = ctx.optional_input(1)) n_fft = read_scalar_int(*l, "DFT", "dft_length");
    if (n_fft < 1) sdk::fail(NXRT_INVALID_ARGUMENT, "DFT: dft_length {} must be >= 1", n_fft);
    const int64_t n_out = onesided ? n_fft / 2 + 1 : n_fft;
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < axis; ++d) outer *= x.dim(size_t(d));
    for (int64_t d = axis + 1; d < r - 1; ++d) inner *= x.dim(size_t(d));
    std::vector<int64_t> od = x.dims();
    od[size_t(axis)] = n_out;
    od.back() = 2;
    TensorView y = ctx.output(0, x.dtype(), od);
    if (x.dtype() == NXRT_DTYPE_FLOAT32)
      dft_axis(x.data<float>(), y.data<float>(), outer, n_in, inner, int(comps), n_fft, n_out, inverse);
    else
      dft_axis(x.data<double>(), y.data<double>(), outer, n_in, inner, int(comps), n_fft, n_out, inverse);
  });
}

// -------------------------------------------------------------------- STFT

Check stft_check(const Node& n) {
  if (auto r = sdk::require_dtypes(n, kFloat, 0, 1)) return r;
  if (auto r = typed_same(n, kFloat, 1)) return r;
  if (n.has_input(2) && n.input(2).dtype() != n.input(0).dtype()) return sdk::refuse(NXRT_REFUSE_DTYPE, "STFT: window dtype differs from signal");
  if (n.output(0).dtype() != n.input(0).dtype()) return sdk::refuse(NXRT_REFUSE_DTYPE, "STFT: output dtype differs from signal");
  if (auto r = index_dtype(n, 1, "frame_step")) return r;
  if (auto r = index_dtype(n, 3, "frame_length")) return r;
  return known_attrs(n, {"onesided"});
}

std::unique_ptr<Kernel> stft_create(const Node& n, CpuSession&) {
  const bool onesided = n.attr_int("onesided", 1) != 0;
  return make_kernel([onesided](Context& ctx) {
    ConstTensorView x = ctx.input(0);
    if (x.rank() != 3) sdk::fail(NXRT_INVALID_ARGUMENT, "STFT: signal must be [batch, length, 1 or 2], got {}", dims_str(x.dims()));
    const int64_t batch = x.dim(0), length = x.dim(1), comps = x.dim(2);
    if (comps != 1 && comps != 2) sdk::fail(NXRT_INVALID_ARGUMENT, "STFT: last dim is {}, must be 1 (real) or 2 (complex)", comps);
    if (onesided && comps == 2) sdk::fail(NXRT_INVALID_ARGUMENT, "STFT: onesided=1 needs a real signal (last dim 1)");
    const int64_t step = read_scalar_int(ctx.input(1), "STFT", "frame_step");
    if (step < 1) sdk::fail(NXRT_INVALID_ARGUMENT, "STFT: frame_step {} must be >= 1", step);
    auto window = ctx.optional_input(2);
    auto fl = ctx.optional_input(3);
    int64_t frame_length = -1;
    if (window) {
      if (window->rank() != 1) sdk::fail(NXRT_INVALID_ARGUMENT, "STFT: window must be 1-D, got {}", dims_str(window->dims()));
      frame_length = window->dim(0);
    }
    if (fl) {
      const int64_t v = read_scalar_int(*fl, "STFT", "frame_length");
      if (frame_length >= 0 && v != frame_length)
        sdk::fail(NXRT_INVALID_ARGUMENT, "STFT: frame_length {} differs from the window length {}", v, frame_length);
      frame_length = v;
    }
    if (frame_length < 0) sdk::fail(NXRT_INVALID_ARGUMENT, "STFT: needs a window or a frame_length");
    if (frame_length < 1 || frame_length > length)
      sdk::fail(NXRT_INVALID_ARGUMENT, "STFT: frame_length {} must be in [1, signal length {}]", frame_length, length);
    const int64_t frames = (length - frame_length) / step + 1;
    const int64_t bins = onesided ? frame_length / 2 + 1 : frame_length;
    TensorView y = ctx.output(0, x.dtype(), {batch, frames, bins, 2});
    if (x.dtype() == NXRT_DTYPE_FLOAT32)
      stft(x.data<float>(), window ? window->data<float>() : nullptr, y.data<float>(), batch, length, int(comps), step,
           frame_length, frames, bins);
    else
      stft(x.data<double>(), window ? window->data<double>() : nullptr, y.data<double>(), batch, length, int(comps), step,
           frame_length, frames, bins);
  });
}

// --------------------------------------------------------- MelWeightMatrix

Check mel_check(const Node& n) {
  for (size_t i = 0; i < 3; ++i)
    if (auto r = index_dtype(n, i, "num_mel_bins / dft_length / sample_rate")) return r;
  for (size_t i = 3; i < 5; ++i) {
    const auto t = n.input(i).dtype();
    if (t != NXRT_DTYPE_FLOAT32 && t != NXRT_DTYPE_FLOAT64)
      return sdk::refuse(NXRT_REFUSE_DTYPE, "MelWeightMatrix input {} (edge hertz) is {}, only float32/float64 are implemented", i,
                         sdk::dtype_name(t));
  }
  const auto t = n.output(0).dtype();
  if (t != NXRT_DTYPE_FLOAT32 && t != NXRT_DTYPE_FLOAT64)
    return sdk::refuse(NXRT_REFUSE_DTYPE, "MelWeightMatrix output is {}, only float32/float64 are implemented", sdk::dtype_name(t));
  return known_attrs(n, {"output_datatype"});
}

std::unique_ptr<Kernel> mel_create(const Node& n, CpuSession&) {
  const nxrt_dtype dt = n.output(0).dtype();
  return make_kernel([dt](Context& ctx) {
    const char* op = "MelWeightMatrix";
    const int64_t bins = read_scalar_int(ctx.input(0), op, "num_mel_bins");
    const int64_t dft_length = read_scalar_int(ctx.input(1), op, "dft_length");
    const int64_t rate = read_scalar_int(ctx.input(2), op, "sample_rate");
    const double lower = read_scalar_float(ctx.input(3), op, "lower_edge_hertz");
    const double upper = read_scalar_float(ctx.input(4), op, "upper_edge_hertz");
    if (bins < 1 || dft_length < 1 || rate < 1)
      sdk::fail(NXRT_INVALID_ARGUMENT, "{}: num_mel_bins ({}), dft_length ({}) and sample_rate ({}) must be >= 1", op, bins,
                dft_length, rate);
    if (!(lower >= 0 && lower < upper))
      sdk::fail(NXRT_INVALID_ARGUMENT, "{}: edges must satisfy 0 <= lower ({}) < upper ({})", op, lower, upper);
    const std::vector<double> m = mel_weight_matrix(bins, dft_length, rate, lower, upper);
    TensorView y = ctx.output(0, dt, {dft_length / 2 + 1, bins});
    if (dt == NXRT_DTYPE_FLOAT32)
      for (size_t i = 0; i < m.size(); ++i) y.data<float>()[i] = float(m[i]);
    else
      for (size_t i = 0; i < m.size(); ++i) y.data<double>()[i] = m[i];
  });
}

}  // namespace

void register_signal_ops(Registry& r) {
  r.add(Def{"DFT", "", 17, 19, dft_check, dft_create});
  r.add(Def{"STFT", "", 17, INT_MAX, stft_check, stft_create});
  r.add(Def{"MelWeightMatrix", "", 17, INT_MAX, mel_check, mel_create});
}

}  // namespace nxrt::cpu
