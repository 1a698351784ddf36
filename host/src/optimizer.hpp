// The optimizer (optimizer.cpp): host graph rewrites every EP benefits from.
#pragma once
#include "ir.hpp"

namespace nxrt {

// Folds Constant nodes into constant values, drops no-ops (Identity, inference Dropout),
// folds BatchNormalization into a preceding Conv with constant weights.
void optimize(nxrt_model_ir& model);

}  // namespace nxrt
