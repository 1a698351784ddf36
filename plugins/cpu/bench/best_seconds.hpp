// The benches' timer: f once to warm up (scratch, pages, the pool), then the fastest of `reps`
// calls in seconds (wall clock), so other load on the machine lowers the rates less.
// (gemm_peak.cpp keeps its own: it can time by the thread's CPU time and takes no warm-up.)
#pragma once
#include <algorithm>
#include <chrono>

template <class F>
double best_seconds(int reps, F&& f) {
  f();
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}
