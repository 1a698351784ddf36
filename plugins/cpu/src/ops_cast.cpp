// Cast and CastLike between float32, float16 (round to nearest even),
// bfloat16, float64, bool and every integer type (tensor_ops.hpp cast()), and
// between any of those and string (strings.hpp: shortest round-trip text; text
// that does not parse fails the run naming the element).
// float -> bfloat16 truncates below opset 19 (ONNX 1.12's Cast data keeps the
// upper 16 bits of the float32; its spec says nothing) and rounds to nearest
// even from opset 19 (the ONNX reference's float32_to_bfloat16 default).
#include <algorithm>
#include <cstring>
#include <tuple>

#include "ops.hpp"
#include "strings.hpp"

namespace nxrt::cpu {
namespace {

// -------------------------------------------------------------------- Cast

bool cast_supported(nxrt_dtype t) { return elem_of(t).has_value() || t == NXRT_DTYPE_STRING; }

void cast_to_string(Context& ctx, const ConstTensorView& x, Elem from) {
  for (size_t i = 0; i < size_t(x.numel()); ++i) ctx.set_string(0, i, number_to_string(x.raw(), from, i));
}

void cast_from_string(const ConstTensorView& x, TensorView& y, Elem to) {
  for (size_t i = 0; i < size_t(x.numel()); ++i)
    if (!string_to_number(x.string(i), to, y.raw(), i))
      sdk::fail(NXRT_INVALID_ARGUMENT, "Cast: element {} (\"{}\") is not a {} number", i, x.string(i).substr(0, 64),
                sdk::dtype_name(y.dtype()));
}

std::unique_ptr<Kernel> cast_create(const Node& n, CpuSession&, bool like, Bf16Round bf16) {
  const nxrt_dtype to = like ? n.input(1).dtype() : nxrt_dtype(n.attr_int("to", 0));
  return make_kernel([to, bf16](Context& ctx) {
    ConstTensorView x = ctx.input(0);
    TensorView y = ctx.output(0, to, x.dims());
    if (x.numel() == 0) return;
    if (x.dtype() == to) {  // string elements too: input strings live until the run ends
      std::memcpy(y.raw(), x.raw(), x.bytes());
      return;
    }
    auto se = elem_of(x.dtype()), de = elem_of(to);
    if (to == NXRT_DTYPE_STRING && se) return cast_to_string(ctx, x, *se);
    if (x.dtype() == NXRT_DTYPE_STRING && de) return cast_from_string(x, y, *de);
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
    // Init-captures ([bf16 = bf16]): clang before 16 cannot capture a structured binding.
    r.add(Def{"Cast", "", since, until, [](const Node& n) { return cast_check(n, false); },
              [bf16 = bf16](const Node& n, CpuSession& s) { return cast_create(n, s, false, bf16); }});
    r.add(Def{"CastLike", "", std::max(since, 15), until, [](const Node& n) { return cast_check(n, true); },
              [bf16 = bf16](const Node& n, CpuSession& s) { return cast_create(n, s, true, bf16); }});
  }
}

}  // namespace nxrt::cpu
