/* Test plugin: speaks only a future ABI major, so negotiation must fail cleanly. */
#include <nxrt_ep.h>

#include <stdio.h>

NXRT_EP_EXPORT int32_t nxrt_ep_negotiate(const nxrt_negotiate_request* rq, nxrt_negotiate_reply* rp) {
  snprintf(rp->message, sizeof rp->message, "this plugin needs nxrt EP ABI 2.x, host offers %u.%u", rq->abi_major, rq->abi_minor);
  return NXRT_VERSION_MISMATCH;
}
