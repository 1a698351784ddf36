// Hot loops written as plain C++ are compiled several times with
// target_clones and the best clone is picked at load time from CPUID (ifunc),
// so they vectorise with AVX-512 on machines that have it while the library
// still runs on baseline x86-64.
#pragma once

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define NXRT_CLONES __attribute__((target_clones("avx512f", "arch=x86-64-v3", "default")))
#else
#define NXRT_CLONES
#endif
