#include "runner.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <deque>
#include <exception>
#include <map>

namespace conf {
namespace {
constexpr size_t kPhaseBytes = 128;
char* g_phase = nullptr;  // shared page of the current child
}  // namespace

std::string current_phase() { return g_phase ? std::string(g_phase, strnlen(g_phase, kPhaseBytes)) : std::string(); }

void set_phase(const char* call) {
  if (!g_phase) return;
  size_t n = std::min(std::strlen(call), kPhaseBytes - 1);
  std::memcpy(g_phase, call, n);
  g_phase[n] = '\0';
}

namespace {

using Clock = std::chrono::steady_clock;

void put_u32(std::string& s, uint32_t v) { s.append(reinterpret_cast<const char*>(&v), 4); }
void put_str(std::string& s, const std::string& v) {
  put_u32(s, uint32_t(v.size()));
  s += v;
}
uint32_t get_u32(const std::string& s, size_t& p) {
  uint32_t v = 0;
  if (p + 4 <= s.size()) std::memcpy(&v, s.data() + p, 4);
  p += 4;
  return v;
}
std::string get_str(const std::string& s, size_t& p) {
  uint32_t n = get_u32(s, p);
  if (p + n > s.size()) return {};
  std::string v = s.substr(p, n);
  p += n;
  return v;
}

void write_all(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    ssize_t n = ::write(fd, s.data() + off, s.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      return;
    }
    off += size_t(n);
  }
}

void send(int fd, char type, const std::string& payload) {
  std::string m(1, type);
  put_u32(m, uint32_t(payload.size()));
  m += payload;
  write_all(fd, m);
}

std::string encode(uint32_t item, const Record& r) {
  std::string s;
  put_u32(s, item);
  for (auto* f : {&r.suite, &r.check, &r.status, &r.message, &r.op, &r.dtype}) put_str(s, *f);
  put_str(s, std::to_string(r.seconds));
  return s;
}

std::string signal_text(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  const char* desc = strsignal(sig);
  return std::string(abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(sig)) + " (" +
         (desc ? desc : "?") + ")";
}

[[noreturn]] void child_main(int fd, const std::vector<Item>& items, const std::vector<size_t>& todo) {
  // Keep the runner's stdout clean: the plugin's prints go to stderr.
  dup2(2, 1);
  for (size_t i : todo) {
    std::string idx;
    put_u32(idx, uint32_t(i));
    send(fd, 'B', idx);
    auto t0 = Clock::now();
    std::vector<Record> recs;
    try {
      recs = items[i].fn();
    } catch (const std::exception& e) {
      recs = {fail(std::string("a C++ exception crossed the C ABI: ") + e.what())};
    } catch (...) {
      recs = {fail("a C++ exception of unknown type crossed the C ABI")};
    }
    double secs = std::chrono::duration<double>(Clock::now() - t0).count();
    for (auto& r : recs) {
      if (r.check.empty()) r.check = items[i].name;
      if (r.op.empty()) r.op = items[i].op;
      if (r.dtype.empty()) r.dtype = items[i].dtype;
      if (r.seconds == 0) r.seconds = secs / double(recs.size());
      send(fd, 'R', encode(uint32_t(i), r));
    }
    send(fd, 'E', idx);
  }
  ::close(fd);
  _exit(0);
}

struct Child {
  pid_t pid = -1;
  int fd = -1;
  std::vector<size_t> todo;
  long current = -1;  // item started and not finished
  std::map<size_t, bool> finished;
  Clock::time_point deadline;
  std::string buf;
  bool timed_out = false;
  char* phase = nullptr;
};

}  // namespace

std::vector<Record> run_isolated(const std::string& suite, const std::vector<Item>& items, const PoolOptions& o) {
  std::vector<std::vector<Record>> out(items.size());
  std::deque<std::vector<size_t>> queue;
  size_t chunk = o.chunk ? o.chunk : 1;
  for (size_t i = 0; i < items.size(); i += chunk) {
    std::vector<size_t> c;
    for (size_t j = i; j < items.size() && j < i + chunk; ++j) c.push_back(j);
    queue.push_back(std::move(c));
  }
  std::vector<Child> running;
  size_t done = 0;
  auto timeout = std::chrono::milliseconds(long(o.timeout_s * 1000));
  auto finish_item = [&](size_t i) {
    ++done;
    if (o.progress) o.progress(done, items.size(), items[i].name);
  };

  auto spawn = [&](std::vector<size_t> todo) {
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) {
      for (size_t i : todo) {
        out[i] = {fail("cannot create a pipe for the child process")};
        finish_item(i);
      }
      return;
    }
    void* page = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    char* phase = page == MAP_FAILED ? nullptr : static_cast<char*>(page);
    if (phase) phase[0] = '\0';
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
      ::close(p[0]);
      g_phase = phase;
      child_main(p[1], items, todo);
    }
    ::close(p[1]);
    if (pid < 0) {
      ::close(p[0]);
      for (size_t i : todo) {
        out[i] = {fail("fork failed")};
        finish_item(i);
      }
      return;
    }
    Child c;
    c.phase = phase;
    c.pid = pid;
    c.fd = p[0];
    c.todo = std::move(todo);
    c.deadline = Clock::now() + timeout;
    running.push_back(std::move(c));
  };

  auto parse = [&](Child& c) {
    size_t p = 0;
    while (c.buf.size() - p >= 5) {
      char type = c.buf[p];
      uint32_t len = 0;
      std::memcpy(&len, c.buf.data() + p + 1, 4);
      if (c.buf.size() - p - 5 < len) break;
      std::string payload = c.buf.substr(p + 5, len);
      p += 5 + len;
      size_t q = 0;
      uint32_t idx = get_u32(payload, q);
      if (idx >= items.size()) continue;
      if (type == 'B') {
        c.current = long(idx);
        c.deadline = Clock::now() + timeout;
        out[idx].clear();
      } else if (type == 'R') {
        Record r;
        for (auto* f : {&r.suite, &r.check, &r.status, &r.message, &r.op, &r.dtype}) *f = get_str(payload, q);
        r.seconds = std::atof(get_str(payload, q).c_str());
        r.suite = suite;
        out[idx].push_back(std::move(r));
      } else if (type == 'E') {
        c.finished[idx] = true;
        c.current = -1;
        finish_item(idx);
      }
    }
    c.buf.erase(0, p);
  };

  auto reap = [&](Child& c) {
    int status = 0;
    while (waitpid(c.pid, &status, 0) < 0 && errno == EINTR) {
    }
    ::close(c.fd);
    std::string why;
    if (c.timed_out)
      why = "timeout: no result after " + std::to_string(int(o.timeout_s)) + " s (killed)";
    else if (WIFSIGNALED(status))
      why = "crashed with " + signal_text(WTERMSIG(status));
    else if (WIFEXITED(status) && WEXITSTATUS(status) != 0)
      why = "the process exited with status " + std::to_string(WEXITSTATUS(status));
    else
      why = "the process ended without reporting a result";
    std::string in_call;
    if (c.phase) {
      c.phase[kPhaseBytes - 1] = '\0';
      if (c.phase[0]) in_call = std::string(" (during ") + c.phase + ")";
      munmap(c.phase, 4096);
    }
    std::vector<size_t> rest;
    bool after = false;
    for (size_t i : c.todo) {
      if (c.finished.count(i)) continue;
      if (long(i) == c.current || (!after && c.current < 0)) {
        // The item it was in (or the first unfinished one).
        Record r = fail(why + " in " + items[i].name + in_call);
        r.suite = suite;
        r.check = items[i].name;
        r.op = items[i].op;
        r.dtype = items[i].dtype;
        r.seconds = c.timed_out ? o.timeout_s : 0;
        out[i] = {r};
        finish_item(i);
        after = true;
        continue;
      }
      rest.push_back(i);
    }
    if (!rest.empty()) queue.push_front(std::move(rest));
  };

  while (!queue.empty() || !running.empty()) {
    while (!queue.empty() && int(running.size()) < std::max(1, o.jobs)) {
      auto todo = std::move(queue.front());
      queue.pop_front();
      spawn(std::move(todo));
    }
    if (running.empty()) continue;
    std::vector<pollfd> fds;
    auto now = Clock::now();
    auto wait = std::chrono::milliseconds(1000);
    for (auto& c : running) {
      fds.push_back({c.fd, POLLIN, 0});
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(c.deadline - now);
      if (left < wait) wait = left;
    }
    if (wait.count() < 0) wait = std::chrono::milliseconds(0);
    int n = poll(fds.data(), fds.size(), int(wait.count()) + 1);
    if (n < 0 && errno != EINTR) break;
    std::vector<size_t> ended;
    for (size_t k = 0; k < running.size(); ++k) {
      auto& c = running[k];
      if (fds[k].revents & (POLLIN | POLLHUP | POLLERR)) {
        char tmp[65536];
        ssize_t r = ::read(c.fd, tmp, sizeof tmp);
        if (r > 0) {
          c.buf.append(tmp, size_t(r));
          parse(c);
        } else if (r == 0 || (r < 0 && errno != EINTR && errno != EAGAIN)) {
          ended.push_back(k);
          continue;
        }
      }
      if (Clock::now() > c.deadline) {
        kill(c.pid, SIGKILL);
        c.timed_out = true;
        ended.push_back(k);
      }
    }
    for (auto it = ended.rbegin(); it != ended.rend(); ++it) {
      Child c = std::move(running[*it]);
      running.erase(running.begin() + long(*it));
      reap(c);
    }
  }
  std::vector<Record> all;
  for (size_t i = 0; i < items.size(); ++i)
    for (auto& r : out[i]) all.push_back(r);
  return all;
}

}  // namespace conf
