// The worker's solution-call layer (src/bench/runtime/): arguments in the ABI's terms,
// fib::allocate's buffers reused and poisoned call after call, and a SolutionCall over a
// CallBackend other than the fib ABI's (as a tvm-ffi or Python runtime would be).
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <vector>

#include "fib/bench/runtime/solution_call.h"

namespace fib::bench::detail {
namespace {

Definition toy_definition() {
  Diagnostics diag;
  ReadContext ctx{"test.json", &diag};
  auto d = definition_from_json(Json::parse(R"({
    "name": "toy",
    "op_type": "test",
    "axes": {"n": {"type": "var"}},
    "inputs": {"x": {"shape": ["n"], "dtype": "float32"},
               "bias": {"shape": ["n"], "dtype": "float32", "optional": true},
               "k": {"shape": null, "dtype": "int32"},
               "scale": {"shape": null, "dtype": "float32"}},
    "outputs": {"y": {"shape": ["n"], "dtype": "int32"}},
    "reference": "def run(x, bias, k, scale):\n    return x\n"
  })"),
                                ctx);
  EXPECT_TRUE(d) << diag.to_string();
  return *d;
}

// Host memory without guards; counts its poisonings.
class PlainBuffer : public OutputBuffer {
 public:
  PlainBuffer(DType dtype, const Shape& shape) : OutputBuffer(dtype, shape, FIB_DEVICE_CPU, 0) {
    storage_.resize(bytes() + 1);
    set_data(storage_.data());
  }
  void poison(std::uint64_t k) override {
    ++poisoned;
    last_call = k;
  }
  int poisoned = 0;
  std::uint64_t last_call = 0;

 private:
  std::vector<std::byte> storage_;
};

MakeBuffer plain() {
  return
      [](DType dtype, const Shape& shape) { return std::make_unique<PlainBuffer>(dtype, shape); };
}

const PlainBuffer& plain_of(const OutputBuffer& b) { return static_cast<const PlainBuffer&>(b); }

TEST(SolutionCall, ArgumentsFollowTheDefinition) {
  const Definition def = toy_definition();
  float x[3] = {1, 2, 3};
  InputViews in;
  in.tensors["x"] = contiguous_view(x, DType::kFloat32, {3});
  const Scalars scalars{{"k", std::int64_t{7}}, {"scale", std::int64_t{2}}};
  in.scalars = &scalars;
  std::int32_t y[3];
  const std::vector<fib_value> args =
      build_arguments(def, in, {contiguous_view(y, DType::kInt32, {3})});
  ASSERT_EQ(args.size(), 5u);
  EXPECT_EQ(args[0].kind, FIB_VALUE_TENSOR);
  EXPECT_EQ(args[0].tensor.data, x);
  EXPECT_EQ(args[0].tensor.strides[0], 1);
  EXPECT_EQ(args[1].kind, FIB_VALUE_ABSENT);  // the optional bias is not in the set
  EXPECT_EQ(args[2].kind, FIB_VALUE_INT);
  EXPECT_EQ(args[2].i, 7);
  EXPECT_EQ(args[3].kind, FIB_VALUE_FLOAT);  // an integer given to a float scalar
  EXPECT_EQ(args[3].f, 2.0);
  EXPECT_EQ(args[4].tensor.data, y);
}

TEST(SolutionCall, AllocationsAreReusedByPositionAndPoisonedEveryCall) {
  for (const bool ahead : {false, true}) {
    ValueAllocator a(plain(), ahead);
    const std::int64_t shape[2] = {2, 3};
    fib_tensor t1{}, t2{}, t3{};
    a.begin_call(0);
    ASSERT_EQ(a.abi()->allocate(a.abi()->context, FIB_DTYPE_FLOAT32, shape, 2, &t1), 0);
    ASSERT_EQ(a.abi()->allocate(a.abi()->context, FIB_DTYPE_INT8, shape, 1, &t2), 0);
    a.end_call();
    EXPECT_EQ(plain_of(a.buffer(0)).poisoned, 1);
    a.begin_call(1);
    fib_tensor again{};
    ASSERT_EQ(a.abi()->allocate(a.abi()->context, FIB_DTYPE_FLOAT32, shape, 2, &again), 0);
    EXPECT_EQ(again.data, t1.data);  // the same request at the same position: the same buffer
    ASSERT_EQ(a.abi()->allocate(a.abi()->context, FIB_DTYPE_INT8, shape, 2, &t3), 0);
    EXPECT_NE(t3.data, t2.data);  // a different shape: a fresh buffer
    a.end_call();
    EXPECT_EQ(a.used(), 2u);
    EXPECT_EQ(plain_of(a.buffer(0)).poisoned, 2) << "ahead " << ahead;
    EXPECT_EQ(plain_of(a.buffer(0)).last_call, 1u);
    EXPECT_EQ(plain_of(a.buffer(1)).poisoned, 1);
    fib_tensor bad{};
    const std::int64_t negative[1] = {-1};
    EXPECT_NE(a.abi()->allocate(a.abi()->context, FIB_DTYPE_FLOAT32, negative, 1, &bad), 0);
    EXPECT_NE(a.abi()->allocate(a.abi()->context, 99, shape, 1, &bad), 0);
  }
}

// A runtime of its own: returns a tensor fib::allocate handed out, or (cheating) one it did not.
class FakeRuntime : public CallBackend {
 public:
  std::optional<std::string> call(const CallFrame& frame) override {
    ++calls;
    if (fail) return "boom";
    const std::int64_t n = frame.args->at(0).tensor.shape[0];
    fib_tensor out{};
    if (frame.allocator->allocate(frame.allocator->context, FIB_DTYPE_INT32, &n, 1, &out) != 0) {
      return "allocation failed";
    }
    (*frame.results)[0] = out;
    if (cheat) (*frame.results)[0].data = &stray;
    return std::nullopt;
  }
  int calls = 0;
  bool fail = false, cheat = false;
  std::int32_t stray = 0;
};

TEST(SolutionCall, AnyBackendCallsAndItsResultsAreChecked) {
  const Definition def = toy_definition();
  FakeRuntime runtime;
  SolutionCall call(def, {{"n", 3}}, runtime, /*dps=*/false, plain(), /*poison_ahead=*/false);
  ASSERT_EQ(call.output_shapes().size(), 1u);
  EXPECT_EQ(call.output_shapes()[0], (Shape{3}));
  EXPECT_TRUE(call.output_views().empty());
  float x[3] = {};
  InputViews in;
  in.tensors["x"] = contiguous_view(x, DType::kFloat32, {3});
  const std::vector<fib_value> args = build_arguments(def, in, call.output_views());

  call.begin(4);
  EXPECT_EQ(call.sentinels().at("y"), poison_for(DType::kInt32, 4).sentinel);
  EXPECT_EQ(call.invoke(args, nullptr), std::nullopt);
  call.end();
  EXPECT_EQ(call.foreign_result(), std::nullopt);
  ASSERT_EQ(call.guarded().size(), 1u);
  EXPECT_EQ(call.guarded()[0].name, "allocation #1");
  const ProducedOutput p = call.produced(0);
  EXPECT_EQ(p.shape, (Shape{3}));
  EXPECT_EQ(p.bytes, 12u);
  EXPECT_EQ(p.data, call.guarded()[0].buffer->data());

  runtime.cheat = true;
  call.begin(5);
  EXPECT_EQ(call.invoke(args, nullptr), std::nullopt);
  call.end();
  ASSERT_TRUE(call.foreign_result());
  EXPECT_NE(call.foreign_result()->find("was not allocated with fib::allocate"), std::string::npos);

  runtime.fail = true;
  call.begin(6);
  EXPECT_EQ(call.invoke(args, nullptr), std::optional<std::string>("boom"));
  EXPECT_EQ(runtime.calls, 3);
}

TEST(SolutionCall, DestinationPassingGuardsItsOutputs) {
  const Definition def = toy_definition();
  FakeRuntime runtime;
  SolutionCall call(def, {{"n", 5}}, runtime, /*dps=*/true, plain(), /*poison_ahead=*/false);
  ASSERT_EQ(call.output_views().size(), 1u);
  EXPECT_EQ(call.output_views()[0].shape[0], 5);
  call.begin(0);
  ASSERT_EQ(call.guarded().size(), 1u);
  EXPECT_EQ(call.guarded()[0].name, "output 'y'");
  EXPECT_EQ(plain_of(*call.guarded()[0].buffer).poisoned, 1);
  EXPECT_EQ(guard_message(call.guarded()[0], 20),
            "the solution wrote past the end of output 'y' (byte 20 of a 20-byte buffer)");
  EXPECT_EQ(guard_message(call.guarded()[0], -3),
            "the solution wrote before the start of output 'y' (3 bytes before it)");
  EXPECT_THROW(SolutionCall(def, {}, runtime, true, plain(), false), Error);
}

}  // namespace
}  // namespace fib::bench::detail
