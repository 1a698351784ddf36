/* Compiles the ABI header as strict C11 (see CMakeLists.txt). */
#include "nxrt_ep.h"

_Static_assert(sizeof(int32_t) == 4, "int32_t");
_Static_assert(offsetof(nxrt_negotiate_reply, message) == 12, "frozen reply prefix moved");
_Static_assert(offsetof(nxrt_negotiate_request, host) == 16, "frozen request prefix moved");
