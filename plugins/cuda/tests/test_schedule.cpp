// The group schedule (schedule.cpp): every temporary is allocated before its producer's
// launch, alive at each launch that reads it (also through views that alias it), released
// exactly once after its last reader, and views inside the group launch nothing.
#include <doctest/doctest.h>

#include "ops.hpp"
#include "schedule.hpp"

#include <cstring>
#include <map>
#include <set>

using namespace nxrt::cuda;

namespace {

struct Builder {
  IrGraph g;
  int value(const char* name, Shape dims) {
    IrValue v;
    v.name = name;
    v.dtype = NXRT_DTYPE_FLOAT32;
    v.rank = int64_t(dims.size());
    v.dims = dims;
    return g.add_value(v);
  }
  int shape_const(std::vector<int64_t> s) {
    IrValue v;
    v.name = "shape";
    v.dtype = NXRT_DTYPE_INT64;
    v.rank = 1;
    v.dims = {int64_t(s.size())};
    v.is_const = v.has_data = true;
    v.data.resize(s.size() * 8);
    std::memcpy(v.data.data(), s.data(), v.data.size());
    return g.add_value(v);
  }
  void node(const char* op, std::vector<int> in, int out) {
    IrNode n;
    n.op = op;
    n.opset = 17;
    n.index = g.nodes.size();
    n.in = std::move(in);
    n.out = {out};
    g.nodes.push_back(n);
  }
};

}  // namespace

TEST_CASE("temporaries live exactly from their producer to their last reader, through views") {
  Builder b;
  const int x = b.value("x", {2, 8}), w = b.value("w", {8, 8}), shape = b.shape_const({4, 4});
  const int a = b.value("a", {2, 8}), r = b.value("r", {2, 8}), c = b.value("c", {4, 4}), d = b.value("d", {4, 4});
  const int e = b.value("e", {4, 4}), f = b.value("f", {2, 8}), dead = b.value("dead", {2, 8}), h = b.value("h", {2, 8});
  b.node("MatMul", {x, w}, a);
  b.node("Relu", {a}, r);
  b.node("Reshape", {r, shape}, c);  // view of r
  b.node("Add", {c, c}, d);
  b.node("Identity", {d}, e);        // a group output: copies
  b.node("Sigmoid", {r}, f);         // reads r after the view: r must still be alive
  b.node("Tanh", {f}, dead);         // nobody reads it
  b.node("Mul", {f, f}, h);
  IrGraph& g = b.g;
  g.inputs = {x, w, shape};
  g.outputs = {e, h};
  g.values[size_t(x)].group_input = 0;
  g.values[size_t(w)].group_input = 1;
  g.values[size_t(shape)].group_input = 2;
  g.values[size_t(e)].group_output = 0;
  g.values[size_t(h)].group_output = 1;

  std::vector<Shape> shapes(g.values.size());
  for (size_t i = 0; i < g.values.size(); ++i) shapes[i] = g.values[i].dims;
  std::vector<const void*> addr(g.values.size(), nullptr);
  static char in_x[64], in_w[256], out_e[64], out_h[64];
  addr[size_t(x)] = in_x, addr[size_t(w)] = in_w, addr[size_t(e)] = out_e, addr[size_t(h)] = out_h;

  std::set<const void*> live, ever;
  std::vector<std::string> launched;
  std::map<const void*, std::string> freed_after;
  std::vector<std::unique_ptr<char[]>> owned;
  ScheduleHooks hooks;
  hooks.alloc = [&](uint64_t bytes) {
    CHECK(bytes == 64);  // every temporary here is 16 float32
    owned.push_back(std::make_unique<char[]>(bytes));
    live.insert(owned.back().get());
    ever.insert(owned.back().get());
    return static_cast<void*>(owned.back().get());
  };
  hooks.release = [&](void* p) {
    REQUIRE(live.count(p) == 1);  // released once, only what was allocated
    live.erase(p);
    freed_after[p] = launched.empty() ? "" : launched.back();
  };
  hooks.launch = [&](const IrNode& n, const NodeIo& io) {
    for (size_t i = 0; i < io.in.size(); ++i)
      if (ever.count(io.in[i])) REQUIRE_MESSAGE(live.count(io.in[i]) == 1, n.op << " reads a released temporary");
    if (ever.count(io.out[0])) REQUIRE(live.count(io.out[0]) == 1);
    launched.push_back(n.op);
  };
  schedule_group(g, device_uses(g), shapes, addr, hooks);

  CHECK(launched == std::vector<std::string>{"MatMul", "Relu", "Add", "Identity", "Sigmoid", "Tanh", "Mul"});  // no Reshape
  CHECK(live.empty());
  CHECK(ever.size() == 5);  // a, r (shared by c), d, f, dead
  CHECK(addr[size_t(c)] == addr[size_t(r)]);
  CHECK(freed_after[addr[size_t(a)]] == "Relu");
  CHECK(freed_after[addr[size_t(r)]] == "Sigmoid");  // not after Add: the view's reads and Sigmoid's
  CHECK(freed_after[addr[size_t(d)]] == "Identity");
  CHECK(freed_after[addr[size_t(dead)]] == "Tanh");
  CHECK(freed_after[addr[size_t(f)]] == "Mul");
  CHECK(addr[size_t(h)] == out_h);  // group outputs are written in place
}

TEST_CASE("device reads: shape and axes inputs are not, fused activations are skipped") {
  CHECK(reads_on_device("Gemm", 2));
  CHECK_FALSE(reads_on_device("Reshape", 1));
  CHECK_FALSE(reads_on_device("ReduceMean", 1));
  CHECK(reads_on_device("Gather", 1));
  CHECK(is_view("Flatten"));
  CHECK_FALSE(is_view("Transpose"));
  Builder b;
  const int x = b.value("x", {4}), y = b.value("y", {4}), z = b.value("z", {4});
  b.node("Add", {x, x}, y);
  b.node("Relu", {y}, z);
  CHECK(fuse_epilogues(b.g) == 1);
  auto uses = device_uses(b.g);
  CHECK(uses[size_t(x)] == 2);
  CHECK(uses[size_t(y)] == 0);  // the Relu was folded into the Add
}
