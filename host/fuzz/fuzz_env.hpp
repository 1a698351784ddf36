// The environment every input of a fuzz target runs in: an empty env with the given plugins
// registered, made once per process (the first call's arguments); a plugin that does not load
// stops the target, since nothing it would test could run.
#pragma once
#include <nxrt/nxrt.h>

#include <cstdio>
#include <cstdlib>
#include <initializer_list>

inline nxrt_env* fuzz_env(const char* target, std::initializer_list<const char*> plugins) {
  static nxrt_env* env = [&] {
    nxrt_env* e = nullptr;
    nxrt_error* err = nxrt_env_create_empty(&e);
    for (const char* p : plugins)
      if (!err) err = nxrt_env_register_plugin(e, p, nullptr);
    if (err) {
      std::fprintf(stderr, "%s: cannot load the plugins: %s\n", target, nxrt_error_message(err));
      std::abort();
    }
    return e;
  }();
  return env;
}
