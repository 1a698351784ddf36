#include "profiler.hpp"

#include "error.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>

namespace nxrt {

namespace {
std::string json_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\', o += c;
    else if (static_cast<unsigned char>(c) < 0x20) o += fmt::format("\\u{:04x}", int(c));
    else o += c;
  }
  return o;
}
}  // namespace

void Profiler::add(Event e) {
  std::lock_guard lock(mu_);
  events_.push_back(std::move(e));
}

size_t Profiler::event_count() const {
  std::lock_guard lock(mu_);
  return events_.size();
}

size_t Profiler::write_chrome_trace(const std::string& path) const {
  std::lock_guard lock(mu_);
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "w"), &std::fclose);
  if (!f) raise(NXRT_ERR_INVALID_ARGUMENT, "cannot write the profile to '{}': {}", path, std::strerror(errno));
  // Thread ids as small numbers in order of appearance, so the viewer's rows are stable.
  // Named tracks (device timings) get their own ids after a metadata event naming them.
  std::map<uint64_t, int> tid;
  std::map<std::string, int> track_tid;
  auto us = [&](Clock::time_point t) { return std::chrono::duration<double, std::micro>(t - origin_).count(); };
  std::string out = "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  bool first = true;
  for (size_t i = 0; i < events_.size(); ++i) {
    const Event& e = events_[i];
    int t;
    if (e.track.empty()) {
      t = tid.emplace(e.thread, int(tid.size()) + 1).first->second;
    } else {
      auto [it, added] = track_tid.emplace(e.track, 1000 + int(track_tid.size()));
      t = it->second;
      if (added)
        out += fmt::format("{}{{\"name\":\"thread_name\",\"cat\":\"__metadata\",\"ph\":\"M\",\"pid\":1,\"tid\":{},"
                           "\"args\":{{\"name\":\"{}\"}}}}",
                           first ? "" : ",\n", t, json_escape(e.track));
      first = false;
    }
    std::string node = e.node >= 0 ? fmt::format(",\"node\":{}", e.node) : std::string();
    out += fmt::format(
        "{}{{\"name\":\"{}\",\"cat\":\"{}\",\"ph\":\"X\",\"ts\":{:.3f},\"dur\":{:.3f},\"pid\":1,\"tid\":{},"
        "\"args\":{{\"ep\":\"{}\",\"ops\":\"{}\",\"run\":{}{}}}}}",
        first ? "" : ",\n", json_escape(e.name), e.cat, us(e.begin), us(e.end) - us(e.begin), t, json_escape(e.ep),
        json_escape(e.ops), e.run, node);
    first = false;
  }
  out += "\n]}\n";
  if (std::fwrite(out.data(), 1, out.size(), f.get()) != out.size() || std::fflush(f.get()) != 0)
    raise(NXRT_ERR_INVALID_ARGUMENT, "cannot write the profile to '{}': {}", path, std::strerror(errno));
  return events_.size();
}

}  // namespace nxrt
