/* Test plugin from the future: it speaks only nxrt EP ABI major 3, so a 2.x host
 * must refuse it at load, with a message naming both majors (3 and the host's).
 * It fills only the frozen prefix of the reply (struct_size..message), which is
 * all a plugin of another major may rely on. */
#include <nxrt_ep.h>

#include <stdio.h>

#define NEWMAJOR_ABI_MAJOR 3u

NXRT_EP_EXPORT int32_t nxrt_ep_negotiate(const nxrt_negotiate_request* rq, nxrt_negotiate_reply* rp) {
  if (!rp) return NXRT_INVALID_ARGUMENT;
  if (!rq) {
    snprintf(rp->message, sizeof rp->message, "no negotiation request");
    return NXRT_INVALID_ARGUMENT;
  }
  if (rq->abi_major != NEWMAJOR_ABI_MAJOR) {
    rp->abi_major = NEWMAJOR_ABI_MAJOR; /* frozen prefix: tells the host our major */
    rp->abi_minor = 0;
    snprintf(rp->message, sizeof rp->message,
             "this plugin speaks nxrt EP ABI 3.x only; the host offers ABI %u.%u", rq->abi_major, rq->abi_minor);
    return NXRT_VERSION_MISMATCH;
  }
  /* A major-3 host would get a major-3 answer here; this test plugin never meets one. */
  snprintf(rp->message, sizeof rp->message, "test plugin: ABI 3.x is not implemented");
  return NXRT_UNSUPPORTED;
}
