// The kernel's view of one compute call: inputs, outputs to bind, stream.
//
// Ownership: a Context wraps the host's nxrt_kernel_context for one compute call and owns nothing;
// the views it returns point into host-owned (or plugin-allocated) memory valid until compute returns.
// Thread class: [per-object], like the call it belongs to; never keep it past compute().
#pragma once
#include "tensor.hpp"

#include <optional>
#include <span>
#include <string_view>

namespace nxrt::sdk {

class Context {
 public:
  explicit Context(nxrt_kernel_context* ctx) : ctx_(ctx) {}
  nxrt_kernel_context* raw() const { return ctx_; }
  size_t input_count() const { return host().ctx_input_count(ctx_); }
  size_t output_count() const { return host().ctx_output_count(ctx_); }

  // Throws when the input is absent; see optional_input.
  ConstTensorView input(size_t i) const {
    nxrt_const_tensor t{};
    t.struct_size = sizeof t;
    check(host().ctx_input(ctx_, i, &t));
    return ConstTensorView(t);
  }
  std::optional<ConstTensorView> optional_input(size_t i) const {
    if (i >= input_count()) return std::nullopt;
    nxrt_const_tensor t{};
    t.struct_size = sizeof t;
    nxrt_status* s = host().ctx_input(ctx_, i, &t);
    if (s && host().status_code(s) == NXRT_NOT_FOUND) {
      host().status_release(s);
      return std::nullopt;
    }
    check(s);
    return ConstTensorView(t);
  }
  TensorView output(size_t i, nxrt_dtype dtype, std::span<const int64_t> dims) {
    nxrt_tensor t{};
    t.struct_size = sizeof t;
    check(host().ctx_output(ctx_, i, dtype, uint32_t(dims.size()), dims.data(), &t));
    return TensorView(t);
  }
  TensorView output(size_t i, nxrt_dtype dtype, std::initializer_list<int64_t> dims) {
    return output(i, dtype, std::span<const int64_t>(dims.begin(), dims.size()));
  }
  // Element `element` of STRING output i (bound with output() first) becomes a copy of
  // `s`, owned by the host. Needs a 2.3 host (the host offers string nodes only to plugins
  // declaring NXRT_FEATURE_STRING_TENSORS, and only a 2.3 host knows that bit).
  void set_string(size_t i, uint64_t element, std::string_view s) {
    if (!NXRT_HAS_FIELD(&host(), nxrt_host_services, ctx_output_string_set) || !host().ctx_output_string_set)
      fail(NXRT_UNSUPPORTED, "the host is older than ABI 2.3 and cannot take string outputs");
    check(host().ctx_output_string_set(ctx_, i, element, s.data(), s.size()));
  }
  nxrt_stream* stream() const { return host().ctx_stream(ctx_); }
  bool cancelled() const { return host().ctx_cancelled(ctx_) != 0; }
  uint64_t run_id() const { return host().ctx_run_id(ctx_); }

 private:
  nxrt_kernel_context* ctx_;
};

}  // namespace nxrt::sdk
