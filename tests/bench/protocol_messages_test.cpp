// The worker messages (fib/bench/protocol/messages.h): each survives its to_json/from_json round
// trip, parsing is strict, and a reply cannot name the files the orchestrator reads.
#include <gtest/gtest.h>

#include <string>

#include "fib/bench/protocol/messages.h"

namespace fib::bench::protocol {
namespace {

Definition toy_definition() {
  Diagnostics diag;
  ReadContext ctx{"test.json", &diag};
  auto d = definition_from_json(Json::parse(R"({
    "name": "toy_scale",
    "op_type": "test",
    "axes": {"n": {"type": "var"}, "d": {"type": "const", "value": 4}},
    "inputs": {"x": {"shape": ["n", "d"], "dtype": "bfloat16"},
               "eps": {"shape": null, "dtype": "float32"}},
    "outputs": {"y": {"shape": ["n", "d"], "dtype": "int32"}},
    "reference": "def run(x, eps):\n    return x\n"
  })"),
                                ctx);
  EXPECT_TRUE(d) << diag.to_string();
  return *d;
}

Schedule two_trials() {
  Schedule s;
  s.trials.push_back(
      TrialPlan{{5, 6}, {0, 7, 8}, 0, "/scratch/solution-trial0.safetensors", 2.5, 0.5});
  s.trials.push_back(TrialPlan{{}, {9, 1, 10}, 1, "/scratch/solution-trial1.safetensors", 0, 0});
  s.noise.min_samples = 3;
  s.noise.rel_precision = 0.01;
  s.fixed_iterations = true;
  s.flush_caches = false;
  s.device_pool = DevicePool{2, 9, 42};
  return s;
}

EvaluateRequest evaluate_request() {
  EvaluateRequest r;
  r.definition = toy_definition();
  r.var_axes = {{"n", 16}};
  r.solution = SolutionRef{"/cache/abc/solution.so", "run", false, "tvm-ffi",
                           Json{{"library", "/usr/lib/libpython3.11.so.1.0"}}};
  r.sets = "/scratch/inputs.safetensors";
  r.schedule = two_trials();
  r.device = "cuda:1";
  r.gpu_timer = "cupti";
  r.sampling = SamplingRequest{0, 100, "/scratch/solution-draws.safetensors"};
  return r;
}

TrialResult checked_trial(std::uint64_t call) {
  TrialResult t;
  t.samples_ms = {0.5, 0.25, 0.75};
  t.warmup_ms = 1.5;
  t.warmup_calls = 2;
  t.stopped_by = "noise";
  t.checked = CheckedCall{call, {{"y", -1515870811}}};
  t.gpu = Json{{"method", Json{{"mode", "cuda_events"}}}};
  return t;
}

EvaluateReply evaluate_reply() {
  EvaluateReply r;
  r.signature = "run(bf16[n,d], f32) -> i32[n,d]";
  r.load_inputs_ms = 3;
  r.schedule_ms = 40;
  r.cache_flush_ms = 0.5;
  r.trials = {checked_trial(2), checked_trial(6)};
  r.failure = Failure{"guard", "the solution wrote past the end of output 'y'", 6};
  r.fatal = true;
  r.window_audit = Json{{"available", true}, {"iterations", 3}};
  r.worker_phases_ms = Json{{"trials", 30.0}};
  r.gpu = Json{{"device", 1}, {"name", "H100"}};
  r.sampling_draws = 100;
  r.worker_ms = 41.5;
  return r;
}

TEST(ProtocolMessages, LoadRequestRoundTrips) {
  const SolutionRef ref = evaluate_request().solution;
  const Json j = load_request(ref);
  EXPECT_EQ(command_of(j), "load");
  const SolutionRef back = load_request_solution(j);
  EXPECT_EQ(back.library, ref.library);
  EXPECT_EQ(back.symbol, ref.symbol);
  EXPECT_EQ(back.binding, ref.binding);
  EXPECT_EQ(back.python, ref.python);
  Json extra = j;
  extra["device"] = "cuda:0";
  EXPECT_THROW(load_request_solution(extra), ProtocolError);
}

TEST(ProtocolMessages, EvaluateRequestRoundTrips) {
  const EvaluateRequest r = evaluate_request();
  const EvaluateRequest back = from_json<EvaluateRequest>(to_json(r));
  EXPECT_EQ(to_json(back.definition), to_json(r.definition));
  EXPECT_EQ(back.var_axes, r.var_axes);
  EXPECT_EQ(back.solution.library, r.solution.library);
  EXPECT_EQ(back.solution.symbol, r.solution.symbol);
  EXPECT_EQ(back.solution.dps, r.solution.dps);
  EXPECT_EQ(back.solution.binding, "tvm-ffi");
  EXPECT_EQ(back.solution.python, r.solution.python);
  EXPECT_EQ(back.sets, r.sets);
  EXPECT_EQ(back.schedule.trials, r.schedule.trials);
  EXPECT_EQ(back.schedule.noise.min_samples, 3u);
  EXPECT_EQ(back.schedule.noise.rel_precision, 0.01);
  EXPECT_TRUE(back.schedule.fixed_iterations);
  EXPECT_FALSE(back.schedule.flush_caches);
  EXPECT_EQ(back.schedule.device_pool, r.schedule.device_pool);
  EXPECT_EQ(back.device, "cuda:1");
  EXPECT_EQ(back.gpu_timer, "cupti");
  ASSERT_TRUE(back.sampling);
  EXPECT_EQ(back.sampling->set, 0);
  EXPECT_EQ(back.sampling->draws, 100);
  EXPECT_EQ(back.sampling->output, r.sampling->output);
  EXPECT_EQ(command_of(to_json(r)), "evaluate");
  EXPECT_EQ(to_json(back), to_json(r));
}

TEST(ProtocolMessages, ReferenceRequestRoundTrips) {
  ReferenceRequest r;
  r.definition = toy_definition();
  r.var_axes = {{"n", 3}};
  r.sets = "/scratch/inputs.safetensors";
  r.seeds = {1, 2, 18446744073709551615ull};
  r.threads = 4;
  r.eval_extra = Json{{"sampling_validation_trials", 50}};
  r.schedule = two_trials();
  r.device = "cpu";
  const ReferenceRequest back = from_json<ReferenceRequest>(to_json(r));
  EXPECT_EQ(back.seeds, r.seeds);
  EXPECT_EQ(back.threads, 4u);
  EXPECT_EQ(back.eval_extra, r.eval_extra);
  EXPECT_EQ(back.schedule.trials, r.schedule.trials);
  EXPECT_EQ(command_of(to_json(r)), "reference");
  EXPECT_EQ(to_json(back), to_json(r));
}

TEST(ProtocolMessages, RepliesRoundTrip) {
  const EvaluateReply r = evaluate_reply();
  const EvaluateReply back = from_json<EvaluateReply>(to_json(r));
  ASSERT_EQ(back.trials.size(), 2u);
  EXPECT_EQ(back.trials[1].samples_ms, r.trials[1].samples_ms);
  EXPECT_EQ(back.trials[1].checked, r.trials[1].checked);
  EXPECT_EQ(back.trials[0].gpu, r.trials[0].gpu);
  ASSERT_TRUE(back.failure);
  EXPECT_EQ(back.failure->kind, "guard");
  EXPECT_EQ(back.failure->call, 6u);
  EXPECT_TRUE(back.fatal);
  EXPECT_EQ(back.sampling_draws, 100);
  EXPECT_EQ(to_json(back), to_json(r));

  ReferenceReply ref;
  ref.kernel = "native:rmsnorm";
  ref.load_inputs_ms = 2;
  ref.trials = {checked_trial(0)};
  ref.trials[0].gpu = Json();
  EXPECT_EQ(to_json(from_json<ReferenceReply>(to_json(ref))), to_json(ref));

  const HelloReply hello{1234, 1, Json{{"seccomp", Json{{"on", true}}}}};
  const HelloReply hello_back = from_json<HelloReply>(to_json(hello));
  EXPECT_EQ(hello_back.pid, 1234);
  EXPECT_EQ(hello_back.abi, 1u);
  EXPECT_EQ(hello_back.hardening, hello.hardening);
}

TEST(ProtocolMessages, ErrorRepliesParseAsEitherReply) {
  const Json j = error_reply("out of memory in the worker", /*oom=*/true);
  const EvaluateReply e = from_json<EvaluateReply>(j);
  EXPECT_FALSE(e.ok);
  EXPECT_TRUE(e.oom);
  EXPECT_EQ(e.error, "out of memory in the worker");
  EXPECT_TRUE(e.trials.empty());
  const ReferenceReply r = from_json<ReferenceReply>(j);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.error, "out of memory in the worker");
}

// A reply naming a file for its checked outputs (or its draws) is not a reply: the orchestrator
// reads the paths its request chose, never one a worker hands back.
TEST(ProtocolMessages, ReplyNamingAFileIsRejected) {
  Json j = to_json(evaluate_reply());
  j["trials"][0]["checked"]["file"] = "/home/user/.ssh/id_rsa";
  EXPECT_THROW(from_json<EvaluateReply>(j), ProtocolError);

  Json draws = to_json(evaluate_reply());
  draws["sampling"]["file"] = "/etc/passwd";
  EXPECT_THROW(from_json<EvaluateReply>(draws), ProtocolError);

  Json ref = to_json(ReferenceReply{true, "", false, "k", 0, {checked_trial(0)}});
  ref["trials"][0]["checked"]["file"] = "/tmp/other.safetensors";
  EXPECT_THROW(from_json<ReferenceReply>(ref), ProtocolError);
}

TEST(ProtocolMessages, StrictParsing) {
  Json unknown = to_json(evaluate_reply());
  unknown["verdict"] = "PASSED";
  EXPECT_THROW(from_json<EvaluateReply>(unknown), ProtocolError);
  Json wrong_type = to_json(evaluate_reply());
  wrong_type["trials"][0]["samples_ms"] = "fast";
  EXPECT_THROW(from_json<EvaluateReply>(wrong_type), ProtocolError);
  Json missing = to_json(evaluate_reply());
  missing.erase("ok");
  EXPECT_THROW(from_json<EvaluateReply>(missing), ProtocolError);
  EXPECT_THROW(from_json<EvaluateReply>(Json::array()), ProtocolError);
  Json bad_pool = to_json(evaluate_request());
  bad_pool["schedule"]["device_pool"]["first"] = 0;
  EXPECT_THROW(from_json<EvaluateRequest>(bad_pool), ProtocolError);
  EXPECT_EQ(command_of(Json::parse("[1]")), "");
}

TEST(ProtocolMessages, RepliesAreHeldAgainstTheirRequests) {
  const EvaluateRequest req = evaluate_request();
  EXPECT_EQ(check_reply(req, evaluate_reply()), "");

  EvaluateReply extra_trial = evaluate_reply();
  extra_trial.trials.push_back(checked_trial(9));
  EXPECT_NE(check_reply(req, extra_trial), "");

  EvaluateRequest unchecked = evaluate_request();
  unchecked.schedule.trials[1].check_output.clear();
  EXPECT_NE(check_reply(unchecked, evaluate_reply()), "");

  // A request that leaves the checked call to the worker's draw: the reply's position must be
  // one of the timed calls the trial made.
  EvaluateRequest drawn = evaluate_request();
  for (TrialPlan& t : drawn.schedule.trials) t.check_position = -1;
  EXPECT_NE(check_reply(drawn, evaluate_reply()), "");  // no position reported
  EvaluateReply placed = evaluate_reply();
  for (TrialResult& t : placed.trials) t.checked->position = 2;
  EXPECT_EQ(check_reply(drawn, placed), "");
  placed.trials[1].checked->position = 3;  // 3 timed calls made
  EXPECT_NE(check_reply(drawn, placed), "");

  EvaluateReply more_draws = evaluate_reply();
  more_draws.sampling_draws = 101;
  EXPECT_NE(check_reply(req, more_draws), "");
  EvaluateRequest no_sampling = evaluate_request();
  no_sampling.sampling.reset();
  EXPECT_NE(check_reply(no_sampling, evaluate_reply()), "");
}

// A CPU evaluation with an output arena: the worker reports no checked call (the orchestrator
// draws it), as many timed calls as the noise criterion needs before any stop and no more than
// planned, and misshapen outputs only of the definition's outputs, on calls it made.
EvaluateRequest arena_request() {
  EvaluateRequest r = evaluate_request();
  r.device = "cpu";
  r.arena = OutputArena{3 * 2 * 64, 64, {0}};
  for (std::size_t t = 0; t < r.schedule.trials.size(); ++t) {
    r.schedule.trials[t].check_position = -1;
    r.schedule.trials[t].check_output.clear();
    r.schedule.trials[t].first_slot = static_cast<int>(3 * t);
    r.schedule.trials[t].poison_base = 1000 + t;
  }
  r.sampling.reset();
  return r;
}

EvaluateReply arena_reply() {
  EvaluateReply r = evaluate_reply();
  for (TrialResult& t : r.trials) t.checked.reset();
  r.sampling_draws = 0;
  return r;
}

TEST(ProtocolMessages, ArenaRequestsAndMisshapenOutputsRoundTrip) {
  const EvaluateRequest r = arena_request();
  const EvaluateRequest back = from_json<EvaluateRequest>(to_json(r));
  EXPECT_EQ(back.arena, r.arena);
  EXPECT_EQ(back.schedule.trials, r.schedule.trials);
  EvaluateReply reply = arena_reply();
  reply.trials[0].misshapen.push_back(MisshapenOutput{1, "y", "float32", {16, 2}});
  const EvaluateReply parsed = from_json<EvaluateReply>(to_json(reply));
  EXPECT_EQ(parsed.trials[0].misshapen, reply.trials[0].misshapen);
}

TEST(ProtocolMessages, ArenaRepliesAreHeldAgainstTheirRequests) {
  const EvaluateRequest req = arena_request();
  EXPECT_EQ(check_reply(req, arena_reply()), "");

  EvaluateReply drew_itself = arena_reply();
  drew_itself.trials[1].checked = CheckedCall{6, {}, 1};
  EXPECT_NE(check_reply(req, drew_itself), "");

  // Fewer timed calls than the noise criterion needs (3) would narrow the orchestrator's draw.
  EvaluateReply fewer = arena_reply();
  fewer.trials[0].samples_ms = {0.5};
  EXPECT_NE(check_reply(req, fewer), "");
  EvaluateReply more = arena_reply();
  more.trials[0].samples_ms = {0.5, 0.5, 0.5, 0.5};
  EXPECT_NE(check_reply(req, more), "");

  EvaluateReply misshapen = arena_reply();
  misshapen.trials[0].misshapen.push_back(MisshapenOutput{2, "y", "float32", {16}});
  EXPECT_EQ(check_reply(req, misshapen), "");
  for (const MisshapenOutput& bad :
       {MisshapenOutput{3, "y", "float32", {16}}, MisshapenOutput{0, "z", "float32", {16}},
        MisshapenOutput{0, "y", "float99", {16}},
        MisshapenOutput{0, "y", "float32", {1 << 30, 1 << 30}}}) {
    EvaluateReply r = arena_reply();
    r.trials[0].misshapen.push_back(bad);
    EXPECT_NE(check_reply(req, r), "") << bad.output << " " << bad.position;
  }
  // Without an arena, a worker reports no misshapen output.
  EXPECT_NE(check_reply(evaluate_request(), misshapen), "");
}

}  // namespace
}  // namespace fib::bench::protocol
