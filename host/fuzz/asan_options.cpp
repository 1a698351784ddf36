// ASan's defaults for every fuzz target (fuzzing, the regression replays, a replay by hand);
// ASAN_OPTIONS still overrides them.
//
// A model may ask at run time for an output of terabytes (Range, ConstantOfShape, Tile of a
// computed shape). The host refuses what the allocator refuses: a null from aligned_alloc is an
// "out of host memory" error, a std::bad_alloc is caught at the C API. Under ASan a request
// past its 1 TiB maximum aborts instead, and one of a few GiB succeeds and trips libFuzzer's
// memory limit: neither is the host's behaviour. So allocations over 1.5 GiB fail, as they would
// in a process under a 4 GiB address-space limit (how the hostile-model suite runs nxrt) once
// two of them are held (constant folding two 1.9 GB outputs crossed libFuzzer's 4 GiB RSS limit
// with 3 GiB here), and ASan returns the null instead of aborting.
extern "C" const char* __asan_default_options() {
  return "allocator_may_return_null=1:max_allocation_size_mb=1536";
}
