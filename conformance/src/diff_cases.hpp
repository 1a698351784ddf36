// Differential op checks (the "diff" suite): seeded single-node cases for a core
// set of operators and an independent float64 reference for each. A case is a
// pure function of (seed, op, case id), so a failure can be rerun on its own.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "minihost.hpp"

namespace conf::diff {

// One operator family the suite covers: ONNX op type, opset and per-op tolerance.
struct OpSpec {
  std::string id;  // check name suffix and --diff-case prefix: "Add", "Softmax_11"
  std::string op;  // ONNX op_type
  int opset = 13;
  int default_cases = 24;
  double rtol = 1e-5, atol = 1e-6;  // |got - ref| <= atol + rtol * |ref|, atol scaled per case
};
const std::vector<OpSpec>& op_specs();
const OpSpec* find_spec(const std::string& id);

struct Case {
  const OpSpec* spec = nullptr;
  int id = 0;
  std::vector<std::vector<int64_t>> in_dims;
  std::vector<nxrt_attribute> attrs;
  std::vector<int64_t> out_dims;
  nxrt_dtype dtype = NXRT_DTYPE_FLOAT32;  // of every input and the output
  double atol_scale = 1;  // MatMul/Gemm: grows with the reduction length
  // "MatMul opset 13: A[2,1,3,4] B[3,4,5] -> [2,3,3,5]" (+ attributes)
  std::string describe() const;
  int64_t elements() const;  // inputs + output: "smallest" failing case
};

// Case `id` of `spec` for `seed`. The first ids of each op are fixed shapes that
// cover every broadcasting direction; later ids are drawn from the seed.
Case make_case(const OpSpec& spec, uint64_t seed, int id);

// Float32 inputs of a case (values from the seed; Div divisors kept away from 0).
std::vector<HostTensor> make_inputs(const Case& c, uint64_t seed, uint64_t salt = 0);

// Cases with a size-0 dim in several positions (broadcast against 1, empty reductions).
std::vector<Case> zero_size_cases(const OpSpec& spec);

// make_inputs with NaN, +-Inf, -0 and denormals mixed in where IEEE arithmetic fixes the result.
std::vector<HostTensor> special_inputs(const Case& c, uint64_t seed);

// The float64 reference output of a case, rounded to float32 at the end.
std::vector<double> reference(const Case& c, const std::vector<HostTensor>& inputs);

// "" or why `got` is not the reference within the op's tolerance.
std::string compare_ref(const Case& c, const HostTensor& got, const std::vector<double>& ref);

// Integer extremes (issue 14). The integer element types ONNX allows `spec`'s op at its opset
// (of int8, uint8, int32, int64; none for Gemm and Softmax), and its cases for one of them:
// every pair of the type's extremes (MIN, MIN+1, -100, -1, 0, 1, MAX-1, MAX), broadcast and
// scalar forms; MatMul sums that wrap. Div divisors are never 0 (undefined in ONNX) and never
// -1 (MIN / -1 overflows).
std::vector<nxrt_dtype> integer_types(const OpSpec& spec);
std::vector<Case> integer_cases(const OpSpec& spec, nxrt_dtype t);
std::vector<HostTensor> integer_inputs(const Case& c);
// Two's-complement results: Add, Sub, Mul and MatMul's sums wrap around, Div truncates toward 0.
HostTensor integer_reference(const Case& c, const std::vector<HostTensor>& inputs);
// "" or the first element that differs (exact comparison), with the operands and a hint
// ("saturates instead of wrapping?", "rounds toward -inf?").
std::string compare_integer(const Case& c, const std::vector<HostTensor>& inputs, const HostTensor& got, const HostTensor& ref);

}  // namespace conf::diff
