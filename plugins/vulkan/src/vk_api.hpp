// Vulkan entry points loaded at run time (dlopen of libvulkan.so.1), so the
// plugin loads and reports "no device" with a reason on machines without a
// Vulkan loader or driver.
#pragma once
#define VK_NO_PROTOTYPES
#include <vulkan/vulkan.h>

#include <string>

namespace nxrt::vk {

#define NXRT_VK_GLOBAL_FNS(X) \
  X(vkCreateInstance)         \
  X(vkEnumerateInstanceExtensionProperties) \
  X(vkEnumerateInstanceLayerProperties) \
  X(vkEnumerateInstanceVersion)

#define NXRT_VK_INSTANCE_FNS(X)                  \
  X(vkDestroyInstance)                           \
  X(vkEnumeratePhysicalDevices)                  \
  X(vkGetPhysicalDeviceProperties)               \
  X(vkGetPhysicalDeviceProperties2)              \
  X(vkGetPhysicalDeviceFeatures2)                \
  X(vkGetPhysicalDeviceMemoryProperties)         \
  X(vkGetPhysicalDeviceMemoryProperties2)        \
  X(vkGetPhysicalDeviceQueueFamilyProperties)    \
  X(vkEnumerateDeviceExtensionProperties)        \
  X(vkCreateDevice)                              \
  X(vkGetDeviceProcAddr)

#define NXRT_VK_DEVICE_FNS(X)            \
  X(vkDestroyDevice)                     \
  X(vkGetDeviceQueue)                    \
  X(vkDeviceWaitIdle)                    \
  X(vkQueueWaitIdle)                     \
  X(vkQueueSubmit)                       \
  X(vkCreateBuffer)                      \
  X(vkDestroyBuffer)                     \
  X(vkGetBufferMemoryRequirements)       \
  X(vkAllocateMemory)                    \
  X(vkFreeMemory)                        \
  X(vkBindBufferMemory)                  \
  X(vkMapMemory)                         \
  X(vkUnmapMemory)                       \
  X(vkCreateShaderModule)                \
  X(vkDestroyShaderModule)               \
  X(vkCreateDescriptorSetLayout)         \
  X(vkDestroyDescriptorSetLayout)        \
  X(vkCreatePipelineLayout)              \
  X(vkDestroyPipelineLayout)             \
  X(vkCreateComputePipelines)            \
  X(vkDestroyPipeline)                   \
  X(vkCreatePipelineCache)               \
  X(vkDestroyPipelineCache)              \
  X(vkGetPipelineCacheData)              \
  X(vkMergePipelineCaches)               \
  X(vkCreateDescriptorPool)              \
  X(vkDestroyDescriptorPool)             \
  X(vkResetDescriptorPool)               \
  X(vkAllocateDescriptorSets)            \
  X(vkUpdateDescriptorSets)              \
  X(vkCreateCommandPool)                 \
  X(vkDestroyCommandPool)                \
  X(vkAllocateCommandBuffers)            \
  X(vkFreeCommandBuffers)                \
  X(vkBeginCommandBuffer)                \
  X(vkEndCommandBuffer)                  \
  X(vkResetCommandBuffer)                \
  X(vkCmdBindPipeline)                   \
  X(vkCmdBindDescriptorSets)             \
  X(vkCmdPushConstants)                  \
  X(vkCmdDispatch)                       \
  X(vkCmdCopyBuffer)                     \
  X(vkCmdUpdateBuffer)                   \
  X(vkCmdFillBuffer)                     \
  X(vkCmdPipelineBarrier)                \
  X(vkCreateSemaphore)                   \
  X(vkDestroySemaphore)                  \
  X(vkWaitSemaphores)                    \
  X(vkGetSemaphoreCounterValue)          \
  X(vkSignalSemaphore)                   \
  X(vkCreateQueryPool)                   \
  X(vkDestroyQueryPool)                  \
  X(vkCmdResetQueryPool)                 \
  X(vkCmdWriteTimestamp)                 \
  X(vkGetQueryPoolResults)

#define NXRT_VK_DECL(name) extern PFN_##name name;
NXRT_VK_GLOBAL_FNS(NXRT_VK_DECL)
NXRT_VK_INSTANCE_FNS(NXRT_VK_DECL)
NXRT_VK_DEVICE_FNS(NXRT_VK_DECL)
extern PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr;
extern PFN_vkCreateDebugUtilsMessengerEXT vkCreateDebugUtilsMessengerEXT;
extern PFN_vkDestroyDebugUtilsMessengerEXT vkDestroyDebugUtilsMessengerEXT;
#undef NXRT_VK_DECL

// Loads libvulkan and the global entry points; false with `why` set on failure.
bool load_loader(std::string& why);
void load_instance_fns(VkInstance instance);
const char* result_name(VkResult r);

}  // namespace nxrt::vk
