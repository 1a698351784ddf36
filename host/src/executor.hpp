// The executor (executor.cpp): Session::run walks the steps of a prepared session;
// this is what the rest of the host uses of it: per-run state and the kernel-context
// services the host gives plugins during kernel_compute.
#pragma once
#include "kernel_context.hpp"
#include "run_state.hpp"

#include <memory>
#include <vector>

namespace nxrt {

// Per-run buffers (arenas, streams), pooled by the session.
std::unique_ptr<RunState> make_run_state(Session& s, const std::vector<uint64_t>& arena_bytes);
void free_run_state(Session& s, RunState& rs);

// Host services of the kernel context (see nxrt_host_services).
nxrt_status* ctx_input(const nxrt_kernel_context* ctx, size_t i, nxrt_const_tensor* out);
nxrt_status* ctx_output(nxrt_kernel_context* ctx, size_t i, nxrt_dtype dtype, uint32_t rank, const int64_t* dims,
                        nxrt_tensor* out);
nxrt_status* ctx_output_string_set(nxrt_kernel_context* ctx, size_t i, uint64_t element, const char* bytes, uint64_t size);
int ctx_cancelled(const nxrt_kernel_context* ctx);
uint64_t ctx_run_id(const nxrt_kernel_context* ctx);

}  // namespace nxrt
