// ABI 2.4 kernel cache for SDK kernels: a kernel's expensive derived data ("prepacked
// buffers": packed weights, transposed or reordered constants) declared by name, so that
// export writes them and import hands them back from the blob without deriving them again.
//
// The kernel's create code runs in both cases and declares what it derives:
//
//   std::unique_ptr<Kernel> make(const Node& n, MySession& s, sdk::Prepacked& pp) {
//     pp.param("K", k);  pp.param("N", n);              // what the buffers were derived for
//     auto packed = pp.buffer<float>("packed_b", count, [&](std::span<float> dst) { pack(w, dst); });
//     pp.capture(n.input(1));                            // after the declarations (see below)
//     return make_kernel([packed](Context& ctx) { ... packed.data() ... });
//   }
//
// On kernel_create, buffer() allocates (64-byte aligned, counted in the session's memory
// stats) and calls the fill; on kernel_import it returns a span INTO the blob (zero copy;
// the host keeps the blob mapped until kernel_release) and never calls the fill. A stored
// parameter that differs from the declared one, or a buffer of another size, rejects the
// blob with RECOMPILE and the reason in words; a blob this code cannot parse is UNSUPPORTED.
// Declare every param and buffer before graph_capture_constant: a rejected import falls
// back to kernel_create, which needs the constant.
//
// Blob layout (native byte order; blobs start NXRT_CACHE_BLOB_ALIGNMENT-aligned):
//   u32 magic "NXPK", u32 format version, u64 header bytes (H),
//   kind (u64 length + bytes: "Gemm", "com.x::Op", "Conv+Add+Relu"),
//   u32 param count, per param: name, i64 value,
//   u32 buffer count, per buffer: name, u32 element size, u32 0, u64 count, u64 offset,
//   u64 FNV-1a of bytes [0, H - 8);
//   then each buffer at its offset (a multiple of kPrepackedAlignment, >= H).
// The host checksums whole sections; the header checksum makes a changed header byte a
// verdict here too, and buffer bytes are never read at import (that is the point).
//
// Ownership: a Prepacked owns the buffers it allocated; an imported one borrows the blob.
// PrepackedKernel owns both its Prepacked and the kernel made from it (the kernel goes
// first). Thread class: create/import code runs on the calling thread; afterwards the
// buffers are read-only and safe to read from any thread.
#pragma once
#include "graph.hpp"
#include "kernel.hpp"
#include "kernel_cache.hpp"
#include "memory_accounting.hpp"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace nxrt::sdk {

inline constexpr uint32_t kPrepackedMagic = 0x4b50584eu;  // "NXPK"
inline constexpr uint32_t kPrepackedFormat = 1;
inline constexpr uint64_t kPrepackedAlignment = 64;  // each buffer's offset in the blob
inline constexpr uint32_t kPrepackedMaxEntries = 256;  // params or buffers in one blob

inline uint64_t fnv1a(const void* data, size_t n, uint64_t h = 0xcbf29ce484222325ull) {
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

class Prepacked {
 public:
  // kernel_create: buffers are made here, counted in `counters` (may be null) while alive.
  Prepacked(std::string kind, MemoryCounters* counters) : kind_(std::move(kind)), counters_(counters) {}
  // kernel_import: the header of `blob` parsed and checked (throws BlobRejected); the
  // blob must outlive this object. `kind` is what the node to rebuild is.
  static std::unique_ptr<Prepacked> read(std::span<const uint8_t> blob, const std::string& kind);

  Prepacked(const Prepacked&) = delete;
  Prepacked& operator=(const Prepacked&) = delete;
  ~Prepacked() {
    for (auto& b : buffers_)
      if (b.owned) std::free(const_cast<void*>(b.data));
  }

  bool imported() const { return imported_; }
  const std::string& kind() const { return kind_; }

  // A value the buffers depend on (a shape, a layout constant, a flag).
  void param(std::string_view name, int64_t value) {
    if (!imported_) {
      for (auto& p : params_)
        if (p.name == name) fail(NXRT_INTERNAL, "{}: prepacked parameter '{}' declared twice", kind_, name);
      params_.push_back({std::string(name), value, true});
      return;
    }
    for (auto& p : params_)
      if (p.name == name) {
        if (p.value != value)
          throw BlobRejected{NXRT_CACHE_RECOMPILE, fmt::format("the blob was packed for {} with {}={}, this node has {}={}",
                                                               kind_, name, p.value, name, value)};
        p.used = true;
        return;
      }
    throw BlobRejected{NXRT_CACHE_RECOMPILE,
                       fmt::format("the blob of {} has no parameter '{}' (an older or other kernel)", kind_, name)};
  }

  // `count` elements of T derived once: made by `fill(std::span<T>)` on create, the blob's on import.
  template <typename T, typename Fill>
  std::span<const T> buffer(std::string_view name, size_t count, Fill&& fill) {
    static_assert(std::is_trivially_copyable_v<T> && alignof(T) <= kPrepackedAlignment);
    if (!imported_) {
      for (auto& b : buffers_)
        if (b.name == name) fail(NXRT_INTERNAL, "{}: prepacked buffer '{}' declared twice", kind_, name);
      if (count > (uint64_t(1) << 60) / sizeof(T)) fail(NXRT_OUT_OF_MEMORY, "{}: buffer '{}' of {} elements", kind_, name, count);
      const size_t bytes = (count * sizeof(T) + kPrepackedAlignment - 1) / kPrepackedAlignment * kPrepackedAlignment;
      void* p = std::aligned_alloc(kPrepackedAlignment, bytes ? bytes : kPrepackedAlignment);
      if (!p) fail(NXRT_OUT_OF_MEMORY, "{}: cannot allocate {} bytes for '{}'", kind_, bytes, name);
      buffers_.push_back({std::string(name), sizeof(T), count, p, true, true});
      if (counters_) held_.push_back(std::make_unique<HeldBytes>(*counters_, count * sizeof(T)));
      std::span<T> dst(static_cast<T*>(p), count);
      fill(dst);
      return {static_cast<const T*>(p), count};
    }
    for (auto& b : buffers_)
      if (b.name == name) {
        if (b.elem_size != sizeof(T) || b.count != count)
          throw BlobRejected{NXRT_CACHE_RECOMPILE,
                             fmt::format("the blob's {} buffer '{}' holds {} elements of {} bytes, this node needs {} of {}",
                                         kind_, name, b.count, b.elem_size, count, sizeof(T))};
        b.used = true;
        return {static_cast<const T*>(b.data), count};
      }
    throw BlobRejected{NXRT_CACHE_RECOMPILE, fmt::format("the blob of {} has no buffer '{}'", kind_, name)};
  }

  // graph_capture_constant for a constant input the buffers replace. On create a failure is
  // an error as usual; on import it is ignored (a host that does not take captures during
  // kernel_import keeps its copy; the kernel never reads it either way).
  // The constant's bytes are a parameter too (their digest): a blob packed from other weights
  // (another claim of the same shapes) is RECOMPILE, never applied to this node.
  void capture(const Value& v) {
    if (v.is_constant()) {
      auto t = v.constant();
      const int64_t d = int64_t(digest64(t.raw(), t.bytes()));
      param(fmt::format("digest of {}", v.name()), d);
    }
    if (!imported_) {
      v.capture();
      return;
    }
    try {
      v.capture();
    } catch (const Error&) {
    }
  }

  // Import: after the create code ran, everything the blob holds must have been asked for
  // (else the node's kernel differs from the one exported, e.g. a weight is no longer constant).
  void finish() const {
    if (!imported_) return;
    for (auto& p : params_)
      if (!p.used) throw BlobRejected{NXRT_CACHE_RECOMPILE, fmt::format("the blob of {} has parameter '{}' this node's kernel does not use", kind_, p.name)};
    for (auto& b : buffers_)
      if (!b.used) throw BlobRejected{NXRT_CACHE_RECOMPILE, fmt::format("the blob of {} has buffer '{}' this node's kernel does not use", kind_, b.name)};
  }

  bool empty() const { return buffers_.empty(); }
  // Bytes of buffer data (allocated here, or borrowed from the blob).
  uint64_t bytes() const {
    uint64_t n = 0;
    for (auto& b : buffers_) n += b.count * b.elem_size;
    return n;
  }
  // Where buffer `name` lies (tests: an imported one lies inside the blob); null if none.
  const void* data(std::string_view name) const {
    for (auto& b : buffers_)
      if (b.name == name) return b.data;
    return nullptr;
  }

  void write(BlobWriter& w) const;

 private:
  struct Param {
    std::string name;
    int64_t value;
    bool used;
  };
  struct Buffer {
    std::string name;
    uint64_t elem_size, count;
    const void* data;
    bool owned, used;
  };
  Prepacked() = default;
  std::string kind_;
  MemoryCounters* counters_ = nullptr;
  bool imported_ = false;
  std::vector<Param> params_;
  std::vector<Buffer> buffers_;
  std::vector<std::unique_ptr<HeldBytes>> held_;
};

namespace detail {
inline void put_bytes(std::string& s, const void* p, size_t n) { s.append(static_cast<const char*>(p), n); }
template <typename T>
void put(std::string& s, const T& v) {
  put_bytes(s, &v, sizeof v);
}
inline void put_string(std::string& s, const std::string& v) {
  put(s, uint64_t(v.size()));
  put_bytes(s, v.data(), v.size());
}
inline uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }
}  // namespace detail

inline void Prepacked::write(BlobWriter& w) const {
  using namespace detail;
  // The header with offsets: its size does not depend on the offsets' values.
  auto header = [&](const std::vector<uint64_t>& offsets) {
    std::string h;
    put(h, kPrepackedMagic);
    put(h, kPrepackedFormat);
    put(h, uint64_t(0));  // header bytes, patched below
    put_string(h, kind_);
    put(h, uint32_t(params_.size()));
    for (auto& p : params_) {
      put_string(h, p.name);
      put(h, p.value);
    }
    put(h, uint32_t(buffers_.size()));
    for (size_t i = 0; i < buffers_.size(); ++i) {
      put_string(h, buffers_[i].name);
      put(h, uint32_t(buffers_[i].elem_size));
      put(h, uint32_t(0));
      put(h, buffers_[i].count);
      put(h, offsets[i]);
    }
    const uint64_t total = h.size() + sizeof(uint64_t);
    std::memcpy(h.data() + 8, &total, sizeof total);
    put(h, fnv1a(h.data(), h.size()));
    return h;
  };
  std::vector<uint64_t> offsets(buffers_.size(), 0);
  uint64_t at = header(offsets).size();
  for (size_t i = 0; i < buffers_.size(); ++i) {
    offsets[i] = align_up(at, kPrepackedAlignment);
    at = offsets[i] + buffers_[i].count * buffers_[i].elem_size;
  }
  const std::string h = header(offsets);
  if (w.written() != 0) fail(NXRT_INTERNAL, "{}: a prepacked blob must start the kernel's blob", kind_);
  w.write(h.data(), h.size());
  for (size_t i = 0; i < buffers_.size(); ++i) {
    w.align(kPrepackedAlignment);
    if (w.written() != offsets[i]) fail(NXRT_INTERNAL, "{}: buffer '{}' landed at byte {}, not {}", kind_, buffers_[i].name, w.written(), offsets[i]);
    w.write(buffers_[i].data, buffers_[i].count * buffers_[i].elem_size);
  }
}

inline std::unique_ptr<Prepacked> Prepacked::read(std::span<const uint8_t> blob, const std::string& kind) {
  std::unique_ptr<Prepacked> pp(new Prepacked());
  pp->kind_ = kind;
  pp->imported_ = true;
  BlobReader r(blob.data(), blob.size());
  if (blob.size() < 16) r.reject("{} bytes are too few for a prepacked-kernel blob", blob.size());
  if (r.pod<uint32_t>() != kPrepackedMagic) r.reject("not a prepacked-kernel blob (no NXPK magic)");
  const uint32_t format = r.pod<uint32_t>();
  if (format != kPrepackedFormat)
    throw BlobRejected{NXRT_CACHE_RECOMPILE, fmt::format("the blob has prepacked format {}, this plugin writes format {}", format, kPrepackedFormat)};
  const uint64_t header = r.pod<uint64_t>();
  if (header < 24 || header > blob.size()) r.reject("a header of {} bytes in a blob of {}", header, blob.size());
  uint64_t sum;
  std::memcpy(&sum, blob.data() + header - 8, sizeof sum);
  if (sum != fnv1a(blob.data(), size_t(header - 8))) r.reject("the header checksum does not match");
  BlobReader h(blob.data(), header - 8);  // the header only: nothing in it may point past it
  h.bytes(16);
  const std::string stored_kind = h.string(4096);
  const uint32_t np = h.pod<uint32_t>();
  if (np > kPrepackedMaxEntries) h.reject("{} parameters", np);
  for (uint32_t i = 0; i < np; ++i) {
    std::string name = h.string(256);
    const int64_t v = h.pod<int64_t>();
    for (auto& p : pp->params_)
      if (p.name == name) h.reject("parameter '{}' twice", name);
    pp->params_.push_back({std::move(name), v, false});
  }
  const uint32_t nb = h.pod<uint32_t>();
  if (nb > kPrepackedMaxEntries) h.reject("{} buffers", nb);
  for (uint32_t i = 0; i < nb; ++i) {
    std::string name = h.string(256);
    const uint32_t es = h.pod<uint32_t>();
    const uint32_t zero = h.pod<uint32_t>();
    const uint64_t count = h.pod<uint64_t>(), offset = h.pod<uint64_t>();
    if ((es != 1 && es != 2 && es != 4 && es != 8) || zero != 0) h.reject("buffer '{}' has elements of {} bytes", name, es);
    if (offset < header || offset % kPrepackedAlignment || offset > blob.size() || count > (blob.size() - offset) / es)
      h.reject("buffer '{}' ({} x {} bytes at byte {}) lies outside the blob of {} bytes", name, count, es, offset, blob.size());
    const uint8_t* p = blob.data() + offset;
    if (reinterpret_cast<uintptr_t>(p) % es) h.reject("buffer '{}' is misaligned in memory", name);
    for (auto& b : pp->buffers_)
      if (b.name == name) h.reject("buffer '{}' twice", name);
    pp->buffers_.push_back({std::move(name), es, count, p, false, false});
  }
  if (h.remaining() != 0) h.reject("{} unread header bytes", h.remaining());
  if (stored_kind != kind)
    throw BlobRejected{NXRT_CACHE_RECOMPILE, fmt::format("the blob holds a {} kernel, this node is {}", stored_kind, kind)};
  return pp;
}

// A kernel with the Prepacked it was made from: export_blob writes the buffers.
class PrepackedKernel final : public Kernel {
 public:
  PrepackedKernel(std::unique_ptr<Prepacked> pp, std::unique_ptr<Kernel> k) : pp_(std::move(pp)), k_(std::move(k)) {}
  void compute(Context& ctx) override { k_->compute(ctx); }
  std::string describe() const override { return k_->describe(); }
  void export_blob(BlobWriter& w) override {
    if (pp_->empty()) fail(NXRT_UNSUPPORTED, "{}: nothing prepacked (no constant operand was packed)", pp_->kind());
    pp_->write(w);
  }
  const Prepacked& prepacked() const { return *pp_; }
  Kernel& inner() { return *k_; }

 private:
  std::unique_ptr<Prepacked> pp_;  // declared first: destroyed after the kernel that reads it
  std::unique_ptr<Kernel> k_;
};

// kernel_create through `create(Prepacked&)`.
template <typename Create>
std::unique_ptr<Kernel> create_prepacked(std::string kind, MemoryCounters* counters, Create&& create) {
  auto pp = std::make_unique<Prepacked>(std::move(kind), counters);
  std::unique_ptr<Kernel> k = create(*pp);
  return std::make_unique<PrepackedKernel>(std::move(pp), std::move(k));
}

// kernel_import through the same `create(Prepacked&)`, fed from `blob`.
template <typename Create>
std::unique_ptr<Kernel> import_prepacked(const std::string& kind, std::span<const uint8_t> blob, Create&& create) {
  auto pp = Prepacked::read(blob, kind);
  std::unique_ptr<Kernel> k = create(*pp);
  pp->finish();
  return std::make_unique<PrepackedKernel>(std::move(pp), std::move(k));
}

// The kind of a single-node kernel: "Op" or "domain::Op".
inline std::string prepacked_kind(const Node& n) {
  std::string d(n.domain());
  if (d == "ai.onnx") d.clear();
  return d.empty() ? std::string(n.op_type()) : d + "::" + std::string(n.op_type());
}

}  // namespace nxrt::sdk
