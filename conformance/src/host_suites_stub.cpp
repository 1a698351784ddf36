// Built when libnxrt is not available: the ops and models suites report "not run".
#include "checks.hpp"

namespace conf {
bool host_suites_available() { return false; }
std::vector<Item> ops_items(const Config&, std::string* error) {
  *error = "not run: this build has no libnxrt";
  return {};
}
std::vector<Item> models_items(const Config&, std::string* error) {
  *error = "not run: this build has no libnxrt";
  return {};
}
}  // namespace conf
