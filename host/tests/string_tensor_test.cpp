// String tensors (ABI 2.3) through the host: .pb and C API I/O, the CPU plugin's Cast
// and StringNormalizer, outputs that outlive the run and its inputs, string constants,
// control flow carrying strings, and the partitioner keeping string nodes off EPs that
// cannot take them.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include "error_of.hpp"
#include "model_builder.hpp"
#include "string_tensor.hpp"

#include <nxrt/nxrt.h>

#include <filesystem>

using namespace nxrt;
using namespace nxrt::test;
using nxrt::test::error_of;

namespace {

constexpr int S = onnx::TensorProto::STRING;

std::vector<std::string> strings_of(const HostTensor& t) {
  REQUIRE(t.dtype == NXRT_DTYPE_STRING);
  std::vector<std::string> v(size_t(t.numel()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::string(string_at(t.data.data(), i));
  return v;
}

void strings_attr(onnx::NodeProto* n, const std::string& name, std::vector<std::string> v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::STRINGS);
  for (auto& x : v) a->add_strings(x);
}

void string_attr(onnx::NodeProto* n, const std::string& name, const std::string& v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(v);
}

// x (float [4]) -> Cast to string -> StringNormalizer(UPPER, stop "NAN" case-insensitively)
// -> y; also words (string [3], input) -> Cast to float -> z, and a string constant echoed.
Model text_builder() {
  Model m;
  Graph g = m.main();
  g.in("x", F, std::vector<int64_t>{4});
  g.in("words", S, std::vector<int64_t>{3});
  auto* c = g.node("Cast", {"x"}, {"x_text"});
  int_attr(c, "to", S);
  auto* sn = g.node("StringNormalizer", {"x_text"}, {"y"});
  string_attr(sn, "case_change_action", "UPPER");
  strings_attr(sn, "stopwords", {"nan"});
  auto* c2 = g.node("Cast", {"words"}, {"z"});
  int_attr(c2, "to", F);
  auto* k = g.g->add_initializer();
  k->set_name("greeting");
  k->set_data_type(S);
  k->add_dims(2);
  k->add_string_data("héllo");
  k->add_string_data(std::string("nul\0byte", 8));
  auto* sn2 = g.node("StringNormalizer", {"greeting"}, {"shout"});
  string_attr(sn2, "case_change_action", "UPPER");
  g.out("y", S, std::vector<int64_t>{-1});
  g.out("z", F, std::vector<int64_t>{3});
  g.out("shout", S, std::vector<int64_t>{2});
  return m;
}
std::shared_ptr<nxrt_model_ir> text_model() { return text_builder().load(); }

In text(const std::string& name, const std::vector<std::string>& v, std::vector<nxrt_string>& keep) {
  keep.clear();
  for (auto& s : v) keep.push_back(nxrt_string{s.data(), s.size()});
  In i{name, NXRT_DTYPE_STRING, {int64_t(v.size())}, std::vector<uint8_t>(keep.size() * sizeof(nxrt_string))};
  std::memcpy(i.bytes.data(), keep.data(), i.bytes.size());
  return i;
}

}  // namespace

TEST_CASE("strings: Cast and StringNormalizer on the CPU; outputs outlive the run and its inputs") {
  Env env;
  auto s = session(env, text_model());
  std::vector<HostTensor> out;
  {
    auto words = std::make_unique<std::vector<std::string>>(std::vector<std::string>{" 1.5", "-inf", "+2e3 "});
    std::vector<nxrt_string> keep;
    out = run(*s, {f32("x", {0.039187793f, std::nanf(""), -2.5f, 1e-5f}, {4}), text("words", *words, keep)});
    words->assign(3, std::string(64, 'x'));  // the caller reuses its buffers: outputs must not care
  }
  REQUIRE(out.size() == 3);
  CHECK(strings_of(out[0]) == std::vector<std::string>{"0.039187793", "-2.5", "1E-05"});
  CHECK(out[0].dims == std::vector<int64_t>{3});
  const std::vector<float> z = values(out[1]);
  CHECK(z[0] == 1.5f);
  CHECK(std::isinf(z[1]));
  CHECK(z[1] < 0);
  CHECK(z[2] == 2000.0f);
  CHECK(strings_of(out[2]) == std::vector<std::string>{"HÉLLO", std::string("NUL\0BYTE", 8)});
  // A second run on the same (pooled) run state leaves the first run's outputs intact.
  std::vector<nxrt_string> keep;
  auto again = run(*s, {f32("x", {1, 2, 3, 4}, {4}), text("words", {"0", "1", "2"}, keep)});
  CHECK(strings_of(again[0]) == std::vector<std::string>{"1", "2", "3", "4"});
  CHECK(strings_of(out[0]) == std::vector<std::string>{"0.039187793", "-2.5", "1E-05"});
}

TEST_CASE("strings: text that is not a number fails the run naming the element") {
  Env env;
  auto s = session(env, text_model());
  std::vector<nxrt_string> keep;
  const std::string e = error_of([&] { run(*s, {f32("x", {0, 0, 0, 0}, {4}), text("words", {"1", "one", "3"}, keep)}); });
  CHECK(e.find("element 1") != std::string::npos);
  CHECK(e.find("\"one\"") != std::string::npos);
}

TEST_CASE("strings: .pb files round-trip string_data, and refuse a count that disagrees with the shape") {
  const auto dir = std::filesystem::temp_directory_path() / "nxrt_string_tensor_test";
  std::filesystem::create_directories(dir);
  HostTensor t = make_string_tensor("s", {2, 2}, {"a", "", std::string("\0z", 2), "ünï"});
  write_tensor_file(dir / "s.pb", t);
  HostTensor back = read_tensor_file(dir / "s.pb");
  CHECK(back.dims == t.dims);
  CHECK(strings_of(back) == strings_of(t));
  onnx::TensorProto bad;
  bad.set_name("bad");
  bad.set_data_type(S);
  bad.add_dims(3);
  bad.add_string_data("only one");
  CHECK(error_of([&] { decode_tensor(bad); }).find("needs 3 strings but has 1") != std::string::npos);
}

TEST_CASE("strings: the C API takes and returns string tensors whose text the outputs own") {
  const std::string bytes = text_builder().m.SerializeAsString();
  auto ok = [](nxrt_error* e) {
    const std::string m = e ? nxrt_error_message(e) : "";
    if (e) nxrt_error_release(e);
    return m;
  };
  nxrt_env* env = nullptr;
  REQUIRE(ok(nxrt_env_create_empty(&env)) == "");
  REQUIRE(ok(nxrt_env_register_plugin(env, lib_path("libnxrt_ep_cpu.so").c_str(), nullptr)) == "");
  nxrt_model* model = nullptr;
  REQUIRE(ok(nxrt_model_load_bytes(bytes.data(), bytes.size(), &model)) == "");
  nxrt_session_options o{};
  o.eps = "cpu";
  nxrt_session* s = nullptr;
  REQUIRE(ok(nxrt_session_create(env, model, &o, &s)) == "");
  const float xv[] = {1, 2, 3, 4};
  const int64_t xd[] = {4}, wd[] = {3};
  std::vector<std::string> words{"4", "5.5", "-6"};
  std::vector<nxrt_string> w;
  for (auto& x : words) w.push_back(nxrt_string{x.data(), x.size()});
  const nxrt_host_tensor in[] = {{"x", NXRT_DTYPE_FLOAT32, 1, xd, xv}, {"words", NXRT_DTYPE_STRING, 1, wd, w.data()}};
  nxrt_outputs* out = nullptr;
  REQUIRE(ok(nxrt_session_run(s, in, 2, &out)) == "");
  words.assign(3, std::string(40, '#'));  // the caller's text is gone; the outputs keep theirs
  const nxrt_host_tensor y = nxrt_outputs_get(out, 0), z = nxrt_outputs_get(out, 1);
  REQUIRE(y.dtype == NXRT_DTYPE_STRING);
  CHECK(string_at(y.data, 0) == "1");
  CHECK(string_at(y.data, 3) == "4");
  CHECK(static_cast<const float*>(z.data)[1] == 5.5f);
  nxrt_outputs_release(out);
  nxrt_session_release(s);
  nxrt_model_release(model);
  nxrt_env_release(env);
}

TEST_CASE("strings: Loop carries a string tensor through its body") {
  Model m;
  Graph g = m.main();
  g.in("M", I64, std::vector<int64_t>{});
  g.in("s0", S, std::vector<int64_t>{2});
  auto* n = g.node("Loop", {"M", "", "s0"}, {"s"});
  Graph b = body(n, "body", "loop_body");
  b.in("i", I64, std::vector<int64_t>{});
  b.in("c", B, std::vector<int64_t>{});
  b.in("s_in", S, std::vector<int64_t>{2});
  auto* up = b.node("StringNormalizer", {"s_in"}, {"s_out"});
  string_attr(up, "case_change_action", "UPPER");
  b.node("Identity", {"c"}, {"c_out"});
  b.out("c_out", B, std::vector<int64_t>{});
  b.out("s_out", S, std::vector<int64_t>{2});
  g.out("s", S, std::vector<int64_t>{2});
  Env env;
  auto s = session(env, m.load());
  std::vector<nxrt_string> keep;
  auto out = run(*s, {i64("M", 2), text("s0", {"ab", "çd"}, keep)});
  CHECK(strings_of(out[0]) == std::vector<std::string>{"AB", "ÇD"});
  auto zero = run(*s, {i64("M", 0), text("s0", {"ab", "çd"}, keep)});
  CHECK(strings_of(zero[0]) == std::vector<std::string>{"ab", "çd"});
}

TEST_CASE("strings: an EP without string tensors never sees a string node") {
  Env env;
  env.add(lib_path("libnxrt_ep_sample.so"));
  auto m = text_model();
  SessionConfig c;
  c.eps = "sample";
  c.threads = 1;
  const std::string e = error_of([&] { env.create_session(m, c, false); });
  CHECK(e.find("touches a string tensor") != std::string::npos);
}

TEST_CASE("strings: element-moving ops on the CPU (Concat, Reshape, Unsqueeze, Identity, Shape) keep the text") {
  Model m;
  Graph g = m.main();
  g.in("s", S, std::vector<int64_t>{2});
  g.int64s("shape", {2, 2}, {2});
  g.int64s("axes", {0}, {1});
  g.node("Concat", {"s", "s"}, {"twice"})->add_attribute()->CopyFrom([] {
    onnx::AttributeProto a;
    a.set_name("axis");
    a.set_type(onnx::AttributeProto::INT);
    a.set_i(0);
    return a;
  }());
  g.node("Reshape", {"twice", "shape"}, {"square"});
  g.node("Identity", {"square"}, {"same"});
  g.node("Unsqueeze", {"s", "axes"}, {"row"});
  g.node("Shape", {"same"}, {"dims"});
  g.out("same", S, std::vector<int64_t>{2, 2});
  g.out("row", S, std::vector<int64_t>{1, 2});
  g.out("dims", I64, std::vector<int64_t>{2});
  Env env;
  auto s = session(env, m.load());
  for (auto& a : s->assignments()) CHECK(a.ep == 0);  // all on the CPU
  std::vector<nxrt_string> keep;
  auto out = run(*s, {text("s", {"x", "yz"}, keep)});
  CHECK(strings_of(out[0]) == std::vector<std::string>{"x", "yz", "x", "yz"});
  CHECK(out[0].dims == std::vector<int64_t>{2, 2});
  CHECK(strings_of(out[1]) == std::vector<std::string>{"x", "yz"});
  std::vector<int64_t> d(2);
  std::memcpy(d.data(), out[2].data.data(), 16);
  CHECK(d == std::vector<int64_t>{2, 2});
}

TEST_CASE("strings: TfIdfVectorizer counts string tokens from pool_strings") {
  Model m;
  Graph g = m.main();
  g.in("words", S, std::vector<int64_t>{6});
  auto* n = g.node("TfIdfVectorizer", {"words"}, {"counts"});
  string_attr(n, "mode", "TF");
  int_attr(n, "min_gram_length", 1);
  int_attr(n, "max_gram_length", 2);
  int_attr(n, "max_skip_count", 0);
  ints_attr(n, "ngram_counts", {0, 2});
  ints_attr(n, "ngram_indexes", {0, 1, 2});
  strings_attr(n, "pool_strings", {"to", "be", "to", "be"});  // unigrams to, be; bigram (to, be)
  g.out("counts", F, std::vector<int64_t>{3});
  Env env;
  auto s = session(env, m.load());
  std::vector<nxrt_string> keep;
  auto out = run(*s, {text("words", {"to", "be", "or", "not", "to", "be"}, keep)});
  CHECK(values(out[0]) == std::vector<float>{2, 2, 2});
}
