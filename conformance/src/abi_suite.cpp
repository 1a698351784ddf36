// The abi suite: the runner is its own minimal host (minihost.hpp) and
// exercises every entry point of the plugin table directly.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <regex>
#include <set>
#include <thread>

#include "checks.hpp"
#include "utf8.hpp"

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

std::string hex(uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%llx", (unsigned long long)v);
  return buf;
}

int plugin_minor(Plugin& p);

// "the plugin wrote byte N past ..." or "" when the canaries are intact.
std::string canary_problem(const NegotiateResult& r, uint32_t reply_size) {
  if (!r.canary_ok)
    return "the plugin wrote byte " + std::to_string(r.first_bad_byte) + " past reply.struct_size (" +
           std::to_string(reply_size) + ")";
  if (!r.tail_ok)
    return "the plugin wrote byte " + std::to_string(r.first_bad_byte) + " past the size it wrote back (" +
           std::to_string(r.written_size) + ")";
  return "";
}

// The callee-filled rule on the reply: written back min(caller's size, plugin's sizeof).
std::string reply_size_problem(const NegotiateResult& r, uint32_t caller) {
  if (r.rc != NXRT_OK) return "";
  if (r.written_size > caller)
    return "reply.struct_size written back as " + std::to_string(r.written_size) + ", more than the caller's " +
           std::to_string(caller);
  uint32_t need = uint32_t(std::min<size_t>(caller, sizeof(nxrt_negotiate_reply)));
  if (r.written_size < need)
    return "reply.struct_size written back as " + std::to_string(r.written_size) +
           "; the callee-filled rule needs min(caller's " + std::to_string(caller) + ", the plugin's sizeof >= " +
           std::to_string(sizeof(nxrt_negotiate_reply)) + ") = " + std::to_string(need);
  return "";
}

// Whether `text` mentions the number `n` on its own (not inside another number).
bool names_number(const std::string& text, uint32_t n) {
  return std::regex_search(text, std::regex("(^|[^0-9])" + std::to_string(n) + "([^0-9]|$)"));
}

Record negotiate_equal(const Config& c) {
  return with_plugin(c, [](Plugin& p) {
    auto r = p.negotiate_raw(NegotiateArgs{});
    if (r.rc != NXRT_OK)
      return fail(std::string("the plugin refused ABI 2.0 with ") + status_code_name(r.rc) + ": '" + r.reply.message + "'");
    Record out = pass("agreed 2.0");
    if (r.reply.abi_major != 2)
      out = fail("the plugin agreed to major " + std::to_string(r.reply.abi_major) + ", the host offered major 2");
    else if (r.reply.abi_minor != 0)
      out = fail("the plugin agreed to minor " + std::to_string(r.reply.abi_minor) + ", the host offered minor 0 (agreed must be min)");
    else if (!r.reply.api)
      out = fail("negotiation returned NXRT_OK with reply.api = NULL (no function table)");
    else if (!r.reply.plugin)
      out = fail("negotiation returned NXRT_OK with reply.plugin = NULL (every negotiation creates an instance)");
    else if (auto e = reply_size_problem(r, sizeof(nxrt_negotiate_reply)); !e.empty())
      out = fail(e);
    else if (r.reply.reserved0 != 0)
      out = fail("reply.reserved0 is " + std::to_string(r.reply.reserved0) + ", must be 0");
    Plugin::shutdown_raw(r);
    return out;
  });
}

Record negotiate_newer(const Config& c) {
  return with_plugin(c, [](Plugin& p) {
    NegotiateArgs a;
    a.minor = 7;
    a.host = host_table_newer();
    a.request_size = sizeof(nxrt_negotiate_request) + 32;  // a 2.7 request: fields this header does not know (0xEE)
    auto r = p.negotiate_raw(a);
    if (r.rc != NXRT_OK)
      return fail(std::string("the plugin refused a newer host (2.7, larger request and services table) with ") +
                  status_code_name(r.rc) + ": '" + r.reply.message + "'; a newer minor must be accepted");
    Record out = pass("agreed 2." + std::to_string(r.reply.abi_minor));
    if (r.reply.abi_major != 2) out = fail("agreed major " + std::to_string(r.reply.abi_major) + " for a 2.7 offer");
    else if (r.reply.abi_minor > 7) out = fail("agreed minor " + std::to_string(r.reply.abi_minor) + " exceeds the offered 7");
    else if (!r.reply.api) out = fail("reply.api is NULL");
    else if (!r.canary_ok) out = fail(canary_problem(r, sizeof(nxrt_negotiate_reply)));
    Plugin::shutdown_raw(r);
    return out;
  });
}

// Agreed minor = min(host's, plugin's), for offers below, at and above the plugin's own.
Record negotiate_min_minor(const Config& c) {
  return with_plugin(c, [](Plugin& p) {
    auto top = p.negotiate_raw(2, 0xFFFFFFFFu);
    if (top.rc != NXRT_OK)
      return fail(std::string("the plugin refused an offer of 2.4294967295 with ") + status_code_name(top.rc) + ": '" +
                  top.reply.message + "'; a newer minor must be accepted");
    uint32_t own = top.reply.abi_minor;
    Plugin::shutdown_raw(top);
    for (uint32_t offer : {0u, 1u, 2u, 3u, 7u, own, own + 1, 1000u}) {
      auto r = p.negotiate_raw(2, offer);
      if (r.rc != NXRT_OK)
        return fail("the plugin refused an offer of 2." + std::to_string(offer) + " with " + status_code_name(r.rc) + ": '" +
                    r.reply.message + "'");
      uint32_t got = r.reply.abi_minor;
      Plugin::shutdown_raw(r);
      if (got != std::min(offer, own))
        return fail("offered 2." + std::to_string(offer) + ", agreed 2." + std::to_string(got) + "; the plugin speaks 2." +
                    std::to_string(own) + " so the agreed minor must be min = " + std::to_string(std::min(offer, own)));
    }
    return pass("the plugin speaks 2." + std::to_string(own) + "; every offer agreed the min");
  });
}

Record negotiate_refuse_major(const Config& c, uint32_t major) {
  return with_plugin(c, [major](Plugin& p) {
    auto r = p.negotiate_raw(major, 0);
    if (r.rc == NXRT_OK) {
      Plugin::shutdown_raw(r);
      return fail("the plugin accepted ABI major " + std::to_string(major) + " (agreed " + std::to_string(r.reply.abi_major) +
                  "." + std::to_string(r.reply.abi_minor) + "); it must refuse with NXRT_VERSION_MISMATCH");
    }
    if (r.rc != NXRT_VERSION_MISMATCH)
      return fail(std::string("refused major ") + std::to_string(major) + " with " + status_code_name(r.rc) +
                  ", expected NXRT_VERSION_MISMATCH");
    std::string msg = r.reply.message;
    if (msg.empty()) return fail("refused major " + std::to_string(major) + " with an empty reply.message");
    if (!r.canary_ok) return fail(canary_problem(r, sizeof(nxrt_negotiate_reply)));
    if (!names_number(msg, major) || !names_number(msg, NXRT_EP_ABI_MAJOR))
      return fail("the refusal of major " + std::to_string(major) + " must name both majors (" + std::to_string(major) +
                  " and the plugin's 2): '" + msg + "'");
    return pass("refused: '" + msg + "'");
  });
}

Record negotiate_reply_canary(const Config& c) {
  return with_plugin(c, [](Plugin& p) {
    auto r = p.negotiate_raw(NegotiateArgs{});
    Plugin::shutdown_raw(r);
    if (!r.canary_ok) return fail(canary_problem(r, sizeof(nxrt_negotiate_reply)));
    if (r.rc != NXRT_OK) return skip("not run: negotiation refused");
    if (auto e = reply_size_problem(r, sizeof(nxrt_negotiate_reply)); !e.empty()) return fail(e);
    return pass("wrote back " + std::to_string(r.written_size));
  });
}

// A reply from a future host: bigger than this header's; the plugin fills what
// it knows and writes back min(caller's size, its own sizeof).
Record negotiate_reply_larger(const Config& c) {
  return with_plugin(c, [](Plugin& p) {
    NegotiateArgs a;
    a.reply_size = sizeof(nxrt_negotiate_reply) + 64;
    auto r = p.negotiate_raw(a);
    Plugin::shutdown_raw(r);
    if (r.rc != NXRT_OK)
      return fail(std::string("the plugin refused a larger reply with ") + status_code_name(r.rc) + ": '" + r.reply.message + "'");
    if (!r.canary_ok || !r.tail_ok) return fail(canary_problem(r, a.reply_size));
    if (auto e = reply_size_problem(r, a.reply_size); !e.empty()) return fail(e);
    if (!r.reply.api) return fail("reply.api is NULL");
    // A plugin of this header's minor has this header's sizeof: it writes back exactly that.
    if (plugin_minor(p) == int(NXRT_EP_ABI_MINOR) && r.written_size != sizeof(nxrt_negotiate_reply))
      return fail("reply.struct_size written back as " + std::to_string(r.written_size) + " for a caller's " +
                  std::to_string(a.reply_size) + "; the plugin speaks 2." + std::to_string(NXRT_EP_ABI_MINOR) +
                  ", whose reply is " + std::to_string(sizeof(nxrt_negotiate_reply)) + " bytes: min(caller's size, its sizeof) = " +
                  std::to_string(sizeof(nxrt_negotiate_reply)));
    return pass("wrote back " + std::to_string(r.written_size) + " of " + std::to_string(a.reply_size));
  });
}

Record negotiate_short_reply(const Config& c) {
  return with_plugin(c, [](Plugin& p) {
    uint32_t size = offsetof(nxrt_negotiate_reply, reserved0);  // the frozen prefix only
    NegotiateArgs a;
    a.reply_size = size;
    auto r = p.negotiate_raw(a);
    if (!r.canary_ok) return fail(canary_problem(r, size));
    if (r.rc == NXRT_OK) return fail("the plugin returned NXRT_OK into a reply too small to hold its function table and instance");
    if (!r.reply.message[0]) return fail("refused a short reply with an empty message");
    return pass(std::string("refused: '") + r.reply.message + "'");
  });
}

Record negotiate_short_request(const Config& c) {
  return with_plugin(c, [](Plugin& p) {
    NegotiateArgs a;
    a.request_size = offsetof(nxrt_negotiate_request, host);
    auto r = p.negotiate_raw(a);
    if (!r.canary_ok) return fail(canary_problem(r, sizeof(nxrt_negotiate_reply)));
    if (r.rc == NXRT_OK) {
      Plugin::shutdown_raw(r);
      return fail("accepted a request whose struct_size excludes the host field");
    }
    if (!r.reply.message[0]) return fail("refused a short request with an empty message");
    return pass(std::string("refused: '") + r.reply.message + "'");
  });
}

// A 2.0 request cut to the frozen prefix (struct_size..host, a 1.x-sized
// request): malformed for 2.0. The plugin must not read past struct_size (the
// fields there are trap pointers) and either refuses with a message or accepts
// treating library_path, host_name and host_version as NULL.
Record negotiate_prefix_request(const Config& c) {
  return with_plugin(c, [&c](Plugin& p) {
    NegotiateArgs a;
    a.request_size = offsetof(nxrt_negotiate_request, library_path);
    auto r = p.negotiate_raw(a);
    if (!r.canary_ok) return fail(canary_problem(r, sizeof(nxrt_negotiate_reply)));
    if (r.rc != NXRT_OK) {
      if (!r.reply.message[0]) return fail("refused a request without library_path/host_name/host_version with an empty message");
      return pass(std::string("refused: '") + r.reply.message + "'");
    }
    if (!r.reply.api || !r.reply.plugin) {
      Plugin::shutdown_raw(r);
      return fail("accepted a prefix-only request with reply.api or reply.plugin = NULL");
    }
    uint32_t n = 0;
    Result st;
    if (NXRT_HAS_FIELD(r.reply.api, nxrt_plugin_api, device_count) && r.reply.api->device_count) {
      Phase ph("device_count");
      st = take(r.reply.api->device_count(r.reply.plugin, &n));
    }
    (void)c;
    Plugin::shutdown_raw(r);
    if (!st.ok) return fail("accepted a prefix-only request, then device_count failed: " + st.str());
    return pass("accepted, treating the missing fields as NULL");
  });
}

Record negotiate_null_host(const Config& c) {
  return with_plugin(c, [](Plugin& p) {
    NegotiateArgs a;
    a.null_host = true;
    auto r = p.negotiate_raw(a);
    if (r.rc == NXRT_OK) {
      Plugin::shutdown_raw(r);
      return fail("accepted a request with host = NULL");
    }
    if (!r.reply.message[0]) return fail("refused host = NULL with an empty message");
    return pass(std::string("refused: '") + r.reply.message + "'");
  });
}

Record negotiate_older_table(const Config& c) {
  return with_plugin(c, [&c](Plugin& p) {
    host_log().take();
    NegotiateArgs a;
    a.host = host_table_truncated();
    auto r = p.negotiate_raw(a);
    if (!r.canary_ok) return fail(canary_problem(r, sizeof(nxrt_negotiate_reply)));
    if (r.rc != NXRT_OK) {
      if (!r.reply.message[0]) return fail("refused a smaller host table with an empty message");
      return pass(std::string("refused cleanly: '") + r.reply.message + "'");
    }
    if (!r.reply.api) return fail("NXRT_OK with reply.api = NULL");
    // Accepted: exercise it and make sure nothing past struct_size is used.
    nxrt_plugin_api api{};
    std::memcpy(&api, r.reply.api, std::min<size_t>(r.reply.api->struct_size, sizeof api));
    nxrt_plugin* inst = r.reply.plugin;
    uint32_t n = 0;
    if (api.device_count) take(api.device_count(inst, &n));
    if (n > c.device && api.session_create && api.session_release && api.get_capability) {
      nxrt_ep_session* s = nullptr;
      if (take(api.session_create(inst, c.device, nullptr, 0, &s)).ok && s) {
        AddRelu g;
        nxrt_claim_sink sink;
        sink.graph = &g.gb.graph();
        sink.features = r.reply.features;
        take(api.get_capability(s, &g.gb.graph(), &sink));
        api.session_release(s);
      }
    }
    if (api.shutdown) api.shutdown(inst);
    auto v = host_log().take();
    if (!v.empty()) return fail(v.front());
    return pass("accepted the smaller table and stayed within it");
  });
}

Record negotiate_repeatable(const Config& c) {
  return with_plugin(c, [](Plugin& p) {
    auto a = p.negotiate_raw(NegotiateArgs{});
    auto b = p.negotiate_raw(NegotiateArgs{});
    Record out = pass();
    if (a.rc != NXRT_OK || b.rc != NXRT_OK) out = skip("not run: negotiation refused");
    else if (!a.reply.api || !b.reply.api) out = skip("not run: no function table");
    else if (a.reply.features != b.reply.features) out = fail("features differ between two negotiations");
    else if (a.reply.abi_minor != b.reply.abi_minor) out = fail("agreed minor differs between two negotiations");
    else if (std::strcmp(a.reply.api->name ? a.reply.api->name : "", b.reply.api->name ? b.reply.api->name : "") != 0)
      out = fail("the plugin name differs between two negotiations");
    Plugin::shutdown_raw(b);
    if (!(a.reply.plugin && a.reply.plugin == b.reply.plugin)) Plugin::shutdown_raw(a);
    return out;
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
      Result r = take(p.api().device_count(p.instance(), &n));
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

// ------------------------------------------------------------- instances

// Two instances of one library (the same path opened twice: one library, two negotiations).
struct Pair {
  std::unique_ptr<Plugin> a, b;
  std::optional<Record> open(const Config& c) {
    std::string err, stage;
    a = Plugin::open(c.plugin, &err, &stage);
    if (!a) return skip("not run: the plugin does not load (" + err + ")");
    b = Plugin::open(c.plugin, &err, &stage);
    if (!b) return skip("not run: the plugin does not load twice (" + err + ")");
    std::string e = a->negotiate();
    if (!e.empty()) return skip("not run: " + e);
    if (!missing_required(*a).empty()) return skip("not run: required functions missing (see api.required_functions)");
    e = b->negotiate();
    if (!e.empty()) return fail("a second negotiation while the first instance is alive failed: " + e);
    return std::nullopt;
  }
  ~Pair() {
    // A shared "instance" (a broken plugin) is shut down once.
    if (a && b && a->negotiated() && b->negotiated() && a->instance() == b->instance()) b->forget();
  }
};

Record instance_distinct(const Config& c) {
  Pair p;
  if (auto r = p.open(c)) return *r;
  if (p.a->instance() == p.b->instance()) {
    return fail("two negotiations returned the same plugin pointer " + hex(uintptr_t(p.a->instance())) +
                "; every negotiation must create a new instance");
  }
  return pass(hex(uintptr_t(p.a->instance())) + " and " + hex(uintptr_t(p.b->instance())));
}

// Sessions on both instances; shutting the first down leaves the second working.
Record instance_shutdown_isolated(const Config& c) {
  Pair p;
  if (auto r = p.open(c)) return *r;
  if (p.a->instance() == p.b->instance()) {
    return skip("not run: both negotiations returned one instance (see instance.distinct)");
  }
  uint32_t na = 0, nb = 0;
  Result r = take(p.a->api().device_count(p.a->instance(), &na));
  if (!r.ok) return fail(ok_or(r, "device_count on instance 1"));
  r = take(p.b->api().device_count(p.b->instance(), &nb));
  if (!r.ok) return fail(ok_or(r, "device_count on instance 2"));
  if (na != nb) return fail("the two instances report " + std::to_string(na) + " and " + std::to_string(nb) + " devices");
  if (na <= c.device) {
    p.a->shutdown();
    r = take(p.b->api().device_count(p.b->instance(), &nb));
    if (!r.ok) return fail(ok_or(r, "device_count on instance 2 after instance 1's shutdown"));
    return skip("no device: only the device-free part ran (instance 2 answers after instance 1's shutdown)");
  }
  {
    Session sa(*p.a, c.device), sb(*p.b, c.device);
    r = sa.create();
    if (!r.ok) return fail(ok_or(r, "session_create on instance 1"));
    r = sb.create();
    if (!r.ok) return fail(ok_or(r, "session_create on instance 2 while instance 1 has a session"));
    AddRelu g;
    size_t claimed = 0;
    std::string e = run_add_relu_once(sa, g, &claimed);
    if (!e.empty()) return fail("instance 1: " + e);
    e = run_add_relu_once(sb, g, &claimed);
    if (!e.empty()) return fail("instance 2 beside instance 1: " + e);
  }
  p.a->shutdown();  // its sessions are released
  host_log().take();
  r = take(p.b->api().device_count(p.b->instance(), &nb));
  if (!r.ok) return fail(ok_or(r, "device_count on instance 2 after instance 1's shutdown"));
  if (nb != na) return fail("instance 2 reports " + std::to_string(nb) + " devices after instance 1's shutdown, " + std::to_string(na) + " before");
  nxrt_device_info info{};
  info.struct_size = sizeof info;
  r = take(p.b->api().device_info(p.b->instance(), c.device, &info));
  if (!r.ok) return fail(ok_or(r, "device_info on instance 2 after instance 1's shutdown"));
  Session s(*p.b, c.device);
  r = s.create();
  if (!r.ok) return fail(ok_or(r, "session_create on instance 2 after instance 1's shutdown"));
  AddRelu g;
  size_t claimed = 0;
  std::string e = run_add_relu_once(s, g, &claimed);
  if (!e.empty()) return fail("instance 2 after instance 1's shutdown: " + e);
  auto v = host_log().take();
  if (!v.empty()) return fail(v.front());
  return pass(claimed ? "instance 2 ran Add/Relu after instance 1's shutdown" : "instance 2 works after instance 1's shutdown");
}

// 20 rounds of negotiate/shutdown, overlapping: each new instance is created
// before the previous one is shut down.
Record instance_cycles(const Config& c) {
  std::string err, stage;
  auto lib = Plugin::open(c.plugin, &err, &stage);
  if (!lib) return skip("not run: the plugin does not load (" + err + ")");
  std::unique_ptr<Plugin> prev;
  std::set<nxrt_plugin*> live;
  for (int k = 0; k < 20; ++k) {
    auto cur = Plugin::open(c.plugin, &err, &stage);
    if (!cur) return fail("round " + std::to_string(k) + ": " + err);
    std::string e = cur->negotiate();
    if (!e.empty()) return k == 0 ? skip("not run: " + e) : fail("round " + std::to_string(k) + ": " + e);
    if (!missing_required(*cur).empty()) return skip("not run: required functions missing");
    if (prev && prev->instance() == cur->instance()) {
      cur->forget();
      return fail("round " + std::to_string(k) + ": negotiate returned the live instance of the previous round");
    }
    uint32_t n = 0;
    Result r = take(cur->api().device_count(cur->instance(), &n));
    if (!r.ok) return fail("round " + std::to_string(k) + ": " + ok_or(r, "device_count"));
    if (n > c.device) {
      Session s(*cur, c.device);
      r = s.create();
      if (!r.ok) return fail("round " + std::to_string(k) + ": " + ok_or(r, "session_create"));
    }
    if (prev) prev->shutdown();  // the previous instance goes; this one lives on
    r = take(cur->api().device_count(cur->instance(), &n));
    if (!r.ok) return fail("round " + std::to_string(k) + ": " + ok_or(r, "device_count after the previous instance's shutdown"));
    prev = std::move(cur);
  }
  return pass("20 overlapping negotiate/shutdown rounds");
}

Record instance_threads(const Config& c) {
  std::string err, stage;
  auto lib = Plugin::open(c.plugin, &err, &stage);
  if (!lib) return skip("not run: the plugin does not load (" + err + ")");
  if (std::string e = lib->negotiate(); !e.empty()) return skip("not run: " + e);
  if (!missing_required(*lib).empty()) return skip("not run: required functions missing");
  std::mutex mu;
  std::string first;
  std::vector<std::thread> ts;
  for (int t = 0; t < 8; ++t)
    ts.emplace_back(guarded_thread(mu, first, t, [&, t] {
      for (int k = 0; k < 10; ++k) {
        std::string e2, st2;
        auto p = Plugin::open(c.plugin, &e2, &st2);
        std::string e = p ? p->negotiate() : e2;
        uint32_t n = 0;
        if (e.empty()) e = ok_or(take(p->api().device_count(p->instance(), &n)), "device_count");
        if (!e.empty()) {
          std::lock_guard lock(mu);
          if (first.empty()) first = "thread " + std::to_string(t) + " round " + std::to_string(k) + ": " + e;
          return;
        }
        p->shutdown();
      }
    }));
  for (auto& t : ts) t.join();
  if (!first.empty()) return fail(first);
  uint32_t n = 0;
  Result r = take(lib->api().device_count(lib->instance(), &n));
  if (!r.ok) return fail(ok_or(r, "device_count on the first instance after 80 concurrent negotiate/shutdown"));
  return pass("8 threads x 10 negotiate/shutdown beside a live instance");
}

// The function table is immutable: the same pointer and contents for every
// instance, before and after use.
Record instance_table_immutable(const Config& c) {
  Pair p;
  if (auto r = p.open(c)) return *r;
  const nxrt_plugin_api* ta = p.a->api_ptr();
  const nxrt_plugin_api* tb = p.b->api_ptr();
  size_t n = std::min<size_t>(ta->struct_size, sizeof(nxrt_plugin_api));
  std::vector<uint8_t> before(reinterpret_cast<const uint8_t*>(ta), reinterpret_cast<const uint8_t*>(ta) + n);
  if (ta != tb) {
    if (tb->struct_size != ta->struct_size || std::memcmp(ta, tb, n) != 0)
      return fail("two instances got different function tables (" + hex(uintptr_t(ta)) + ", " + hex(uintptr_t(tb)) +
                  ") with different contents");
  }
  uint32_t devs = 0;
  take(p.a->api().device_count(p.a->instance(), &devs));
  if (devs > c.device) {
    Session s(*p.b, c.device);
    if (s.create().ok) {
      AddRelu g;
      size_t claimed = 0;
      run_add_relu_once(s, g, &claimed);
    }
  }
  auto third = Plugin::open(c.plugin, nullptr, nullptr);
  if (third && third->negotiate().empty()) {
    const nxrt_plugin_api* tc = third->api_ptr();
    if (tc->struct_size != ta->struct_size || std::memcmp(tc, before.data(), n) != 0)
      return fail("a third instance got a function table whose contents differ from the first's");
  }
  if (std::memcmp(ta, before.data(), n) != 0) {
    size_t at = 0;
    while (at < n && reinterpret_cast<const uint8_t*>(ta)[at] == before[at]) ++at;
    return fail("the function table changed after it was returned (byte " + std::to_string(at) +
                "); it must be immutable");
  }
  return pass(ta == tb ? "one table for every instance" : "equal tables per instance");
}

// ------------------------------------------------------------------ api

Record api_struct_size(const Config& c) {
  return with_plugin(c, [](Plugin& p) {
    std::string e = p.negotiate();
    if (!e.empty()) return skip("not run: " + e);
    // The 2.0 table ends with on_run_end (2.1 appended native_handle..session_stats).
    constexpr size_t k20 = offsetof(nxrt_plugin_api, on_run_end) + sizeof(void*);
    const size_t size = p.api_struct_size();
    if (size < k20)
      return fail("the function table's struct_size is " + std::to_string(size) + " bytes; ABI 2.0 needs " + std::to_string(k20));
    // Not merely large enough: a reader tells which entries exist from struct_size, so it is the
    // size of the table at one minor (the header the plugin was built with), up to the plugin's own.
    struct End {
      uint32_t minor;
      size_t bytes;
      const char* name;
    };
    static const End ends[] = {{0, k20, "2.0"},
                               {1, offsetof(nxrt_plugin_api, copy_peer) + sizeof(void*), "2.1"},
                               {2, offsetof(nxrt_plugin_api, memory_import) + sizeof(void*), "2.2/2.3"},
                               {4, offsetof(nxrt_plugin_api, session_create_offline) + sizeof(void*), "2.4"},
                               {5, offsetof(nxrt_plugin_api, kernel_describe) + sizeof(void*), "2.5"}};
    static_assert(NXRT_EP_ABI_MINOR == 5, "a new minor: add the end of its table here");
    const NegotiateResult own = p.negotiate_raw(NXRT_EP_ABI_MAJOR, UINT32_MAX);
    if (own.rc != NXRT_OK || !own.reply.api) return pass(std::to_string(size) + " bytes (the plugin's own minor is unknown)");
    const uint32_t m = own.reply.abi_minor;
    Plugin::shutdown_raw(own);
    std::string known;
    for (const End& e : ends) {
      if (e.minor > m) break;
      if (e.bytes == size) return pass(fmt::format("{} bytes: the ABI {} table (the plugin speaks 2.{})", size, e.name, m));
      known += fmt::format("{}{}: {}", known.empty() ? "" : ", ", e.name, e.bytes);
    }
    if (m > NXRT_EP_ABI_MINOR && size > std::end(ends)[-1].bytes && size % sizeof(void*) == 0)
      return pass(fmt::format("{} bytes (the plugin speaks 2.{}, newer than this tool's 2.{})", size, m, NXRT_EP_ABI_MINOR));
    return fail(fmt::format("the function table's struct_size is {} bytes, the size of no ABI table up to the plugin's 2.{} "
                            "({} bytes): a host tells which entries exist from struct_size, so it must be exactly one of "
                            "these (sizeof(nxrt_plugin_api) of the header the plugin was built with), not merely large enough",
                            size, m, known));
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

// Only bits the agreed minor defines: at 2.0 (the host's own minor) and at a
// 2.7 offer when the plugin's minor is one this header knows.
Record api_feature_bits(const Config& c) {
  return with_plugin(c, [](Plugin& p) {
    std::string e = p.negotiate();
    if (!e.empty()) return skip("not run: " + e);
    uint64_t f = p.raw_features();
    uint64_t known = NXRT_FEATURES_OF_MINOR(p.reply().abi_minor);
    if (f & ~known)
      return fail("feature bits " + hex(f & ~known) + " are not defined by ABI 2." + std::to_string(p.reply().abi_minor) +
                  " (the agreed minor, the host's own)");
    auto r = p.negotiate_raw(2, 7, host_table_newer());
    Plugin::shutdown_raw(r);
    if (r.rc == NXRT_OK && r.reply.abi_minor <= NXRT_EP_ABI_MINOR) {
      uint64_t k7 = NXRT_FEATURES_OF_MINOR(r.reply.abi_minor);
      if (r.reply.features & ~k7)
        return fail("offered 2.7, agreed 2." + std::to_string(r.reply.abi_minor) + " with feature bits " +
                    hex(r.reply.features & ~k7) + " that minor does not define");
    }
    return pass(hex(f));
  });
}

// A declared feature guarantees its functions, an undeclared one that they are NULL.
// The 2.0 features are checked at 2.0 (the host's own minor); the 2.1 ones need
// 2.1 agreed (a 2.0 host never reads the 2.1 part of the table), so the check
// negotiates a second time as the newest host (2.2) when the plugin speaks 2.1 or later.
struct FeatureGroup {
  uint64_t bit;
  const char* feature;
  std::vector<std::pair<const char*, size_t>> fns;  // name, offset in the table
};
#define NXRT_CONF_FN(f) std::pair<const char*, size_t>(#f, offsetof(nxrt_plugin_api, f))
const std::vector<FeatureGroup>& feature_groups_2_0() {
  static const std::vector<FeatureGroup> g = {
      {NXRT_FEATURE_STREAMS, "NXRT_FEATURE_STREAMS",
       {NXRT_CONF_FN(stream_create), NXRT_CONF_FN(stream_synchronize), NXRT_CONF_FN(stream_release),
        NXRT_CONF_FN(event_create), NXRT_CONF_FN(event_record), NXRT_CONF_FN(stream_wait_event),
        NXRT_CONF_FN(event_synchronize), NXRT_CONF_FN(event_release)}},
      {NXRT_FEATURE_RUN_HOOKS, "NXRT_FEATURE_RUN_HOOKS", {NXRT_CONF_FN(on_run_start), NXRT_CONF_FN(on_run_end)}}};
  return g;
}
const std::vector<FeatureGroup>& feature_groups_2_1() {
  static const std::vector<FeatureGroup> g = {
      {NXRT_FEATURE_NATIVE_HANDLES, "NXRT_FEATURE_NATIVE_HANDLES", {NXRT_CONF_FN(native_handle)}},
      {NXRT_FEATURE_STREAM_IMPORT, "NXRT_FEATURE_STREAM_IMPORT", {NXRT_CONF_FN(stream_import)}},
      {NXRT_FEATURE_EXTERNAL_ALLOCATOR, "NXRT_FEATURE_EXTERNAL_ALLOCATOR", {NXRT_CONF_FN(session_set_allocator)}},
      {NXRT_FEATURE_MEMORY_STATS, "NXRT_FEATURE_MEMORY_STATS", {NXRT_CONF_FN(session_stats)}},
      {NXRT_FEATURE_PEER_COPY, "NXRT_FEATURE_PEER_COPY", {NXRT_CONF_FN(copy_peer)}}};
  return g;
}
const std::vector<FeatureGroup>& feature_groups_2_2() {
  static const std::vector<FeatureGroup> g = {
      {NXRT_FEATURE_MEMORY_IMPORT, "NXRT_FEATURE_MEMORY_IMPORT", {NXRT_CONF_FN(memory_import)}}};
  return g;
}
#undef NXRT_CONF_FN

// "" when every group's functions match its bit in `f`. The table as the host
// copied it (fields past struct_size read as NULL).
std::string check_feature_groups(const Plugin& p, uint64_t f, const std::vector<FeatureGroup>& groups) {
  const auto* table = reinterpret_cast<const uint8_t*>(&p.api());
  for (auto& g : groups) {
    bool on = f & g.bit;
    for (auto& [name, off] : g.fns) {
      const void* ptr;
      std::memcpy(&ptr, table + off, sizeof ptr);
      bool inside = p.api_struct_size() >= off + sizeof(void*);
      if (on && !inside)
        return std::string(g.feature) + " is declared but " + name + " lies beyond the table's struct_size (" +
               std::to_string(p.api_struct_size()) + " bytes)";
      if (on && !ptr) return std::string(g.feature) + " is declared but " + name + " is NULL";
      if (!on && ptr) return std::string(g.feature) + " is not declared but " + name + " is set";
    }
  }
  return "";
}

Record api_feature_functions(const Config& c) {
  return with_plugin(c, [](Plugin& p) {
    std::string e = p.negotiate();
    if (!e.empty()) return skip("not run: " + e);
    uint64_t f = p.raw_features();
    if (auto m = check_feature_groups(p, f, feature_groups_2_0()); !m.empty()) return fail(m);
    if ((f & NXRT_FEATURE_DEVICE_PROFILING) && !(f & NXRT_FEATURE_RUN_HOOKS))
      return fail("NXRT_FEATURE_DEVICE_PROFILING is declared without NXRT_FEATURE_RUN_HOOKS (timings come through on_run_end)");
    std::string d = std::string("fused_groups=") + b2s(f & NXRT_FEATURE_FUSED_GROUPS) + " streams=" +
                    b2s(f & NXRT_FEATURE_STREAMS) + " concurrent_run=" + b2s(f & NXRT_FEATURE_CONCURRENT_RUN) +
                    " run_hooks=" + b2s(f & NXRT_FEATURE_RUN_HOOKS) + " device_profiling=" +
                    b2s(f & NXRT_FEATURE_DEVICE_PROFILING);
    p.shutdown();

    // 2.1 and 2.2, as the newest host: a new instance.
    Plugin* p21 = &p;
    e = p21->negotiate(kInteropMinor);
    if (!e.empty()) return fail("as a 2." + std::to_string(kInteropMinor) + " host: " + e);
    if (p21->agreed_minor() < 1) return pass(d + "; offered 2.1, the plugin speaks 2.0 (no 2.1 features)");
    uint64_t f1 = p21->raw_features();
    if ((f1 & NXRT_FEATURES_2_0) != (f & NXRT_FEATURES_2_0))
      return fail("the 2.0 feature bits differ between a 2.0 negotiation (" + hex(f & NXRT_FEATURES_2_0) + ") and a 2.1 one (" +
                  hex(f1 & NXRT_FEATURES_2_0) + "); the table and its features are the same for every instance");
    if (auto m = check_feature_groups(*p21, f1, feature_groups_2_0()); !m.empty()) return fail("at 2.1: " + m);
    if (auto m = check_feature_groups(*p21, f1, feature_groups_2_1()); !m.empty()) return fail("at 2.1: " + m);
    if (p21->agreed_minor() >= 2)
      if (auto m = check_feature_groups(*p21, f1, feature_groups_2_2()); !m.empty()) return fail("at 2.2: " + m);
    if ((f1 & NXRT_FEATURE_STREAM_IMPORT) && !(f1 & NXRT_FEATURE_STREAMS))
      return fail("NXRT_FEATURE_STREAM_IMPORT is declared without NXRT_FEATURE_STREAMS (an imported stream is a stream)");
    if ((f1 & NXRT_FEATURE_STREAM_IMPORT) && !(f1 & NXRT_FEATURE_NATIVE_HANDLES))
      return fail("NXRT_FEATURE_STREAM_IMPORT is declared without NXRT_FEATURE_NATIVE_HANDLES (native_handle(STREAM) "
                  "gives the imported stream's completion point)");
    d += "; at 2." + std::to_string(p21->agreed_minor()) + ": native_handles=" + b2s(f1 & NXRT_FEATURE_NATIVE_HANDLES) +
         " stream_import=" + b2s(f1 & NXRT_FEATURE_STREAM_IMPORT) + " external_allocator=" +
         b2s(f1 & NXRT_FEATURE_EXTERNAL_ALLOCATOR) + " memory_stats=" + b2s(f1 & NXRT_FEATURE_MEMORY_STATS) +
         " peer_copy=" + b2s(f1 & NXRT_FEATURE_PEER_COPY) + " memory_import=" + b2s(f1 & NXRT_FEATURE_MEMORY_IMPORT);
    return pass(d);
  });
}

// --------------------------------------------------------------- devices

Record device_count(const Config& c) {
  Env env(c);
  if (auto r = env.load()) return *r;
  uint32_t n = 12345;
  Result r = take(env.p->api().device_count(env.p->instance(), &n));
  if (!r.ok) return fail(ok_or(r, "device_count"));
  if (n == 12345 || n > 4096) return fail("device_count reported an implausible count " + std::to_string(n));
  if (n == 0) {
    const char* why = env.p->api().no_device_reason(env.p->instance());
    if (!why || !*why) return fail("no devices and no_device_reason() is empty");
    return skip(std::string("no device: ") + why);
  }
  return pass(std::to_string(n) + " device(s)");
}

Record device_count_stable(const Config& c) {
  Env env(c);
  if (auto r = env.load()) return *r;
  uint32_t first = 0;
  if (!take(env.p->api().device_count(env.p->instance(), &first)).ok) return skip("not run: device_count failed");
  std::atomic<int> bad{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < 8; ++t)
    ts.emplace_back([&] {
      for (int i = 0; i < 50; ++i) {
        uint32_t n = 0;
        if (!take(env.p->api().device_count(env.p->instance(), &n)).ok || n != first) bad++;
      }
    });
  for (auto& t : ts) t.join();
  if (bad) return fail(std::to_string(bad.load()) + " of 400 concurrent device_count calls failed or differed from " + std::to_string(first));
  return pass();
}

std::string info_problem(const nxrt_device_info& i) {
  if (!i.name || !*i.name) return "name is NULL or empty";
  if (!i.vendor) return "vendor is NULL";
  if (!valid_utf8(i.name)) return "name is not valid UTF-8: '" + to_valid_utf8(i.name) + "'";
  if (!valid_utf8(i.vendor)) return "vendor is not valid UTF-8: '" + to_valid_utf8(i.vendor) + "'";
  if (i.kind > NXRT_DEVICE_OTHER) return "kind " + std::to_string(int(i.kind)) + " is not an nxrt_device_kind";
  if (i.dtypes == 0) return "dtypes is 0 (no element type accepted)";
  uint64_t valid = 0;
  for (int b : {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 16}) valid |= 1ull << b;
  if (i.dtypes & ~valid) return "dtypes has bits for undefined element types";
  if (i.property_count && !i.properties) return "property_count > 0 with NULL properties";
  for (uint32_t k = 0; k < i.property_count; ++k) {
    const nxrt_property* pr = i.properties[k];
    if (!pr) return "property " + std::to_string(k) + " is a NULL pointer";
    if (!NXRT_HAS_FIELD(pr, nxrt_property, value))
      return "property " + std::to_string(k) + " has struct_size " + std::to_string(pr->struct_size) + ", too small for key and value";
    if (!pr->key || !pr->value) return "property " + std::to_string(k) + " has a NULL key or value";
  }
  return "";
}

Record device_info(const Config& c) {
  Env env(c);
  if (auto r = env.device()) return *r;
  std::string names;
  for (uint32_t d = 0; d < env.devices; ++d) {
    nxrt_device_info i{};
    i.struct_size = sizeof i;
    Result r = take(env.p->api().device_info(env.p->instance(), d, &i));
    if (!r.ok) return fail(ok_or(r, "device_info(" + std::to_string(d) + ")"));
    if (i.struct_size != sizeof i)
      return fail("device_info wrote back struct_size " + std::to_string(i.struct_size) + "; the callee-filled rule needs min(" +
                  std::to_string(sizeof i) + ", the plugin's sizeof) = " + std::to_string(sizeof i));
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
    if (!take(env.p->api().device_info(env.p->instance(), d, &a)).ok) return skip("not run: device_info failed");
    for (int k = 0; k < 20; ++k) {
      b = nxrt_device_info{};
      b.struct_size = sizeof b;
      Result r = take(env.p->api().device_info(env.p->instance(), d, &b));
      if (!r.ok) return fail(ok_or(r, "repeated device_info"));
      std::string what;
      if (!same_info(a, b, &what)) return fail("device " + std::to_string(d) + ": " + what + " changed between calls");
    }
  }
  return pass();
}

// Callee-filled rule with a caller struct_size other than ours. `size` is what
// the caller allocated: smaller (an older caller) or larger than sizeof (a
// future caller: its unknown tail holds 0x5C). Bytes past the caller's size are
// canaries (0xA5). The callee writes nothing past min(size, its sizeof) and
// writes back that size. `own` is the plugin's sizeof when it is known (the
// plugin speaks this header's minor), 0 otherwise.
template <typename T, typename Call>
std::string callee_filled(const char* what, uint32_t size, size_t own, Call call, std::string* note) {
  alignas(16) uint8_t buf[sizeof(T) + 256];
  std::memset(buf, 0xA5, sizeof buf);
  std::memset(buf, 0, std::min<size_t>(size, sizeof(T)));
  if (size > sizeof(T)) std::memset(buf + sizeof(T), 0x5C, size - sizeof(T));
  auto* t = reinterpret_cast<T*>(buf);
  t->struct_size = size;
  Result r = call(t);
  for (size_t k = size; k < sizeof buf; ++k)
    if (buf[k] != 0xA5)
      return std::string(what) + " wrote byte " + std::to_string(k) + " past the caller's struct_size " + std::to_string(size);
  if (!r.ok)
    return std::string(what) + " failed for a caller's struct_size of " + std::to_string(size) + ": " + r.str() +
           (r.problem.empty() ? "" : " [" + r.problem + "]") + "; the callee-filled rule fills what fits";
  uint32_t back = t->struct_size;
  if (size <= sizeof(T) && back != size)
    return std::string(what) + " wrote back struct_size " + std::to_string(back) + " for a caller's " + std::to_string(size) +
           "; the callee-filled rule needs min(caller's size, the plugin's sizeof) = " + std::to_string(size);
  if (size > sizeof(T)) {
    if (back > size || back < sizeof(T) || (own && back != std::min<size_t>(own, size)))
      return std::string(what) + " wrote back struct_size " + std::to_string(back) + " for a future caller's " +
             std::to_string(size) + "; the callee-filled rule needs min(caller's size, the plugin's sizeof" +
             (own ? " " + std::to_string(own) : std::string(" >= ") + std::to_string(sizeof(T))) + ")";
    for (size_t k = std::max<size_t>(back, sizeof(T)); k < size; ++k)
      if (buf[k] != 0x5C)
        return std::string(what) + " wrote byte " + std::to_string(k) + " past the size it wrote back (" + std::to_string(back) + ")";
  }
  *note = "filled " + std::to_string(back) + " of " + std::to_string(size) + " bytes";
  return "";
}

// The plugin's own minor (its answer to a very new offer), or -1.
int plugin_minor(Plugin& p) {
  auto r = p.negotiate_raw(2, 0xFFFFFFFFu);
  Plugin::shutdown_raw(r);
  return r.rc == NXRT_OK ? int(r.reply.abi_minor) : -1;
}

Record device_info_sized(const Config& c, uint32_t size) {
  Env env(c);
  if (auto r = env.device()) return *r;
  size_t own = plugin_minor(*env.p) == int(NXRT_EP_ABI_MINOR) ? sizeof(nxrt_device_info) : 0;
  std::string note;
  auto call = [&](nxrt_device_info* i) { return take(env.p->api().device_info(env.p->instance(), c.device, i)); };
  std::string e = callee_filled<nxrt_device_info>("device_info", size, own, call, &note);
  if (!e.empty()) return fail(e);
  return pass(note);
}

Record device_description(const Config& c) {
  Env env(c);
  if (auto r = env.device()) return *r;
  std::string notes;
  for (uint32_t d = 0; d < env.devices; ++d) {
    nxrt_device_info i{};
    i.struct_size = sizeof i;
    Result r = take(env.p->api().device_info(env.p->instance(), d, &i));
    if (!r.ok) return fail(ok_or(r, "device_info(" + std::to_string(d) + ")"));
    std::string dev = "device " + std::to_string(d) + ": ";
    if (i.memory_free_bytes && i.memory_bytes && i.memory_free_bytes > i.memory_bytes)
      return fail(dev + "memory_free_bytes " + std::to_string(i.memory_free_bytes) + " exceeds memory_bytes " +
                  std::to_string(i.memory_bytes));
    if (i.memory_free_bytes && !i.memory_bytes)
      return fail(dev + "memory_free_bytes is known (" + std::to_string(i.memory_free_bytes) + ") but memory_bytes is 0");
    std::string bus = i.pci_bus_id ? i.pci_bus_id : "";
    if (!bus.empty() && !std::regex_match(bus, std::regex("[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\\.[0-7]")))
      return fail(dev + "pci_bus_id '" + bus + "' is not \"dddd:bb:dd.f\" (hex domain:bus:device.function)");
    if (!bus.empty() && !i.vendor_id) return fail(dev + "pci_bus_id '" + bus + "' without a PCI vendor_id");
    bool uuid = false;
    for (uint8_t b : i.uuid) uuid |= b != 0;
    // Distinct devices of one plugin must not share a known uuid (the host shows equal uuids as one device).
    for (uint32_t e = 0; e < d && uuid; ++e) {
      nxrt_device_info o{};
      o.struct_size = sizeof o;
      if (take(env.p->api().device_info(env.p->instance(), e, &o)).ok && std::memcmp(o.uuid, i.uuid, 16) == 0)
        return fail(dev + "has the same uuid as device " + std::to_string(e));
    }
    notes += (notes.empty() ? "" : "; ") + std::string("uuid ") + (uuid ? "set" : "unknown") + ", pci " +
             (bus.empty() ? "none" : bus) + ", free " +
             (i.memory_free_bytes ? std::to_string(i.memory_free_bytes >> 20) + "/" + std::to_string(i.memory_bytes >> 20) + " MiB" : "unknown");
  }
  return pass(notes);
}

Record device_info_bad_index(const Config& c) {
  Env env(c);
  if (auto r = env.load()) return *r;
  uint32_t n = 0;
  if (!take(env.p->api().device_count(env.p->instance(), &n)).ok) return skip("not run: device_count failed");
  nxrt_device_info i{};
  i.struct_size = sizeof i;
  std::string e = expect_error(take(env.p->api().device_info(env.p->instance(), n, &i)), "device_info(device_count)", {NXRT_NOT_FOUND, NXRT_INVALID_ARGUMENT});
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
  if (!take(env.p->api().device_count(env.p->instance(), &n)).ok) return skip("not run: device_count failed");
  nxrt_ep_session* s = nullptr;
  Result r = take(env.p->api().session_create(env.p->instance(), n, nullptr, 0, &s));
  if (r.ok && s) env.p->api().session_release(s);
  std::string e = expect_error(r, "session_create(device_count)", {NXRT_NOT_FOUND, NXRT_INVALID_ARGUMENT});
  if (!e.empty()) return fail(e);
  return pass();
}

// ---------------------------------------------------------- option schema

// Whether `v` is a valid text for an option of type `t`.
bool parses_as(const std::string& v, nxrt_option_type t) {
  switch (t) {
    case NXRT_OPTION_STRING:
    case NXRT_OPTION_PATH: return true;
    case NXRT_OPTION_INT: return std::regex_match(v, std::regex("[+-]?[0-9]+")) && v.size() < 20;
    case NXRT_OPTION_FLOAT:
      return std::regex_match(v, std::regex("[+-]?([0-9]+\\.?[0-9]*|\\.[0-9]+)([eE][+-]?[0-9]+)?"));
    case NXRT_OPTION_BOOL: return v == "0" || v == "1" || v == "true" || v == "false";
    default: return false;
  }
}

const char* option_type_name(nxrt_option_type t) {
  switch (t) {
    case NXRT_OPTION_STRING: return "STRING";
    case NXRT_OPTION_INT: return "INT";
    case NXRT_OPTION_FLOAT: return "FLOAT";
    case NXRT_OPTION_BOOL: return "BOOL";
    case NXRT_OPTION_PATH: return "PATH";
    default: return "?";
  }
}

struct Schema {
  std::vector<nxrt_option_info> options;
  std::string problem;
};

Schema read_schema(Plugin& p) {
  Schema s;
  auto& api = p.api();
  uint32_t n;
  {
    Phase ph("option_count");
    n = api.option_count(p.instance());
  }
  if (n > 4096) {
    s.problem = "option_count reports an implausible " + std::to_string(n);
    return s;
  }
  std::string prefix = std::string(api.name ? api.name : "") + ".";
  std::set<std::string> names;
  for (uint32_t k = 0; k < n; ++k) {
    nxrt_option_info i{};
    i.struct_size = sizeof i;
    Result r;
    {
      Phase ph("option_info");
      r = take(api.option_info(p.instance(), k, &i));
    }
    std::string at = "option " + std::to_string(k) + ": ";
    if (!r.ok) return s.problem = at + ok_or(r, "option_info"), s;
    if (i.struct_size != sizeof i)
      return s.problem = at + "option_info wrote back struct_size " + std::to_string(i.struct_size) + ", expected " +
                         std::to_string(sizeof i),
             s;
    if (!i.name || !*i.name) return s.problem = at + "name is NULL or empty", s;
    std::string name = i.name;
    at = "option '" + name + "': ";
    if (name.rfind(prefix, 0) != 0 || name.size() == prefix.size())
      return s.problem = at + "the name must be \"" + prefix + "<key>\" (the plugin's name, a dot, a key)", s;
    if (!names.insert(name).second) return s.problem = at + "declared twice", s;
    if (i.type > NXRT_OPTION_PATH) return s.problem = at + "type " + std::to_string(i.type) + " is not an nxrt_option_type", s;
    if (!i.help || !*i.help) return s.problem = at + "help is NULL or empty", s;
    if (!i.default_value) return s.problem = at + "default_value is NULL (\"\" means no default)", s;
    std::string d = i.default_value;
    if (!d.empty() && !parses_as(d, i.type))
      return s.problem = at + "default '" + d + "' does not parse as " + option_type_name(i.type), s;
    s.options.push_back(i);
  }
  return s;
}

Record option_schema(const Config& c) {
  Env env(c);
  if (auto r = env.load()) return *r;
  Schema sc = read_schema(*env.p);
  if (!sc.problem.empty()) return fail(sc.problem);
  std::string list;
  for (auto& o : sc.options) list += (list.empty() ? "" : ", ") + std::string(o.name) + ":" + option_type_name(o.type);
  return pass(sc.options.empty() ? "no options declared" : list);
}

Record option_info_bad_index(const Config& c) {
  Env env(c);
  if (auto r = env.load()) return *r;
  uint32_t n = env.p->api().option_count(env.p->instance());
  nxrt_option_info i{};
  i.struct_size = sizeof i;
  std::string e = expect_error(take(env.p->api().option_info(env.p->instance(), n, &i)), "option_info(option_count)",
                               {NXRT_NOT_FOUND, NXRT_INVALID_ARGUMENT});
  if (!e.empty()) return fail(e);
  return pass();
}

Record option_info_sized(const Config& c, uint32_t size) {
  Env env(c);
  if (auto r = env.load()) return *r;
  if (env.p->api().option_count(env.p->instance()) == 0) return skip("the plugin declares no options");
  size_t own = plugin_minor(*env.p) == int(NXRT_EP_ABI_MINOR) ? sizeof(nxrt_option_info) : 0;
  std::string note;
  auto call = [&](nxrt_option_info* i) { return take(env.p->api().option_info(env.p->instance(), 0, i)); };
  std::string e = callee_filled<nxrt_option_info>("option_info", size, own, call, &note);
  if (!e.empty()) return fail(e);
  return pass(note);
}

// Every declared option at its default value is accepted, one at a time and all together.
Record session_declared_defaults(const Config& c) {
  Env env(c);
  if (auto r = env.device()) return *r;
  Schema sc = read_schema(*env.p);
  if (!sc.problem.empty()) return skip("not run: the option schema is malformed (see option.schema)");
  OptionList all;
  for (auto& o : sc.options) {
    std::string d = o.default_value;
    if (d.empty()) continue;  // no default
    OptionList one = {{o.name, d}};
    all.push_back(one[0]);
    Session s(*env.p, c.device);
    Result r = s.create(one);
    if (!r.ok) return fail(ok_or(r, "session_create with " + std::string(o.name) + "=" + d + " (its declared default)"));
  }
  if (all.empty()) return skip("the plugin declares no option with a default");
  Session s(*env.p, c.device);
  Result r = s.create(all);
  if (!r.ok) return fail(ok_or(r, "session_create with every declared option at its default"));
  return pass(std::to_string(all.size()) + " option(s) at their defaults");
}

// Errors about the caller's input are permanent: not marked retryable.
Record errors_not_retryable(const Config& c) {
  Env env(c);
  if (auto r = env.load()) return *r;
  auto& api = env.p->api();
  uint32_t n = 0;
  if (!take(api.device_count(env.p->instance(), &n)).ok) return skip("not run: device_count failed");
  struct Probe {
    const char* what;
    nxrt_status* st;
  };
  nxrt_device_info i{};
  i.struct_size = sizeof i;
  nxrt_ep_session* s = nullptr;
  std::vector<Probe> probes = {{"device_info(device_count)", api.device_info(env.p->instance(), n, &i)},
                               {"session_create(device_count)", api.session_create(env.p->instance(), n, nullptr, 0, &s)}};
  if (s) api.session_release(s);
  std::string bad;
  for (auto& p : probes) {
    if (!p.st) continue;
    if (!is_live_status(p.st)) {
      bad = std::string(p.what) + ": the plugin returned a status that host->status_create did not make";
      continue;
    }
    int retry = host_table_full()->status_retryable(p.st);
    if (retry && bad.empty()) bad = std::string(p.what) + " failed with a status marked retryable; a bad index is permanent";
    take(p.st);
  }
  if (!bad.empty()) return fail(bad);
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
  r = take(copy_n(api, env.s->raw(), &d2d, 1, nullptr));
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
  r = take(copy_n(api, env.s->raw(), &z, 1, nullptr));
  if (!r.ok) return fail(ok_or(r, "a zero-byte copy region"));
  r = take(copy_n(api, env.s->raw(), nullptr, 0, nullptr));
  if (!r.ok) return fail(ok_or(r, "an empty copy batch"));
  // A zero-sized tensor: zero-byte allocation and transfers.
  void* e = nullptr;
  r = env.s->upload(nullptr, 0, &e);
  if (!r.ok) return fail(ok_or(r, "zero-byte allocation"));
  nxrt_copy_region ze = z;
  ze.dst = e;
  ze.dst_offset = 0;
  r = take(copy_n(api, env.s->raw(), &ze, 1, nullptr));
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
  r = take(copy_n(api, env.s->raw(), regs.data(), regs.size(), nullptr));
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
  r = take(copy_n(api, env.s->raw(), regs.data(), regs.size(), nullptr));
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
  r = take(copy_n(api, env.s->raw(), &g, 1, nullptr));
  if (!r.ok) return fail(ok_or(r, "pinned->device copy"));
  std::memset(pin, 0, bytes);
  g.src = dev;
  g.dst = pin;
  g.src_memory = NXRT_MEMORY_DEVICE;
  g.dst_memory = NXRT_MEMORY_HOST_PINNED;
  r = take(copy_n(api, env.s->raw(), &g, 1, nullptr));
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
      for (int k = 0; k < 3 && err.empty(); ++k) err = ok_or(take(copy_n(api, env.s->raw(), &g[k], 1, s1)), "copy on a stream");
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
      err = ok_or(take(copy_n(api, env.s->raw(), &up, 1, s1)), "copy on stream 1");
      if (err.empty()) err = ok_or(take(api.event_record(e, s1)), "event_record");
      if (err.empty()) err = ok_or(take(api.stream_wait_event(s2, e)), "stream_wait_event");
      if (err.empty()) err = ok_or(take(copy_n(api, env.s->raw(), &down, 1, s2)), "copy on stream 2");
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

// ABI 2.5 kernel_describe (optional): one line of valid UTF-8 without control characters, at
// most NXRT_KERNEL_DESCRIPTION_MAX bytes, the same text on every call for one kernel.
Record kernel_describe(const Config& c) {
  Env env(c);
  env.minor = kDescribeMinor;
  if (auto r = env.session()) return *r;
  if (env.p->agreed_minor() < 5)
    return skip(fmt::format("the plugin speaks 2.{}; kernel_describe came with 2.5", env.p->agreed_minor()));
  const auto describe = env.p->api().kernel_describe;
  if (!describe) return pass("no kernel_describe (optional: the plugin describes nothing)");
  AddRelu g;
  Pipeline p(*env.s, g.gb);
  if (std::string e = p.build(); !e.empty()) return fail(e);
  if (p.kernel_count() == 0) return skip("the plugin claims neither Add nor Relu (float32)");
  std::string said;
  for (size_t i = 0; i < p.kernel_count(); ++i) {
    const char* d = nullptr;
    const char* again = nullptr;
    {
      Phase ph("kernel_describe");
      d = describe(p.kernel(i));
      again = describe(p.kernel(i));
    }
    if (!d) continue;
    const std::string_view text(d, strnlen(d, NXRT_KERNEL_DESCRIPTION_MAX + 1));
    std::string shown;  // for the report: valid UTF-8, control characters as \xNN
    for (char ch : to_valid_utf8(text.substr(0, 80)))
      shown += uint8_t(ch) < 0x20 || ch == 0x7f ? fmt::format("\\x{:02x}", int(uint8_t(ch))) : std::string(1, ch);
    if (text.size() > NXRT_KERNEL_DESCRIPTION_MAX)
      return fail(fmt::format("kernel_describe returned more than {} bytes: '{}...'", NXRT_KERNEL_DESCRIPTION_MAX, shown));
    if (!valid_utf8(text)) return fail(fmt::format("kernel_describe returned text that is not valid UTF-8: '{}'", shown));
    for (size_t k = 0; k < text.size(); ++k)
      if (uint8_t(text[k]) < 0x20 || uint8_t(text[k]) == 0x7f)
        return fail(fmt::format("kernel_describe returned control character 0x{:02x} at byte {} (one line, no control "
                                "characters): '{}'", int(uint8_t(text[k])), k, shown));
    if (!again || std::string_view(again) != text)
      return fail(fmt::format("kernel_describe gave '{}', then '{}' for the same kernel", shown,
                              again ? to_valid_utf8(again) : "NULL"));
    said += fmt::format("{}'{}'", said.empty() ? "" : ", ", shown);
  }
  return pass(said.empty() ? "kernel_describe says nothing (NULL)" : said);
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

// ------------------------------------------------- ABI 2.0: copies, hooks

// Copy regions from a future minor: each element bigger than this header's
// nxrt_copy_region (struct_size says so, the tail holds garbage). The array of
// pointers lets the plugin read each one by its own struct_size.
Record transfer_future_regions(const Config& c) {
  Env env(c);
  if (auto r = env.session()) return *r;
  auto& api = env.p->api();
  const size_t rows = 16, row = 96, extra = 40;
  const size_t elem = sizeof(nxrt_copy_region) + extra;
  auto src = pattern(rows * row, 21);
  void* h = nullptr;
  std::vector<uint8_t> zeros(rows * row, 0);
  Result r = env.s->upload(zeros.data(), zeros.size(), &h);
  if (!r.ok) return fail(ok_or(r, "upload"));
  std::vector<std::vector<uint8_t>> store(rows);
  std::vector<const nxrt_copy_region*> ptrs(rows);
  for (size_t i = 0; i < rows; ++i) {
    // Alternate future-sized and current-sized elements in one batch.
    size_t sz = i % 2 ? sizeof(nxrt_copy_region) : elem;
    store[i].assign(sz + 16, 0xEE);
    auto* g = reinterpret_cast<nxrt_copy_region*>(store[i].data() + (16 - uintptr_t(store[i].data()) % 16) % 16);
    std::memset(g, 0, sizeof *g);
    g->struct_size = uint32_t(sz);
    g->src_memory = NXRT_MEMORY_HOST;
    g->src = src.data();
    g->src_offset = (rows - 1 - i) * row;
    g->dst_memory = NXRT_MEMORY_DEVICE;
    g->dst = h;
    g->dst_offset = (rows - 1 - i) * row;
    g->bytes = row;
    ptrs[i] = g;
  }
  r = take(api.copy(env.s->raw(), ptrs.data(), ptrs.size(), nullptr));
  if (!r.ok) return fail(ok_or(r, "a batch of copy regions with struct_size " + std::to_string(elem)));
  std::vector<uint8_t> back(rows * row);
  r = env.s->download(h, 0, back.data(), back.size());
  env.s->free(h);
  if (!r.ok) return fail(ok_or(r, "download"));
  if (back != src) {
    size_t at = 0;
    while (at < back.size() && back[at] == src[at]) ++at;
    return fail("copy regions with a larger struct_size (" + std::to_string(elem) + " bytes) copied wrongly: row " +
                std::to_string(at / row) + " differs");
  }
  return pass(std::to_string(rows) + " regions, half of them " + std::to_string(elem) + " bytes");
}

// The Add(X, C) -> Relu graph, C a constant (initializer).
struct AddConst {
  GraphBuilder gb;
  const nxrt_value *x, *c, *t, *z;
  HostTensor in_x, expected;
  AddConst() {
    std::vector<int64_t> dims = {3, 5};
    gb.graph().opsets[""] = 17;
    HostTensor cv = make_f32(dims, 9);
    x = gb.value("X", NXRT_DTYPE_FLOAT32, dims);
    c = gb.constant("C", NXRT_DTYPE_FLOAT32, dims, cv.bytes);
    t = gb.value("T", NXRT_DTYPE_FLOAT32, dims);
    z = gb.value("Z", NXRT_DTYPE_FLOAT32, dims);
    gb.node("Add", "", {x, c}, {t});
    gb.node("Relu", "", {t}, {z});
    gb.graph().inputs = {x};
    gb.graph().outputs = {z};
    in_x = make_f32(dims, 4);
    expected = in_x;
    for (size_t i = 0; i < 15; ++i) {
      float a, b;
      std::memcpy(&a, &in_x.bytes[i * 4], 4);
      std::memcpy(&b, &cv.bytes[i * 4], 4);
      float r = a + b > 0 ? a + b : 0;
      std::memcpy(&expected.bytes[i * 4], &r, 4);
    }
  }
};

Record kernel_constant_input(const Config& c) {
  Env env(c);
  if (auto r = env.session()) return *r;
  AddConst g;
  Pipeline p(*env.s, g.gb);
  std::string e = p.build();
  if (!e.empty()) return fail(e);
  if (!p.claimed_nodes()) return skip("the plugin claims neither Add (with a constant input) nor Relu (float32)");
  for (int k = 0; k < 3; ++k) {
    std::vector<HostTensor> out;
    e = p.run({{g.x, g.in_x}}, out);
    if (e.empty()) e = compare(out[0], g.expected);
    if (!e.empty()) return fail("run " + std::to_string(k) + ": " + e);
  }
  return pass(std::to_string(p.claimed_nodes()) + " of 2 nodes on the plugin");
}

// Kernel inputs and constants are read-only: checksummed around every call.
Record kernel_inputs_read_only(const Config& c) {
  Env env(c);
  if (auto r = env.session()) return *r;
  size_t calls = 0;
  {
    AddRelu g({4, 33});
    Pipeline p(*env.s, g.gb);
    std::string e = p.build();
    if (!e.empty()) return fail(e);
    for (int k = 0; k < 3; ++k) {
      std::vector<HostTensor> out;
      e = p.run({{g.x, g.in_x}, {g.y, g.in_y}}, out);
      if (!e.empty()) return fail(e);
      calls += p.kernel_count();
    }
  }
  {
    AddConst g;
    Pipeline p(*env.s, g.gb);
    std::string e = p.build();
    if (!e.empty()) return fail(e);
    for (int k = 0; k < 3; ++k) {
      std::vector<HostTensor> out;
      e = p.run({{g.x, g.in_x}}, out);
      if (!e.empty()) return fail(e);
      calls += p.kernel_count();
    }
  }
  if (!calls) return skip("the plugin claims neither Add nor Relu (float32)");
  return pass(std::to_string(calls) + " kernel calls; inputs and constants unchanged");
}

// Run hooks: on_run_start / on_run_end around the kernels of a run.
Record run_hooks(const Config& c, bool profiling) {
  Env env(c);
  if (auto r = env.session()) return *r;
  uint64_t f = env.p->features();
  if (!(f & NXRT_FEATURE_RUN_HOOKS)) return skip("the plugin does not declare NXRT_FEATURE_RUN_HOOKS");
  auto& api = env.p->api();
  if (!api.on_run_start || !api.on_run_end) return skip("not run: run hooks are NULL (see api.feature_functions)");
  bool device_profiling = f & NXRT_FEATURE_DEVICE_PROFILING;
  if (profiling && !device_profiling) return skip("the plugin does not declare NXRT_FEATURE_DEVICE_PROFILING");
  AddRelu g({8, 8});
  Pipeline p(*env.s, g.gb);
  std::string e = p.build();
  if (!e.empty()) return fail(e);
  auto start = [&](uint64_t id, bool prof, uint32_t size) {
    std::vector<uint8_t> buf(std::max<size_t>(size, sizeof(nxrt_run_options)) + 16, 0xEE);
    auto* ro = reinterpret_cast<nxrt_run_options*>(buf.data() + (8 - uintptr_t(buf.data()) % 8) % 8);
    std::memset(ro, 0, sizeof *ro);
    ro->struct_size = size;
    ro->profiling = prof;
    ro->run_id = id;
    ro->option_count = 0;
    ro->options = nullptr;
    Phase ph("on_run_start");
    return take(api.on_run_start(env.s->raw(), ro));
  };
  auto run = [&](uint64_t id) {
    std::vector<HostTensor> out;
    ComputeOptions o;
    o.run_id = id;
    o.manual_run = true;
    std::string err = p.run({{g.x, g.in_x}, {g.y, g.in_y}}, out, o);
    if (err.empty()) err = compare(out[0], g.expected);
    return err;
  };
  auto end = [&](uint64_t id, const nxrt_status* st, nxrt_profile_sink* sink) {
    Phase ph("on_run_end");
    return take(api.on_run_end(env.s->raw(), id, st, sink));
  };
  if (profiling) {
    nxrt_profile_sink sink;
    Result r = start(77, true, sizeof(nxrt_run_options));
    if (!r.ok) return fail(ok_or(r, "on_run_start (profiling)"));
    if (std::string err = run(77); !err.empty()) return fail("profiled run: " + err);
    r = end(77, nullptr, &sink);
    {
      std::lock_guard lock(sink.mu);
      sink.active = false;
    }
    if (!r.ok) return fail(ok_or(r, "on_run_end (profiling)"));
    if (!sink.violations.empty()) return fail(sink.violations.front());
    if (p.kernel_count() && sink.events.empty())
      return fail("NXRT_FEATURE_DEVICE_PROFILING is declared but on_run_end reported no device timing for a run of " +
                  std::to_string(p.kernel_count()) + " kernel(s)");
    std::set<size_t> firsts;
    for (size_t k = 0; k < p.kernel_count(); ++k)
      for (size_t n : p.kernel_nodes(k)) firsts.insert(n);
    for (auto& ev : sink.events)
      if (!firsts.count(ev.node_index))
        return fail("profile_device_event names node " + (ev.node_index == NXRT_NO_INDEX ? std::string("NXRT_NO_INDEX") : std::to_string(ev.node_index)) +
                    ", which is not a node of a kernel in the run");
    return pass(std::to_string(sink.events.size()) + " device timing(s) for " + std::to_string(p.kernel_count()) + " kernel(s)");
  }
  // A plain run.
  Result r = start(41, false, sizeof(nxrt_run_options));
  if (!r.ok) return fail(ok_or(r, "on_run_start"));
  if (std::string err = run(41); !err.empty()) return fail("run 41: " + err);
  r = end(41, nullptr, nullptr);
  if (!r.ok) return fail(ok_or(r, "on_run_end with a NULL (successful) run status"));
  // Two overlapping runs, one ending in error; run options from a future minor (larger struct).
  r = start(42, false, sizeof(nxrt_run_options) + 24);
  if (!r.ok) return fail(ok_or(r, "on_run_start with a larger nxrt_run_options (future minor)"));
  r = start(43, true, sizeof(nxrt_run_options));  // profiled, but the sink is NULL without DEVICE_PROFILING
  if (!r.ok) return fail(ok_or(r, "on_run_start of an overlapping run"));
  if (std::string err = run(43); !err.empty()) return fail("run 43: " + err);
  if (std::string err = run(42); !err.empty()) return fail("run 42: " + err);
  nxrt_status* failed = host_table_full()->status_create(NXRT_CANCELLED, 0, "the run was cancelled (conformance)");
  nxrt_profile_sink sink;
  r = end(43, failed, device_profiling ? &sink : nullptr);
  if (!is_live_status(failed)) return fail("on_run_end released the run's status, which the host owns");
  host_table_full()->status_release(failed);
  if (!r.ok) return fail(ok_or(r, "on_run_end with an error run status"));
  r = end(42, nullptr, nullptr);
  if (!r.ok) return fail(ok_or(r, "on_run_end of the other overlapping run"));
  auto v = host_log().take();
  if (!v.empty()) return fail(v.front());
  return pass("start/end around runs 41-43 (overlapping, one failed)");
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
  note(take(api.device_info(env.p->instance(), env.devices + 3, &i)), "device_info(bad index)");
  nxrt_ep_session* s = nullptr;
  note(take(api.session_create(env.p->instance(), env.devices + 3, nullptr, 0, &s)), "session_create(bad device)");
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
    Result r = take(p->api().device_count(p->instance(), &n));
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
  add("negotiate.agreed_minor_is_min", negotiate_min_minor);
  add("negotiate.older_host_table", negotiate_older_table);
  add("negotiate.refuse_major_1", [](const Config& c) { return negotiate_refuse_major(c, 1); });
  add("negotiate.refuse_major_3", [](const Config& c) { return negotiate_refuse_major(c, 3); });
  add("negotiate.refuse_major_0", [](const Config& c) { return negotiate_refuse_major(c, 0); });
  add("negotiate.reply_struct_size", negotiate_reply_canary);
  add("negotiate.reply_larger", negotiate_reply_larger);
  add("negotiate.short_reply", negotiate_short_reply);
  add("negotiate.short_request", negotiate_short_request);
  add("negotiate.prefix_request", negotiate_prefix_request);
  add("negotiate.null_host", negotiate_null_host);
  add("negotiate.repeatable", negotiate_repeatable);
  add("negotiate.reload_after_shutdown", negotiate_reload);
  add("instance.distinct", instance_distinct);
  add("instance.shutdown_isolated", instance_shutdown_isolated);
  add("instance.cycles_20", instance_cycles);
  add("instance.threads", instance_threads);
  add("instance.table_immutable", instance_table_immutable);
  add("api.struct_size", api_struct_size);
  add("api.identity", api_identity);
  add("api.required_functions", api_required);
  add("api.feature_bits", api_feature_bits);
  add("api.feature_functions", api_feature_functions);
  add("device.count", device_count);
  add("device.count_stable", device_count_stable);
  add("device.info", device_info);
  add("device.info_stable", device_info_stable);
  add("device.info_short_struct", [](const Config& c) { return device_info_sized(c, offsetof(nxrt_device_info, name)); });
  add("device.info_short_uuid", [](const Config& c) {
    return device_info_sized(c, offsetof(nxrt_device_info, uuid) + sizeof(nxrt_device_info::uuid));
  });
  add("device.info_future_struct", [](const Config& c) { return device_info_sized(c, sizeof(nxrt_device_info) + 48); });
  add("device.info_bad_index", device_info_bad_index);
  add("device.description", device_description);
  add("option.schema", option_schema);
  add("option.info_bad_index", option_info_bad_index);
  add("option.info_short_struct", [](const Config& c) { return option_info_sized(c, offsetof(nxrt_option_info, name)); });
  add("option.info_future_struct", [](const Config& c) { return option_info_sized(c, sizeof(nxrt_option_info) + 32); });
  add("session.create", session_create);
  add("session.threads_option", [](const Config& c) { return session_options(c, 0); });
  add("session.unknown_option_ignored", [](const Config& c) { return session_options(c, 1); });
  add("session.unknown_prefixed_option", [](const Config& c) { return session_options(c, 2); });
  add("session.declared_defaults", session_declared_defaults);
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
  add("transfer.future_regions", transfer_future_regions);
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
  add("kernel.describe", kernel_describe);
  add("kernel.deterministic", kernel_deterministic);
  add("kernel.zero_sized", kernel_zero_sized);
  add("kernel.memory_per_run", kernel_memory);
  add("kernel.constant_input", kernel_constant_input);
  add("kernel.inputs_read_only", kernel_inputs_read_only);
  add("run.hooks", [](const Config& c) { return run_hooks(c, false); });
  add("run.device_profiling", [](const Config& c) { return run_hooks(c, true); });
  add("threads.kernels_8", threads_kernels);
  add("threads.sessions_8", threads_sessions);
  add("errors.status_ownership", errors_statuses);
  add("errors.not_retryable", errors_not_retryable);
  add("lifecycle.load_unload_100", lifecycle_cycles);
  return items;
}

}  // namespace conf
