// The abi suite: the runner is its own minimal host (minihost.hpp) and
// exercises every entry point of the plugin table directly.
#include <algorithm>
#include <cstring>
#include <regex>
#include <thread>

#include "checks.hpp"

namespace conf {
namespace {

using Fn = std::function<Record()>;

std::string b2s(bool b) { return b ? "yes" : "no"; }

// Error-path expectation: a non-NULL status with a valid code and message.
std::string expect_error(const Result& r, const char* what, std::initializer_list<nxrt_status_code> codes = {}) {
  if (r.ok) return std::string(what) + " succeeded; it must fail";
  if (!r.problem.empty()) return std::string(what) + ": " + r.problem;
  if (codes.size()) {
    bool ok = false;
    std::string names;
    for (auto c : codes) {
      ok |= r.code == c;
      names += (names.empty() ? "" : " or ") + std::string(status_code_name(c));
    }
    if (!ok) return std::string(what) + " failed with " + status_code_name(r.code) + ", expected " + names + " ('" + r.message + "')";
  }
  return "";
}

std::string ok_or(const Result& r, const std::string& what) {
  if (r.ok) return "";
  return what + " failed: " + r.str() + (r.problem.empty() ? "" : " [" + r.problem + "]");
}

// ------------------------------------------------------------------ load

Record load_dlopen(const Config& c) {
  std::string err, stage;
  auto p = Plugin::open(c.plugin, &err, &stage);
  if (!p && stage == "dlopen") return fail("dlopen failed: " + err);
  return pass();
}

Record load_entry_symbol(const Config& c) {
  std::string err, stage;
  auto p = Plugin::open(c.plugin, &err, &stage);
  if (!p && stage == "dlopen") return skip("not run: dlopen failed");
  if (!p) return fail(err);
  return pass();
}

// ------------------------------------------------------------- negotiate

template <typename F>
Record with_plugin(const Config& c, F&& f) {
  std::string err, stage;
  auto p = Plugin::open(c.plugin, &err, &stage);
  if (!p) return skip("not run: the plugin does not load (" + err + ")");
  Record r = f(*p);
  if (p->negotiated()) p->shutdown();
  return r;
}

Record negotiate_equal(const Config& c) {
  return with_plugin(c, [](Plugin& p) {
    auto r = p.negotiate_raw(1, 0, host_table_full());
    if (r.rc != NXRT_OK)
      return fail(std::string("the plugin refused ABI 1.0 with ") + status_code_name(r.rc) + ": '" + r.reply.message + "'");
    if (r.reply.abi_major != 1)
      return fail("the plugin agreed to major " + std::to_string(r.reply.abi_major) + ", the host offered major 1");
    if (r.reply.abi_minor != 0)
      return fail("the plugin agreed to minor " + std::to_string(r.reply.abi_minor) + ", the host offered minor 0 (agreed must be min)");
    if (!r.reply.api) return fail("negotiation returned NXRT_OK with reply.api = NULL (no function table)");
    p.negotiate();
    return pass("agreed 1.0");
  });
}

Record negotiate_newer(const Config& c) {
  return with_plugin(c, [](Plugin& p) {
    auto r = p.negotiate_raw(1, 7, host_table_newer());
    if (r.rc != NXRT_OK)
      return fail(std::string("the plugin refused a newer host (1.7, larger services table) with ") + status_code_name(r.rc) +
                  ": '" + r.reply.message + "'; a newer minor must be accepted");
    if (r.reply.abi_major != 1) return fail("agreed major " + std::to_string(r.reply.abi_major) + " for a 1.7 offer");
    if (r.reply.abi_minor > 7) return fail("agreed minor " + std::to_string(r.reply.abi_minor) + " exceeds the offered 7");
    if (!r.reply.api) return fail("reply.api is NULL");
    return pass("agreed 1." + std::to_string(r.reply.abi_minor));
  });
}

Record negotiate_refuse_major(const Config& c, uint32_t major) {
  return with_plugin(c, [major](Plugin& p) {
    auto r = p.negotiate_raw(major, 0, host_table_full());
    if (r.rc == NXRT_OK)
      return fail("the plugin accepted ABI major " + std::to_string(major) + " (agreed " + std::to_string(r.reply.abi_major) +
                  "." + std::to_string(r.reply.abi_minor) + "); it must refuse with NXRT_VERSION_MISMATCH");
    if (r.rc != NXRT_VERSION_MISMATCH)
      return fail(std::string("refused major ") + std::to_string(major) + " with " + status_code_name(r.rc) +
                  ", expected NXRT_VERSION_MISMATCH");
    if (!r.reply.message[0]) return fail("refused major " + std::to_string(major) + " with an empty reply.message");
    if (!r.canary_ok) return fail("the plugin wrote past reply.struct_size");
    return pass(std::string("refused: '") + r.reply.message + "'");
  });
}

Record negotiate_reply_canary(const Config& c) {
  return with_plugin(c, [](Plugin& p) {
    auto r = p.negotiate_raw(1, 0, host_table_full());
    if (!r.canary_ok) return fail("the plugin wrote past reply.struct_size (" + std::to_string(sizeof(nxrt_negotiate_reply)) + ")");
    if (r.rc != NXRT_OK) return skip("not run: negotiation refused");
    return pass();
  });
}

Record negotiate_short_reply(const Config& c) {
  return with_plugin(c, [](Plugin& p) {
    uint32_t size = offsetof(nxrt_negotiate_reply, features);  // the frozen prefix only
    auto r = p.negotiate_raw(1, 0, host_table_full(), sizeof(nxrt_negotiate_request), size);
    if (!r.canary_ok) return fail("the plugin wrote past a short reply.struct_size (" + std::to_string(size) + " bytes)");
    if (r.rc == NXRT_OK) return fail("the plugin returned NXRT_OK into a reply too small to hold its function table");
    if (!r.reply.message[0]) return fail("refused a short reply with an empty message");
    return pass(std::string("refused: '") + r.reply.message + "'");
  });
}

Record negotiate_short_request(const Config& c) {
  return with_plugin(c, [](Plugin& p) {
    auto r = p.negotiate_raw(1, 0, host_table_full(), offsetof(nxrt_negotiate_request, host));
    if (!r.canary_ok) return fail("the plugin wrote past reply.struct_size");
    if (r.rc == NXRT_OK) return fail("accepted a request whose struct_size excludes the host field");
    if (!r.reply.message[0]) return fail("refused a short request with an empty message");
    return pass(std::string("refused: '") + r.reply.message + "'");
  });
}

Record negotiate_null_host(const Config& c) {
  return with_plugin(c, [](Plugin& p) {
    auto r = p.negotiate_raw(1, 0, nullptr);
    if (r.rc == NXRT_OK) return fail("accepted a request with host = NULL");
    if (!r.reply.message[0]) return fail("refused host = NULL with an empty message");
    return pass(std::string("refused: '") + r.reply.message + "'");
  });
}

Record negotiate_older_table(const Config& c) {
  return with_plugin(c, [&c](Plugin& p) {
    host_log().take();
    auto r = p.negotiate_raw(1, 0, host_table_truncated());
    if (!r.canary_ok) return fail("the plugin wrote past reply.struct_size");
    if (r.rc != NXRT_OK) {
      if (!r.reply.message[0]) return fail("refused a smaller host table with an empty message");
      return pass(std::string("refused cleanly: '") + r.reply.message + "'");
    }
    if (!r.reply.api) return fail("NXRT_OK with reply.api = NULL");
    // Accepted: exercise it and make sure nothing past struct_size is used.
    nxrt_plugin_api api{};
    std::memcpy(&api, r.reply.api, std::min<size_t>(r.reply.api->struct_size, sizeof api));
    uint32_t n = 0;
    if (api.device_count) take(api.device_count(&n));
    if (n > c.device && api.session_create && api.session_release && api.get_capability) {
      nxrt_ep_session* s = nullptr;
      if (take(api.session_create(c.device, nullptr, 0, &s)).ok && s) {
        AddRelu g;
        nxrt_claim_sink sink;
        sink.graph = &g.gb.graph();
        sink.features = r.reply.features;
        take(api.get_capability(s, &g.gb.graph(), &sink));
        api.session_release(s);
      }
    }
    if (api.shutdown) api.shutdown();
    auto v = host_log().take();
    if (!v.empty()) return fail(v.front());
    return pass("accepted the smaller table and stayed within it");
  });
}

Record negotiate_repeatable(const Config& c) {
  return with_plugin(c, [](Plugin& p) {
    auto a = p.negotiate_raw(1, 0, host_table_full());
    auto b = p.negotiate_raw(1, 0, host_table_full());
    if (a.rc != NXRT_OK || b.rc != NXRT_OK) return skip("not run: negotiation refused");
    if (!a.reply.api || !b.reply.api) return skip("not run: no function table");
    if (a.reply.features != b.reply.features) return fail("features differ between two negotiations");
    if (a.reply.abi_minor != b.reply.abi_minor) return fail("agreed minor differs between two negotiations");
    if (std::strcmp(a.reply.api->name ? a.reply.api->name : "", b.reply.api->name ? b.reply.api->name : "") != 0)
      return fail("the plugin name differs between two negotiations");
    p.negotiate();
    return pass();
  });
}

Record negotiate_reload(const Config& c) {
  return with_plugin(c, [&c](Plugin& p) {
    std::string e = p.negotiate();
    if (!e.empty()) return skip("not run: " + e);
    if (!missing_required(p).empty()) return skip("not run: required functions missing");
    for (int round = 0; round < 3; ++round) {
      p.shutdown();
      e = p.negotiate();
      if (!e.empty()) return fail("negotiation after shutdown failed (round " + std::to_string(round + 1) + "): " + e);
      if (!p.api().device_count) return fail("no device_count after reload");
      uint32_t n = 0;
      Result r = take(p.api().device_count(&n));
      if (!r.ok) return fail("device_count after reload failed: " + r.str());
      if (n > c.device) {
        Session s(p, c.device);
        Result sr = s.create();
        if (!sr.ok) return fail("session_create after reload failed: " + sr.str());
      }
    }
    return pass("3 shutdown/negotiate rounds");
  });
}

// ------------------------------------------------------------------ api

Record api_struct_size(const Config& c) {
  return with_plugin(c, [](Plugin& p) {
    std::string e = p.negotiate();
    if (!e.empty()) return skip("not run: " + e);
    if (p.api_struct_size() < sizeof(nxrt_plugin_api))
      return fail("the function table's struct_size is " + std::to_string(p.api_struct_size()) +
                  " bytes; ABI 1.0 needs " + std::to_string(sizeof(nxrt_plugin_api)));
    return pass(std::to_string(p.api_struct_size()) + " bytes");
  });
}

Record api_identity(const Config& c) {
  return with_plugin(c, [](Plugin& p) {
    std::string e = p.negotiate();
    if (!e.empty()) return skip("not run: " + e);
    const char* name = p.api().name;
    const char* ver = p.api().version;
    if (!name || !*name) return fail("name is NULL or empty");
    if (!std::regex_match(name, std::regex("[a-z0-9][a-z0-9_-]*")))
      return fail(std::string("name '") + name + "' is not a short lowercase EP name ([a-z0-9_-])");
    if (!ver || !*ver) return fail("version is NULL or empty");
    if (!std::regex_search(ver, std::regex("^[0-9]+\\.[0-9]+\\.[0-9]+")))
      return fail(std::string("version '") + ver + "' is not semver (MAJOR.MINOR.PATCH)");
    return pass(std::string(name) + " " + ver);
  });
}

Record api_required(const Config& c) {
  return with_plugin(c, [](Plugin& p) {
    std::string e = p.negotiate();
    if (!e.empty()) return skip("not run: " + e);
    std::string m = missing_required(p);
    if (!m.empty()) return fail("required functions are NULL or beyond struct_size: " + m);
    return pass();
  });
}

Record api_features(const Config& c) {
  return with_plugin(c, [](Plugin& p) {
    std::string e = p.negotiate();
    if (!e.empty()) return skip("not run: " + e);
    uint64_t f = p.features();
    uint64_t known = NXRT_FEATURE_FUSED_GROUPS | NXRT_FEATURE_STREAMS | NXRT_FEATURE_CONCURRENT_RUN;
    if (f & ~known) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "0x%llx", (unsigned long long)(f & ~known));
      return fail(std::string("undefined feature bits set for ABI 1.0: ") + buf);
    }
    auto& a = p.api();
    const void* fns[] = {reinterpret_cast<const void*>(a.stream_create), reinterpret_cast<const void*>(a.stream_synchronize),
                         reinterpret_cast<const void*>(a.stream_release), reinterpret_cast<const void*>(a.event_create),
                         reinterpret_cast<const void*>(a.event_record), reinterpret_cast<const void*>(a.stream_wait_event),
                         reinterpret_cast<const void*>(a.event_synchronize), reinterpret_cast<const void*>(a.event_release)};
    const char* names[] = {"stream_create", "stream_synchronize", "stream_release", "event_create",
                           "event_record", "stream_wait_event", "event_synchronize", "event_release"};
    bool streams = f & NXRT_FEATURE_STREAMS;
    for (size_t i = 0; i < 8; ++i) {
      if (streams && !fns[i]) return fail(std::string("NXRT_FEATURE_STREAMS is declared but ") + names[i] + " is NULL");
      if (!streams && fns[i]) return fail(std::string("NXRT_FEATURE_STREAMS is not declared but ") + names[i] + " is set");
    }
    std::string d = std::string("fused_groups=") + b2s(f & NXRT_FEATURE_FUSED_GROUPS) + " streams=" + b2s(streams) +
                    " concurrent_run=" + b2s(f & NXRT_FEATURE_CONCURRENT_RUN);
    return pass(d);
  });
}

// --------------------------------------------------------------- devices

Record device_count(const Config& c) {
  Env env(c);
  if (auto r = env.load()) return *r;
  uint32_t n = 12345;
  Result r = take(env.p->api().device_count(&n));
  if (!r.ok) return fail(ok_or(r, "device_count"));
  if (n == 12345 || n > 4096) return fail("device_count reported an implausible count " + std::to_string(n));
  if (n == 0) {
    const char* why = env.p->api().no_device_reason();
    if (!why || !*why) return fail("no devices and no_device_reason() is empty");
    return skip(std::string("no device: ") + why);
  }
  return pass(std::to_string(n) + " device(s)");
}

Record device_count_stable(const Config& c) {
  Env env(c);
  if (auto r = env.load()) return *r;
  uint32_t first = 0;
  if (!take(env.p->api().device_count(&first)).ok) return skip("not run: device_count failed");
  std::atomic<int> bad{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < 8; ++t)
    ts.emplace_back([&] {
      for (int i = 0; i < 50; ++i) {
        uint32_t n = 0;
        if (!take(env.p->api().device_count(&n)).ok || n != first) bad++;
      }
    });
  for (auto& t : ts) t.join();
  if (bad) return fail(std::to_string(bad.load()) + " of 400 concurrent device_count calls failed or differed from " + std::to_string(first));
  return pass();
}

std::string info_problem(const nxrt_device_info& i) {
  if (!i.name || !*i.name) return "name is NULL or empty";
  if (!i.vendor) return "vendor is NULL";
  if (i.kind > NXRT_DEVICE_OTHER) return "kind " + std::to_string(int(i.kind)) + " is not an nxrt_device_kind";
  if (i.dtypes == 0) return "dtypes is 0 (no element type accepted)";
  uint64_t valid = 0;
  for (int b : {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 16}) valid |= 1ull << b;
  if (i.dtypes & ~valid) return "dtypes has bits for undefined element types";
  if (i.property_count && !i.properties) return "property_count > 0 with NULL properties";
  for (uint32_t k = 0; k < i.property_count; ++k)
    if (!i.properties[k].key || !i.properties[k].value) return "property " + std::to_string(k) + " has a NULL key or value";
  return "";
}

Record device_info(const Config& c) {
  Env env(c);
  if (auto r = env.device()) return *r;
  std::string names;
  for (uint32_t d = 0; d < env.devices; ++d) {
    nxrt_device_info i{};
    i.struct_size = sizeof i;
    Result r = take(env.p->api().device_info(d, &i));
    if (!r.ok) return fail(ok_or(r, "device_info(" + std::to_string(d) + ")"));
    if (i.struct_size > sizeof i)
      return fail("device_info raised struct_size to " + std::to_string(i.struct_size) + ", beyond what the host set");
    std::string pr = info_problem(i);
    if (!pr.empty()) return fail("device " + std::to_string(d) + ": " + pr);
    names += (names.empty() ? "" : "; ") + std::string(i.name) + (i.host_addressable ? " (host-addressable)" : "");
  }
  return pass(names);
}

bool same_info(const nxrt_device_info& a, const nxrt_device_info& b, std::string* what) {
  auto s = [](const char* x) { return std::string(x ? x : ""); };
  if (a.kind != b.kind) *what = "kind";
  else if (s(a.name) != s(b.name)) *what = "name";
  else if (s(a.vendor) != s(b.vendor)) *what = "vendor";
  else if (a.vendor_id != b.vendor_id || a.device_id != b.device_id) *what = "PCI ids";
  else if (std::memcmp(a.uuid, b.uuid, 16) != 0) *what = "uuid";
  else if (a.memory_bytes != b.memory_bytes) *what = "memory_bytes";
  else if (a.dtypes != b.dtypes) *what = "dtypes";
  else if (a.host_addressable != b.host_addressable) *what = "host_addressable";
  else if (a.property_count != b.property_count) *what = "property_count";
  else return true;
  return false;
}

Record device_info_stable(const Config& c) {
  Env env(c);
  if (auto r = env.device()) return *r;
  for (uint32_t d = 0; d < env.devices; ++d) {
    nxrt_device_info a{}, b{};
    a.struct_size = b.struct_size = sizeof a;
    if (!take(env.p->api().device_info(d, &a)).ok) return skip("not run: device_info failed");
    for (int k = 0; k < 20; ++k) {
      b = nxrt_device_info{};
      b.struct_size = sizeof b;
      Result r = take(env.p->api().device_info(d, &b));
      if (!r.ok) return fail(ok_or(r, "repeated device_info"));
      std::string what;
      if (!same_info(a, b, &what)) return fail("device " + std::to_string(d) + ": " + what + " changed between calls");
    }
  }
  return pass();
}

Record device_info_short(const Config& c) {
  Env env(c);
  if (auto r = env.device()) return *r;
  uint32_t size = offsetof(nxrt_device_info, name);  // struct_size + kind only
  alignas(16) uint8_t buf[sizeof(nxrt_device_info) + 64];
  std::memset(buf, 0xA5, sizeof buf);
  auto* i = reinterpret_cast<nxrt_device_info*>(buf);
  std::memset(buf, 0, size);
  i->struct_size = size;
  Result r = take(env.p->api().device_info(0, i));
  for (size_t k = size; k < sizeof buf; ++k)
    if (buf[k] != 0xA5) return fail("device_info wrote byte " + std::to_string(k) + " past the host's struct_size " + std::to_string(size));
  if (!r.ok && (!r.problem.empty())) return fail("device_info with a short struct: " + r.problem);
  if (i->struct_size > size) return fail("device_info raised struct_size above the host's");
  return pass(r.ok ? "filled the fields that fit" : "refused: " + r.str());
}

Record device_info_bad_index(const Config& c) {
  Env env(c);
  if (auto r = env.load()) return *r;
  uint32_t n = 0;
  if (!take(env.p->api().device_count(&n)).ok) return skip("not run: device_count failed");
  nxrt_device_info i{};
  i.struct_size = sizeof i;
  std::string e = expect_error(take(env.p->api().device_info(n, &i)), "device_info(device_count)", {NXRT_NOT_FOUND, NXRT_INVALID_ARGUMENT});
  if (!e.empty()) return fail(e);
  return pass();
}

// -------------------------------------------------------------- sessions

Record session_create(const Config& c) {
  Env env(c);
  if (auto r = env.device()) return *r;
  Session s(*env.p, c.device);
  Result r = s.create();
  if (!r.ok) return fail(ok_or(r, "session_create(device " + std::to_string(c.device) + ")"));
  std::vector<std::unique_ptr<Session>> many;
  for (int k = 0; k < 8; ++k) {
    many.push_back(std::make_unique<Session>(*env.p, c.device));
    Result rk = many.back()->create();
    if (!rk.ok) return fail(ok_or(rk, "creating session " + std::to_string(k + 2) + " while others are alive"));
  }
  return pass("9 sessions at once");
}

Record session_options(const Config& c, int which) {
  Env env(c);
  if (auto r = env.device()) return *r;
  std::string name = env.p->api().name ? env.p->api().name : "";
  Session s(*env.p, c.device);
  if (which == 0) {
    for (const char* v : {"0", "1", "2"}) {
      Session t(*env.p, c.device);
      Result r = t.create({{"threads", v}});
      if (!r.ok) return fail(ok_or(r, std::string("session_create with threads=") + v));
    }
    return pass();
  }
  if (which == 1) {
    Result r = s.create({{"nxrt_conformance_unknown_option", "1"}});
    if (!r.ok) return fail(ok_or(r, "session_create with an unknown unprefixed option (must be ignored)"));
    return pass();
  }
  std::string key = name + ".nxrt_conformance_bogus_key";
  Result r = s.create({{key.c_str(), "1"}});
  std::string e = expect_error(r, ("session_create with unknown option '" + key + "'").c_str(), {NXRT_INVALID_ARGUMENT});
  if (!e.empty()) return fail(e);
  if (r.message.find("nxrt_conformance_bogus_key") == std::string::npos)
    return fail("the error for an unknown prefixed option does not name the key: '" + r.message + "'");
  return pass("'" + r.message + "'");
}

Record session_bad_device(const Config& c) {
  Env env(c);
  if (auto r = env.load()) return *r;
  uint32_t n = 0;
  if (!take(env.p->api().device_count(&n)).ok) return skip("not run: device_count failed");
  nxrt_ep_session* s = nullptr;
  Result r = take(env.p->api().session_create(n, nullptr, 0, &s));
  if (r.ok && s) env.p->api().session_release(s);
  std::string e = expect_error(r, "session_create(device_count)", {NXRT_NOT_FOUND, NXRT_INVALID_ARGUMENT});
  if (!e.empty()) return fail(e);
  return pass();
}

// ---------------------------------------------------------------- memory

Record memory_alignment(const Config& c) {
  Env env(c);
  if (auto r = env.session()) return *r;
  auto& api = env.p->api();
  std::string notes;
  size_t checked = 0;
  for (nxrt_memory_kind kind : {NXRT_MEMORY_DEVICE, NXRT_MEMORY_HOST_PINNED}) {
    bool visible = kind == NXRT_MEMORY_HOST_PINNED || env.info.host_addressable;
    for (uint64_t align : {1ull, 16ull, 64ull, 256ull, 4096ull})
      for (uint64_t bytes : {1ull, 100ull, 4097ull, 1ull << 20}) {
        void* h = nullptr;
        Result r = take(api.memory_alloc(env.s->raw(), kind, bytes, align, &h));
        if (!r.ok) {
          if (kind == NXRT_MEMORY_HOST_PINNED && r.code == NXRT_UNSUPPORTED && r.problem.empty()) {
            notes = " (HOST_PINNED unsupported)";
            goto next_kind;
          }
          return fail(ok_or(r, "memory_alloc(" + std::to_string(bytes) + " bytes, alignment " + std::to_string(align) + ")"));
        }
        if (!h) return fail("memory_alloc returned success and a NULL handle");
        if (visible) {
          uint64_t need = std::max<uint64_t>(align, 64);
          if (reinterpret_cast<uintptr_t>(h) % need)
            return fail(std::string(kind == NXRT_MEMORY_DEVICE ? "DEVICE" : "HOST_PINNED") + " allocation of " +
                        std::to_string(bytes) + " bytes with alignment " + std::to_string(align) + " is at " +
                        std::to_string(reinterpret_cast<uintptr_t>(h) % 4096) + " mod 4096, not a multiple of " + std::to_string(need));
          std::memset(h, 0x5A, bytes);  // must be writable over its whole size
          ++checked;
        }
        api.memory_free(env.s->raw(), kind, h);
      }
  next_kind:;
  }
  if (!checked) return skip("device memory is opaque and HOST_PINNED is unsupported: no host-visible pointer to check" + notes);
  return pass(std::to_string(checked) + " host-visible allocations aligned to max(alignment, 64)" + notes);
}

Record memory_zero_byte(const Config& c) {
  Env env(c);
  if (auto r = env.session()) return *r;
  auto& api = env.p->api();
  void *a = nullptr, *b = nullptr;
  Result ra = take(api.memory_alloc(env.s->raw(), NXRT_MEMORY_DEVICE, 0, 64, &a));
  if (!ra.ok) return fail(ok_or(ra, "memory_alloc(0 bytes)"));
  Result rb = take(api.memory_alloc(env.s->raw(), NXRT_MEMORY_DEVICE, 0, 64, &b));
  if (!rb.ok) return fail(ok_or(rb, "second memory_alloc(0 bytes)"));
  if (!a || !b) return fail("a zero-byte request returned a NULL handle");
  if (a == b) return fail("two live zero-byte allocations returned the same handle");
  api.memory_free(env.s->raw(), NXRT_MEMORY_DEVICE, a);
  api.memory_free(env.s->raw(), NXRT_MEMORY_DEVICE, b);
  return pass();
}

Record memory_huge(const Config& c) {
  Env env(c);
  if (auto r = env.session()) return *r;
  void* h = nullptr;
  Result r = take(env.p->api().memory_alloc(env.s->raw(), NXRT_MEMORY_DEVICE, 1ull << 62, 64, &h));
  if (r.ok) {
    env.p->api().memory_free(env.s->raw(), NXRT_MEMORY_DEVICE, h);
    return fail("an allocation of 2^62 bytes succeeded");
  }
  std::string e = expect_error(r, "memory_alloc(2^62 bytes)", {NXRT_OUT_OF_MEMORY, NXRT_INVALID_ARGUMENT});
  if (!e.empty()) return fail(e);
  return pass("'" + r.message + "'");
}

Record memory_cycles(const Config& c) {
  Env env(c);
  if (auto r = env.session()) return *r;
  auto& api = env.p->api();
  size_t m0 = 0, r0 = 0;
  for (int i = 0; i < 3000; ++i) {
    if (i == 200) {
      m0 = malloc_bytes();
      r0 = rss_bytes();
    }
    void* h = nullptr;
    Result r = take(api.memory_alloc(env.s->raw(), NXRT_MEMORY_DEVICE, 65536 + (i % 7) * 4096, 256, &h));
    if (!r.ok) return fail(ok_or(r, "memory_alloc in cycle " + std::to_string(i)));
    api.memory_free(env.s->raw(), NXRT_MEMORY_DEVICE, h);
  }
  long dm = long(malloc_bytes()) - long(m0), dr = long(rss_bytes()) - long(r0);
  if (dm > (8l << 20) || dr > (16l << 20))
    return fail("host memory grew by " + std::to_string(dm >> 10) + " KiB (malloc) / " + std::to_string(dr >> 10) +
                " KiB (RSS) over 2800 alloc/free cycles");
  return pass();
}

// -------------------------------------------------------------- transfer

std::vector<uint8_t> pattern(size_t bytes, uint32_t seed) {
  std::vector<uint8_t> v(bytes);
  uint64_t x = 0x9E3779B97F4A7C15ull ^ seed;
  for (size_t i = 0; i < bytes; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    v[i] = uint8_t(x);
  }
  return v;
}

// Special bit patterns for floating types: NaN payloads, infinities, denormals, -0.
void add_specials(std::vector<uint8_t>& v, nxrt_dtype t) {
  std::vector<uint64_t> sp;
  if (t == NXRT_DTYPE_FLOAT32) sp = {0x7fc00001, 0xffc12345, 0x7f800000, 0xff800000, 0x00000001, 0x80000000, 0x7fbfffff};
  if (t == NXRT_DTYPE_FLOAT64) sp = {0x7ff8000000000001ull, 0xfff0000000000000ull, 0x0000000000000001ull, 0x8000000000000000ull};
  if (t == NXRT_DTYPE_FLOAT16 || t == NXRT_DTYPE_BFLOAT16) sp = {0x7e01, 0xfc00, 0x0001, 0x8000, 0x7f81};
  size_t es = dtype_size(t);
  for (size_t k = 0; k < sp.size() && (k + 1) * es <= v.size(); ++k) std::memcpy(&v[k * es], &sp[k], es);
}

Record transfer_dtype(const Config& c, nxrt_dtype t) {
  Env env(c);
  if (auto r = env.session()) return *r;
  auto& api = env.p->api();
  size_t es = dtype_size(t);
  size_t n = 1031;
  auto src = pattern(n * es, uint32_t(t));
  add_specials(src, t);
  void *a = nullptr, *b = nullptr;
  Result r = env.s->upload(src.data(), src.size(), &a);
  if (!r.ok) return fail(ok_or(r, "host->device copy"));
  r = take(api.memory_alloc(env.s->raw(), NXRT_MEMORY_DEVICE, src.size() + 512, 256, &b));
  if (!r.ok) return fail(ok_or(r, "memory_alloc"));
  // device -> device at an offset, then back to the host.
  nxrt_copy_region d2d{};
  d2d.struct_size = sizeof d2d;
  d2d.src_memory = NXRT_MEMORY_DEVICE;
  d2d.src = a;
  d2d.dst_memory = NXRT_MEMORY_DEVICE;
  d2d.dst = b;
  d2d.dst_offset = 256;
  d2d.bytes = src.size();
  r = take(api.copy(env.s->raw(), &d2d, 1, nullptr));
  if (!r.ok) return fail(ok_or(r, "device->device copy"));
  std::vector<uint8_t> back(src.size(), 0);
  r = env.s->download(b, 256, back.data(), back.size());
  if (!r.ok) return fail(ok_or(r, "device->host copy"));
  std::vector<uint8_t> direct(src.size(), 0);
  r = env.s->download(a, 0, direct.data(), direct.size());
  if (!r.ok) return fail(ok_or(r, "device->host copy"));
  env.s->free(a);
  env.s->free(b);
  for (size_t i = 0; i < src.size(); ++i) {
    if (direct[i] != src[i]) return fail("host->device->host differs at byte " + std::to_string(i) + " (element " + std::to_string(i / es) + ")");
    if (back[i] != src[i]) return fail("host->device->device->host differs at byte " + std::to_string(i) + " (element " + std::to_string(i / es) + ")");
  }
  return pass(std::to_string(n) + " elements bit-exact incl. NaN payloads/denormals where applicable");
}

Record transfer_zero(const Config& c) {
  Env env(c);
  if (auto r = env.session()) return *r;
  auto& api = env.p->api();
  void* h = nullptr;
  std::vector<uint8_t> canary(256, 0xC3);
  Result r = env.s->upload(canary.data(), canary.size(), &h);
  if (!r.ok) return fail(ok_or(r, "upload"));
  uint8_t src[16] = {1, 2, 3};
  nxrt_copy_region z{};
  z.struct_size = sizeof z;
  z.src_memory = NXRT_MEMORY_HOST;
  z.src = src;
  z.dst_memory = NXRT_MEMORY_DEVICE;
  z.dst = h;
  z.dst_offset = 16;
  z.bytes = 0;
  r = take(api.copy(env.s->raw(), &z, 1, nullptr));
  if (!r.ok) return fail(ok_or(r, "a zero-byte copy region"));
  r = take(api.copy(env.s->raw(), nullptr, 0, nullptr));
  if (!r.ok) return fail(ok_or(r, "an empty copy batch"));
  // A zero-sized tensor: zero-byte allocation and transfers.
  void* e = nullptr;
  r = env.s->upload(nullptr, 0, &e);
  if (!r.ok) return fail(ok_or(r, "zero-byte allocation"));
  nxrt_copy_region ze = z;
  ze.dst = e;
  ze.dst_offset = 0;
  r = take(api.copy(env.s->raw(), &ze, 1, nullptr));
  if (!r.ok) return fail(ok_or(r, "a zero-byte copy into a zero-byte allocation"));
  env.s->free(e);
  std::vector<uint8_t> back(256);
  r = env.s->download(h, 0, back.data(), back.size());
  env.s->free(h);
  if (!r.ok) return fail(ok_or(r, "download"));
  if (back != canary) return fail("a zero-byte copy modified the destination");
  return pass();
}

Record transfer_large(const Config& c) {
  Env env(c);
  if (auto r = env.session()) return *r;
  size_t bytes = 64ull << 20;
  if (env.info.memory_bytes && env.info.memory_bytes / 4 < bytes) bytes = env.info.memory_bytes / 4;
  bytes += 12;  // not a multiple of any alignment
  auto src = pattern(bytes, 77);
  void* h = nullptr;
  Result r = env.s->upload(src.data(), src.size(), &h);
  if (!r.ok) return fail(ok_or(r, "uploading " + std::to_string(bytes) + " bytes"));
  std::vector<uint8_t> back(bytes, 0);
  r = env.s->download(h, 0, back.data(), back.size());
  env.s->free(h);
  if (!r.ok) return fail(ok_or(r, "downloading"));
  for (size_t i = 0; i < bytes; ++i)
    if (back[i] != src[i]) return fail("round trip of " + std::to_string(bytes) + " bytes differs at byte " + std::to_string(i));
  return pass(std::to_string(bytes >> 20) + " MiB bit-exact");
}

Record transfer_strided(const Config& c) {
  Env env(c);
  if (auto r = env.session()) return *r;
  auto& api = env.p->api();
  const size_t rows = 64, row = 200, stride = 512;
  std::vector<uint8_t> base(rows * stride, 0xEE);
  void* h = nullptr;
  Result r = env.s->upload(base.data(), base.size(), &h);
  if (!r.ok) return fail(ok_or(r, "upload"));
  auto src = pattern(rows * row, 5);
  // Scatter: dense host rows into strided device rows, one batch.
  std::vector<nxrt_copy_region> regs(rows);
  for (size_t i = 0; i < rows; ++i) {
    auto& g = regs[i];
    g = nxrt_copy_region{};
    g.struct_size = sizeof g;
    g.src_memory = NXRT_MEMORY_HOST;
    g.src = src.data();
    g.src_offset = i * row;
    g.dst_memory = NXRT_MEMORY_DEVICE;
    g.dst = h;
    g.dst_offset = i * stride + 8;
    g.bytes = row;
  }
  r = take(api.copy(env.s->raw(), regs.data(), regs.size(), nullptr));
  if (!r.ok) return fail(ok_or(r, "a batch of 64 strided copies"));
  // Gather back in reverse order into a dense host buffer.
  std::vector<uint8_t> dense(rows * row, 0);
  for (size_t i = 0; i < rows; ++i) {
    auto& g = regs[i];
    g.src_memory = NXRT_MEMORY_DEVICE;
    g.src = h;
    g.src_offset = (rows - 1 - i) * stride + 8;
    g.dst_memory = NXRT_MEMORY_HOST;
    g.dst = dense.data();
    g.dst_offset = (rows - 1 - i) * row;
  }
  r = take(api.copy(env.s->raw(), regs.data(), regs.size(), nullptr));
  if (!r.ok) return fail(ok_or(r, "a batch of 64 strided gathers"));
  std::vector<uint8_t> whole(rows * stride);
  r = env.s->download(h, 0, whole.data(), whole.size());
  env.s->free(h);
  if (!r.ok) return fail(ok_or(r, "download"));
  if (dense != src) return fail("strided scatter/gather did not round-trip");
  for (size_t i = 0; i < rows; ++i)
    for (size_t k = 0; k < stride; ++k) {
      bool in_row = k >= 8 && k < 8 + row;
      uint8_t want = in_row ? src[i * row + k - 8] : 0xEE;
      if (whole[i * stride + k] != want)
        return fail(in_row ? "row " + std::to_string(i) + " landed at the wrong offset"
                           : "a strided copy wrote into the gap after row " + std::to_string(i));
    }
  return pass();
}

Record transfer_pinned(const Config& c) {
  Env env(c);
  if (auto r = env.session()) return *r;
  auto& api = env.p->api();
  size_t bytes = 1 << 20;
  void* pin = nullptr;
  Result r = take(api.memory_alloc(env.s->raw(), NXRT_MEMORY_HOST_PINNED, bytes, 64, &pin));
  if (!r.ok && r.code == NXRT_UNSUPPORTED && r.problem.empty()) return skip("HOST_PINNED memory is unsupported: " + r.message);
  if (!r.ok) return fail(ok_or(r, "HOST_PINNED memory_alloc"));
  auto src = pattern(bytes, 9);
  std::memcpy(pin, src.data(), bytes);
  void* dev = nullptr;
  r = take(api.memory_alloc(env.s->raw(), NXRT_MEMORY_DEVICE, bytes, 256, &dev));
  if (!r.ok) return fail(ok_or(r, "memory_alloc"));
  nxrt_copy_region g{};
  g.struct_size = sizeof g;
  g.src_memory = NXRT_MEMORY_HOST_PINNED;
  g.src = pin;
  g.dst_memory = NXRT_MEMORY_DEVICE;
  g.dst = dev;
  g.bytes = bytes;
  r = take(api.copy(env.s->raw(), &g, 1, nullptr));
  if (!r.ok) return fail(ok_or(r, "pinned->device copy"));
  std::memset(pin, 0, bytes);
  g.src = dev;
  g.dst = pin;
  g.src_memory = NXRT_MEMORY_DEVICE;
  g.dst_memory = NXRT_MEMORY_HOST_PINNED;
  r = take(api.copy(env.s->raw(), &g, 1, nullptr));
  if (!r.ok) return fail(ok_or(r, "device->pinned copy"));
  bool same = std::memcmp(pin, src.data(), bytes) == 0;
  api.memory_free(env.s->raw(), NXRT_MEMORY_DEVICE, dev);
  api.memory_free(env.s->raw(), NXRT_MEMORY_HOST_PINNED, pin);
  if (!same) return fail("pinned->device->pinned round trip differs");
  return pass();
}

// --------------------------------------------------------------- streams

Record stream_check(const Config& c, int which) {
  Env env(c);
  if (auto r = env.session()) return *r;
  if (!(env.p->features() & NXRT_FEATURE_STREAMS)) return skip("the plugin does not declare NXRT_FEATURE_STREAMS");
  auto& api = env.p->api();
  if (!api.stream_create || !api.stream_synchronize || !api.stream_release || !api.event_create || !api.event_record ||
      !api.stream_wait_event || !api.event_synchronize || !api.event_release)
    return skip("not run: NXRT_FEATURE_STREAMS is declared but stream functions are NULL (see api.feature_bits)");
  nxrt_stream *s1 = nullptr, *s2 = nullptr;
  Result r = take(api.stream_create(env.s->raw(), &s1));
  if (!r.ok || !s1) return fail(ok_or(r, "stream_create") + (s1 ? "" : " (NULL stream)"));
  r = take(api.stream_create(env.s->raw(), &s2));
  if (!r.ok || !s2) return fail(ok_or(r, "stream_create"));
  std::string err;
  const size_t bytes = 1 << 18;
  if (which == 0) {
    // Ordering: H->A, A->B, B->H on one stream, then synchronize.
    void *a = nullptr, *b = nullptr;
    take(api.memory_alloc(env.s->raw(), NXRT_MEMORY_DEVICE, bytes, 256, &a));
    take(api.memory_alloc(env.s->raw(), NXRT_MEMORY_DEVICE, bytes, 256, &b));
    for (int round = 0; round < 20 && err.empty(); ++round) {
      auto src = pattern(bytes, uint32_t(round));
      std::vector<uint8_t> dst(bytes, 0);
      nxrt_copy_region g[3]{};
      for (auto& x : g) {
        x.struct_size = sizeof x;
        x.bytes = bytes;
      }
      g[0].src_memory = NXRT_MEMORY_HOST, g[0].src = src.data(), g[0].dst_memory = NXRT_MEMORY_DEVICE, g[0].dst = a;
      g[1].src_memory = NXRT_MEMORY_DEVICE, g[1].src = a, g[1].dst_memory = NXRT_MEMORY_DEVICE, g[1].dst = b;
      g[2].src_memory = NXRT_MEMORY_DEVICE, g[2].src = b, g[2].dst_memory = NXRT_MEMORY_HOST, g[2].dst = dst.data();
      for (int k = 0; k < 3 && err.empty(); ++k) err = ok_or(take(api.copy(env.s->raw(), &g[k], 1, s1)), "copy on a stream");
      if (err.empty()) err = ok_or(take(api.stream_synchronize(s1)), "stream_synchronize");
      if (err.empty() && dst != src) err = "three copies queued on one stream were not executed in order (round " + std::to_string(round) + ")";
    }
    env.s->free(a);
    env.s->free(b);
  } else if (which == 1) {
    // Cross-stream: s1 writes A and records E; s2 waits on E and reads A.
    nxrt_event* e = nullptr;
    r = take(api.event_create(env.s->raw(), &e));
    if (!r.ok || !e) err = ok_or(r, "event_create");
    void* a = nullptr;
    take(api.memory_alloc(env.s->raw(), NXRT_MEMORY_DEVICE, bytes, 256, &a));
    for (int round = 0; round < 20 && err.empty(); ++round) {
      auto src = pattern(bytes, uint32_t(100 + round));
      std::vector<uint8_t> dst(bytes, 0);
      nxrt_copy_region up{}, down{};
      up.struct_size = down.struct_size = sizeof up;
      up.bytes = down.bytes = bytes;
      up.src_memory = NXRT_MEMORY_HOST, up.src = src.data(), up.dst_memory = NXRT_MEMORY_DEVICE, up.dst = a;
      down.src_memory = NXRT_MEMORY_DEVICE, down.src = a, down.dst_memory = NXRT_MEMORY_HOST, down.dst = dst.data();
      err = ok_or(take(api.copy(env.s->raw(), &up, 1, s1)), "copy on stream 1");
      if (err.empty()) err = ok_or(take(api.event_record(e, s1)), "event_record");
      if (err.empty()) err = ok_or(take(api.stream_wait_event(s2, e)), "stream_wait_event");
      if (err.empty()) err = ok_or(take(api.copy(env.s->raw(), &down, 1, s2)), "copy on stream 2");
      if (err.empty()) err = ok_or(take(api.stream_synchronize(s2)), "stream_synchronize");
      if (err.empty()) err = ok_or(take(api.event_synchronize(e)), "event_synchronize");
      if (err.empty() && dst != src) err = "a stream waiting on an event saw data from before the event (round " + std::to_string(round) + ")";
      if (err.empty()) err = ok_or(take(api.stream_synchronize(s1)), "stream_synchronize");
    }
    env.s->free(a);
    if (e) api.event_release(e);
  } else {
    // A kernel whose context carries a stream.
    AddRelu g;
    Pipeline p(*env.s, g.gb);
    err = p.build();
    if (err.empty() && p.claimed_nodes() == 0) {
      api.stream_release(s1);
      api.stream_release(s2);
      return skip("the plugin claims neither Add nor Relu (float32)");
    }
    for (int round = 0; round < 10 && err.empty(); ++round) {
      std::vector<HostTensor> out;
      ComputeOptions o;
      o.stream = s1;
      err = p.run({{g.x, g.in_x}, {g.y, g.in_y}}, out, o);
      if (err.empty()) err = compare(out[0], g.expected);
    }
  }
  api.stream_release(s1);
  api.stream_release(s2);
  if (!err.empty()) return fail(err);
  return pass();
}

// ------------------------------------------------------------ capability

std::string claims_str(const nxrt_claim_sink& s) {
  std::string out;
  for (auto& c : s.claims) {
    out += "[";
    for (size_t i = 0; i < c.size(); ++i) out += (i ? "," : "") + std::to_string(c[i]);
    out += "]";
  }
  out += "/";
  for (auto& [i, r] : s.refusals) out += std::to_string(i) + ":" + std::to_string(r.first) + ";";
  return out;
}

// A graph of Add/Relu followed by nodes no plugin knows.
struct Mixed {
  GraphBuilder gb;
  Mixed() {
    gb.graph().opsets[""] = 17;
    gb.graph().opsets["com.nxrt.conformance.unknown"] = 1;
    auto* x = gb.value("X", NXRT_DTYPE_FLOAT32, {4, 5});
    auto* y = gb.value("Y", NXRT_DTYPE_FLOAT32, {4, 5});
    auto* t = gb.value("T", NXRT_DTYPE_FLOAT32, {4, 5});
    auto* u = gb.value("U", NXRT_DTYPE_FLOAT32, {4, 5});
    auto* v = gb.value("V", NXRT_DTYPE_FLOAT32, {4, 5});
    auto* w = gb.value("W", NXRT_DTYPE_FLOAT32, {4, 5});
    gb.node("Add", "", {x, y}, {t});
    gb.node("NxrtConformanceUnknownOp", "", {t}, {u}, {nxrt_attribute{"alpha", NXRT_ATTR_FLOAT, 0, 0.5f, "", {}, {}}});
    gb.node("Mystery", "com.nxrt.conformance.unknown", {u}, {v});
    gb.node("Relu", "", {v}, {w});
    gb.graph().inputs = {x, y};
    gb.graph().outputs = {w};
  }
};

Record capability_check(const Config& c, int which) {
  Env env(c);
  if (auto r = env.session()) return *r;
  if (which == 0) {  // empty graph
    nxrt_graph g;
    g.opsets[""] = 17;
    nxrt_claim_sink sink;
    Result r = env.s->capability(g, sink);
    if (!r.ok) return fail(ok_or(r, "get_capability on an empty graph"));
    if (!sink.violations.empty()) return fail(sink.violations.front());
    if (!sink.claims.empty() || !sink.refusals.empty()) return fail("claims or refusals on an empty graph");
    return pass();
  }
  if (which == 1) {  // unknown ops only
    GraphBuilder gb;
    gb.graph().opsets[""] = 17;
    gb.graph().opsets["com.nxrt.conformance.unknown"] = 1;
    auto* a = gb.value("A", NXRT_DTYPE_FLOAT32, {3});
    auto* b = gb.value("B", NXRT_DTYPE_FLOAT32, {3});
    auto* d = gb.value("D", NXRT_DTYPE_FLOAT32, {3});
    auto* e = gb.value("E", NXRT_DTYPE_FLOAT32, {3});
    gb.node("NxrtConformanceUnknownOp", "", {a}, {b});
    gb.node("Mystery", "com.nxrt.conformance.unknown", {b}, {d});
    gb.node("AlsoUnknown", "", {d, a}, {e});
    gb.graph().inputs = {a};
    gb.graph().outputs = {e};
    nxrt_claim_sink sink;
    Result r = env.s->capability(gb.graph(), sink);
    if (!r.ok) return fail(ok_or(r, "get_capability on a graph of unknown ops"));
    if (!sink.violations.empty()) return fail(sink.violations.front());
    if (!sink.claims.empty()) return fail("the plugin claimed a node with an unknown op (" + claims_str(sink) + ")");
    for (size_t i = 0; i < 3; ++i) {
      auto it = sink.refusals.find(i);
      if (it == sink.refusals.end()) return fail("node " + std::to_string(i) + " (unknown op) was neither claimed nor refused");
      if (it->second.first != NXRT_REFUSE_OP && it->second.first != NXRT_REFUSE_OPSET)
        return fail("unknown op in node " + std::to_string(i) + " refused with reason " + std::to_string(it->second.first) +
                    ", expected NXRT_REFUSE_OP");
    }
    return pass("3 nodes refused: '" + sink.refusals[0].second + "'");
  }
  if (which == 2) {  // every node answered exactly once
    Mixed m;
    nxrt_claim_sink sink;
    Result r = env.s->capability(m.gb.graph(), sink);
    if (!r.ok) return fail(ok_or(r, "get_capability"));
    if (!sink.violations.empty()) return fail(sink.violations.front());
    for (size_t i = 0; i < m.gb.graph().nodes.size(); ++i) {
      bool claimed = false;
      for (auto& cl : sink.claims) claimed |= std::find(cl.begin(), cl.end(), i) != cl.end();
      if (!claimed && !sink.refusals.count(i))
        return fail("node " + std::to_string(i) + " (" + m.gb.graph().nodes[i]->op_type + ") was neither claimed nor refused");
    }
    for (size_t i : {1, 2})
      for (auto& cl : sink.claims)
        if (std::find(cl.begin(), cl.end(), i) != cl.end()) return fail("claimed unknown-op node " + std::to_string(i));
    return pass(claims_str(sink));
  }
  if (which == 3) {  // deterministic
    Mixed m;
    AddRelu ar;
    std::string first_m, first_a;
    for (int k = 0; k < 6; ++k) {
      nxrt_claim_sink s1, s2;
      Result r1 = env.s->capability(m.gb.graph(), s1);
      Result r2 = env.s->capability(ar.gb.graph(), s2);
      if (!r1.ok || !r2.ok) return fail(ok_or(r1.ok ? r2 : r1, "get_capability"));
      if (k == 0) {
        first_m = claims_str(s1);
        first_a = claims_str(s2);
      } else if (claims_str(s1) != first_m || claims_str(s2) != first_a) {
        return fail("claims changed between calls on the same graph: " + first_m + " then " + claims_str(s1));
      }
    }
    return pass(first_a);
  }
  // which == 4: claims refer only to real nodes, and are valid.
  Mixed m;
  AddRelu ar;
  for (const GraphBuilder* gb : {&m.gb, &ar.gb}) {
    nxrt_claim_sink sink;
    Result r = env.s->capability(gb->graph(), sink);
    if (!sink.violations.empty()) return fail(sink.violations.front());
    if (!r.ok) return fail(ok_or(r, "get_capability"));
  }
  return pass();
}

// --------------------------------------------------------------- kernels

Record kernel_add_relu(const Config& c) {
  Env env(c);
  if (auto r = env.session()) return *r;
  AddRelu g;
  size_t claimed = 0;
  std::string e = run_add_relu_once(*env.s, g, &claimed);
  if (!e.empty()) return fail(e);
  if (claimed == 0) return skip("the plugin claims neither Add nor Relu (float32)");
  return pass(std::to_string(claimed) + " of 2 nodes on the plugin");
}

Record kernel_create_unclaimed(const Config& c) {
  Env env(c);
  if (auto r = env.session()) return *r;
  GraphBuilder gb;
  gb.graph().opsets[""] = 17;
  auto* a = gb.value("A", NXRT_DTYPE_FLOAT32, {3});
  auto* b = gb.value("B", NXRT_DTYPE_FLOAT32, {3});
  gb.node("NxrtConformanceUnknownOp", "", {a}, {b});
  auto view = gb.subgraph({0});
  nxrt_kernel* k = nullptr;
  Result r = take(env.p->api().kernel_create(env.s->raw(), view.get(), &k));
  if (r.ok) {
    if (k) env.p->api().kernel_release(k);
    return fail("kernel_create succeeded for an op the plugin does not know");
  }
  std::string err = expect_error(r, "kernel_create(unknown op)", {NXRT_UNSUPPORTED, NXRT_INVALID_ARGUMENT, NXRT_NOT_FOUND});
  if (!err.empty()) return fail(err);
  return pass("'" + r.message + "'");
}

Record kernel_deterministic(const Config& c) {
  Env env(c);
  if (auto r = env.session()) return *r;
  AddRelu g({3, 7, 11});
  Pipeline p(*env.s, g.gb);
  std::string e = p.build();
  if (!e.empty()) return fail(e);
  if (!p.claimed_nodes()) return skip("the plugin claims neither Add nor Relu (float32)");
  std::vector<uint8_t> first;
  for (int k = 0; k < 20; ++k) {
    std::vector<HostTensor> out;
    e = p.run({{g.x, g.in_x}, {g.y, g.in_y}}, out);
    if (!e.empty()) return fail("run " + std::to_string(k) + ": " + e);
    if (k == 0) {
      e = compare(out[0], g.expected);
      if (!e.empty()) return fail(e);
      first = out[0].bytes;
    } else if (out[0].bytes != first) {
      return fail("run " + std::to_string(k) + " gave different bits than run 0");
    }
  }
  return pass("20 runs bit-identical");
}

Record kernel_zero_sized(const Config& c) {
  Env env(c);
  if (auto r = env.session()) return *r;
  AddRelu g({0, 3});
  Pipeline p(*env.s, g.gb);
  std::string e = p.build();
  if (!e.empty()) return fail(e);
  if (!p.claimed_nodes()) return skip("the plugin claims neither Add nor Relu on zero-sized float32 tensors");
  std::vector<HostTensor> out;
  e = p.run({{g.x, g.in_x}, {g.y, g.in_y}}, out);
  if (!e.empty()) return fail(e);
  e = compare(out[0], g.expected);
  if (!e.empty()) return fail(e);
  return pass();
}

Record kernel_memory(const Config& c) {
  Env env(c);
  if (auto r = env.session()) return *r;
  AddRelu g({64, 64});
  Pipeline p(*env.s, g.gb);
  std::string e = p.build();
  if (!e.empty()) return fail(e);
  if (!p.claimed_nodes()) return skip("the plugin claims neither Add nor Relu (float32)");
  const int warm = 30, runs = 300;
  size_t m0 = 0, r0 = 0;
  long st0 = 0;
  for (int k = 0; k < warm + runs; ++k) {
    if (k == warm) {
      m0 = malloc_bytes();
      r0 = rss_bytes();
      st0 = host_log().statuses_created - host_log().statuses_released;
    }
    std::vector<HostTensor> out;
    e = p.run({{g.x, g.in_x}, {g.y, g.in_y}}, out);
    if (!e.empty()) return fail("run " + std::to_string(k) + ": " + e);
  }
  long dm = long(malloc_bytes()) - long(m0), dr = long(rss_bytes()) - long(r0);
  long dst = host_log().statuses_created - host_log().statuses_released - st0;
  if (dm > (8l << 20) || dr > (16l << 20))
    return fail("memory grows per run: +" + std::to_string(dm >> 10) + " KiB malloc, +" + std::to_string(dr >> 10) +
                " KiB RSS over " + std::to_string(runs) + " runs (~" + std::to_string(std::max(dm, dr) / runs >> 10) + " KiB/run)");
  if (dst > 0) return fail(std::to_string(dst) + " statuses leaked over " + std::to_string(runs) + " runs");
  return pass("+" + std::to_string(dm >> 10) + " KiB malloc, +" + std::to_string(dr >> 10) + " KiB RSS over " + std::to_string(runs) + " runs");
}

// --------------------------------------------------------------- threads

Record threads_kernels(const Config& c) {
  Env env(c);
  if (auto r = env.session()) return *r;
  AddRelu g({16, 33});
  size_t claimed = 0;
  std::string e = run_add_relu_once(*env.s, g, &claimed);
  if (!e.empty()) return skip("not run: single-threaded run failed (see kernel.add_relu)");
  if (!claimed) return skip("the plugin claims neither Add nor Relu (float32)");
  bool shared = env.p->features() & NXRT_FEATURE_CONCURRENT_RUN;
  std::unique_ptr<Pipeline> common;
  if (shared) {
    common = std::make_unique<Pipeline>(*env.s, g.gb);
    e = common->build();
    if (!e.empty()) return fail(e);
  }
  std::mutex mu;
  std::string first_err;
  std::vector<std::thread> ts;
  for (int t = 0; t < 8; ++t)
    ts.emplace_back(guarded_thread(mu, first_err, t, [&, t] {
      std::unique_ptr<Pipeline> own;
      Pipeline* p = common.get();
      if (!p || t % 2) {  // with CONCURRENT_RUN half the threads share one kernel set
        own = std::make_unique<Pipeline>(*env.s, g.gb);
        std::string err;
        {
          std::lock_guard lock(mu);  // get_capability is [per-object] on the session
          err = own->build();
        }
        if (!err.empty()) {
          std::lock_guard lock(mu);
          if (first_err.empty()) first_err = "thread " + std::to_string(t) + ": " + err;
          return;
        }
        p = own.get();
      }
      for (int k = 0; k < 40; ++k) {
        std::vector<HostTensor> out;
        std::string err = p->run({{g.x, g.in_x}, {g.y, g.in_y}}, out);
        if (err.empty()) err = compare(out[0], g.expected, 0, 0);
        if (!err.empty()) {
          std::lock_guard lock(mu);
          if (first_err.empty()) first_err = "thread " + std::to_string(t) + " run " + std::to_string(k) + ": " + err;
          return;
        }
      }
    }));
  for (auto& t : ts) t.join();
  if (!first_err.empty()) return fail(first_err);
  return pass(std::string("8 threads x 40 runs identical") + (shared ? " (4 sharing one kernel: CONCURRENT_RUN)" : ""));
}

Record threads_sessions(const Config& c) {
  Env env(c);
  if (auto r = env.device()) return *r;
  AddRelu g({8, 9});
  std::mutex mu;
  std::string first_err;
  std::atomic<int> unclaimed{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < 8; ++t)
    ts.emplace_back(guarded_thread(mu, first_err, t, [&, t] {
      Session s(*env.p, c.device);
      Result r = s.create({{"threads", "1"}});
      std::string err = ok_or(r, "session_create");
      for (int k = 0; k < 10 && err.empty(); ++k) {
        size_t claimed = 0;
        err = run_add_relu_once(s, g, &claimed);
        if (!claimed) unclaimed++;
      }
      if (!err.empty()) {
        std::lock_guard lock(mu);
        if (first_err.empty()) first_err = "thread " + std::to_string(t) + ": " + err;
      }
    }));
  for (auto& t : ts) t.join();
  if (!first_err.empty()) return fail(first_err);
  if (unclaimed == 80) return skip("the plugin claims neither Add nor Relu (float32)");
  return pass("8 threads, one session each, 10 capability+create+run rounds, identical results");
}

// ---------------------------------------------------------------- errors

Record errors_statuses(const Config& c) {
  Env env(c);
  if (auto r = env.session()) return *r;
  host_log().take();
  long before = host_log().statuses_created - host_log().statuses_released;
  auto& api = env.p->api();
  // Drive several error paths and a normal run.
  nxrt_device_info i{};
  i.struct_size = sizeof i;
  std::vector<std::string> problems;
  auto note = [&](const Result& r, const char* what) {
    if (!r.ok && !r.problem.empty()) problems.push_back(std::string(what) + ": " + r.problem);
  };
  note(take(api.device_info(env.devices + 3, &i)), "device_info(bad index)");
  nxrt_ep_session* s = nullptr;
  note(take(api.session_create(env.devices + 3, nullptr, 0, &s)), "session_create(bad device)");
  void* h = nullptr;
  note(take(api.memory_alloc(env.s->raw(), NXRT_MEMORY_DEVICE, 1ull << 62, 64, &h)), "memory_alloc(2^62)");
  AddRelu g;
  size_t claimed = 0;
  run_add_relu_once(*env.s, g, &claimed);
  Mixed m;
  nxrt_claim_sink sink;
  note(env.s->capability(m.gb.graph(), sink), "get_capability");
  long after = host_log().statuses_created - host_log().statuses_released;
  auto v = host_log().take();
  if (!problems.empty()) return fail(problems.front());
  if (!v.empty()) return fail(v.front());
  if (after != before)
    return fail(std::to_string(after - before) + " host statuses created by the plugin were neither returned nor released");
  return pass();
}

// ------------------------------------------------------------- lifecycle

Record lifecycle_cycles(const Config& c) {
  const int cycles = 100, warm = 5;
  size_t m0 = 0, r0 = 0;
  for (int k = 0; k < cycles; ++k) {
    if (k == warm) {
      m0 = malloc_bytes();
      r0 = rss_bytes();
    }
    std::string err, stage;
    auto p = Plugin::open(c.plugin, &err, &stage);
    if (!p) return k == 0 ? skip("not run: the plugin does not load (" + err + ")") : fail("cycle " + std::to_string(k) + ": " + err);
    std::string e = p->negotiate();
    if (!e.empty()) return k == 0 ? skip("not run: " + e) : fail("cycle " + std::to_string(k) + ": " + e);
    if (!missing_required(*p).empty()) return skip("not run: required functions missing");
    uint32_t n = 0;
    Result r = take(p->api().device_count(&n));
    if (!r.ok) return fail("cycle " + std::to_string(k) + ": " + ok_or(r, "device_count"));
    if (n > c.device) {
      Session s(*p, c.device);
      r = s.create();
      if (!r.ok) return fail("cycle " + std::to_string(k) + ": " + ok_or(r, "session_create"));
      void* h = nullptr;
      r = take(p->api().memory_alloc(s.raw(), NXRT_MEMORY_DEVICE, 1 << 16, 256, &h));
      if (r.ok) s.free(h);
    }
    p->shutdown();
    p.reset();  // dlclose
  }
  long dm = long(malloc_bytes()) - long(m0), dr = long(rss_bytes()) - long(r0);
  if (dm > (8l << 20) || dr > (32l << 20))
    return fail("memory grew by " + std::to_string(dm >> 10) + " KiB malloc / " + std::to_string(dr >> 10) + " KiB RSS over " +
                std::to_string(cycles - warm) + " load/negotiate/unload cycles");
  return pass("+" + std::to_string(dm >> 10) + " KiB malloc, +" + std::to_string(dr >> 10) + " KiB RSS over " + std::to_string(cycles - warm) + " cycles");
}

}  // namespace

std::vector<Item> abi_items(const Config& cfg) {
  std::vector<Item> items;
  auto add = [&](std::string name, std::function<Record(const Config&)> f) {
    items.push_back(Item{std::move(name), [f, cfg] { return std::vector<Record>{f(cfg)}; }, "", ""});
  };
  add("load.dlopen", load_dlopen);
  add("load.entry_symbol", load_entry_symbol);
  add("negotiate.equal_minor", negotiate_equal);
  add("negotiate.newer_minor", negotiate_newer);
  add("negotiate.older_host_table", negotiate_older_table);
  add("negotiate.refuse_major_2", [](const Config& c) { return negotiate_refuse_major(c, 2); });
  add("negotiate.refuse_major_0", [](const Config& c) { return negotiate_refuse_major(c, 0); });
  add("negotiate.reply_struct_size", negotiate_reply_canary);
  add("negotiate.short_reply", negotiate_short_reply);
  add("negotiate.short_request", negotiate_short_request);
  add("negotiate.null_host", negotiate_null_host);
  add("negotiate.repeatable", negotiate_repeatable);
  add("negotiate.reload_after_shutdown", negotiate_reload);
  add("api.struct_size", api_struct_size);
  add("api.identity", api_identity);
  add("api.required_functions", api_required);
  add("api.feature_bits", api_features);
  add("device.count", device_count);
  add("device.count_stable", device_count_stable);
  add("device.info", device_info);
  add("device.info_stable", device_info_stable);
  add("device.info_short_struct", device_info_short);
  add("device.info_bad_index", device_info_bad_index);
  add("session.create", session_create);
  add("session.threads_option", [](const Config& c) { return session_options(c, 0); });
  add("session.unknown_option_ignored", [](const Config& c) { return session_options(c, 1); });
  add("session.unknown_prefixed_option", [](const Config& c) { return session_options(c, 2); });
  add("session.bad_device", session_bad_device);
  add("memory.alignment", memory_alignment);
  add("memory.zero_byte", memory_zero_byte);
  add("memory.huge_fails_cleanly", memory_huge);
  add("memory.alloc_free_cycles", memory_cycles);
  for (nxrt_dtype t : {NXRT_DTYPE_FLOAT32, NXRT_DTYPE_FLOAT16, NXRT_DTYPE_BFLOAT16, NXRT_DTYPE_FLOAT64, NXRT_DTYPE_INT8,
                       NXRT_DTYPE_UINT8, NXRT_DTYPE_INT16, NXRT_DTYPE_UINT16, NXRT_DTYPE_INT32, NXRT_DTYPE_UINT32,
                       NXRT_DTYPE_INT64, NXRT_DTYPE_UINT64, NXRT_DTYPE_BOOL}) {
    Item it{std::string("transfer.roundtrip.") + dtype_name(t), [t, cfg] { return std::vector<Record>{transfer_dtype(cfg, t)}; }, "", dtype_name(t)};
    items.push_back(std::move(it));
  }
  add("transfer.zero_sized", transfer_zero);
  add("transfer.large", transfer_large);
  add("transfer.strided_batch", transfer_strided);
  add("transfer.host_pinned", transfer_pinned);
  add("stream.ordering", [](const Config& c) { return stream_check(c, 0); });
  add("stream.event_wait", [](const Config& c) { return stream_check(c, 1); });
  add("stream.kernel_on_stream", [](const Config& c) { return stream_check(c, 2); });
  add("capability.empty_graph", [](const Config& c) { return capability_check(c, 0); });
  add("capability.unknown_ops", [](const Config& c) { return capability_check(c, 1); });
  add("capability.every_node_answered", [](const Config& c) { return capability_check(c, 2); });
  add("capability.deterministic", [](const Config& c) { return capability_check(c, 3); });
  add("capability.real_nodes", [](const Config& c) { return capability_check(c, 4); });
  add("kernel.add_relu", kernel_add_relu);
  add("kernel.create_unclaimed_fails", kernel_create_unclaimed);
  add("kernel.deterministic", kernel_deterministic);
  add("kernel.zero_sized", kernel_zero_sized);
  add("kernel.memory_per_run", kernel_memory);
  add("threads.kernels_8", threads_kernels);
  add("threads.sessions_8", threads_sessions);
  add("errors.status_ownership", errors_statuses);
  add("lifecycle.load_unload_100", lifecycle_cycles);
  return items;
}

}  // namespace conf
