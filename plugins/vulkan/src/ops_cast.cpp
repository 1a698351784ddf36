// Cast and CastLike: float32<->float16, float32<->int32, int64<->int32
// (cast.comp), and same-type copies. Input and output types differ by
// design, so the kernel has its own type check instead of a TypeConstraint.
#include "op_kernel.hpp"
#include "shape_math.hpp"

#include <fmt/format.h>

namespace nxrt::vk {

using sdk::fail;
using sdk::refuse;

namespace {

struct CastKernel { Shader shader; uint32_t mode; bool copy; };
std::optional<CastKernel> cast_kernel(nxrt_dtype from, nxrt_dtype to) {
  using enum Shader;
  const auto F32 = NXRT_DTYPE_FLOAT32, F16 = NXRT_DTYPE_FLOAT16, I32 = NXRT_DTYPE_INT32, I64 = NXRT_DTYPE_INT64;
  if (from == to && (from == F32 || from == F16 || from == I32 || from == I64)) return CastKernel{cast, 0, true};
  if (from == F32 && to == F16) return CastKernel{cast_to_f16, 0, false};
  if (from == F16 && to == F32) return CastKernel{cast_from_f16, 0, false};
  if (from == F32 && to == I32) return CastKernel{cast, 0, false};
  if (from == I32 && to == F32) return CastKernel{cast, 1, false};
  if (from == I64 && to == I32) return CastKernel{cast, 2, false};
  if (from == I32 && to == I64) return CastKernel{cast, 3, false};
  return std::nullopt;
}

R check_cast_types(const IrGraph& g, const IrNode& n, const DeviceLimits& lim) {
  auto x = g.in(n, 0);
  auto y = g.out(n, 0);
  if (!x || !y) return refuse(NXRT_REFUSE_OTHER, "Cast without an input or output");
  const bool like = n.op == "CastLike";
  if (like && !g.in(n, 1)) return refuse(NXRT_REFUSE_OTHER, "CastLike without its target_type input");
  const nxrt_dtype to = like ? g.in(n, 1)->dtype : nxrt_dtype(attr_i(n, "to", 0));
  if (y->dtype != to) return refuse(NXRT_REFUSE_DTYPE, "{} output type differs from its target type", n.op);
  if (!cast_kernel(x->dtype, to))
    return refuse(NXRT_REFUSE_DTYPE, "{} from {} to {} is not implemented (float32<->float16, float32<->int32, "
                  "int64<->int32)", n.op, sdk::dtype_name(x->dtype), sdk::dtype_name(to));
  if ((x->dtype == NXRT_DTYPE_FLOAT16 || to == NXRT_DTYPE_FLOAT16) && !lim.storage16)
    return refuse(NXRT_REFUSE_DTYPE, "{} to or from float16 needs storageBuffer16BitAccess, which the device lacks", n.op);
  return std::nullopt;
}

void emit_cast(Emitter& e, const EmitArgs& a) {
  auto k = cast_kernel(a.g.in(a.n, 0)->dtype, a.g.out(a.n, 0)->dtype);
  if (!k) fail(NXRT_INTERNAL, "Cast: no kernel for this pair of types");
  if (k->copy) {
    e.copy(a.il[0], a.ol[0]);
    return;
  }
  struct { uint32_t n; } p{u32(a.ny)};
  uint32_t gx, gy;
  Emitter::grid(uint64_t(a.ny), 256, gx, gy);
  e.dispatch(k->shader, k->shader == Shader::cast ? std::vector<uint32_t>{k->mode} : std::vector<uint32_t>{}, {a.il[0], a.ol[0]},
             1, p, gx, gy);
}

}  // namespace

std::vector<OpKernel> cast_ops() {
  return {
      // saturate only affects float8, which is refused.
      {.names = {"Cast"}, .attrs = {"to", "saturate"}, .check_types = check_cast_types, .infer = same_shape, .emit = emit_cast},
      // CastLike: the type of input 1 (never read) is the target.
      {.names = {"CastLike"}, .attrs = {"saturate"}, .check_types = check_cast_types, .infer = same_shape, .emit = emit_cast},
  };
}

}  // namespace nxrt::vk
