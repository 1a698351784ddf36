// Errors inside a plugin are C++ exceptions; at the ABI boundary they become
// nxrt_status values. Nothing throws across the boundary.
//
// Ownership: an Error owns its message; check() takes ownership of the host status it is given
// and releases it. Thread class: any thread.
#pragma once
#include <nxrt_ep.h>

#include <fmt/format.h>

#include <atomic>
#include <new>
#include <stdexcept>
#include <string>
#include <utility>

namespace nxrt::sdk {

// The host's services, stored by every negotiation (see plugin.hpp). One process
// has one host: every instance of a library gets the same table, which stays
// valid while any instance lives, so kernels reach it without an instance.
inline std::atomic<const nxrt_host_services*>& host_services_slot() {
  static std::atomic<const nxrt_host_services*> host{nullptr};
  return host;
}
inline const nxrt_host_services& host() { return *host_services_slot().load(std::memory_order_acquire); }

class Error : public std::runtime_error {
 public:
  Error(nxrt_status_code code, std::string message, bool retryable = false)
      : std::runtime_error(std::move(message)), code_(code), retryable_(retryable) {}
  nxrt_status_code code() const { return code_; }
  bool retryable() const { return retryable_; }

 private:
  nxrt_status_code code_;
  bool retryable_;
};

// A failure the host may retry once (a transient allocation or device failure).
template <typename... Args>
[[noreturn]] void fail_retryable(nxrt_status_code code, fmt::format_string<Args...> f, Args&&... args) {
  throw Error(code, fmt::format(f, std::forward<Args>(args)...), true);
}

template <typename... Args>
[[noreturn]] void fail(nxrt_status_code code, fmt::format_string<Args...> f, Args&&... args) {
  throw Error(code, fmt::format(f, std::forward<Args>(args)...));
}

// Throws when a host call failed, carrying the host's message.
inline void check(nxrt_status* status) {
  if (status == nullptr) return;
  auto code = host().status_code(status);
  std::string message = host().status_message(status);
  bool retryable = host().status_retryable(status) != 0;
  host().status_release(status);
  throw Error(code, std::move(message), retryable);
}

// Never NULL: the host returns a static out-of-memory status when it cannot allocate.
inline nxrt_status* make_status(nxrt_status_code code, const std::string& message,
                                bool retryable = false) {
  return host().status_create(code, retryable ? 1 : 0, message.c_str());
}

// Runs `f` and turns any exception into a status. Use at every entry point.
template <typename F>
nxrt_status* guard(F&& f) noexcept {
  try {
    f();
    return nullptr;
  } catch (const Error& e) {
    return make_status(e.code(), e.what(), e.retryable());
  } catch (const std::bad_alloc&) {
    return make_status(NXRT_OUT_OF_MEMORY, "out of host memory");
  } catch (const std::exception& e) {
    return make_status(NXRT_INTERNAL, e.what());
  } catch (...) {
    return make_status(NXRT_INTERNAL, "unknown C++ exception inside the plugin");
  }
}

}  // namespace nxrt::sdk
