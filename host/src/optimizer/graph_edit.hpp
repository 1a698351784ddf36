// Small graph edits the optimizer's passes share (optimizer/graph_edit.cpp).
#pragma once
#include "ir.hpp"

#include <set>
#include <string>

namespace nxrt::edit {

// Names control-flow bodies read from enclosing graphs (any depth): a body finds them
// by name, so such values keep their names, producers and data.
std::set<std::string> names_read_by_bodies(const nxrt_model_ir& m);

// Whether something still reads v: a node, the graph's outputs, or a body by name.
bool used(const nxrt_value* v, const std::set<std::string>& body_names);

// Every use of `from` reads `to` instead.
void replace_uses(nxrt_model_ir& m, nxrt_value* from, nxrt_value* to);

// Forgets one use of v by node n; a constant nobody reads any more is freed.
void drop_use(nxrt_value* v, const nxrt_node& n, const std::set<std::string>& body_names);

// Marks n removed: its inputs lose the use, its outputs their producer.
void remove_node(nxrt_node& n, const std::set<std::string>& body_names);

// A new constant value of m.
nxrt_value* new_constant(nxrt_model_ir& m, std::string name, std::shared_ptr<HostTensor> t);

// v's producer when it is a live node of the main graph of type op (default domain).
nxrt_node* producer(const nxrt_model_ir& m, const nxrt_value* v, const char* op = nullptr);
// The only node reading v (v read once, not an output, not read by a body); else nullptr.
nxrt_node* sole_consumer(const nxrt_model_ir& m, const nxrt_value* v, const std::set<std::string>& body_names);

bool is_op(const nxrt_node& n, const char* op);  // live, default domain, this op type

// A float constant holding one value (any shape of one element), as a double.
bool scalar_constant(const nxrt_value* v, double* out);

}  // namespace nxrt::edit
