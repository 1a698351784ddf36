// Honest skips for doctest binaries run by ctest. Include this INSTEAD of defining
// DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN (it brings doctest and main()). A case, or the part
// of a case, that cannot run here (no Vulkan device, a missing device feature) ends with
// NXRT_SKIP_CASE("why"), which records the case name and the reason and returns.
// main() exits 77 when nothing failed but something was skipped, so ctest (with
// SKIP_RETURN_CODE 77) reports SKIP instead of a pass with zero assertions; any failure
// still exits 1. The skipped cases and reasons are printed at the end of the run.
#pragma once
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <mutex>
#include <string>
#include <vector>

namespace nxrt_test {

inline constexpr int kSkipReturnCode = 77;

struct Skips {
  std::mutex mu;
  std::string current;  // the running case's name
  std::vector<std::string> list;
};
inline Skips& skips() {
  static Skips s;
  return s;
}

inline void record_skip(const std::string& why) {
  auto& s = skips();
  std::lock_guard lock(s.mu);
  s.list.push_back(s.current + ": " + why);
}

// Only learns the running case's name (doctest has no public accessor for it).
struct CaseNameListener : doctest::IReporter {
  explicit CaseNameListener(const doctest::ContextOptions&) {}
  void report_query(const doctest::QueryData&) override {}
  void test_run_start() override {}
  void test_run_end(const doctest::TestRunStats&) override {}
  void test_case_start(const doctest::TestCaseData& d) override {
    std::lock_guard lock(skips().mu);
    skips().current = d.m_name;
  }
  void test_case_reenter(const doctest::TestCaseData&) override {}
  void test_case_end(const doctest::CurrentTestCaseStats&) override {}
  void test_case_exception(const doctest::TestCaseException&) override {}
  void subcase_start(const doctest::SubcaseSignature&) override {}
  void subcase_end() override {}
  void log_assert(const doctest::AssertData&) override {}
  void log_message(const doctest::MessageData&) override {}
  void test_case_skipped(const doctest::TestCaseData&) override {}
};
REGISTER_LISTENER("nxrt_case_name", 1, CaseNameListener);

}  // namespace nxrt_test

#define NXRT_SKIP_CASE(why)          \
  do {                               \
    MESSAGE("SKIP: " << (why));      \
    nxrt_test::record_skip(why);     \
    return;                          \
  } while (0)

int main(int argc, char** argv) {
  doctest::Context ctx(argc, argv);
  const int rc = ctx.run();
  if (ctx.shouldExit() || rc != 0) return rc;
  auto& s = nxrt_test::skips();
  if (s.list.empty()) return 0;
  std::printf("[nxrt] nothing failed, but %zu case(s) could not run here (exit %d = SKIP):\n", s.list.size(),
              nxrt_test::kSkipReturnCode);
  for (auto& line : s.list) std::printf("[nxrt]   %s\n", line.c_str());
  return nxrt_test::kSkipReturnCode;
}
