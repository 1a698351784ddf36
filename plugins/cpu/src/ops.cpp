// The registration index: the process-wide kernel registry, built once from
// every op family's register_<family>_ops (declared in ops.hpp, defined in
// ops_<family>.cpp).
#include "ops.hpp"

namespace nxrt::cpu {

const Registry& registry() {
  static const Registry r = [] {
    Registry reg;
    register_gemm_ops(reg);
    register_conv_ops(reg);
    register_conv_transpose_ops(reg);
    register_pool_ops(reg);
    register_normalization_ops(reg);
    register_softmax_ops(reg);
    register_elementwise_binary_ops(reg);
    register_elementwise_unary_ops(reg);
    register_compare_logic_ops(reg);
    register_cast_ops(reg);
    register_shape_ops(reg);
    register_data_movement_ops(reg);
    register_gather_scatter_ops(reg);
    register_sort_ops(reg);
    register_reduce_ops(reg);
    register_generator_ops(reg);
    register_object_detection_ops(reg);
    register_loss_ops(reg);
    register_optimizer_ops(reg);
    register_quantize_ops(reg);
    register_integer_ops(reg);
    register_resize_ops(reg);
    register_linalg_ops(reg);
    register_rnn_ops(reg);
    register_signal_ops(reg);
    register_text_ops(reg);
    register_string_ops(reg);
    register_random_ops(reg);
    return reg;
  }();
  return r;
}

}  // namespace nxrt::cpu
