#include "vk_api.hpp"

#include <dlfcn.h>

#include <cstdlib>

namespace nxrt::vk {

#define NXRT_VK_DEF(name) PFN_##name name = nullptr;
NXRT_VK_GLOBAL_FNS(NXRT_VK_DEF)
NXRT_VK_INSTANCE_FNS(NXRT_VK_DEF)
NXRT_VK_DEVICE_FNS(NXRT_VK_DEF)
#undef NXRT_VK_DEF
PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr = nullptr;
PFN_vkCreateDebugUtilsMessengerEXT vkCreateDebugUtilsMessengerEXT = nullptr;
PFN_vkDestroyDebugUtilsMessengerEXT vkDestroyDebugUtilsMessengerEXT = nullptr;

bool load_loader(std::string& why) {
  static void* lib = nullptr;
  if (!lib) {
    const char* env = std::getenv("NXRT_VULKAN_LOADER");  // test hook: point at a missing library
    const char* names[] = {env ? env : "libvulkan.so.1", env ? nullptr : "libvulkan.so"};
    for (const char* n : names) {
      if (!n) continue;
      lib = dlopen(n, RTLD_NOW | RTLD_LOCAL);
      if (lib) break;
    }
    if (!lib) {
      const char* e = dlerror();
      why = std::string("Vulkan loader not found (dlopen libvulkan.so.1 failed: ") + (e ? e : "unknown") + ")";
      return false;
    }
  }
  vkGetInstanceProcAddr = reinterpret_cast<PFN_vkGetInstanceProcAddr>(dlsym(lib, "vkGetInstanceProcAddr"));
  if (!vkGetInstanceProcAddr) {
    why = "Vulkan loader has no vkGetInstanceProcAddr";
    return false;
  }
#define NXRT_VK_LOAD(name) name = reinterpret_cast<PFN_##name>(vkGetInstanceProcAddr(nullptr, #name));
  NXRT_VK_GLOBAL_FNS(NXRT_VK_LOAD)
#undef NXRT_VK_LOAD
  if (!vkCreateInstance) {
    why = "Vulkan loader does not provide vkCreateInstance";
    return false;
  }
  return true;
}

void load_instance_fns(VkInstance instance) {
#define NXRT_VK_LOAD(name) name = reinterpret_cast<PFN_##name>(vkGetInstanceProcAddr(instance, #name));
  NXRT_VK_INSTANCE_FNS(NXRT_VK_LOAD)
  NXRT_VK_DEVICE_FNS(NXRT_VK_LOAD)
  NXRT_VK_LOAD(vkCreateDebugUtilsMessengerEXT)
  NXRT_VK_LOAD(vkDestroyDebugUtilsMessengerEXT)
#undef NXRT_VK_LOAD
}

const char* result_name(VkResult r) {
  switch (r) {
    case VK_SUCCESS: return "VK_SUCCESS";
    case VK_NOT_READY: return "VK_NOT_READY";
    case VK_TIMEOUT: return "VK_TIMEOUT";
    case VK_INCOMPLETE: return "VK_INCOMPLETE";
    case VK_ERROR_OUT_OF_HOST_MEMORY: return "VK_ERROR_OUT_OF_HOST_MEMORY";
    case VK_ERROR_OUT_OF_DEVICE_MEMORY: return "VK_ERROR_OUT_OF_DEVICE_MEMORY";
    case VK_ERROR_INITIALIZATION_FAILED: return "VK_ERROR_INITIALIZATION_FAILED";
    case VK_ERROR_DEVICE_LOST: return "VK_ERROR_DEVICE_LOST";
    case VK_ERROR_LAYER_NOT_PRESENT: return "VK_ERROR_LAYER_NOT_PRESENT";
    case VK_ERROR_EXTENSION_NOT_PRESENT: return "VK_ERROR_EXTENSION_NOT_PRESENT";
    case VK_ERROR_FEATURE_NOT_PRESENT: return "VK_ERROR_FEATURE_NOT_PRESENT";
    case VK_ERROR_INCOMPATIBLE_DRIVER: return "VK_ERROR_INCOMPATIBLE_DRIVER";
    case VK_ERROR_TOO_MANY_OBJECTS: return "VK_ERROR_TOO_MANY_OBJECTS";
    case VK_ERROR_OUT_OF_POOL_MEMORY: return "VK_ERROR_OUT_OF_POOL_MEMORY";
    default: return "VkResult(other)";
  }
}

}  // namespace nxrt::vk
