// Vulkan core of the nxrt Vulkan plugin: instance and device enumeration,
// logical devices, the sub-allocating buffer arena, pipelines, streams and
// events. Independent of the host services, so unit tests drive it directly.
// Errors are thrown as nxrt::sdk::Error.
#pragma once
#include "vk_api.hpp"

#include <nxrt_sdk/memory_accounting.hpp>
#include <nxrt_sdk/status.hpp>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <type_traits>
#include <unordered_set>
#include <vector>

namespace nxrt::vk {

void check_vk(VkResult r, const char* what);

// Vulkan handles as the 64-bit integers of nxrt_native_handle: dispatchable handles
// (pointers) through uintptr_t, non-dispatchable ones as their 64-bit value (a pointer
// type on 64-bit builds, uint64_t on 32-bit ones).
template <typename H>
uint64_t handle_u64(H h) {
  if constexpr (std::is_pointer_v<H>) return uint64_t(reinterpret_cast<uintptr_t>(h));
  else return uint64_t(h);
}
template <typename H>
H handle_from_u64(uint64_t v) {
  if constexpr (std::is_pointer_v<H>) return reinterpret_cast<H>(uintptr_t(v));
  else return H(v);
}

// ------------------------------------------------------------- instance

struct PhysicalDeviceInfo {
  VkPhysicalDevice handle = VK_NULL_HANDLE;
  VkPhysicalDeviceProperties props{};
  VkPhysicalDeviceMemoryProperties mem{};
  uint32_t subgroup_size = 0;
  // storage16 (storageBuffer16BitAccess) is enabled on the logical device when present:
  // the float16 kernels need it.
  bool fp16 = false, int8 = false, storage16 = false, timeline = false, push_descriptor = false;
  uint32_t queue_family = 0;
  // timestampValidBits of the compute queue family (0: no timestamps, no device
  // profiling on this device) and limits.timestampPeriod (ns per tick).
  uint32_t timestamp_bits = 0;
  double timestamp_period = 0;
  uint64_t device_local_bytes = 0;
  // VK_EXT_memory_budget: free device-local memory can be asked (memory_free_bytes).
  bool memory_budget = false;
  // VK_EXT_pci_bus_info: "dddd:bb:dd.f", empty without the extension.
  std::string pci_bus_id;
  // VK_EXT_external_memory_host (enabled when present): host memory aligned to
  // host_import_alignment can be imported (memory_import of HOST_POINTER); 0 without it.
  uint64_t host_import_alignment = 0;
  uint8_t uuid[16]{};
  std::string driver;
  std::vector<std::pair<std::string, std::string>> properties;  // for device_info
};

// Device-local memory free now (sum over device-local heaps of budget - usage), where the
// driver has VK_EXT_memory_budget; 0 (unknown) otherwise.
uint64_t device_local_free_bytes(const PhysicalDeviceInfo& d);

class Instance {
 public:
  // The process's VkInstance, shared by every plugin instance: each holds a
  // reference (acquire at creation, release at shutdown) and the last release
  // destroys it, so load/unload cycles do not accumulate instances and one
  // plugin instance's shutdown never pulls the device from under another.
  // get() creates it on first use and never throws.
  static Instance& get();
  static void acquire();
  static void release();
  bool ok() const { return instance_ != VK_NULL_HANDLE; }
  const std::string& reason() const { return reason_; }  // why there is no device
  const std::vector<PhysicalDeviceInfo>& devices() const { return devices_; }
  VkInstance handle() const { return instance_; }
  bool validation() const { return validation_; }
  // Validation-layer messages (warnings and errors) seen so far.
  static std::atomic<uint64_t>& message_count();
  ~Instance();

 private:
  Instance();
  VkInstance instance_ = VK_NULL_HANDLE;
  VkDebugUtilsMessengerEXT messenger_ = VK_NULL_HANDLE;
  bool validation_ = false;
  std::string reason_;
  std::vector<PhysicalDeviceInfo> devices_;
};

// ------------------------------------------------------------- memory

struct Block;
// One allocation handed out as an nxrt handle: a VkBuffer over a range of a
// (possibly shared) VkDeviceMemory block.
struct Alloc {
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceSize size = 0;
  char* mapped = nullptr;  // host pointer when the memory is host-visible
  Block* block = nullptr;
  VkDeviceSize block_offset = 0, block_size = 0;
  bool pinned = false;
  // Memory of someone else (Device::import): a caller's VkBuffer (block null, buffer not
  // ours) or host memory imported into a VkDeviceMemory of its own (block owned by the
  // Alloc, freed with it). Never counted as allocated.
  bool imported = false;
  // Unique per allocation (never reused, unlike the Alloc address): a recorded
  // command buffer is reused only for the same allocations.
  uint64_t id = 0;
};

struct Pipeline {
  VkPipeline pipeline = VK_NULL_HANDLE;
  VkPipelineLayout layout = VK_NULL_HANDLE;
  VkDescriptorSetLayout set_layout = VK_NULL_HANDLE;
  uint32_t bindings = 0;
};

// *_f16: the same kernel over float16 storage buffers (needs storageBuffer16BitAccess).
enum class Shader {
  unary, binary, copy, gather, softmax, layernorm, reduce, batchnorm, pool, conv_direct, matmul, conv_gemm,
  unary_f16, binary_f16, softmax_f16, matmul_f16, copy_f16, gather_f16, layernorm_f16, reduce_f16, batchnorm_f16,
  pool_f16, conv_direct_f16, conv_gemm_f16, cast, cast_to_f16, cast_from_f16, count
};

class Stream;

// Where emitters get their pipelines: a Device creates them, a PipelinePlan
// (pipeline_plan.hpp) only lists them (offline compile, kernel export).
class PipelineSource {
 public:
  virtual const Pipeline& pipeline(Shader s, std::span<const uint32_t> spec) = 0;

 protected:
  ~PipelineSource() = default;
};

class Device : public PipelineSource {
 public:
  Device(uint32_t index, std::string pipeline_cache_path = {});
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  const PhysicalDeviceInfo& info() const { return *info_; }
  VkDevice handle() const { return device_; }
  VkQueue queue() const { return queue_; }
  VkInstance instance() const { return instance_; }
  const VkPhysicalDeviceLimits& limits() const { return info_->props.limits; }
  // Timestamp queries work on this device's compute queue (device profiling).
  bool timestamps() const { return info_->timestamp_bits > 0 && info_->timestamp_period > 0; }

  // DEVICE memory (device-local; mapped when the device allows) or HOST_PINNED
  // (host-visible, coherent, mapped).
  Alloc* alloc(uint64_t bytes, bool pinned, uint64_t alignment = 256);
  void free(Alloc* a);
  Alloc* find_pinned(const void* p);  // the pinned allocation containing p
  // Memory not allocated here as a DEVICE Alloc (memory_import, ABI 2.2): a VULKAN_BUFFER
  // of this VkDevice (aux0) at value 0, or a HOST_POINTER aligned to the device's
  // host_import_alignment (VK_EXT_external_memory_host). NXRT_UNSUPPORTED otherwise.
  Alloc* import(const nxrt_native_handle& h);
  // `a` is a live DEVICE (not pinned) allocation of this device.
  bool is_device_alloc(const Alloc* a);
  bool device_mapped() const { return device_type_host_visible_; }
  uint64_t bytes_in_use() const { return in_use_; }
  // Every VkDeviceMemory block (device-local and host-visible) comes from `a` from now
  // on. Fails with NXRT_INVALID_ARGUMENT once the device has allocated memory, since the
  // blocks it holds could not go back through `a`. The constructor allocates none.
  void set_allocator(const nxrt_device_allocator& a);
  // Memory and transfer counters (nxrt_memory_stats): alloc/free per Alloc (staging
  // included), reserve/unreserve per backing block, copied by copy_regions.
  sdk::MemoryCounters& counters() { return counters_; }

  const Pipeline& pipeline(Shader s, std::span<const uint32_t> spec = {}) override;
  std::vector<uint8_t> pipeline_cache_data();
  // Merges driver pipeline-cache bytes (from a kernel blob) into this device's cache when
  // their Vulkan header names this vendor, device and pipelineCacheUUID; false otherwise
  // (nothing merged: pipelines are compiled as usual).
  bool merge_pipeline_cache(std::span<const uint8_t> bytes);
  void save_pipeline_cache();
  // Bytes of pipeline cache data loaded from the vulkan.pipeline_cache file (0: none, or ignored).
  size_t pipeline_cache_loaded() const { return cache_loaded_; }

  // Submits on the device's queue under its lock (Vulkan queues are externally
  // synchronised); also for tests that stand in for a caller's own submissions.
  void submit(const VkSubmitInfo& info);
  // Waits until the queue has retired every submission. A signalled timeline value does not
  // promise the driver is done with the command buffer (lavapipe's queue thread may still
  // touch it), so command pools are destroyed only after this.
  void queue_wait_idle();
  // Runs `record` in a one-off command buffer and waits for it.
  void run_now(const std::function<void(VkCommandBuffer)>& record);
  // The stream used when the caller gives none (copies, or a host without streams).
  // Callers hold default_stream_lock() for as long as they use it: it is shared by threads.
  Stream& default_stream();
  std::unique_lock<std::mutex> default_stream_lock() { return std::unique_lock<std::mutex>(default_stream_mu_); }

 private:
  friend class Stream;
  uint32_t find_type(uint32_t bits, VkMemoryPropertyFlags want, VkMemoryPropertyFlags avoid = 0);
  Block* new_block(uint32_t type, VkDeviceSize bytes, VkDeviceSize alignment, bool map);
  void release_block(Block* b);  // returns its memory (driver or external allocator)

  const PhysicalDeviceInfo* info_;
  VkInstance instance_ = VK_NULL_HANDLE;
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  std::mutex queue_mu_;
  uint32_t device_type_ = 0, pinned_type_ = 0;
  bool device_type_host_visible_ = false;
  std::mutex mem_mu_;
  std::vector<std::unique_ptr<Block>> blocks_;
  std::map<uintptr_t, Alloc*> pinned_;  // mapped address -> allocation
  std::unordered_set<const Alloc*> live_;
  PFN_vkGetMemoryHostPointerPropertiesEXT host_pointer_properties_ = nullptr;
  uint64_t in_use_ = 0;
  bool allocated_ = false;  // a block was ever allocated (set_allocator is too late)
  sdk::ExternalAllocator external_;
  sdk::MemoryCounters counters_;
  std::mutex pipe_mu_;
  VkPipelineCache cache_ = VK_NULL_HANDLE;
  std::string cache_path_;
  size_t cache_loaded_ = 0;
  std::map<std::pair<int, std::vector<uint32_t>>, Pipeline> pipelines_;
  std::map<uint32_t, VkDescriptorSetLayout> set_layouts_;
  std::map<int, VkShaderModule> modules_;
  std::unique_ptr<Stream> default_stream_;
  std::mutex default_stream_mu_;
};

// ------------------------------------------------------------- streams

// A timeline semaphore shared by a stream and the events recorded on it.
struct Timeline {
  Device* dev;
  VkSemaphore sem = VK_NULL_HANDLE;
  bool owned = true;  // false: the caller's semaphore (imported stream), never destroyed here
  explicit Timeline(Device* d);
  Timeline(Device* d, VkSemaphore external) : dev(d), sem(external), owned(false) {}
  ~Timeline();
  Timeline(const Timeline&) = delete;
  Timeline& operator=(const Timeline&) = delete;
  uint64_t completed() const;
  void wait(uint64_t value) const;
};

class Stream {
 public:
  explicit Stream(Device& d);
  // A stream over the caller's timeline semaphore `sem` (ABI stream import): its first
  // submission waits for `value` and signals value+1, and so on. `sem` is not owned.
  Stream(Device& d, VkSemaphore sem, uint64_t value);
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  Device& device() { return dev_; }
  // Submits `cmd` after everything queued before; returns the timeline value
  // that signals its completion. `keep` lives until then.
  uint64_t submit(VkCommandBuffer cmd, std::shared_ptr<void> keep = {});
  // A command buffer from the stream's pool, freed once its work completes.
  VkCommandBuffer begin_transient();
  uint64_t submit_transient(VkCommandBuffer cmd, std::shared_ptr<void> keep = {});
  void synchronize();
  // Nothing queued or waited for: host-side access needs no synchronisation. Pending
  // waits (an event's point, not yet submitted) count as work.
  bool idle() const { return waits_.empty() && timeline_->completed() >= value_; }
  void wait_for(std::shared_ptr<Timeline> t, uint64_t value);
  std::pair<std::shared_ptr<Timeline>, uint64_t> mark();  // flushes pending waits
  const std::shared_ptr<Timeline>& timeline() const { return timeline_; }
  uint64_t value() const { return value_; }

 private:
  void retire();
  void create_pool();
  Device& dev_;
  std::shared_ptr<Timeline> timeline_;
  uint64_t value_ = 0;
  uint64_t start_ = 0;  // value_ at creation: nothing of ours to wait for before it
  std::vector<std::pair<std::shared_ptr<Timeline>, uint64_t>> waits_;
  VkCommandPool pool_ = VK_NULL_HANDLE;
  struct Pending { uint64_t value; VkCommandBuffer cmd; std::shared_ptr<void> keep; };
  std::vector<Pending> pending_;
};

class Event {
 public:
  void record(Stream& s) { std::tie(timeline_, value_) = s.mark(); }
  void wait_on(Stream& s) { if (timeline_) s.wait_for(timeline_, value_); }
  void synchronize() { if (timeline_) timeline_->wait(value_); }

 private:
  std::shared_ptr<Timeline> timeline_;
  uint64_t value_ = 0;
};

// ------------------------------------------------------------- interop (ABI 2.1)

// The native handle (nxrt_native.h) of a device object; handles stay the plugin's.
//   DEVICE: VULKAN_DEVICE, handle VkDevice, aux0 VkPhysicalDevice, aux1 VkInstance,
//           value the queue family index.
//   QUEUE:  VULKAN_QUEUE, handle VkQueue, value the family index.
//   MEMORY: `memory` a DEVICE Alloc*: VULKAN_BUFFER, handle its own VkBuffer, value 0 (the
//           allocation starts the buffer), size the Alloc's size (the request rounded up
//           to 256 bytes), aux0 the VkDevice. INVALID_ARGUMENT for anything else.
//   STREAM: VULKAN_TIMELINE, handle the stream's timeline semaphore, value the point at
//           which all work queued so far completes (pending waits are flushed first).
nxrt_native_handle native_handle(Device& d, nxrt_native_object what, const void* memory, Stream* stream);
// A stream over the caller's VULKAN_TIMELINE (semaphore not owned, first submission waits
// for h.value); INVALID_ARGUMENT for another type or a zero handle.
std::unique_ptr<Stream> import_stream(Device& d, const nxrt_native_handle& h);

// ------------------------------------------------------------- transfers

// One side of a copy: host memory (pointer) or a device/pinned allocation.
struct Endpoint {
  Alloc* alloc = nullptr;  // null: host pointer
  char* host = nullptr;
  uint64_t offset = 0;
};
struct CopyOp { Endpoint src, dst; uint64_t bytes; };

// Performs copies, ordered on `stream` when given (else complete on return).
void copy(Device& d, std::span<const CopyOp> ops, Stream* stream);
// The ABI's copy: regions as the host passed them (DEVICE handles are Alloc*, host and
// pinned ones pointers), performed by copy() and counted by direction in d.counters().
void copy_regions(Device& d, std::span<const nxrt_copy_region> regions, Stream* stream);
// Device-to-device regions from `src`'s allocations to `dst`'s (two sessions, maybe two
// VkDevices): one buffer copy on the same Device, a direct memcpy when both sides are
// mapped, else a bounce through host memory. Ordered on `dst_stream` (a stream of `dst`)
// when given; the source must be complete. Counted as device-to-device in dst's counters.
void copy_between(Device& src, Device& dst, std::span<const nxrt_copy_region> regions, Stream* dst_stream);

// The compute-to-compute/transfer barrier used between dependent commands.
void full_barrier(VkCommandBuffer cmd);
// Makes device writes visible to host reads after the submission completes.
void host_barrier(VkCommandBuffer cmd);

}  // namespace nxrt::vk
