#include <mutex>
#include "vk_core.hpp"
#include "device_traits.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>

namespace nxrt::vk {

using sdk::fail;

void check_vk(VkResult r, const char* what) {
  if (r == VK_SUCCESS) return;
  nxrt_status_code code = NXRT_INTERNAL;
  if (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY) code = NXRT_OUT_OF_MEMORY;
  if (r == VK_ERROR_DEVICE_LOST) code = NXRT_DEVICE_LOST;
  fail(code, "{} failed: {} ({})", what, result_name(r), int(r));
}

// ------------------------------------------------------------- instance

std::atomic<uint64_t>& Instance::message_count() {
  static std::atomic<uint64_t> n{0};
  return n;
}

static VKAPI_ATTR VkBool32 VKAPI_CALL debug_callback(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                     VkDebugUtilsMessageTypeFlagsEXT,
                                                     const VkDebugUtilsMessengerCallbackDataEXT* data, void*) {
  if (severity >= VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT) {
    Instance::message_count()++;
    std::fprintf(stderr, "nxrt-vulkan validation: %s\n", data && data->pMessage ? data->pMessage : "(no message)");
  }
  return VK_FALSE;
}

static bool env_on(const char* name) {
  const char* v = std::getenv(name);
  return v && *v && std::strcmp(v, "0") != 0;
}

static std::unique_ptr<Instance>& instance_slot() {
  static std::unique_ptr<Instance> inst;
  return inst;
}
static std::mutex& instance_mutex() {
  static std::mutex mu;
  return mu;
}

uint64_t device_local_free_bytes(const PhysicalDeviceInfo& d) {
  if (!d.memory_budget) return 0;
  VkPhysicalDeviceMemoryBudgetPropertiesEXT budget{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_BUDGET_PROPERTIES_EXT};
  VkPhysicalDeviceMemoryProperties2 mp{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_PROPERTIES_2};
  mp.pNext = &budget;
  vkGetPhysicalDeviceMemoryProperties2(d.handle, &mp);
  uint64_t free = 0;
  for (uint32_t h = 0; h < mp.memoryProperties.memoryHeapCount; ++h)
    if ((mp.memoryProperties.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) && budget.heapBudget[h] > budget.heapUsage[h])
      free += budget.heapBudget[h] - budget.heapUsage[h];
  return free;
}

Instance& Instance::get() {
  std::lock_guard lock(instance_mutex());
  auto& slot = instance_slot();
  if (!slot) slot.reset(new Instance());
  return *slot;
}

static int& instance_refs() {
  static int refs = 0;
  return refs;
}

void Instance::acquire() {
  std::lock_guard lock(instance_mutex());
  ++instance_refs();
}

void Instance::release() {
  std::lock_guard lock(instance_mutex());
  if (instance_refs() > 0 && --instance_refs() == 0) instance_slot().reset();
}

Instance::Instance() {
  try {
    if (!load_loader(reason_)) return;
    uint32_t api = VK_API_VERSION_1_0;
    if (vkEnumerateInstanceVersion) vkEnumerateInstanceVersion(&api);
    if (api < VK_API_VERSION_1_2) {
      reason_ = fmt::format("Vulkan loader is version {}.{}, the plugin needs 1.2", VK_VERSION_MAJOR(api), VK_VERSION_MINOR(api));
      return;
    }
    std::vector<const char*> layers, exts;
    bool want_validation = env_on("NXRT_VULKAN_VALIDATION");
    if (want_validation) {
      uint32_t n = 0;
      vkEnumerateInstanceLayerProperties(&n, nullptr);
      std::vector<VkLayerProperties> lp(n);
      vkEnumerateInstanceLayerProperties(&n, lp.data());
      for (auto& l : lp)
        if (std::strcmp(l.layerName, "VK_LAYER_KHRONOS_validation") == 0) validation_ = true;
      if (validation_) {
        layers.push_back("VK_LAYER_KHRONOS_validation");
        exts.push_back(VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
      } else {
        std::fprintf(stderr, "nxrt-vulkan: NXRT_VULKAN_VALIDATION is set but VK_LAYER_KHRONOS_validation is not installed\n");
      }
    }
    VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
    app.pApplicationName = "nxrt";
    app.pEngineName = "nxrt-vulkan";
    app.apiVersion = VK_API_VERSION_1_2;
    VkInstanceCreateInfo ci{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
    ci.pApplicationInfo = &app;
    ci.enabledLayerCount = uint32_t(layers.size());
    ci.ppEnabledLayerNames = layers.data();
    ci.enabledExtensionCount = uint32_t(exts.size());
    ci.ppEnabledExtensionNames = exts.data();
    VkValidationFeatureEnableEXT enables[] = {VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT};
    VkValidationFeaturesEXT vf{VK_STRUCTURE_TYPE_VALIDATION_FEATURES_EXT};
    vf.enabledValidationFeatureCount = 1;
    vf.pEnabledValidationFeatures = enables;
    VkDebugUtilsMessengerCreateInfoEXT dci{VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT};
    dci.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
    dci.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                      VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
    dci.pfnUserCallback = debug_callback;
    if (validation_) {
      if (!env_on("NXRT_VULKAN_NO_SYNC_VALIDATION")) dci.pNext = &vf;
      ci.pNext = &dci;
    }
    VkResult r = vkCreateInstance(&ci, nullptr, &instance_);
    if (r != VK_SUCCESS) {
      instance_ = VK_NULL_HANDLE;
      reason_ = r == VK_ERROR_INCOMPATIBLE_DRIVER
                    ? "no Vulkan driver (ICD) found: vkCreateInstance returned VK_ERROR_INCOMPATIBLE_DRIVER"
                    : fmt::format("vkCreateInstance failed: {}", result_name(r));
      return;
    }
    load_instance_fns(instance_);
    if (validation_ && vkCreateDebugUtilsMessengerEXT) {
      dci.pNext = nullptr;
      vkCreateDebugUtilsMessengerEXT(instance_, &dci, nullptr, &messenger_);
    }
    uint32_t n = 0;
    r = vkEnumeratePhysicalDevices(instance_, &n, nullptr);
    std::vector<VkPhysicalDevice> pds(n);
    if (n) r = vkEnumeratePhysicalDevices(instance_, &n, pds.data());
    if (r != VK_SUCCESS && r != VK_INCOMPLETE) {
      reason_ = fmt::format("vkEnumeratePhysicalDevices failed: {}", result_name(r));
      return;
    }
    std::string skipped;
    for (auto pd : pds) {
      PhysicalDeviceInfo d;
      d.handle = pd;
      vkGetPhysicalDeviceProperties(pd, &d.props);
      vkGetPhysicalDeviceMemoryProperties(pd, &d.mem);
      if (d.props.apiVersion < VK_API_VERSION_1_2) {
        skipped += fmt::format("; {} supports only Vulkan {}.{}", d.props.deviceName, VK_VERSION_MAJOR(d.props.apiVersion),
                               VK_VERSION_MINOR(d.props.apiVersion));
        continue;
      }
      VkPhysicalDeviceVulkan12Features f12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
      VkPhysicalDeviceVulkan11Features f11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
      f12.pNext = &f11;
      VkPhysicalDeviceFeatures2 f2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
      f2.pNext = &f12;
      vkGetPhysicalDeviceFeatures2(pd, &f2);
      VkPhysicalDeviceSubgroupProperties sg{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
      VkPhysicalDeviceIDProperties idp{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES};
      VkPhysicalDeviceDriverProperties drv{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};
      sg.pNext = &idp;
      idp.pNext = &drv;
      VkPhysicalDeviceProperties2 p2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
      p2.pNext = &sg;
      vkGetPhysicalDeviceProperties2(pd, &p2);
      d.subgroup_size = sg.subgroupSize;
      d.fp16 = f12.shaderFloat16;
      d.int8 = f12.shaderInt8;
      d.storage16 = f11.storageBuffer16BitAccess;
      d.timeline = f12.timelineSemaphore;
      std::memcpy(d.uuid, idp.deviceUUID, 16);
      d.driver = fmt::format("{} {}", drv.driverName, drv.driverInfo);
      uint32_t qn = 0;
      vkGetPhysicalDeviceQueueFamilyProperties(pd, &qn, nullptr);
      std::vector<VkQueueFamilyProperties> qf(qn);
      vkGetPhysicalDeviceQueueFamilyProperties(pd, &qn, qf.data());
      bool found = false;
      for (uint32_t i = 0; i < qn && !found; ++i)
        if (qf[i].queueFlags & VK_QUEUE_COMPUTE_BIT) { d.queue_family = i; found = true; }
      if (found) {
        d.timestamp_bits = qf[d.queue_family].timestampValidBits;
        d.timestamp_period = d.props.limits.timestampPeriod;
      }
      if (!found || !d.timeline) {
        skipped += fmt::format("; {} has no {}", d.props.deviceName, found ? "timeline semaphores" : "compute queue");
        continue;
      }
      uint32_t en = 0;
      vkEnumerateDeviceExtensionProperties(pd, nullptr, &en, nullptr);
      std::vector<VkExtensionProperties> ep(en);
      vkEnumerateDeviceExtensionProperties(pd, nullptr, &en, ep.data());
      bool pci_bus_info = false;
      for (auto& e : ep) {
        if (std::strcmp(e.extensionName, VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME) == 0) d.push_descriptor = true;
        if (std::strcmp(e.extensionName, VK_EXT_PCI_BUS_INFO_EXTENSION_NAME) == 0) pci_bus_info = true;
        if (std::strcmp(e.extensionName, VK_EXT_MEMORY_BUDGET_EXTENSION_NAME) == 0) d.memory_budget = true;
        if (std::strcmp(e.extensionName, VK_EXT_EXTERNAL_MEMORY_HOST_EXTENSION_NAME) == 0) d.host_import_alignment = 1;
      }
      if (d.host_import_alignment) {
        VkPhysicalDeviceExternalMemoryHostPropertiesEXT hp{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_EXTERNAL_MEMORY_HOST_PROPERTIES_EXT};
        VkPhysicalDeviceProperties2 pp{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
        pp.pNext = &hp;
        vkGetPhysicalDeviceProperties2(pd, &pp);
        d.host_import_alignment = std::max<uint64_t>(hp.minImportedHostPointerAlignment, 1);
      }
      if (pci_bus_info) {
        VkPhysicalDevicePCIBusInfoPropertiesEXT pci{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PCI_BUS_INFO_PROPERTIES_EXT};
        VkPhysicalDeviceProperties2 pp{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
        pp.pNext = &pci;
        vkGetPhysicalDeviceProperties2(pd, &pp);
        d.pci_bus_id = fmt::format("{:04x}:{:02x}:{:02x}.{:x}", pci.pciDomain, pci.pciBus, pci.pciDevice, pci.pciFunction);
      }
      std::string heaps;
      for (uint32_t h = 0; h < d.mem.memoryHeapCount; ++h) {
        auto& hp = d.mem.memoryHeaps[h];
        if (hp.flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) d.device_local_bytes += hp.size;
        heaps += fmt::format("{}{}MiB{}", h ? "," : "", hp.size >> 20, (hp.flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) ? ":device_local" : "");
      }
      const char* types[] = {"other", "integrated_gpu", "discrete_gpu", "virtual_gpu", "cpu"};
      auto& L = d.props.limits;
      d.properties = {
          {"vulkan.device_type", types[std::min<int>(d.props.deviceType, 4)]},
          {"vulkan.api_version", fmt::format("{}.{}.{}", VK_VERSION_MAJOR(d.props.apiVersion), VK_VERSION_MINOR(d.props.apiVersion), VK_VERSION_PATCH(d.props.apiVersion))},
          {"vulkan.driver", d.driver},
          {"vulkan.memory_heaps", heaps},
          {"vulkan.subgroup_size", std::to_string(d.subgroup_size)},
          {"vulkan.shader_float16", d.fp16 ? "1" : "0"},
          {"vulkan.shader_int8", d.int8 ? "1" : "0"},
          {"vulkan.storage_buffer_16bit", d.storage16 ? "1" : "0"},
          {"vulkan.push_descriptor", d.push_descriptor ? "1" : "0"},
          {"vulkan.host_import_alignment", std::to_string(d.host_import_alignment)},
          {"vulkan.max_compute_shared_memory", std::to_string(L.maxComputeSharedMemorySize)},
          {"vulkan.max_storage_buffer_range", std::to_string(L.maxStorageBufferRange)},
          {"vulkan.max_push_constants", std::to_string(L.maxPushConstantsSize)},
          {"vulkan.max_workgroup_invocations", std::to_string(L.maxComputeWorkGroupInvocations)},
          {"vulkan.timestamp_valid_bits", std::to_string(d.timestamp_bits)},
          {"vulkan.timestamp_period_ns", fmt::format("{}", d.timestamp_period)},
          {"vulkan.kernel_dtypes", d.storage16 ? "float32; float16 (16-bit storage, float32 arithmetic) for every "
                                                 "float kernel; int32/int64 for data movement; Cast float32<->float16, "
                                                 "float32<->int32, int64<->int32"
                                               : "float32 (compute); int32/int64 for data movement; Cast "
                                                 "float32<->int32, int64<->int32"},
      };
      // What the compile choices and the fingerprint read (device_traits.hpp): an offline
      // session rebuilds the same traits from these properties.
      // kv, not [k, v]: clang 14 (the sanitizer builds) cannot capture a structured binding.
      for (auto& kv : DeviceTraits::from_device(d).properties()) {
        auto it = std::find_if(d.properties.begin(), d.properties.end(), [&](auto& e) { return e.first == kv.first; });
        if (it != d.properties.end()) it->second = kv.second;
        else d.properties.push_back(kv);
      }
      devices_.push_back(std::move(d));
    }
    if (devices_.empty())
      reason_ = pds.empty() ? "Vulkan instance created but no physical device is present (no usable ICD)"
                            : "no Vulkan device is usable" + skipped;
  } catch (const std::exception& e) {
    reason_ = std::string("Vulkan initialisation failed: ") + e.what();
  }
}

Instance::~Instance() {
  // Runs from the plugin's shutdown (never from a static destructor, which could race
  // with the loader's own teardown): every session, hence every VkDevice, is gone.
  if (messenger_ != VK_NULL_HANDLE && vkDestroyDebugUtilsMessengerEXT)
    vkDestroyDebugUtilsMessengerEXT(instance_, messenger_, nullptr);
  if (instance_ != VK_NULL_HANDLE) vkDestroyInstance(instance_, nullptr);
}

// ------------------------------------------------------------- memory

struct Block {
  VkDeviceMemory mem = VK_NULL_HANDLE;
  VkDeviceSize size = 0;      // usable bytes (what was asked for)
  VkDeviceSize reserved = 0;  // bytes held: the external allocator may return more
  bool external = false;      // from the caller's allocator: goes back through it
  nxrt_native_handle native{};
  uint32_t type = 0;
  char* mapped = nullptr;
  bool dedicated = false;
  std::map<VkDeviceSize, VkDeviceSize> free;  // offset -> size
};

static constexpr VkDeviceSize kBlockSize = 64ull << 20;
static constexpr VkDeviceSize kDedicated = 16ull << 20;

static VkDeviceSize align_up(VkDeviceSize v, VkDeviceSize a) { return (v + a - 1) / a * a; }

Device::Device(uint32_t index, std::string cache_path) : cache_path_(std::move(cache_path)) {
  auto& inst = Instance::get();
  if (index >= inst.devices().size()) fail(NXRT_NOT_FOUND, "no Vulkan device {}", index);
  info_ = &inst.devices()[index];
  instance_ = inst.handle();
  float prio = 1.0f;
  VkDeviceQueueCreateInfo qci{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
  qci.queueFamilyIndex = info_->queue_family;
  qci.queueCount = 1;
  qci.pQueuePriorities = &prio;
  VkPhysicalDeviceVulkan12Features f12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  f12.timelineSemaphore = VK_TRUE;
  // 16-bit storage for the float16 kernels (loads/stores only; arithmetic is float32).
  VkPhysicalDeviceVulkan11Features f11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
  f11.storageBuffer16BitAccess = info_->storage16 ? VK_TRUE : VK_FALSE;
  f12.pNext = &f11;
  VkDeviceCreateInfo dci{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
  dci.pNext = &f12;
  dci.queueCreateInfoCount = 1;
  dci.pQueueCreateInfos = &qci;
  const char* host_import_ext = VK_EXT_EXTERNAL_MEMORY_HOST_EXTENSION_NAME;
  if (info_->host_import_alignment) {
    dci.enabledExtensionCount = 1;
    dci.ppEnabledExtensionNames = &host_import_ext;
  }
  check_vk(vkCreateDevice(info_->handle, &dci, nullptr, &device_), "vkCreateDevice");
  if (info_->host_import_alignment)
    host_pointer_properties_ = reinterpret_cast<PFN_vkGetMemoryHostPointerPropertiesEXT>(
        vkGetDeviceProcAddr(device_, "vkGetMemoryHostPointerPropertiesEXT"));
  vkGetDeviceQueue(device_, info_->queue_family, 0, &queue_);

  // Memory types, from a probe buffer's requirements.
  VkBufferCreateInfo bci{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  bci.size = 256;
  bci.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  VkBuffer probe;
  check_vk(vkCreateBuffer(device_, &bci, nullptr, &probe), "vkCreateBuffer");
  VkMemoryRequirements req;
  vkGetBufferMemoryRequirements(device_, probe, &req);
  vkDestroyBuffer(device_, probe, nullptr);
  const auto DL = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, HV = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT,
             HC = VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  uint32_t t = find_type(req.memoryTypeBits, DL | HV | HC);
  // The host-visible fast path only where device-local memory is all host
  // visible (UMA, CPU devices); a small ReBAR window is not used for arenas.
  bool uma = t != UINT32_MAX && info_->mem.memoryHeaps[info_->mem.memoryTypes[t].heapIndex].size >= (info_->device_local_bytes * 9) / 10;
  if (uma) {
    device_type_ = t;
    device_type_host_visible_ = true;
  } else {
    device_type_ = find_type(req.memoryTypeBits, DL);
    if (device_type_ == UINT32_MAX) device_type_ = find_type(req.memoryTypeBits, 0);
  }
  pinned_type_ = find_type(req.memoryTypeBits, HV | HC | VK_MEMORY_PROPERTY_HOST_CACHED_BIT);
  if (pinned_type_ == UINT32_MAX) pinned_type_ = find_type(req.memoryTypeBits, HV | HC);
  if (device_type_ == UINT32_MAX || pinned_type_ == UINT32_MAX) fail(NXRT_UNSUPPORTED, "Vulkan device has no usable memory type");

  // Pipeline cache, optionally loaded from a file written by an earlier session.
  std::vector<char> blob;
  if (!cache_path_.empty()) {
    std::ifstream f(cache_path_, std::ios::binary);
    if (f) blob.assign(std::istreambuf_iterator<char>(f), {});
    // Our header: magic, vendor, device, driver version, pipelineCacheUUID.
    const size_t hdr = 8 + 12 + VK_UUID_SIZE;
    bool ok = blob.size() > hdr && std::memcmp(blob.data(), "NXVKPC01", 8) == 0;
    if (ok) {
      uint32_t ids[3];
      std::memcpy(ids, blob.data() + 8, 12);
      ok = ids[0] == info_->props.vendorID && ids[1] == info_->props.deviceID && ids[2] == info_->props.driverVersion &&
           std::memcmp(blob.data() + 20, info_->props.pipelineCacheUUID, VK_UUID_SIZE) == 0;
    }
    const size_t file_bytes = blob.size();
    blob = ok ? std::vector<char>(blob.begin() + hdr, blob.end()) : std::vector<char>{};
    cache_loaded_ = blob.size();
    // NXRT_VULKAN_STATS=1: what became of the file (tests check that a second session loads it).
    if (env_on("NXRT_VULKAN_STATS"))
      std::fprintf(stderr, "nxrt-vulkan stats: pipeline cache '%s': %s\n", cache_path_.c_str(),
                   ok ? fmt::format("loaded {} bytes", blob.size()).c_str()
                   : file_bytes ? "ignored (not a cache of this device and driver)"
                                : "no file yet (written at session end)");
  }
  VkPipelineCacheCreateInfo pci{VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO};
  pci.initialDataSize = blob.size();
  pci.pInitialData = blob.empty() ? nullptr : blob.data();
  check_vk(vkCreatePipelineCache(device_, &pci, nullptr, &cache_), "vkCreatePipelineCache");
}

Device::~Device() {
  if (device_ == VK_NULL_HANDLE) return;
  vkDeviceWaitIdle(device_);
  default_stream_.reset();
  try {
    save_pipeline_cache();
  } catch (...) {
  }
  for (auto& [k, p] : pipelines_) {
    vkDestroyPipeline(device_, p.pipeline, nullptr);
    vkDestroyPipelineLayout(device_, p.layout, nullptr);
  }
  for (auto& [n, l] : set_layouts_) vkDestroyDescriptorSetLayout(device_, l, nullptr);
  for (auto& [n, m] : modules_) vkDestroyShaderModule(device_, m, nullptr);
  vkDestroyPipelineCache(device_, cache_, nullptr);
  // Blocks leaked by callers that never freed their allocations still go back (to the
  // external allocator too) before the device they belong to is destroyed.
  for (auto& b : blocks_) release_block(b.get());
  blocks_.clear();
  vkDestroyDevice(device_, nullptr);
}

uint32_t Device::find_type(uint32_t bits, VkMemoryPropertyFlags want, VkMemoryPropertyFlags avoid) {
  for (uint32_t i = 0; i < info_->mem.memoryTypeCount; ++i) {
    auto f = info_->mem.memoryTypes[i].propertyFlags;
    if ((bits & (1u << i)) && (f & want) == want && !(f & avoid)) return i;
  }
  return UINT32_MAX;
}

// Called with mem_mu_ held.
Block* Device::new_block(uint32_t type, VkDeviceSize bytes, VkDeviceSize alignment, bool map) {
  auto b = std::make_unique<Block>();
  b->size = bytes;
  b->type = type;
  if (external_.active()) {
    b->native = external_.allocate(NXRT_NATIVE_VULKAN_MEMORY, bytes, alignment, handle_u64(device_), type);
    b->mem = handle_from_u64<VkDeviceMemory>(b->native.handle);
    b->external = true;
    b->reserved = b->native.size;
  } else {
    VkMemoryAllocateInfo ai{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
    ai.allocationSize = bytes;
    ai.memoryTypeIndex = type;
    check_vk(vkAllocateMemory(device_, &ai, nullptr, &b->mem), "vkAllocateMemory");
    b->reserved = bytes;
  }
  counters_.reserve(b->reserved);
  allocated_ = true;
  if (map) {
    void* p = nullptr;
    VkResult r = vkMapMemory(device_, b->mem, 0, VK_WHOLE_SIZE, 0, &p);
    if (r != VK_SUCCESS) {
      release_block(b.get());
      check_vk(r, "vkMapMemory");
    }
    b->mapped = static_cast<char*>(p);
  }
  b->free[0] = bytes;
  blocks_.push_back(std::move(b));
  return blocks_.back().get();
}

void Device::release_block(Block* b) {
  if (b->external) {
    // The caller may keep and hand the memory out again: it must come back unmapped.
    if (b->mapped) vkUnmapMemory(device_, b->mem);
    external_.release(b->native);
  } else {
    vkFreeMemory(device_, b->mem, nullptr);  // unmaps implicitly
  }
  b->mapped = nullptr;
  b->mem = VK_NULL_HANDLE;
  counters_.unreserve(b->reserved);
}

void Device::set_allocator(const nxrt_device_allocator& a) {
  std::lock_guard lock(mem_mu_);
  if (allocated_) fail(NXRT_INVALID_ARGUMENT, "set_allocator: the Vulkan device has already allocated memory");
  external_.set(a);
}

bool Device::is_device_alloc(const Alloc* a) {
  std::lock_guard lock(mem_mu_);
  return a && live_.count(a) && !a->pinned;
}

Alloc* Device::alloc(uint64_t bytes, bool pinned, uint64_t alignment) {
  uint64_t size = align_up(std::max<uint64_t>(bytes, 256), 256);
  VkBufferCreateInfo bci{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  bci.size = size;
  bci.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  static std::atomic<uint64_t> next_id{1};
  auto a = std::make_unique<Alloc>();
  a->id = next_id++;
  a->size = size;
  a->pinned = pinned;
  check_vk(vkCreateBuffer(device_, &bci, nullptr, &a->buffer), "vkCreateBuffer");
  VkMemoryRequirements req;
  vkGetBufferMemoryRequirements(device_, a->buffer, &req);
  if (pinned) req.alignment = std::max<VkDeviceSize>(req.alignment, std::max<uint64_t>(alignment, 256));
  uint32_t type = pinned ? pinned_type_ : device_type_;
  bool map = pinned || device_type_host_visible_;
  std::lock_guard lock(mem_mu_);
  try {
    Block* blk = nullptr;
    VkDeviceSize off = 0;
    if (req.size >= kDedicated) {
      blk = new_block(type, req.size, req.alignment, map);
      blk->dedicated = true;
      blk->free.clear();
    } else {
      for (auto& b : blocks_) {
        if (b->dedicated || b->type != type) continue;
        for (auto it = b->free.begin(); it != b->free.end(); ++it) {
          VkDeviceSize o = align_up(it->first, req.alignment);
          if (o + req.size <= it->first + it->second) {
            VkDeviceSize fo = it->first, fs = it->second;
            b->free.erase(it);
            if (o > fo) b->free[fo] = o - fo;
            if (o + req.size < fo + fs) b->free[o + req.size] = fo + fs - (o + req.size);
            blk = b.get();
            off = o;
            break;
          }
        }
        if (blk) break;
      }
      if (!blk) {
        blk = new_block(type, kBlockSize, req.alignment, map);
        blk->free.clear();
        if (req.size < kBlockSize) blk->free[req.size] = kBlockSize - req.size;
      }
    }
    a->block = blk;
    a->block_offset = off;
    a->block_size = req.size;
    check_vk(vkBindBufferMemory(device_, a->buffer, blk->mem, off), "vkBindBufferMemory");
    if (blk->mapped) a->mapped = blk->mapped + off;
  } catch (...) {
    vkDestroyBuffer(device_, a->buffer, nullptr);
    throw;
  }
  in_use_ += a->block_size;
  if (pinned) pinned_[uintptr_t(a->mapped)] = a.get();
  live_.insert(a.get());
  counters_.alloc(a->size);
  return a.release();
}

void Device::free(Alloc* a) {
  if (!a) return;
  if (a->imported) {
    {
      std::lock_guard lock(mem_mu_);
      live_.erase(a);
    }
    if (a->block) {  // host memory imported: our buffer and VkDeviceMemory over it go
      vkDestroyBuffer(device_, a->buffer, nullptr);
      vkFreeMemory(device_, a->block->mem, nullptr);
      delete a->block;
    }
    delete a;
    return;
  }
  vkDestroyBuffer(device_, a->buffer, nullptr);
  std::lock_guard lock(mem_mu_);
  if (a->pinned) pinned_.erase(uintptr_t(a->mapped));
  live_.erase(a);
  counters_.free(a->size);
  in_use_ -= a->block_size;
  Block* b = a->block;
  if (b->dedicated) {
    release_block(b);
    blocks_.erase(std::find_if(blocks_.begin(), blocks_.end(), [&](auto& p) { return p.get() == b; }));
  } else {
    VkDeviceSize o = a->block_offset, s = a->block_size;
    auto next = b->free.lower_bound(o);
    if (next != b->free.end() && next->first == o + s) {
      s += next->second;
      b->free.erase(next);
    }
    auto prev = b->free.lower_bound(o);
    if (prev != b->free.begin()) {
      --prev;
      if (prev->first + prev->second == o) {
        o = prev->first;
        s += prev->second;
        b->free.erase(prev);
      }
    }
    b->free[o] = s;
  }
  delete a;
}

Alloc* Device::import(const nxrt_native_handle& h) {
  static std::atomic<uint64_t> next_id{uint64_t(1) << 62};  // apart from alloc()'s ids
  auto a = std::make_unique<Alloc>();
  a->imported = true;
  a->id = next_id++;
  a->size = h.size;
  if (h.size == 0) fail(NXRT_INVALID_ARGUMENT, "memory_import: size 0");
  if (h.type == NXRT_NATIVE_VULKAN_BUFFER) {
    if (h.aux0 != handle_u64(device_))
      fail(NXRT_UNSUPPORTED, "memory_import: the VkBuffer belongs to VkDevice {:#x}, this session's is {:#x}", h.aux0,
           handle_u64(device_));
    if (h.value != 0)
      fail(NXRT_UNSUPPORTED, "memory_import: a VkBuffer is imported from offset 0 (got {}); give the offset with the tensor", h.value);
    if (!h.handle) fail(NXRT_INVALID_ARGUMENT, "memory_import: a null VkBuffer");
    a->buffer = reinterpret_cast<VkBuffer>(uintptr_t(h.handle));
  } else if (h.type == NXRT_NATIVE_HOST_POINTER) {
    const uint64_t align = info_->host_import_alignment;
    if (!align || !host_pointer_properties_)
      fail(NXRT_UNSUPPORTED, "memory_import: this Vulkan device has no VK_EXT_external_memory_host");
    if (!h.handle) fail(NXRT_INVALID_ARGUMENT, "memory_import: a NULL host pointer");
    if (h.handle % align || h.size % align)
      fail(NXRT_UNSUPPORTED, "memory_import: host memory at {:#x} of {} bytes is not aligned to the device's {} bytes",
           h.handle, h.size, align);
    void* ptr = reinterpret_cast<void*>(uintptr_t(h.handle));
    VkMemoryHostPointerPropertiesEXT props{VK_STRUCTURE_TYPE_MEMORY_HOST_POINTER_PROPERTIES_EXT};
    check_vk(host_pointer_properties_(device_, VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT, ptr, &props),
             "vkGetMemoryHostPointerPropertiesEXT");
    VkExternalMemoryBufferCreateInfo ext{VK_STRUCTURE_TYPE_EXTERNAL_MEMORY_BUFFER_CREATE_INFO};
    ext.handleTypes = VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT;
    VkBufferCreateInfo bci{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
    bci.pNext = &ext;
    bci.size = h.size;
    bci.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
    check_vk(vkCreateBuffer(device_, &bci, nullptr, &a->buffer), "vkCreateBuffer");
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(device_, a->buffer, &req);
    const uint32_t type = find_type(req.memoryTypeBits & props.memoryTypeBits, 0);
    auto blk = std::make_unique<Block>();
    VkImportMemoryHostPointerInfoEXT imp{VK_STRUCTURE_TYPE_IMPORT_MEMORY_HOST_POINTER_INFO_EXT};
    imp.handleType = VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT;
    imp.pHostPointer = ptr;
    VkMemoryAllocateInfo mai{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
    mai.pNext = &imp;
    mai.allocationSize = h.size;
    mai.memoryTypeIndex = type;
    VkResult r = type == UINT32_MAX ? VK_ERROR_FEATURE_NOT_PRESENT : vkAllocateMemory(device_, &mai, nullptr, &blk->mem);
    if (r == VK_SUCCESS) r = vkBindBufferMemory(device_, a->buffer, blk->mem, 0);
    if (r != VK_SUCCESS) {
      if (blk->mem) vkFreeMemory(device_, blk->mem, nullptr);
      vkDestroyBuffer(device_, a->buffer, nullptr);
      fail(NXRT_UNSUPPORTED, "memory_import: the device cannot use host memory at {:#x} ({} bytes): {}", h.handle, h.size,
           type == UINT32_MAX ? "no memory type fits both the buffer and the pointer" : result_name(r));
    }
    blk->size = blk->reserved = h.size;
    blk->type = type;
    blk->dedicated = true;
    a->block = blk.release();
    a->mapped = static_cast<char*>(ptr);  // the caller's bytes, as coherent as the memory type says
  } else {
    fail(NXRT_UNSUPPORTED, "memory_import: a Vulkan session imports VULKAN_BUFFER or HOST_POINTER memory (got native type {})", h.type);
  }
  std::lock_guard lock(mem_mu_);
  live_.insert(a.get());
  return a.release();
}

Alloc* Device::find_pinned(const void* p) {
  std::lock_guard lock(mem_mu_);
  auto it = pinned_.upper_bound(uintptr_t(p));
  if (it == pinned_.begin()) return nullptr;
  --it;
  if (uintptr_t(p) < it->first + it->second->size) return it->second;
  return nullptr;
}

// ------------------------------------------------------------- pipelines

std::span<const uint32_t> shader_spirv(Shader s);  // shaders.cpp
static const uint32_t kBindings[] = {2, 3, 2, 3, 2, 4, 2, 6, 2, 4, 4, 4, 2, 3, 2, 4, 2, 3, 4, 2, 6, 2, 4, 4, 2, 2, 2};
static_assert(std::size(kBindings) == size_t(Shader::count));

const Pipeline& Device::pipeline(Shader s, std::span<const uint32_t> spec) {
  std::lock_guard lock(pipe_mu_);
  auto key = std::make_pair(int(s), std::vector<uint32_t>(spec.begin(), spec.end()));
  auto it = pipelines_.find(key);
  if (it != pipelines_.end()) return it->second;
  auto& mod = modules_[int(s)];
  if (!mod) {
    auto code = shader_spirv(s);
    VkShaderModuleCreateInfo mci{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
    mci.codeSize = code.size() * 4;
    mci.pCode = code.data();
    check_vk(vkCreateShaderModule(device_, &mci, nullptr, &mod), "vkCreateShaderModule");
  }
  uint32_t nb = kBindings[int(s)];
  auto& sl = set_layouts_[nb];
  if (!sl) {
    std::vector<VkDescriptorSetLayoutBinding> b(nb);
    for (uint32_t i = 0; i < nb; ++i) b[i] = {i, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1, VK_SHADER_STAGE_COMPUTE_BIT, nullptr};
    VkDescriptorSetLayoutCreateInfo lci{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
    lci.bindingCount = nb;
    lci.pBindings = b.data();
    check_vk(vkCreateDescriptorSetLayout(device_, &lci, nullptr, &sl), "vkCreateDescriptorSetLayout");
  }
  Pipeline p;
  p.bindings = nb;
  p.set_layout = sl;
  VkPushConstantRange pcr{VK_SHADER_STAGE_COMPUTE_BIT, 0, 128};
  VkPipelineLayoutCreateInfo plci{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
  plci.setLayoutCount = 1;
  plci.pSetLayouts = &sl;
  plci.pushConstantRangeCount = 1;
  plci.pPushConstantRanges = &pcr;
  check_vk(vkCreatePipelineLayout(device_, &plci, nullptr, &p.layout), "vkCreatePipelineLayout");
  std::vector<VkSpecializationMapEntry> entries(spec.size());
  for (uint32_t i = 0; i < spec.size(); ++i) entries[i] = {i, i * 4, 4};
  VkSpecializationInfo si{uint32_t(entries.size()), entries.data(), spec.size() * 4, spec.data()};
  VkComputePipelineCreateInfo cci{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
  cci.stage = {VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO};
  cci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  cci.stage.module = mod;
  cci.stage.pName = "main";
  cci.stage.pSpecializationInfo = spec.empty() ? nullptr : &si;
  cci.layout = p.layout;
  VkResult r = vkCreateComputePipelines(device_, cache_, 1, &cci, nullptr, &p.pipeline);
  if (r != VK_SUCCESS) {
    vkDestroyPipelineLayout(device_, p.layout, nullptr);
    check_vk(r, "vkCreateComputePipelines");
  }
  return pipelines_.emplace(key, p).first->second;
}

std::vector<uint8_t> Device::pipeline_cache_data() {
  size_t n = 0;
  check_vk(vkGetPipelineCacheData(device_, cache_, &n, nullptr), "vkGetPipelineCacheData");
  std::vector<uint8_t> d(n);
  check_vk(vkGetPipelineCacheData(device_, cache_, &n, d.data()), "vkGetPipelineCacheData");
  d.resize(n);
  return d;
}

bool Device::merge_pipeline_cache(std::span<const uint8_t> bytes) {
  // VkPipelineCacheHeaderVersionOne: headerSize, headerVersion, vendorID, deviceID, UUID.
  if (bytes.size() < 16 + VK_UUID_SIZE) return false;
  uint32_t h[4];
  std::memcpy(h, bytes.data(), sizeof h);
  if (h[0] < 16 + VK_UUID_SIZE || h[0] > bytes.size() || h[1] != VK_PIPELINE_CACHE_HEADER_VERSION_ONE ||
      h[2] != info_->props.vendorID || h[3] != info_->props.deviceID ||
      std::memcmp(bytes.data() + 16, info_->props.pipelineCacheUUID, VK_UUID_SIZE) != 0)
    return false;
  VkPipelineCacheCreateInfo pci{VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO};
  pci.initialDataSize = bytes.size();
  pci.pInitialData = bytes.data();
  VkPipelineCache tmp = VK_NULL_HANDLE;
  if (vkCreatePipelineCache(device_, &pci, nullptr, &tmp) != VK_SUCCESS) return false;
  std::lock_guard lock(pipe_mu_);
  const bool ok = vkMergePipelineCaches(device_, cache_, 1, &tmp) == VK_SUCCESS;
  vkDestroyPipelineCache(device_, tmp, nullptr);
  return ok;
}

void Device::save_pipeline_cache() {
  if (cache_path_.empty()) return;
  auto data = pipeline_cache_data();
  std::string tmp = cache_path_ + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) fail(NXRT_INVALID_ARGUMENT, "cannot write pipeline cache '{}'", tmp);
    uint32_t ids[3] = {info_->props.vendorID, info_->props.deviceID, info_->props.driverVersion};
    f.write("NXVKPC01", 8);
    f.write(reinterpret_cast<const char*>(ids), 12);
    f.write(reinterpret_cast<const char*>(info_->props.pipelineCacheUUID), VK_UUID_SIZE);
    f.write(reinterpret_cast<const char*>(data.data()), std::streamsize(data.size()));
  }
  std::rename(tmp.c_str(), cache_path_.c_str());
}

// ------------------------------------------------------------- submission

void Device::submit(const VkSubmitInfo& info) {
  std::lock_guard lock(queue_mu_);
  check_vk(vkQueueSubmit(queue_, 1, &info, VK_NULL_HANDLE), "vkQueueSubmit");
}

void Device::queue_wait_idle() {
  std::lock_guard lock(queue_mu_);
  vkQueueWaitIdle(queue_);
}

Stream& Device::default_stream() {
  std::lock_guard lock(queue_mu_);
  if (!default_stream_) default_stream_ = std::make_unique<Stream>(*this);
  return *default_stream_;
}

void Device::run_now(const std::function<void(VkCommandBuffer)>& record) {
  Stream s(*this);
  VkCommandBuffer cmd = s.begin_transient();
  record(cmd);
  s.submit_transient(cmd);
  s.synchronize();
}

void full_barrier(VkCommandBuffer cmd) {
  VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  const auto st = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
  vkCmdPipelineBarrier(cmd, st, st, 0, 1, &mb, 0, nullptr, 0, nullptr);
}

void host_barrier(VkCommandBuffer cmd) {
  VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  mb.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
  vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1,
                       &mb, 0, nullptr, 0, nullptr);
}

Timeline::Timeline(Device* d) : dev(d) {
  VkSemaphoreTypeCreateInfo tci{VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO};
  tci.semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE;
  tci.initialValue = 0;
  VkSemaphoreCreateInfo sci{VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO};
  sci.pNext = &tci;
  check_vk(vkCreateSemaphore(dev->handle(), &sci, nullptr, &sem), "vkCreateSemaphore");
}
Timeline::~Timeline() {
  if (owned) vkDestroySemaphore(dev->handle(), sem, nullptr);
}
uint64_t Timeline::completed() const {
  uint64_t v = 0;
  check_vk(vkGetSemaphoreCounterValue(dev->handle(), sem, &v), "vkGetSemaphoreCounterValue");
  return v;
}
void Timeline::wait(uint64_t value) const {
  if (value == 0) return;
  VkSemaphoreWaitInfo wi{VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO};
  wi.semaphoreCount = 1;
  wi.pSemaphores = &sem;
  wi.pValues = &value;
  check_vk(vkWaitSemaphores(dev->handle(), &wi, UINT64_MAX), "vkWaitSemaphores");
}

Stream::Stream(Device& d) : dev_(d), timeline_(std::make_shared<Timeline>(&d)) { create_pool(); }

Stream::Stream(Device& d, VkSemaphore sem, uint64_t value)
    : dev_(d), timeline_(std::make_shared<Timeline>(&d, sem)), value_(value), start_(value) {
  create_pool();
}

void Stream::create_pool() {
  VkCommandPoolCreateInfo ci{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  ci.flags = VK_COMMAND_POOL_CREATE_TRANSIENT_BIT;
  ci.queueFamilyIndex = dev_.info().queue_family;
  check_vk(vkCreateCommandPool(dev_.handle(), &ci, nullptr, &pool_), "vkCreateCommandPool");
}

Stream::~Stream() {
  // Only our own submissions are waited for: an imported stream that submitted nothing
  // must not block on the caller's work (which may wait on something the caller signals
  // only later).
  if (value_ > start_) {
    try {
      timeline_->wait(value_);
    } catch (...) {
    }
    dev_.queue_wait_idle();
  }
  for (auto& p : pending_)
    if (p.cmd) vkFreeCommandBuffers(dev_.handle(), pool_, 1, &p.cmd);
  pending_.clear();
  vkDestroyCommandPool(dev_.handle(), pool_, nullptr);
}

uint64_t Stream::submit(VkCommandBuffer cmd, std::shared_ptr<void> keep) {
  std::vector<VkSemaphore> wsem;
  std::vector<uint64_t> wval;
  std::vector<VkPipelineStageFlags> wstage;
  if (value_ > 0) {
    wsem.push_back(timeline_->sem);
    wval.push_back(value_);
  }
  for (auto& [t, v] : waits_) {
    wsem.push_back(t->sem);
    wval.push_back(v);
  }
  wstage.assign(wsem.size(), VK_PIPELINE_STAGE_ALL_COMMANDS_BIT);
  uint64_t signal = value_ + 1;
  VkTimelineSemaphoreSubmitInfo ti{VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO};
  ti.waitSemaphoreValueCount = uint32_t(wval.size());
  ti.pWaitSemaphoreValues = wval.data();
  ti.signalSemaphoreValueCount = 1;
  ti.pSignalSemaphoreValues = &signal;
  VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  si.pNext = &ti;
  si.waitSemaphoreCount = uint32_t(wsem.size());
  si.pWaitSemaphores = wsem.data();
  si.pWaitDstStageMask = wstage.data();
  si.commandBufferCount = cmd ? 1 : 0;
  si.pCommandBuffers = &cmd;
  si.signalSemaphoreCount = 1;
  si.pSignalSemaphores = &timeline_->sem;
  dev_.submit(si);
  value_ = signal;
  // Keep the waited-on timelines alive until this submission completes.
  if (!waits_.empty() || keep) {
    auto hold = std::make_shared<std::pair<std::shared_ptr<void>, decltype(waits_)>>(std::move(keep), std::move(waits_));
    pending_.push_back({value_, VK_NULL_HANDLE, hold});
  }
  waits_.clear();
  retire();
  return value_;
}

VkCommandBuffer Stream::begin_transient() {
  VkCommandBufferAllocateInfo ai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  ai.commandPool = pool_;
  ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  ai.commandBufferCount = 1;
  VkCommandBuffer cmd;
  check_vk(vkAllocateCommandBuffers(dev_.handle(), &ai, &cmd), "vkAllocateCommandBuffers");
  VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  vkBeginCommandBuffer(cmd, &bi);
  return cmd;
}

uint64_t Stream::submit_transient(VkCommandBuffer cmd, std::shared_ptr<void> keep) {
  host_barrier(cmd);
  check_vk(vkEndCommandBuffer(cmd), "vkEndCommandBuffer");
  uint64_t v = submit(cmd, std::move(keep));
  pending_.push_back({v, cmd, nullptr});
  return v;
}

void Stream::retire() {
  if (pending_.empty()) return;
  uint64_t done = timeline_->completed();
  auto it = std::remove_if(pending_.begin(), pending_.end(), [&](Pending& p) {
    if (p.value > done) return false;
    if (p.cmd) vkFreeCommandBuffers(dev_.handle(), pool_, 1, &p.cmd);
    return true;
  });
  pending_.erase(it, pending_.end());
}

void Stream::synchronize() {
  if (!waits_.empty()) submit(VK_NULL_HANDLE);
  timeline_->wait(value_);
  retire();
}

void Stream::wait_for(std::shared_ptr<Timeline> t, uint64_t value) {
  if (value == 0 || t == timeline_) return;
  waits_.emplace_back(std::move(t), value);
}

std::pair<std::shared_ptr<Timeline>, uint64_t> Stream::mark() {
  if (!waits_.empty()) submit(VK_NULL_HANDLE);
  return {timeline_, value_};
}

// ------------------------------------------------------------- interop

nxrt_native_handle native_handle(Device& d, nxrt_native_object what, const void* memory, Stream* stream) {
  nxrt_native_handle h{};
  h.struct_size = sizeof h;
  switch (what) {
    case NXRT_NATIVE_OBJECT_DEVICE:
      h.type = NXRT_NATIVE_VULKAN_DEVICE;
      h.handle = handle_u64(d.handle());
      h.aux0 = handle_u64(d.info().handle);
      h.aux1 = handle_u64(d.instance());
      h.value = d.info().queue_family;
      return h;
    case NXRT_NATIVE_OBJECT_QUEUE:
      h.type = NXRT_NATIVE_VULKAN_QUEUE;
      h.handle = handle_u64(d.queue());
      h.value = d.info().queue_family;
      return h;
    case NXRT_NATIVE_OBJECT_MEMORY: {
      auto* a = static_cast<const Alloc*>(memory);
      if (!d.is_device_alloc(a))
        fail(NXRT_INVALID_ARGUMENT, "native_handle: {} is not a DEVICE allocation of this Vulkan session", memory);
      // Every Alloc has a VkBuffer of its own, bound at its place in the block: offset 0.
      h.type = NXRT_NATIVE_VULKAN_BUFFER;
      h.handle = handle_u64(a->buffer);
      h.aux0 = handle_u64(d.handle());
      h.value = 0;
      h.size = a->size;
      return h;
    }
    case NXRT_NATIVE_OBJECT_STREAM: {
      if (!stream) fail(NXRT_INVALID_ARGUMENT, "native_handle: NULL stream");
      auto [timeline, value] = stream->mark();
      h.type = NXRT_NATIVE_VULKAN_TIMELINE;
      h.handle = handle_u64(timeline->sem);
      h.value = value;
      return h;
    }
    default:
      fail(NXRT_UNSUPPORTED, "the Vulkan plugin has no native handle for object kind {}", what);
  }
}

std::unique_ptr<Stream> import_stream(Device& d, const nxrt_native_handle& h) {
  if (h.type != NXRT_NATIVE_VULKAN_TIMELINE)
    fail(NXRT_INVALID_ARGUMENT, "stream_import: the Vulkan plugin imports NXRT_NATIVE_VULKAN_TIMELINE ({}) handles, not type {}",
         int(NXRT_NATIVE_VULKAN_TIMELINE), h.type);
  if (h.handle == 0) fail(NXRT_INVALID_ARGUMENT, "stream_import: the timeline semaphore handle is 0 (VK_NULL_HANDLE)");
  return std::make_unique<Stream>(d, handle_from_u64<VkSemaphore>(h.handle), h.value);
}

// ------------------------------------------------------------- transfers

void copy(Device& d, std::span<const CopyOp> ops, Stream* stream) {
  // Resolve host pointers that live in our pinned memory to their allocation.
  std::vector<CopyOp> gpu;
  struct Readback { char* dst; Alloc* staging; uint64_t off; uint64_t bytes; };
  std::vector<Readback> readbacks;
  auto free_staging = [&d](std::vector<Alloc*>* v) {
    for (Alloc* a : *v) d.free(a);
    delete v;
  };
  std::shared_ptr<std::vector<Alloc*>> keep(new std::vector<Alloc*>, free_staging);
  const bool idle = !stream || stream->idle();
  bool synced = idle;
  auto ensure_synced = [&] {
    if (!synced && stream) stream->synchronize();
    synced = true;
  };
  for (CopyOp op : ops) {
    if (op.bytes == 0) continue;
    for (Endpoint* e : {&op.src, &op.dst}) {
      if (!e->alloc) {
        if (!e->host) fail(NXRT_INVALID_ARGUMENT, "copy region with a null buffer");
        if (Alloc* p = d.find_pinned(e->host)) {
          e->offset += uint64_t(e->host - p->mapped);
          e->alloc = p;
          e->host = nullptr;
        }
      } else if (e->offset + op.bytes > e->alloc->size) {
        fail(NXRT_INVALID_ARGUMENT, "copy of {} bytes at offset {} overruns an allocation of {} bytes", op.bytes, e->offset, e->alloc->size);
      }
    }
    auto host_ptr = [](const Endpoint& e) -> char* {
      if (!e.alloc) return e.host + e.offset;
      return e.alloc->mapped ? e.alloc->mapped + e.offset : nullptr;
    };
    char* s = host_ptr(op.src);
    char* t = host_ptr(op.dst);
    // Fast path: both ends host-addressable and nothing queued that could touch them.
    if (s && t && (synced || (!op.dst.alloc))) {
      if (op.src.alloc) ensure_synced();
      std::memmove(t, s, op.bytes);
      continue;
    }
    CopyOp g = op;
    if (!op.src.alloc) {  // host source: stage now
      Alloc* st = d.alloc(op.bytes, true);
      keep->push_back(st);
      std::memcpy(st->mapped, s, op.bytes);
      g.src = {st, nullptr, 0};
    }
    if (!op.dst.alloc) {  // host destination: read back after completion
      Alloc* st = d.alloc(op.bytes, true);
      keep->push_back(st);
      readbacks.push_back({op.dst.host + op.dst.offset, st, 0, op.bytes});
      g.dst = {st, nullptr, 0};
    }
    gpu.push_back(g);
  }
  if (gpu.empty()) return;
  std::unique_lock<std::mutex> shared;
  if (!stream) shared = d.default_stream_lock();
  Stream& s = stream ? *stream : d.default_stream();
  VkCommandBuffer cmd = s.begin_transient();
  for (auto& g : gpu) {
    VkBufferCopy r{g.src.offset, g.dst.offset, g.bytes};
    vkCmdCopyBuffer(cmd, g.src.alloc->buffer, g.dst.alloc->buffer, 1, &r);
  }
  s.submit_transient(cmd, keep);
  if (!stream || !readbacks.empty()) {
    s.synchronize();
    for (auto& r : readbacks) std::memcpy(r.dst, r.staging->mapped + r.off, r.bytes);
  }
}

void copy_regions(Device& d, std::span<const nxrt_copy_region> regions, Stream* stream) {
  std::vector<CopyOp> ops;
  auto ep = [](nxrt_memory_kind k, const void* p, uint64_t off) {
    if (!p) fail(NXRT_INVALID_ARGUMENT, "copy region with a null buffer");
    Endpoint e;
    if (k == NXRT_MEMORY_DEVICE) e.alloc = static_cast<Alloc*>(const_cast<void*>(p));
    else e.host = static_cast<char*>(const_cast<void*>(p));
    e.offset = off;
    return e;
  };
  for (auto& r : regions) {
    if (r.bytes == 0) continue;
    ops.push_back({ep(r.src_memory, r.src, r.src_offset), ep(r.dst_memory, r.dst, r.dst_offset), r.bytes});
  }
  copy(d, ops, stream);
  // Counted once performed (or ordered on the stream), by the kinds the host named:
  // a pinned pointer is host memory even though its bytes move as a device buffer.
  for (auto& r : regions)
    if (r.bytes) d.counters().copied(r.src_memory, r.dst_memory, r.bytes);
}

void copy_between(Device& src, Device& dst, std::span<const nxrt_copy_region> regions, Stream* dst_stream) {
  if (&src == &dst) {
    copy_regions(dst, regions, dst_stream);
    return;
  }
  for (const auto& r : regions) {
    if (r.bytes == 0) continue;
    auto* from = static_cast<Alloc*>(const_cast<void*>(r.src));
    auto* to = static_cast<Alloc*>(r.dst);
    if (!from || !to) fail(NXRT_INVALID_ARGUMENT, "peer copy region with a null buffer");
    if (!src.is_device_alloc(from) || !dst.is_device_alloc(to))
      fail(NXRT_INVALID_ARGUMENT, "peer copy region names an allocation of neither session");
    if (r.src_offset + r.bytes > from->size || r.dst_offset + r.bytes > to->size)
      fail(NXRT_INVALID_ARGUMENT, "peer copy of {} bytes overruns an allocation", r.bytes);
    if (from->mapped && to->mapped) {
      // Work queued on dst may still touch the destination: wait for it first.
      if (dst_stream && !dst_stream->idle()) dst_stream->synchronize();
      std::memcpy(to->mapped + r.dst_offset, from->mapped + r.src_offset, r.bytes);
    } else {
      std::vector<char> bounce(r.bytes);
      const CopyOp down{{from, nullptr, r.src_offset}, {nullptr, bounce.data(), 0}, r.bytes};
      copy(src, std::span<const CopyOp>(&down, 1), nullptr);
      const CopyOp up{{nullptr, bounce.data(), 0}, {to, nullptr, r.dst_offset}, r.bytes};
      copy(dst, std::span<const CopyOp>(&up, 1), dst_stream);  // host sources are staged at once
    }
    dst.counters().copied(NXRT_MEMORY_DEVICE, NXRT_MEMORY_DEVICE, r.bytes);
  }
}

}  // namespace nxrt::vk
