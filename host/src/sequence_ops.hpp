// The ONNX ops that make and use sequences and optionals, as host steps
// (SequenceConstruct/At/Insert/Erase/Length/Empty, SplitToSequence, ConcatFromSequence,
// Optional, OptionalHasElement/GetElement, and Identity of a sequence or optional).
#pragma once
#include "control_flow.hpp"

namespace nxrt {

bool is_sequence_op(const nxrt_node& n);
// Throws HostError on a bad attribute.
std::unique_ptr<HostOp> make_sequence_op(const nxrt_node& n);

}  // namespace nxrt
