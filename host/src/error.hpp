// Host-side errors: thrown inside the host, turned into nxrt_error at the C API.
#pragma once
#include <nxrt/nxrt.h>

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace nxrt {

class HostError : public std::runtime_error {
 public:
  HostError(nxrt_error_code code, const std::string& message) : std::runtime_error(message), code_(code) {}
  nxrt_error_code code() const { return code_; }

 private:
  nxrt_error_code code_;
};

template <typename... Args>
[[noreturn]] void raise(nxrt_error_code code, fmt::format_string<Args...> f, Args&&... args) {
  throw HostError(code, fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace nxrt
