// For the host's doctests: the message a call throws as a HostError ("" when it does not throw).
#pragma once
#include "error.hpp"

#include <string>

namespace nxrt::test {

inline std::string error_of(auto&& f) {
  try {
    f();
  } catch (const HostError& e) {
    return e.what();
  }
  return "";
}

}  // namespace nxrt::test
