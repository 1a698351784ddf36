// Watching the process (issue 14): what a plugin may not change behind the host's back.
// A plugin shares the host's process: FP control state (MXCSR's FTZ/DAZ and rounding),
// signal handlers and the signal mask, the locale, the working directory and the umask are
// the host's; stdout is the host's output stream; threads and file descriptors it starts
// must be gone once it is unloaded. Each check runs in its own child process (runner.cpp),
// so its counts start clean.
#include "checks.hpp"

#include <fmt/format.h>

#include <dirent.h>
#include <fenv.h>
#include <locale.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

#include <chrono>
#include <climits>
#include <cstring>
#include <string>
#include <vector>

namespace conf {
namespace {

using Clock = std::chrono::steady_clock;

// The process state a plugin must leave as it found it.
struct ProcessState {
  unsigned mxcsr = 0;  // control bits only (the exception flags are sticky results, not settings)
  int rounding = 0;
  std::vector<std::pair<int, std::string>> handlers;  // signal -> handler and flags
  std::string sigmask, locale, cwd;
  unsigned umask_bits = 0;

  static ProcessState take() {
    ProcessState s;
#if defined(__x86_64__) || defined(__i386__)
    s.mxcsr = _mm_getcsr() & ~0x3Fu;
#endif
    s.rounding = fegetround();
    for (int sig : {SIGHUP, SIGINT, SIGQUIT, SIGILL, SIGABRT, SIGFPE, SIGSEGV, SIGBUS, SIGPIPE, SIGALRM, SIGTERM, SIGUSR1,
                    SIGUSR2, SIGCHLD}) {
      struct sigaction sa {};
      sigaction(sig, nullptr, &sa);
      const void* h = (sa.sa_flags & SA_SIGINFO) ? reinterpret_cast<const void*>(sa.sa_sigaction)
                                                 : reinterpret_cast<const void*>(sa.sa_handler);
      s.handlers.emplace_back(sig, fmt::format("{} flags {:#x}", h, unsigned(sa.sa_flags)));
    }
    sigset_t set;
    sigemptyset(&set);
    pthread_sigmask(SIG_BLOCK, nullptr, &set);
    for (int sig = 1; sig < 32; ++sig) s.sigmask += sigismember(&set, sig) ? '1' : '0';
    const char* loc = setlocale(LC_ALL, nullptr);
    s.locale = loc ? loc : "";
    char buf[PATH_MAX];
    s.cwd = getcwd(buf, sizeof buf) ? buf : "";
    const mode_t m = umask(022);
    umask(m);
    s.umask_bits = unsigned(m);
    return s;
  }

  // "" or what differs from `before`, in words.
  std::string changed_since(const ProcessState& before) const {
    if (mxcsr != before.mxcsr) {
      std::string what;
      if ((mxcsr ^ before.mxcsr) & 0x8040u) what = ": flush-to-zero / denormals-are-zero changed, so the host's own float code now gives other results";
      return fmt::format("MXCSR changed from {:#06x} to {:#06x}{}", before.mxcsr, mxcsr, what);
    }
    if (rounding != before.rounding) return fmt::format("the FP rounding mode changed ({} to {})", before.rounding, rounding);
    for (size_t i = 0; i < handlers.size(); ++i)
      if (handlers[i] != before.handlers[i])
        return fmt::format("the handler of signal {} ({}) changed: {} before, {} now", handlers[i].first,
                           strsignal(handlers[i].first), before.handlers[i].second, handlers[i].second);
    if (sigmask != before.sigmask) return fmt::format("the calling thread's signal mask changed ({} to {})", before.sigmask, sigmask);
    if (locale != before.locale) return fmt::format("the locale changed from '{}' to '{}'", before.locale, locale);
    if (cwd != before.cwd) return fmt::format("the working directory changed from '{}' to '{}'", before.cwd, cwd);
    if (umask_bits != before.umask_bits) return fmt::format("the umask changed from {:03o} to {:03o}", before.umask_bits, umask_bits);
    return "";
  }
};

size_t count_entries(const char* dir) {
  size_t n = 0;
  if (DIR* d = opendir(dir)) {
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.') ++n;
    closedir(d);
  }
  return n;
}
size_t fd_count() { return count_entries("/proc/self/fd") - 1; }  // less the directory's own

// fd 1 sent to a memory file while alive: what the plugin printed to the host's stdout.
class StdoutCapture {
 public:
  StdoutCapture() {
    std::fflush(stdout);
    saved_ = dup(1);
    mem_ = memfd_create("nxrt-conformance-stdout", MFD_CLOEXEC);
    if (saved_ >= 0 && mem_ >= 0) dup2(mem_, 1);
  }
  ~StdoutCapture() { restore(); }
  // Restores fd 1; returns what was written meanwhile (at most `limit` bytes) and its size.
  std::string restore(size_t* total = nullptr, size_t limit = 120) {
    std::string got;
    if (saved_ < 0) return got;
    std::fflush(stdout);
    dup2(saved_, 1);
    close(saved_);
    saved_ = -1;
    struct stat st {};
    if (mem_ >= 0 && fstat(mem_, &st) == 0) {
      if (total) *total = size_t(st.st_size);
      got.resize(std::min(size_t(st.st_size), limit));
      if (pread(mem_, got.data(), got.size(), 0) < 0) got.clear();
    }
    if (mem_ >= 0) close(mem_);
    mem_ = -1;
    return got;
  }

 private:
  int saved_ = -1, mem_ = -1;
};

std::string printable(const std::string& s) {
  std::string o;
  for (unsigned char c : s) o += (c >= 32 && c < 127) ? std::string(1, char(c)) : fmt::format("\\x{:02x}", c);
  return o;
}

// Every plugin call of a session's life, the process state compared after each stage;
// stdout captured throughout.
Record side_effects(const Config& c) {
  const ProcessState before = ProcessState::take();
  StdoutCapture out;
  std::string stage, changed;
  auto after = [&](const char* what) {
    if (!changed.empty()) return;
    changed = ProcessState::take().changed_since(before);
    if (!changed.empty()) stage = what;
  };
  {
    Env env(c);
    if (auto r = env.load()) return *r;
    after("loading and negotiation");
    if (auto r = env.device()) return *r;
    after("device_count and device_info");
    if (auto r = env.session()) return *r;
    after("session_create");
    AddRelu g({4, 33});
    {
      Pipeline p(*env.s, g.gb);
      std::string e = p.build();
      if (!e.empty()) return fail("building Add/Relu: " + e);
      after("get_capability and kernel_create");
      for (int i = 0; i < 3 && e.empty(); ++i) {
        std::vector<HostTensor> y;
        e = p.run({{g.x, g.in_x}, {g.y, g.in_y}}, y);
        if (e.empty()) e = compare(y[0], g.expected);
      }
      if (!e.empty()) return fail("running Add/Relu: " + e);
      after("kernel_compute");
    }
    after("kernel_release");
    env.s.reset();
    after("session_release");
  }
  after("shutdown and unloading");
  size_t printed = 0;
  const std::string text = out.restore(&printed);
  if (!changed.empty()) return fail(fmt::format("after {}: {}", stage, changed));
  if (printed)
    return fail(fmt::format("the plugin wrote {} byte(s) to stdout, the host's output stream (use stderr or the host's log): '{}'",
                            printed, printable(text)));
  return pass("MXCSR, rounding, 14 signal handlers, the signal mask, locale, working directory and umask unchanged after "
              "every stage of a session's life; nothing written to stdout");
}

// Load, run and unload five times: threads and file descriptors back to the count before
// the first load each time; session_release and shutdown within their time budgets.
Record cycles(const Config& c) {
  constexpr int kCycles = 5;
  constexpr double kBudgetS = 10;
  const size_t threads0 = thread_count(), fds0 = fd_count();
  double worst_release = 0, worst_shutdown = 0;
  for (int cycle = 1; cycle <= kCycles; ++cycle) {
    {
      Env env(c);
      if (auto r = env.session()) return *r;
      size_t claimed = 0;
      AddRelu g;
      std::string e = run_add_relu_once(*env.s, g, &claimed);
      if (!e.empty()) return fail(fmt::format("cycle {}: {}", cycle, e));
      auto t0 = Clock::now();
      env.s.reset();
      worst_release = std::max(worst_release, std::chrono::duration<double>(Clock::now() - t0).count());
      t0 = Clock::now();
      env.p->shutdown();
      worst_shutdown = std::max(worst_shutdown, std::chrono::duration<double>(Clock::now() - t0).count());
      // Counted before unloading (a thread may take a moment to leave: up to 2 s), since a
      // thread left in the plugin's code crashes once that code is unmapped; ~Plugin then
      // keeps such a plugin loaded.
      const size_t threads = thread_count_settled(threads0, 2000);
      if (threads > threads0)
        return fail(fmt::format("cycle {}: {} thread(s) still running after the plugin was shut down ({} before it was "
                                "loaded, {} now): unloaded, such a thread runs in unmapped code and crashes the host later",
                                cycle, threads - threads0, threads0, threads));
    }  // dlclose
    const size_t fds = fd_count();
    if (fds > fds0)
      return fail(fmt::format("cycle {}: {} file descriptor(s) left open after the plugin was unloaded ({} before, {} now)",
                              cycle, fds - fds0, fds0, fds));
  }
  if (worst_release > kBudgetS || worst_shutdown > kBudgetS)
    return fail(fmt::format("session_release took up to {:.2f} s and shutdown up to {:.2f} s (budget {:.0f} s each)", worst_release,
                            worst_shutdown, kBudgetS));
  return pass(fmt::format("{} load/run/unload cycles: threads back to {} and file descriptors to {} each time; session_release "
                          "<= {:.3f} s, shutdown <= {:.3f} s",
                          kCycles, threads0, fds0, worst_release, worst_shutdown));
}

}  // namespace

std::vector<Item> process_items(const Config& cfg) {
  std::vector<Item> items;
  items.push_back(Item{"process.side_effects", [cfg] { return std::vector<Record>{side_effects(cfg)}; }, "", ""});
  items.push_back(Item{"process.threads_fds_cycles", [cfg] { return std::vector<Record>{cycles(cfg)}; }, "", ""});
  return items;
}

}  // namespace conf
