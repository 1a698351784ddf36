/*
 * Native interop types of the nxrt EP ABI (2.1, import 2.2, strings 2.3):
 * handles of the device API behind an EP session (a VkDevice, a VkBuffer, a
 * timeline semaphore, a CUDA stream...), the external device-memory allocator a
 * caller may hand to a session, and the element of a string tensor. Pure C11,
 * no state. Shared by the plugin ABI (nxrt_ep.h) and the embedding API (nxrt.h), so the caller of a session and the plugin behind it
 * speak the same words. Struct rule as in nxrt_ep.h: struct_size first.
 */
#ifndef NXRT_NATIVE_H
#define NXRT_NATIVE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* 2.3: one element of a STRING tensor. String tensors live only in host memory
 * (NXRT_MEMORY_HOST), as dense row-major arrays of these, so a string element has
 * a fixed size (nxrt_dtype_size) and the host plans, slices and moves string
 * tensors like any other. `data` points at `size` bytes (UTF-8, not
 * NUL-terminated, may contain NUL; NULL when size is 0) owned by the host. Every
 * string a kernel is handed stays valid until the run ends, so a kernel may copy
 * nxrt_string elements from its inputs to its outputs (Gather, Concat, Identity);
 * new text goes through host->ctx_output_string_set. Only sessions of plugins
 * that declare NXRT_FEATURE_STRING_TENSORS ever see a string tensor. */
typedef struct nxrt_string {
  const char* data;
  uint64_t size;
} nxrt_string;

/* What a native handle is. Handles travel as 64-bit integers: Vulkan's
 * non-dispatchable handles are 64 bits on every data model, pointers are
 * converted through uintptr_t. */
typedef uint32_t nxrt_native_type;
enum {
  NXRT_NATIVE_NONE = 0,
  /* handle: a host pointer; size: bytes. */
  NXRT_NATIVE_HOST_POINTER = 1,
  /* handle: VkDevice; aux0: its VkPhysicalDevice; aux1: its VkInstance;
   * value: the queue family index of the queue the plugin submits to. */
  NXRT_NATIVE_VULKAN_DEVICE = 2,
  /* handle: VkQueue; value: its family index. Vulkan queues are externally
   * synchronised: submit to it only while no nxrt call on the session runs. */
  NXRT_NATIVE_VULKAN_QUEUE = 3,
  /* handle: VkBuffer; value: byte offset of the allocation inside the buffer;
   * size: the allocation's bytes; aux0: the VkDevice it belongs to (2.2; a
   * 2.1 plugin may leave it 0). */
  NXRT_NATIVE_VULKAN_BUFFER = 4,
  /* handle: a timeline VkSemaphore; value: a point on it. As a stream's handle:
   * the point at which all work queued on the stream so far is complete. */
  NXRT_NATIVE_VULKAN_TIMELINE = 5,
  /* handle: VkDeviceMemory; value: its memory type index; size: bytes. */
  NXRT_NATIVE_VULKAN_MEMORY = 6,
  /* value: CUDA device ordinal. */
  NXRT_NATIVE_CUDA_DEVICE = 16,
  /* handle: cudaStream_t. */
  NXRT_NATIVE_CUDA_STREAM = 17,
  /* handle: a device pointer; size: bytes. */
  NXRT_NATIVE_CUDA_POINTER = 18,
  /* handle: cudaEvent_t. */
  NXRT_NATIVE_CUDA_EVENT = 19
};

/* Which object of an EP session a native handle describes (nxrt_ep.h native_handle,
 * nxrt.h nxrt_session_native_handle). */
typedef uint32_t nxrt_native_object;
enum {
  NXRT_NATIVE_OBJECT_DEVICE = 0, /* object NULL: the session's device (VULKAN_DEVICE, CUDA_DEVICE) */
  NXRT_NATIVE_OBJECT_QUEUE = 1,  /* object NULL: the queue the session submits to (VULKAN_QUEUE) */
  NXRT_NATIVE_OBJECT_MEMORY = 2, /* object: a DEVICE handle from memory_alloc (VULKAN_BUFFER, CUDA_POINTER, HOST_POINTER) */
  NXRT_NATIVE_OBJECT_STREAM = 3  /* object: an nxrt_stream* of the session; its completion point
                                    (VULKAN_TIMELINE, CUDA_STREAM) */
};

typedef struct nxrt_native_handle {
  uint32_t struct_size;
  nxrt_native_type type;
  uint64_t handle;
  uint64_t aux0;
  uint64_t aux1;
  uint64_t value;
  uint64_t size;
} nxrt_native_handle;

/* One request to an external allocator. */
typedef struct nxrt_allocation_request {
  uint32_t struct_size;
  nxrt_native_type type;      /* what to return: HOST_POINTER, VULKAN_MEMORY or CUDA_POINTER */
  uint64_t bytes;
  uint64_t alignment;         /* a power of two */
  uint64_t device;            /* VkDevice for VULKAN_MEMORY (allocate on it), CUDA ordinal, else 0 */
  uint32_t memory_type_index; /* VULKAN_MEMORY: the memory type to allocate from */
  uint32_t reserved0;         /* 0 */
} nxrt_allocation_request;

/* Device memory from the caller. Every backing allocation a session makes
 * for device and pinned memory goes through it while it is set (plugins may
 * sub-allocate inside what it returns). Both callbacks are [any-thread] and
 * must not call back into nxrt. The allocator must outlive the session. */
typedef struct nxrt_device_allocator {
  uint32_t struct_size;
  uint32_t reserved0; /* 0 */
  void* user;
  /* Returns 0 and fills `out` (the requested type, a handle, size >= bytes), or
   * nonzero when it cannot (the plugin then fails with NXRT_OUT_OF_MEMORY). */
  int32_t (*alloc)(void* user, const nxrt_allocation_request* request, nxrt_native_handle* out);
  /* Frees what alloc returned (the same handle struct's contents). */
  void (*free)(void* user, const nxrt_native_handle* allocation);
} nxrt_device_allocator;

/* Memory and transfer counters of one EP session, cumulative since it was
 * created except the in-use and reserved figures. */
typedef struct nxrt_memory_stats {
  uint32_t struct_size;
  uint32_t reserved0;
  uint64_t bytes_in_use;      /* allocated and not yet freed (memory_alloc and the plugin's own) */
  uint64_t peak_bytes_in_use;
  uint64_t reserved_bytes;    /* backing memory held from the driver or the external allocator */
  uint64_t allocation_count;  /* allocations made so far */
  uint64_t host_to_device_copies; /* copy regions performed, by direction */
  uint64_t device_to_host_copies;
  uint64_t device_to_device_copies;
  uint64_t host_to_device_bytes;
  uint64_t device_to_host_bytes;
  uint64_t device_to_device_bytes;
} nxrt_memory_stats;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* NXRT_NATIVE_H */
