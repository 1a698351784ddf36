// SPIR-V compiled by glslc at build time (see ../CMakeLists.txt) and embedded.
#include "vk_core.hpp"

namespace nxrt::vk {
namespace {
#define NXRT_SPV(name) const uint32_t name##_spv[] = {
#define NXRT_END };
NXRT_SPV(unary)
#include "unary.spv.inc"
NXRT_END
NXRT_SPV(binary)
#include "binary.spv.inc"
NXRT_END
NXRT_SPV(copy)
#include "copy.spv.inc"
NXRT_END
NXRT_SPV(gather)
#include "gather.spv.inc"
NXRT_END
NXRT_SPV(softmax)
#include "softmax.spv.inc"
NXRT_END
NXRT_SPV(layernorm)
#include "layernorm.spv.inc"
NXRT_END
NXRT_SPV(reduce)
#include "reduce.spv.inc"
NXRT_END
NXRT_SPV(batchnorm)
#include "batchnorm.spv.inc"
NXRT_END
NXRT_SPV(pool)
#include "pool.spv.inc"
NXRT_END
NXRT_SPV(conv_direct)
#include "conv_direct.spv.inc"
NXRT_END
NXRT_SPV(matmul)
#include "matmul.spv.inc"
NXRT_END
NXRT_SPV(conv_gemm)
#include "conv_gemm.spv.inc"
NXRT_END
NXRT_SPV(unary_f16)
#include "unary_f16.spv.inc"
NXRT_END
NXRT_SPV(binary_f16)
#include "binary_f16.spv.inc"
NXRT_END
NXRT_SPV(softmax_f16)
#include "softmax_f16.spv.inc"
NXRT_END
NXRT_SPV(matmul_f16)
#include "matmul_f16.spv.inc"
NXRT_END
NXRT_SPV(copy_f16)
#include "copy_f16.spv.inc"
NXRT_END
NXRT_SPV(gather_f16)
#include "gather_f16.spv.inc"
NXRT_END
NXRT_SPV(layernorm_f16)
#include "layernorm_f16.spv.inc"
NXRT_END
NXRT_SPV(reduce_f16)
#include "reduce_f16.spv.inc"
NXRT_END
NXRT_SPV(batchnorm_f16)
#include "batchnorm_f16.spv.inc"
NXRT_END
NXRT_SPV(pool_f16)
#include "pool_f16.spv.inc"
NXRT_END
NXRT_SPV(conv_direct_f16)
#include "conv_direct_f16.spv.inc"
NXRT_END
NXRT_SPV(conv_gemm_f16)
#include "conv_gemm_f16.spv.inc"
NXRT_END
NXRT_SPV(cast)
#include "cast.spv.inc"
NXRT_END
NXRT_SPV(cast_to_f16)
#include "cast_to_f16.spv.inc"
NXRT_END
NXRT_SPV(cast_from_f16)
#include "cast_from_f16.spv.inc"
NXRT_END
}  // namespace

std::span<const uint32_t> shader_spirv(Shader s) {
  switch (s) {
    case Shader::unary: return unary_spv;
    case Shader::binary: return binary_spv;
    case Shader::copy: return copy_spv;
    case Shader::gather: return gather_spv;
    case Shader::softmax: return softmax_spv;
    case Shader::layernorm: return layernorm_spv;
    case Shader::reduce: return reduce_spv;
    case Shader::batchnorm: return batchnorm_spv;
    case Shader::pool: return pool_spv;
    case Shader::conv_direct: return conv_direct_spv;
    case Shader::matmul: return matmul_spv;
    case Shader::conv_gemm: return conv_gemm_spv;
    case Shader::unary_f16: return unary_f16_spv;
    case Shader::binary_f16: return binary_f16_spv;
    case Shader::softmax_f16: return softmax_f16_spv;
    case Shader::matmul_f16: return matmul_f16_spv;
    case Shader::copy_f16: return copy_f16_spv;
    case Shader::gather_f16: return gather_f16_spv;
    case Shader::layernorm_f16: return layernorm_f16_spv;
    case Shader::reduce_f16: return reduce_f16_spv;
    case Shader::batchnorm_f16: return batchnorm_f16_spv;
    case Shader::pool_f16: return pool_f16_spv;
    case Shader::conv_direct_f16: return conv_direct_f16_spv;
    case Shader::conv_gemm_f16: return conv_gemm_f16_spv;
    case Shader::cast: return cast_spv;
    case Shader::cast_to_f16: return cast_to_f16_spv;
    case Shader::cast_from_f16: return cast_from_f16_spv;
    default: return {};
  }
}

}  // namespace nxrt::vk
