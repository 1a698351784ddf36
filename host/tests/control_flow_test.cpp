// Control flow the host drives: If, Loop and Scan with bodies partitioned like the main
// graph, outer-scope values at any depth, zero-trip loops, scan directions and axes, and
// a body partly on Vulkan. Models are built here with onnx's protobuf; expected values
// are computed independently in the test.
#include "doctest_skip.hpp"
#include "control_flow.hpp"
#include "env.hpp"
#include "error.hpp"
#include "error_of.hpp"
#include "io_binding.hpp"
#include "ir.hpp"
#include "partitioner.hpp"
#include "session.hpp"
#include "model_builder.hpp"

#include <doctest/doctest.h>
#include <onnx/onnx_pb.h>

#include <cstring>
#include <filesystem>
#include <optional>

using namespace nxrt;

namespace {

using nxrt::test::error_of;
using namespace nxrt::test;

// If: both branches read x from the enclosing graph; the else branch also an initializer of it.
std::shared_ptr<nxrt_model_ir> if_model() {
  Model m;
  Graph g = m.main();
  g.in("cond", B, std::vector<int64_t>{});
  g.in("x", F, std::vector<int64_t>{3});
  g.floats("w", {10, 20, 30}, {3});
  auto* n = g.node("If", {"cond"}, {"y"});
  Graph t = body(n, "then_branch", "then");
  t.node("Relu", {"x"}, {"t_y"});
  t.out("t_y", F, std::vector<int64_t>{3});
  Graph e = body(n, "else_branch", "else");
  e.node("Add", {"x", "w"}, {"e_y"});
  e.out("e_y", F, std::vector<int64_t>{3});
  g.out("y", F, std::vector<int64_t>{3});
  return m.load();
}

// Loop: sum += x (outer) each iteration, the running sum as a scan output; the body's
// condition is `iteration < limit` with limit read from the enclosing graph.
std::shared_ptr<nxrt_model_ir> loop_model(bool with_limit) {
  Model m;
  Graph g = m.main();
  g.in("M", I64, std::vector<int64_t>{});
  g.in("cond", B, std::vector<int64_t>{});
  g.in("s0", F, std::vector<int64_t>{2});
  g.in("x", F, std::vector<int64_t>{2});
  g.int64s("limit", {3}, {});
  auto* n = g.node("Loop", {"M", "cond", "s0"}, {"s", "trace"});
  Graph b = body(n, "body", "loop_body");
  b.in("i", I64, std::vector<int64_t>{});
  b.in("c", B, std::vector<int64_t>{});
  b.in("s_in", F, std::vector<int64_t>{2});
  b.node("Add", {"s_in", "x"}, {"s_out"});
  if (with_limit) b.node("Less", {"i", "limit"}, {"c_out"});
  else b.node("Identity", {"c"}, {"c_out"});
  b.node("Identity", {"s_out"}, {"scan_out"});
  b.out("c_out", B, std::vector<int64_t>{});
  b.out("s_out", F, std::vector<int64_t>{2});
  b.out("scan_out", F, std::vector<int64_t>{2});
  g.out("s", F, std::vector<int64_t>{2});
  g.out("trace", F, std::vector<int64_t>{-1, 2});
  return m.load();
}

}  // namespace

TEST_CASE("control flow: If runs the branch the condition picks, reading outer-scope values") {
  Env env;
  auto s = session(env, if_model());
  CHECK(s->assignments()[0].host);
  auto yes = run(*s, {boolean("cond", true), f32("x", {-1, 2, -3}, {3})});
  CHECK(values(yes[0]) == std::vector<float>{0, 2, 0});
  auto no = run(*s, {boolean("cond", false), f32("x", {-1, 2, -3}, {3})});
  CHECK(values(no[0]) == std::vector<float>{9, 22, 27});
}

TEST_CASE("control flow: Loop carries values, stacks scan outputs, and stops on its trip count or condition") {
  Env env;
  auto s = session(env, loop_model(false));
  auto r = run(*s, {i64("M", 3), boolean("cond", true), f32("s0", {1, 2}, {2}), f32("x", {10, 100}, {2})});
  CHECK(values(r[0]) == std::vector<float>{31, 302});
  CHECK(r[1].dims == std::vector<int64_t>{3, 2});
  CHECK(values(r[1]) == std::vector<float>{11, 102, 21, 202, 31, 302});

  // The body's condition (i < 3) ends a loop whose trip count allows 10: iterations 0..3 run.
  Env env2;
  auto c = session(env2, loop_model(true));
  auto r2 = run(*c, {i64("M", 10), boolean("cond", true), f32("s0", {0, 0}, {2}), f32("x", {1, 2}, {2})});
  CHECK(values(r2[0]) == std::vector<float>{4, 8});
  CHECK(r2[1].dims == std::vector<int64_t>{4, 2});
}

TEST_CASE("control flow: a zero-trip Loop returns the initial values and empty scan outputs") {
  Env env;
  auto s = session(env, loop_model(false));
  auto r = run(*s, {i64("M", 0), boolean("cond", true), f32("s0", {1, 2}, {2}), f32("x", {10, 100}, {2})});
  CHECK(values(r[0]) == std::vector<float>{1, 2});
  CHECK(r[1].dims == std::vector<int64_t>{0, 2});
  // A false initial condition: no iteration either.
  auto f = run(*s, {i64("M", 5), boolean("cond", false), f32("s0", {1, 2}, {2}), f32("x", {10, 100}, {2})});
  CHECK(values(f[0]) == std::vector<float>{1, 2});
  CHECK(f[1].dims == std::vector<int64_t>{0, 2});
}

TEST_CASE("control flow: nesting reads a main-graph value two bodies down") {
  // Loop (3 trips) whose body holds an If on (i == 1): then acc + x*k, else acc + x; k and x
  // are main-graph values only the inner If reads.
  Model m;
  Graph g = m.main();
  g.in("x", F, std::vector<int64_t>{2});
  g.int64s("M", {3}, {});
  g.int64s("one", {1}, {});
  g.floats("k", {100, 100}, {2});
  g.floats("acc0", {0, 0}, {2});
  auto* loop = g.node("Loop", {"M", "", "acc0"}, {"acc"});
  Graph b = body(loop, "body", "outer_body");
  b.in("i", I64, std::vector<int64_t>{});
  b.in("c", B, std::vector<int64_t>{});
  b.in("a", F, std::vector<int64_t>{2});
  b.node("Equal", {"i", "one"}, {"is_one"});
  auto* iff = b.node("If", {"is_one"}, {"a_next"});
  Graph t = body(iff, "then_branch", "then");
  t.node("Mul", {"x", "k"}, {"xk"});
  t.node("Add", {"a", "xk"}, {"t_out"});
  t.out("t_out", F, std::vector<int64_t>{2});
  Graph e = body(iff, "else_branch", "else");
  e.node("Add", {"a", "x"}, {"e_out"});
  e.out("e_out", F, std::vector<int64_t>{2});
  b.node("Identity", {"c"}, {"c_out"});
  b.out("c_out", B, std::vector<int64_t>{});
  b.out("a_next", F, std::vector<int64_t>{2});
  g.out("acc", F, std::vector<int64_t>{2});
  auto model = m.load();
  const nxrt_node& ln = *model->nodes[0];
  auto implicit = implicit_inputs(*model, ln);
  std::vector<std::string> names;
  for (auto* v : implicit) names.push_back(v->name);
  CHECK(names == std::vector<std::string>{"one", "x", "k"});
  Env env;
  auto s = session(env, model);
  auto r = run(*s, {f32("x", {1, 2}, {2})});
  CHECK(values(r[0]) == std::vector<float>{102, 204});
}

TEST_CASE("control flow: Scan over axis 0 and 1, forward and reverse, inputs and outputs") {
  // state += x_t; scan output = state. x is [2,3]; scanned along `axis`.
  auto make = [](int64_t in_axis, int64_t in_dir, int64_t out_axis, int64_t out_dir) {
    Model m;
    Graph g = m.main();
    g.in("s0", F, std::vector<int64_t>{in_axis == 0 ? 3 : 2});
    g.in("x", F, std::vector<int64_t>{2, 3});
    auto* n = g.node("Scan", {"s0", "x"}, {"s", "ys"});
    int_attr(n, "num_scan_inputs", 1);
    ints_attr(n, "scan_input_axes", {in_axis});
    ints_attr(n, "scan_input_directions", {in_dir});
    ints_attr(n, "scan_output_axes", {out_axis});
    ints_attr(n, "scan_output_directions", {out_dir});
    Graph b = body(n, "body", "scan_body");
    const int64_t w = in_axis == 0 ? 3 : 2;
    b.in("st", F, std::vector<int64_t>{w});
    b.in("xt", F, std::vector<int64_t>{w});
    b.node("Add", {"st", "xt"}, {"st_out"});
    b.node("Identity", {"st_out"}, {"y_t"});
    b.out("st_out", F, std::vector<int64_t>{w});
    b.out("y_t", F, std::vector<int64_t>{w});
    g.out("s", F, std::vector<int64_t>{w});
    g.out("ys", F, std::vector<int64_t>{-1, -2});
    return m.load();
  };
  const std::vector<float> x{1, 2, 3, 4, 5, 6};
  SUBCASE("axis 0 forward") {
    Env env;
    auto s = session(env, make(0, 0, 0, 0));
    auto r = run(*s, {f32("s0", {0, 0, 0}, {3}), f32("x", x, {2, 3})});
    CHECK(values(r[0]) == std::vector<float>{5, 7, 9});
    CHECK(r[1].dims == std::vector<int64_t>{2, 3});
    CHECK(values(r[1]) == std::vector<float>{1, 2, 3, 5, 7, 9});
  }
  SUBCASE("axis 0, reverse input") {
    Env env;
    auto s = session(env, make(0, 1, 0, 0));
    auto r = run(*s, {f32("s0", {0, 0, 0}, {3}), f32("x", x, {2, 3})});
    CHECK(values(r[1]) == std::vector<float>{4, 5, 6, 5, 7, 9});
  }
  SUBCASE("axis 0, reverse output") {
    Env env;
    auto s = session(env, make(0, 0, 0, 1));
    auto r = run(*s, {f32("s0", {0, 0, 0}, {3}), f32("x", x, {2, 3})});
    CHECK(values(r[1]) == std::vector<float>{5, 7, 9, 1, 2, 3});
  }
  SUBCASE("axis 1 in, axis 1 out") {
    Env env;
    auto s = session(env, make(1, 0, 1, 0));
    auto r = run(*s, {f32("s0", {0, 0}, {2}), f32("x", x, {2, 3})});
    // columns [1,4], [2,5], [3,6]: running sums [1,4], [3,9], [6,15], stacked along axis 1
    CHECK(values(r[0]) == std::vector<float>{6, 15});
    CHECK(r[1].dims == std::vector<int64_t>{2, 3});
    CHECK(values(r[1]) == std::vector<float>{1, 3, 6, 4, 9, 15});
  }
}

TEST_CASE("control flow: a condition of the wrong type is a clear error, not a crash") {
  Model m;
  Graph g = m.main();
  g.in("x", F, std::vector<int64_t>{2});
  g.in("M", I64, std::vector<int64_t>{});
  g.floats("s0", {0, 0}, {2});
  auto* n = g.node("Loop", {"M", "", "s0"}, {"s"});
  Graph b = body(n, "body", "b");
  b.in("i", I64, std::vector<int64_t>{});
  b.in("c", B, std::vector<int64_t>{});
  b.in("a", F, std::vector<int64_t>{2});
  b.node("Add", {"a", "x"}, {"a_out"});
  b.node("Identity", {"c"}, {"c_out"});
  b.out("c_out", B, std::vector<int64_t>{});
  b.out("a_out", F, std::vector<int64_t>{2});
  g.out("s", F, std::vector<int64_t>{2});
  Env env;
  auto s = session(env, m.load());
  In bad{"M", NXRT_DTYPE_INT64, {2}, std::vector<uint8_t>(16)};
  std::string err = error_of([&] { run(*s, {f32("x", {1, 1}, {2}), bad}); });
  CHECK(err.find("has shape [2] but the model expects []") != std::string::npos);
}

TEST_CASE("control flow: a body's nodes run on Vulkan where it claims them, the rest on cpu by fallback") {
  if (!std::filesystem::exists(lib_path("libnxrt_ep_vulkan.so"))) NXRT_SKIP_CASE("the Vulkan plugin is not built");
  // If around: then = Relu(x) + w (Vulkan), else = CumSum(x) (cpu by fallback).
  Model m;
  Graph g = m.main();
  g.in("cond", B, std::vector<int64_t>{});
  g.in("x", F, std::vector<int64_t>{4});
  g.floats("w", {1, 1, 1, 1}, {4});
  g.int64s("axis", {0}, {});
  auto* n = g.node("If", {"cond"}, {"y"});
  Graph t = body(n, "then_branch", "then");
  t.node("Relu", {"x"}, {"r"});
  t.node("Add", {"r", "w"}, {"t_y"});
  t.node("CumSum", {"t_y", "axis"}, {"t_z"});
  t.out("t_z", F, std::vector<int64_t>{4});
  Graph e = body(n, "else_branch", "else");
  e.node("Neg", {"x"}, {"e_y"});
  e.out("e_y", F, std::vector<int64_t>{4});
  g.out("y", F, std::vector<int64_t>{4});
  Env env;
  std::unique_ptr<Session> s;
  try {
    s = session(env, m.load(), "vulkan", true);
  } catch (const HostError& e) {
    NXRT_SKIP_CASE(std::string("Vulkan not usable here: ") + e.what());
  }
  // With fallback a Vulkan plugin without a device still makes a session (all on cpu).
  if (auto vk = env.find("vulkan"); !vk || vk->devices().empty())
    NXRT_SKIP_CASE("no Vulkan device: " + (vk ? vk->no_device_reason() : std::string("plugin not loaded")));
  // The then-branch's program: Relu and Add on Vulkan, CumSum on cpu.
  const Step* host = nullptr;
  for (auto& st : s->steps()) if (st.kind == Step::Host) host = &st;
  REQUIRE(host);
  auto bodies = host->host->bodies();
  REQUIRE(bodies.size() == 2);
  CHECK(bodies[0].attribute == "then_branch");
  const Session& then = *bodies[0].session;
  std::vector<std::string> placed;
  for (auto& a : then.assignments()) placed.push_back(a.ep >= 0 ? then.eps()[size_t(a.ep)]->lib->name() : "?");
  CHECK(placed == std::vector<std::string>{"vulkan", "vulkan", "cpu"});
  auto r = run(*s, {boolean("cond", true), f32("x", {-1, 2, -3, 4}, {4})});
  CHECK(values(r[0]) == std::vector<float>{1, 4, 5, 10});
  auto r2 = run(*s, {boolean("cond", false), f32("x", {-1, 2, -3, 4}, {4})});
  CHECK(values(r2[0]) == std::vector<float>{1, -2, 3, -4});
}

TEST_CASE("sequences: SplitToSequence, SequenceMap with a body, SequenceLength and ConcatFromSequence") {
  // x [2,3] split into its 3 columns, each squared by the map's body, stacked back as [3,2].
  Model m;
  Graph g = m.main();
  g.in("x", F, std::vector<int64_t>{2, 3});
  auto* split = g.node("SplitToSequence", {"x"}, {"cols"});
  int_attr(split, "axis", 1);
  int_attr(split, "keepdims", 0);
  auto* map = g.node("SequenceMap", {"cols"}, {"squares"});
  Graph b = body(map, "body", "square");
  b.in("e", F, std::vector<int64_t>{2});
  b.node("Mul", {"e", "e"}, {"e2"});
  b.out("e2", F, std::vector<int64_t>{2});
  g.node("SequenceLength", {"squares"}, {"n"});
  auto* cat = g.node("ConcatFromSequence", {"squares"}, {"y"});
  int_attr(cat, "axis", 0);
  int_attr(cat, "new_axis", 1);
  g.out("y", F, std::vector<int64_t>{3, 2});
  g.out("n", I64, std::vector<int64_t>{});
  Env env;
  auto s = session(env, m.load());
  auto r = run(*s, {f32("x", {1, 2, 3, 4, 5, 6}, {2, 3})});
  CHECK(r[0].dims == std::vector<int64_t>{3, 2});
  CHECK(values(r[0]) == std::vector<float>{1, 16, 4, 25, 9, 36});
  int64_t n = 0;
  std::memcpy(&n, r[1].data.data(), 8);
  CHECK(n == 3);
}

TEST_CASE("sequences: a Loop carries a sequence it grows, and returns it as a graph output") {
  Model m(17);
  Graph g = m.main();
  g.in("x", F, std::vector<int64_t>{2});
  g.int64s("M", {3}, {});
  auto* empty = g.node("SequenceEmpty", {}, {"s0"});
  int_attr(empty, "dtype", F);
  auto* loop = g.node("Loop", {"M", "", "s0"}, {"s"});
  Graph b = body(loop, "body", "grow");
  b.in("i", I64, std::vector<int64_t>{});
  b.in("c", B, std::vector<int64_t>{});
  set_seq_type(b.g->add_input(), "s_in", F);
  auto* cast = b.node("Cast", {"i"}, {"fi"});
  int_attr(cast, "to", F);
  b.node("Mul", {"x", "fi"}, {"xi"});
  b.node("SequenceInsert", {"s_in", "xi"}, {"s_out"});
  b.node("Identity", {"c"}, {"c_out"});
  b.out("c_out", B, std::vector<int64_t>{});
  set_seq_type(b.g->add_output(), "s_out", F);
  auto* cat = g.node("ConcatFromSequence", {"s"}, {"y"});
  int_attr(cat, "axis", 0);
  g.out("y", F, std::vector<int64_t>{6});
  set_seq_type(g.g->add_output(), "s", F);
  Env env;
  auto s = session(env, m.load());
  In x = f32("x", {1, 10}, {2});
  BoundInput in;
  in.name = "x";
  in.dtype = x.dtype;
  in.dims = x.dims;
  in.host = x.bytes.data();
  std::vector<HostTensor> out;
  std::vector<ValuePtr> vals;
  s->run_bound({in}, nullptr, out, nullptr, nullptr, nullptr, nullptr, &vals);
  CHECK(values(out[0]) == std::vector<float>{0, 0, 1, 10, 2, 20});
  REQUIRE(vals.size() == 2);
  CHECK(!vals[0]);
  REQUIRE(vals[1]);
  CHECK(vals[1]->kind == Value::Sequence);
  REQUIRE(vals[1]->items.size() == 3);
  CHECK(values(vals[1]->items[2]->tensor) == std::vector<float>{2, 20});
  // A sequence input given as a tensor is refused by name.
  Model m2(17);
  Graph g2 = m2.main();
  set_seq_type(g2.g->add_input(), "seq", F);
  g2.node("SequenceLength", {"seq"}, {"n"});
  g2.out("n", I64, std::vector<int64_t>{});
  Env env2;
  auto s2 = session(env2, m2.load());
  In t = f32("seq", {1}, {1});
  std::string err = error_of([&] { run(*s2, {t}); });
  CHECK(err.find("input 'seq' must be a sequence") != std::string::npos);
}

TEST_CASE("partitioner: a claim around a control-flow node that reads its value through a body is split") {
  // Relu -> r; If reads r only inside its branches; Neg(If's output). {Relu, Neg} is not
  // convex: the path Relu -> If -> Neg runs through the body's read.
  Model m;
  Graph g = m.main();
  g.in("cond", B, std::vector<int64_t>{});
  g.in("x", F, std::vector<int64_t>{2});
  g.node("Relu", {"x"}, {"r"});
  auto* n = g.node("If", {"cond"}, {"y"});
  Graph t = body(n, "then_branch", "then");
  t.node("Abs", {"r"}, {"t_y"});
  t.out("t_y", F, std::vector<int64_t>{2});
  Graph e = body(n, "else_branch", "else");
  e.node("Sigmoid", {"x"}, {"e_y"});
  e.out("e_y", F, std::vector<int64_t>{2});
  g.node("Neg", {"y"}, {"z"});
  g.out("z", F, std::vector<int64_t>{2});
  auto model = m.load();
  auto parts = convex_parts(*model, {0, 2});
  CHECK(parts.size() == 2);
  CHECK(order_groups(*model, {{0}, {1}, {2}}) == std::vector<size_t>{0, 1, 2});
}
