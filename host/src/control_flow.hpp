// Control flow the host drives (If, Loop, Scan): a node no EP claims becomes a host
// step. Each body is built once, at session creation, into its own program: a Session
// over a model made from the body (its formal inputs, then every value it reads from
// enclosing graphs, at any depth, as extra inputs), partitioned to the parent's EPs and
// planned like the main graph. The step evaluates the condition or trip count on the
// host (the executor downloads it first when it lives on a device), runs the body, and
// hands loop-carried values from one iteration to the next by moving them.
#pragma once
#include "host_value.hpp"
#include "ir.hpp"

#include <atomic>
#include <memory>
#include <string>
#include <vector>

namespace nxrt {

class Session;

// One input of a host step, read without owning it: a host tensor (a slot of the run, or
// a constant), or, with `value` set, a sequence or optional.
struct TensorView {
  nxrt_dtype dtype = NXRT_DTYPE_UNDEFINED;
  std::vector<int64_t> dims;
  const void* data = nullptr;
  ValuePtr value;
};

// One output of a host step: a tensor, or (value set) a sequence or optional.
struct Result {
  HostTensor tensor;
  ValuePtr value;
};

// One host step's work: reads its inputs (nullptr for an absent optional input), fills
// one Result per output.
class HostOp {
 public:
  // A body's program, for inspection: the attribute it came from ("then_branch", "body").
  struct BodyProgram {
    std::string attribute;
    const Session* session = nullptr;
  };
  virtual ~HostOp() = default;
  virtual std::vector<BodyProgram> bodies() const { return {}; }
  virtual void run(const std::vector<const TensorView*>& inputs, std::vector<Result>& outputs,
                   const std::atomic<bool>* cancel) const = 0;
};

// Where the nodes of `op`'s bodies run: for each body a line "<indent><attribute>:", then one
// line per node "<indent>  <name> (<op>): <ep>" (ep "host" for nested control flow, whose
// bodies follow one level deeper; "*" marks fallback).
std::string describe_bodies(const HostOp& op, const std::string& indent);

// Ops the host runs itself when no EP claims them.
bool is_host_op(const nxrt_node& n);
// Names a body reads from enclosing graphs, its nested bodies' included, in first-use order.
std::vector<std::string> free_names(const GraphBody& body);
// The values of `m` a control-flow node's bodies read (resolved by name): its implicit inputs.
std::vector<const nxrt_value*> implicit_inputs(const nxrt_model_ir& m, const nxrt_node& n);
// The model a body's program runs: the body's values and nodes, its formal inputs then
// one input per free name (typed like the value of `parent` it names), its formal outputs.
std::shared_ptr<nxrt_model_ir> body_model(const GraphBody& body, const nxrt_model_ir& parent);
// The host op for node `n` of `m`; bodies become sessions on `parent`'s EPs. The step's
// inputs are n's inputs followed by implicit_inputs(m, n). Throws HostError.
std::unique_ptr<HostOp> make_host_op(const nxrt_model_ir& m, const nxrt_node& n, const Session& parent);

}  // namespace nxrt
