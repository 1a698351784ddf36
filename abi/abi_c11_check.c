/* Compiles the ABI header as strict C11 (see CMakeLists.txt); the frozen
 * negotiation prefixes, which no major may move, are pinned here. */
#include "nxrt_dtype.h"
#include "nxrt_ep.h"

_Static_assert(sizeof(int32_t) == 4, "int32_t");
_Static_assert(offsetof(nxrt_negotiate_reply, message) == 12, "frozen reply prefix moved");
_Static_assert(offsetof(nxrt_negotiate_request, abi_minor) == 8, "frozen request prefix moved");
_Static_assert(offsetof(nxrt_negotiate_request, host) == (sizeof(void*) == 8 ? 16 : 12), "frozen request prefix moved");
