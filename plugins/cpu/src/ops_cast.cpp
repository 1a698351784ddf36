// Cast and CastLike between float32, float16 (round to nearest even),
// bfloat16, float64, bool and every integer type (tensor_ops.hpp cast()).
// float -> bfloat16 truncates below opset 19 (ONNX 1.12's Cast data keeps the
// upper 16 bits of the float32; its spec says nothing) and rounds to nearest
// even from opset 19 (the ONNX reference's float32_to_bfloat16 default).
#include <algorithm>
#include <cstring>
#include <tuple>

#include "ops.hpp"

namespace nxrt::cpu {
namespace {

// -------------------------------------------------------------------- Cast

bool cast_supported(nxrt_dtype t) { return elem_of(t).has_value(); }

std::unique_ptr<Kernel> cast_create(const Node& n, CpuSession&, bool like, Bf16Round bf16) {
  const nxrt_dtype to = like ? n.input(1).dtype() : nxrt_dtype(n.attr_int("to", 0));
  return make_kernel([to, bf16](Context& ctx) {
    ConstTensorView x = ctx.input(0);
    TensorView y = ctx.output(0, to, x.dims());
    if (x.numel() == 0) return;
    if (x.dtype() == to) {
      std::memcpy(y.raw(), x.raw(), x.bytes());
      return;
    }
    auto se = elem_of(x.dtype()), de = elem_of(to);
    if (!se || !de) sdk::fail(NXRT_INVALID_ARGUMENT, "Cast: {} -> {} is not supported", sdk::dtype_name(x.dtype()), sdk::dtype_name(to));
    cast(x.raw(), *se, y.raw(), *de, x.numel(), bf16);
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
  for (auto [since, until, bf16] : {std::tuple{6, 18, Bf16Round::Truncate}, std::tuple{19, INT_MAX, Bf16Round::NearestEven}}) {
    r.add(Def{"Cast", "", since, until, [](const Node& n) { return cast_check(n, false); },
              [bf16](const Node& n, CpuSession& s) { return cast_create(n, s, false, bf16); }});
    r.add(Def{"CastLike", "", std::max(since, 15), until, [](const Node& n) { return cast_check(n, true); },
              [bf16](const Node& n, CpuSession& s) { return cast_create(n, s, true, bf16); }});
  }
}

}  // namespace nxrt::cpu
