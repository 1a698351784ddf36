// Cast and CastLike between float32, float16 (round to nearest even), float64,
// bool and every integer type (tensor_ops.hpp cast()).
#include <cstring>

#include "ops.hpp"

namespace nxrt::cpu {
namespace {

// -------------------------------------------------------------------- Cast

bool cast_supported(nxrt_dtype t) {
  if (t == NXRT_DTYPE_BFLOAT16) return false;  // bf16 casts are not certified (the host loads no bf16 test data)
  return elem_of(t).has_value();
}

std::unique_ptr<Kernel> cast_create(const Node& n, CpuSession&, bool like) {
  const nxrt_dtype to = like ? n.input(1).dtype() : nxrt_dtype(n.attr_int("to", 0));
  return make_kernel([to](Context& ctx) {
    ConstTensorView x = ctx.input(0);
    TensorView y = ctx.output(0, to, x.dims());
    if (x.numel() == 0) return;
    if (x.dtype() == to) {
      std::memcpy(y.raw(), x.raw(), x.bytes());
      return;
    }
    auto se = elem_of(x.dtype()), de = elem_of(to);
    if (!se || !de) sdk::fail(NXRT_INVALID_ARGUMENT, "Cast: {} -> {} is not supported", sdk::dtype_name(x.dtype()), sdk::dtype_name(to));
    cast(x.raw(), *se, y.raw(), *de, x.numel());
  });
}

Check cast_check(const Node& n, bool like) {
  const nxrt_dtype from = n.input(0).dtype();
  const nxrt_dtype to = like ? n.input(1).dtype() : nxrt_dtype(n.attr_int("to", 0));
  if (!cast_supported(from) || !cast_supported(to))
    return sdk::refuse(NXRT_REFUSE_DTYPE, "{}: {} -> {} is not implemented", n.op_type(), sdk::dtype_name(from), sdk::dtype_name(to));
  if (n.output(0).dtype() != to) return sdk::refuse(NXRT_REFUSE_DTYPE, "{}: output dtype differs from target", n.op_type());
  return known_attrs(n, {"to", "saturate"});
}

}  // namespace

void register_cast_ops(Registry& r) {
  r.add(Def{"Cast", "", 6, INT_MAX, [](const Node& n) { return cast_check(n, false); },
            [](const Node& n, CpuSession& s) { return cast_create(n, s, false); }});
  r.add(Def{"CastLike", "", 15, INT_MAX, [](const Node& n) { return cast_check(n, true); },
            [](const Node& n, CpuSession& s) { return cast_create(n, s, true); }});
}

}  // namespace nxrt::cpu
