// nxrt_sdk/prepacked.hpp: buffers declared on create are written to a blob and come back on
// import as spans into the blob (no fill, no counted memory); mismatched parameters, kinds
// and sizes are RECOMPILE with a reason; truncated, random and corrupted blobs are verdicts,
// never crashes.
#include <doctest/doctest.h>

#include <nxrt_sdk/prepacked.hpp>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace sdk = nxrt::sdk;

namespace {

// A blob as the host hands it over: a copy at a NXRT_CACHE_BLOB_ALIGNMENT-aligned address.
struct AlignedBlob {
  explicit AlignedBlob(const std::vector<uint8_t>& b)
      : n(b.size()), p(static_cast<uint8_t*>(std::aligned_alloc(NXRT_CACHE_BLOB_ALIGNMENT, (b.size() / 4096 + 1) * 4096))) {
    if (n) std::memcpy(p, b.data(), n);
  }
  ~AlignedBlob() { std::free(p); }
  AlignedBlob(const AlignedBlob&) = delete;
  std::span<const uint8_t> span() const { return {p, n}; }
  size_t n;
  uint8_t* p;
};

std::vector<uint8_t> export_of(sdk::Kernel& k) {
  std::vector<uint8_t> out;
  nxrt_blob_writer w{};
  w.struct_size = sizeof w;
  w.user = &out;
  w.write = [](void* user, const void* bytes, uint64_t size) -> nxrt_status* {
    auto* v = static_cast<std::vector<uint8_t>*>(user);
    v->insert(v->end(), static_cast<const uint8_t*>(bytes), static_cast<const uint8_t*>(bytes) + size);
    return nullptr;
  };
  sdk::BlobWriter bw(&w);
  k.export_blob(bw);
  return out;
}

struct NoKernel : sdk::Kernel {
  void compute(sdk::Context&) override {}
};

// The test kernel's create code: K floats "a" (value i * 0.5) and 5 int8 "b", for shape K.
struct Declared {
  std::span<const float> a;
  std::span<const int8_t> b;
  int fills = 0;
};
std::unique_ptr<sdk::Kernel> make(sdk::Prepacked& pp, int64_t K, Declared& d, bool with_b = true) {
  pp.param("K", K);
  d.a = pp.buffer<float>("a", size_t(K), [&](std::span<float> dst) {
    ++d.fills;
    for (size_t i = 0; i < dst.size(); ++i) dst[i] = float(i) * 0.5f;
  });
  if (with_b)
    d.b = pp.buffer<int8_t>("b", 5, [&](std::span<int8_t> dst) {
      ++d.fills;
      for (size_t i = 0; i < dst.size(); ++i) dst[i] = int8_t(-int(i));
    });
  return std::make_unique<NoKernel>();
}

std::vector<uint8_t> exported(int64_t K = 100) {
  Declared d;
  auto k = sdk::create_prepacked("Test", nullptr, [&](sdk::Prepacked& pp) { return make(pp, K, d); });
  return export_of(*k);
}

// The verdict of importing `blob` as a Test kernel for shape K, or OPTIMAL when accepted.
sdk::BlobRejected verdict_of(const std::vector<uint8_t>& bytes, int64_t K = 100, const std::string& kind = "Test") {
  AlignedBlob blob(bytes);
  Declared d;
  try {
    sdk::import_prepacked(kind, blob.span(), [&](sdk::Prepacked& pp) { return make(pp, K, d); });
  } catch (const sdk::BlobRejected& r) {
    return r;
  }
  return {NXRT_CACHE_OPTIMAL, ""};
}

}  // namespace

TEST_CASE("prepacked buffers round-trip through a blob without a copy, a fill or counted memory") {
  sdk::MemoryCounters counters;
  Declared made;
  auto k = sdk::create_prepacked("Test", &counters, [&](sdk::Prepacked& pp) { return make(pp, 100, made); });
  CHECK(made.fills == 2);
  CHECK(counters.stats().bytes_in_use == 100 * sizeof(float) + 5);
  CHECK(reinterpret_cast<uintptr_t>(made.a.data()) % sdk::kPrepackedAlignment == 0);
  const std::vector<uint8_t> bytes = export_of(*k);
  k.reset();
  CHECK(counters.stats().bytes_in_use == 0);

  AlignedBlob blob(bytes);
  Declared got;
  auto imported = sdk::import_prepacked("Test", blob.span(), [&](sdk::Prepacked& pp) { return make(pp, 100, got); });
  CHECK(got.fills == 0);
  const auto* lo = blob.p;
  const auto* hi = blob.p + blob.n;
  CHECK(reinterpret_cast<const uint8_t*>(got.a.data()) >= lo);
  CHECK(reinterpret_cast<const uint8_t*>(got.a.data() + got.a.size()) <= hi);
  CHECK(reinterpret_cast<const uint8_t*>(got.b.data()) >= lo);
  CHECK(reinterpret_cast<uintptr_t>(got.a.data()) % sdk::kPrepackedAlignment == 0);
  REQUIRE(got.a.size() == 100);
  for (size_t i = 0; i < 100; ++i) CHECK(got.a[i] == float(i) * 0.5f);
  REQUIRE(got.b.size() == 5);
  CHECK(got.b[4] == -4);
  // Exporting the imported kernel writes the same bytes (a cache can be rewritten from itself).
  CHECK(export_of(*imported) == bytes);
}

TEST_CASE("a blob of another shape, kind or buffer set is RECOMPILE with the reason") {
  const auto bytes = exported(100);
  CHECK(verdict_of(bytes, 100).verdict == NXRT_CACHE_OPTIMAL);
  auto r = verdict_of(bytes, 64);
  CHECK(r.verdict == NXRT_CACHE_RECOMPILE);
  CHECK(r.reason.find("K=100") != std::string::npos);
  CHECK(r.reason.find("K=64") != std::string::npos);
  r = verdict_of(bytes, 100, "Other");
  CHECK(r.verdict == NXRT_CACHE_RECOMPILE);
  CHECK(r.reason.find("Test") != std::string::npos);
  CHECK(r.reason.find("Other") != std::string::npos);
  // The node's kernel no longer asks for buffer b.
  AlignedBlob blob(bytes);
  Declared d;
  try {
    sdk::import_prepacked("Test", blob.span(), [&](sdk::Prepacked& pp) { return make(pp, 100, d, false); });
    FAIL("an unused buffer was accepted");
  } catch (const sdk::BlobRejected& e) {
    CHECK(e.verdict == NXRT_CACHE_RECOMPILE);
    CHECK(e.reason.find("'b'") != std::string::npos);
  }
  // Another element size for the same name.
  try {
    sdk::import_prepacked("Test", blob.span(), [&](sdk::Prepacked& pp) {
      pp.param("K", 100);
      pp.buffer<double>("a", 50, [](std::span<double>) {});
      return std::make_unique<NoKernel>();
    });
    FAIL("a buffer of another element size was accepted");
  } catch (const sdk::BlobRejected& e) {
    CHECK(e.verdict == NXRT_CACHE_RECOMPILE);
  }
}

TEST_CASE("another format version is RECOMPILE naming both") {
  auto bytes = exported();
  const uint32_t v = sdk::kPrepackedFormat + 1;
  std::memcpy(bytes.data() + 4, &v, 4);
  auto r = verdict_of(bytes);
  CHECK(r.verdict == NXRT_CACHE_RECOMPILE);
  CHECK(r.reason.find(std::to_string(v)) != std::string::npos);
}

TEST_CASE("an empty kernel exports nothing (UNSUPPORTED)") {
  auto k = sdk::create_prepacked("Test", nullptr, [](sdk::Prepacked& pp) {
    pp.param("K", 1);
    return std::make_unique<NoKernel>();
  });
  try {
    export_of(*k);
    FAIL("exported an empty kernel");
  } catch (const sdk::Error& e) {
    CHECK(e.code() == NXRT_UNSUPPORTED);
  }
}

TEST_CASE("hostile blobs: empty, truncated, random, flipped header bytes are verdicts with reasons") {
  const auto good = exported();
  auto rejected = [](const sdk::BlobRejected& r) {
    return (r.verdict == NXRT_CACHE_UNSUPPORTED || r.verdict == NXRT_CACHE_RECOMPILE) && !r.reason.empty();
  };
  CHECK(rejected(verdict_of({})));
  for (size_t n = 0; n < good.size(); n += 64) {
    CAPTURE(n);
    CHECK(rejected(verdict_of(std::vector<uint8_t>(good.begin(), good.begin() + long(n)))));
  }
  CHECK(rejected(verdict_of(std::vector<uint8_t>(good.begin(), good.end() - 1))));
  std::mt19937 rng(12);
  for (int t = 0; t < 200; ++t) {
    std::vector<uint8_t> junk(size_t(rng() % 2048));
    for (auto& b : junk) b = uint8_t(rng());
    CHECK(rejected(verdict_of(junk)));
  }
  // Random bytes behind a valid magic and format reach the header parser.
  for (int t = 0; t < 200; ++t) {
    std::vector<uint8_t> junk(good.size());
    for (auto& b : junk) b = uint8_t(rng());
    std::memcpy(junk.data(), good.data(), 8);
    CHECK(rejected(verdict_of(junk)));
  }
  uint64_t header = 0;
  std::memcpy(&header, good.data() + 8, 8);
  REQUIRE(header < good.size());
  for (size_t i = 0; i < header; ++i)
    for (uint8_t bit : {uint8_t(1), uint8_t(0x80)}) {
      auto bad = good;
      bad[i] ^= bit;
      CAPTURE(i);
      CHECK(rejected(verdict_of(bad)));
    }
}
