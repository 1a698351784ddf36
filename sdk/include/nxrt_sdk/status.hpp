// Errors inside a plugin are C++ exceptions; at the ABI boundary they become
// nxrt_status values. Nothing throws across the boundary.
#pragma once
#include <nxrt_ep.h>

#include <fmt/format.h>

#include <new>
#include <stdexcept>
#include <string>
#include <utility>

namespace nxrt::sdk {

// The host's services, set once by negotiation (see plugin.hpp).
inline const nxrt_host_services*& host_services_slot() {
  static const nxrt_host_services* host = nullptr;
  return host;
}
inline const nxrt_host_services& host() { return *host_services_slot(); }

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

template <typename... Args>
[[noreturn]] void fail(nxrt_status_code code, fmt::format_string<Args...> f, Args&&... args) {
  throw Error(code, fmt::format(f, std::forward<Args>(args)...));
}

// Throws when a host call failed, carrying the host's message.
inline void check(nxrt_status* status) {
  if (status == nullptr) return;
  auto code = host().status_code(status);
  std::string message = host().status_message(status);
  host().status_release(status);
  throw Error(code, std::move(message));
}

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
