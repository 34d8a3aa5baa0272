// The input-set file's deferred bulk fills (fib/bench/inputs/input_set_file.h) and the decision
// to defer them (src/bench/run/prepare.h): a fill travels as its spec, reads back exactly, is made
// on the host where a host copy is needed with the bytes the host would have made, and addresses
// its set's content whether it is made on the host or on a device; GPU lanes with --inputs-on
// device defer, others do not; large workloads share their weights (and only them) across checked
// sets.
#include "fib/bench/inputs/input_set_file.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "bench/run/prepare.h"
#include "fib/bench/eval/eval_config.h"
#include "fib/bench/reference_stage/reference_cache.h"
#include "fib/tensor/inputs.h"
#include "support/temp_dir.h"

namespace fib::bench::detail {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

const fs::path kSource = FIB_SOURCE_DIR;

BulkFill normal_fill(std::uint64_t key, Shape shape) {
  BulkFill f;
  f.spec.dist = counter_random::Dist::kNormal;
  f.spec.a = 0.1f;  // not a binary fraction: its bits must survive the file
  f.spec.b = std::numeric_limits<float>::denorm_min();
  f.spec.lo = -std::numeric_limits<float>::infinity();
  f.spec.hi = 3.0f;
  f.key = key;
  f.dtype = DType::kBFloat16;
  f.shape = std::move(shape);
  return f;
}

bool same_fill(const BulkFill& x, const BulkFill& y) {
  const auto bits = [](float f) { return std::bit_cast<std::uint32_t>(f); };
  return x.spec.dist == y.spec.dist && bits(x.spec.a) == bits(y.spec.a) &&
         bits(x.spec.b) == bits(y.spec.b) && bits(x.spec.lo) == bits(y.spec.lo) &&
         bits(x.spec.hi) == bits(y.spec.hi) && x.spec.first == y.spec.first &&
         x.spec.span == y.spec.span && x.key == y.key && x.dtype == y.dtype && x.shape == y.shape;
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && a.nbytes() == b.nbytes() &&
         std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

TEST(InputSetFile, BulkFillsReadBackExactly) {
  const BulkFill f = normal_fill(0xfedcba9876543210ull, {3, 5});
  EXPECT_TRUE(same_fill(bulk_fill_from_json(Json::parse(bulk_fill_json(f).dump())), f));
  BulkFill ints;
  ints.spec.dist = counter_random::Dist::kInteger;
  ints.spec.first = -7;
  ints.spec.span = std::uint64_t{1} << 32;
  ints.key = 1;
  ints.dtype = DType::kInt64;
  ints.shape = {4096};
  EXPECT_TRUE(same_fill(bulk_fill_from_json(bulk_fill_json(ints)), ints));
}

TEST(InputSetFile, MalformedFillsAreErrors) {
  Json j = bulk_fill_json(normal_fill(1, {2}));
  j["dist"] = 9;
  EXPECT_THROW(bulk_fill_from_json(j), Error);
  j = bulk_fill_json(normal_fill(1, {2}));
  j["dtype"] = "int32";  // a normal distribution into integers
  EXPECT_THROW(bulk_fill_from_json(j), Error);
  j = bulk_fill_json(normal_fill(1, {2}));
  j.erase("key");
  EXPECT_THROW(bulk_fill_from_json(j), Error);
  j = bulk_fill_json(normal_fill(1, {2}));
  j["shape"] = Json::array({-1});
  EXPECT_THROW(bulk_fill_from_json(j), Error);
}

MaterializedInputs deferred_set(std::uint64_t key) {
  MaterializedInputs set;
  Tensor idx(DType::kInt32, {4});
  for (int i = 0; i < 4; ++i) idx.data<std::int32_t>()[i] = 3 - i;
  set.tensors.emplace("indices", idx);
  set.deferred.emplace("weights", normal_fill(key, {64, 33}));
  set.scalars.emplace("scale", Scalar{0.5});
  return set;
}

Definition two_input_definition() {
  Definition def;
  def.name = "d";
  for (const char* n : {"indices", "weights", "scale"}) {
    TensorSpec s;
    s.name = n;
    if (std::string(n) != "scale") s.shape = std::vector<std::string>{"n"};
    def.inputs.push_back(s);
  }
  return def;
}

TEST(InputSetFile, DeferredFillsTravelAsFillsAndAreMadeOnTheHostOnDemand) {
  TempDir tmp;
  const fs::path file = tmp.path() / "inputs.safetensors";
  const std::vector<MaterializedInputs> sets{deferred_set(11), deferred_set(12)};
  write_input_sets(file, two_input_definition(), sets, 5,
                   {digest_input_set(sets[0]), digest_input_set(sets[1])});
  // The fills' 2 x 64 x 33 bfloat16 elements are not in the file.
  EXPECT_LT(fs::file_size(file), 2 * 64 * 33 * 2u);

  std::vector<InputSet> read = read_input_sets(file);
  ASSERT_EQ(read.size(), 2u);
  for (std::size_t k = 0; k < 2; ++k) {
    EXPECT_EQ(read[k].tensors.size(), 1u);
    EXPECT_TRUE(same_bytes(read[k].tensors.at("indices"), sets[k].tensors.at("indices")));
    EXPECT_TRUE(read[k].sums.contains("indices"));
    EXPECT_FALSE(read[k].sums.contains("weights"));  // the device hashes what it makes
    ASSERT_EQ(read[k].fills.size(), 1u);
    EXPECT_TRUE(same_fill(read[k].fills.at("weights"), sets[k].deferred.at("weights")));
    EXPECT_EQ(std::get<double>(read[k].scalars.at("scale")), 0.5);
  }
  // Made on the host where a host copy is needed: the bytes make_bulk_fill gives.
  const Tensor expected = make_bulk_fill(sets[1].deferred.at("weights"));
  make_fills_on_host(read[1]);
  EXPECT_TRUE(read[1].fills.empty());
  EXPECT_TRUE(same_bytes(read[1].tensors.at("weights"), expected));
  const reference::Arguments args = read_input_set(file, 1);
  EXPECT_TRUE(same_bytes(args.tensors.at("weights"), expected));
  EXPECT_TRUE(same_bytes(args.tensors.at("indices"), sets[1].tensors.at("indices")));
}

TEST(InputSetFile, AFillIsPartOfItsSetsContentAddress) {
  const std::string a = digest_input_set(deferred_set(11)).digest;
  EXPECT_EQ(digest_input_set(deferred_set(11)).digest, a);
  EXPECT_NE(digest_input_set(deferred_set(12)).digest, a);
  MaterializedInputs other = deferred_set(11);
  other.deferred.at("weights").spec.hi = 2.0f;
  EXPECT_NE(digest_input_set(other).digest, a);
}

// A fill made on the host keeps the content address its spec gave: the reference cache's key of
// a host-made set is the key of the same set made on a device.
TEST(InputSetFile, AFillMadeOnTheHostKeepsItsSetsContentAddress) {
  MaterializedInputs set = deferred_set(11);
  const InputSetDigest from_fills = digest_input_set(set);
  InputSetDigest digest = from_fills;
  make_deferred_on_host(set, digest);
  EXPECT_TRUE(set.deferred.empty());
  EXPECT_EQ(digest.digest, from_fills.digest);
  const Tensor expected = make_bulk_fill(deferred_set(11).deferred.at("weights"));
  ASSERT_TRUE(set.tensors.contains("weights"));
  EXPECT_TRUE(same_bytes(set.tensors.at("weights"), expected));
  // The made tensor's checksum, which the file carries for the worker, is that of its bytes.
  EXPECT_EQ(digest.sums.at("weights"), input_sum(expected.raw(), expected.nbytes()));
  EXPECT_EQ(digest.sums.at("indices"), from_fills.sums.at("indices"));
  // Another seed's fill, made on the host too, is another address.
  MaterializedInputs other = deferred_set(12);
  InputSetDigest other_digest = digest_input_set(other);
  make_deferred_on_host(other, other_digest);
  EXPECT_NE(other_digest.digest, digest.digest);
}

TEST(PrepareInputs, BulkFillsAreDeferredOnGpuLanesWithInputsOnDevice) {
  RunOptions o;
  EXPECT_EQ(o.inputs_on, InputsOn::kDevice);
  EXPECT_TRUE(inputs_made_on_device(o, /*gpu=*/true));
  EXPECT_FALSE(inputs_made_on_device(o, /*gpu=*/false));  // CPU lanes make inputs in place
  o.inputs_on = InputsOn::kHost;
  EXPECT_FALSE(inputs_made_on_device(o, true));
  EXPECT_FALSE(inputs_made_on_device(o, false));
  EXPECT_THROW(parse_inputs_on("gpu"), Error);  // refused where the command line parses it

  EXPECT_FALSE(shares_weights(100, 0, true));  // 0: never
  EXPECT_FALSE(shares_weights(99, 100, true));
  EXPECT_TRUE(shares_weights(100, 100, true));
  EXPECT_FALSE(shares_weights(1000, 100, false));  // host-made sets are never shared
}

const fs::path kGemm = kSource / "examples/dataset/definitions/gemm/gemm_n2048_k2048.json";

Workload gemm_workload() {
  Workload w;
  w.uuid = "w";
  w.axes = {{"M", 3}};
  for (const char* n : {"A", "B"}) {
    WorkloadInput in;
    in.name = n;
    w.inputs.push_back(in);
  }
  return w;
}

TEST(PrepareInputs, WeightsAreTheInputsWithoutVariableAxes) {
  EXPECT_EQ(weight_inputs(load_definition(kGemm.string())), std::vector<std::string>{"B"});
}

// prepare_workload on a GPU lane: the file, its fills, and what the checked sets share.
struct Prepared {
  PreparedWorkload p;
  std::vector<InputSet> sets;
};
Prepared prepare(TempDir& tmp, const std::string& inputs_on, std::uint64_t share_bytes,
                 std::uint64_t seed = 7) {
  RunOptions o;
  o.dataset = kSource / "examples/dataset";
  o.inputs_on = parse_inputs_on(inputs_on);
  o.share_weights_bytes = share_bytes;
  o.cli.num_trials = 3;
  const EvalConfigFile builtin = builtin_eval_config();
  const PrepareSettings settings{o, builtin, nullptr, seed, true, inputs_made_on_device(o, true)};
  Prepared r{prepare_workload(settings, load_definition(kGemm.string()), gemm_workload(),
                              tmp.path() / fmt::format("{}-{}", inputs_on, seed), 2),
             {}};
  r.sets = read_input_sets(r.p.inputs_file);
  return r;
}

TEST(PrepareInputs, GpuLanesCarryFillsThatMakeTheHostsBytes) {
  TempDir tmp;
  Prepared host = prepare(tmp, "host", 0);
  Prepared device = prepare(tmp, "device", 0);
  EXPECT_EQ(host.p.inputs_made, "host");
  EXPECT_EQ(device.p.inputs_made, "device");
  ASSERT_EQ(host.sets.size(), 3u);  // the checked sets; the pool is made on the device
  ASSERT_EQ(device.sets.size(), 3u);
  EXPECT_EQ(host.p.set_seeds, device.p.set_seeds);
  EXPECT_EQ(host.p.schedule.trials.size(), device.p.schedule.trials.size());
  EXPECT_EQ(host.p.pool, device.p.pool);  // sized by the bytes the fills will make
  for (std::size_t k = 0; k < 3; ++k) {
    EXPECT_TRUE(host.sets[k].fills.empty());
    EXPECT_TRUE(device.sets[k].tensors.empty());
    ASSERT_EQ(device.sets[k].fills.size(), 2u);
    make_fills_on_host(device.sets[k]);
    for (const char* n : {"A", "B"}) {
      EXPECT_TRUE(same_bytes(device.sets[k].tensors.at(n), host.sets[k].tensors.at(n)))
          << "set " << k << " input " << n;
    }
  }
  EXPECT_TRUE(device.p.shared_weights.empty());
  EXPECT_NE(host.sets[0].tensors.at("B").nbytes(), 0u);
}

TEST(PrepareInputs, LargeWorkloadsShareTheirWeightsAcrossCheckedSets) {
  TempDir tmp;
  Prepared device = prepare(tmp, "device", 1);  // every set counts as large
  EXPECT_EQ(device.p.shared_weights, std::vector<std::string>{"B"});
  ASSERT_EQ(device.sets.size(), 3u);
  for (std::size_t k = 1; k < 3; ++k) {
    EXPECT_TRUE(same_fill(device.sets[k].fills.at("B"), device.sets[0].fills.at("B")));
    EXPECT_NE(device.sets[k].fills.at("A").key, device.sets[0].fills.at("A").key);
  }
  // The sets stay distinct content (the activations differ), and their digests say so.
  EXPECT_NE(device.p.set_digests[0], device.p.set_digests[1]);
  EXPECT_NE(device.p.set_digests[1], device.p.set_digests[2]);
  // Host-made inputs are never shared.
  Prepared host = prepare(tmp, "host", 1);
  EXPECT_TRUE(host.p.shared_weights.empty());
  EXPECT_FALSE(same_bytes(host.sets[1].tensors.at("B"), host.sets[0].tensors.at("B")));
}

// The reference cache's keys depend on what the inputs are, not on where they are made: a cache
// filled by a run with host-made inputs serves one with device-made inputs of the same seed.
TEST(PrepareInputs, HostAndDeviceMadeSetsHaveOneReferenceCacheKey) {
  TempDir tmp;
  Prepared host = prepare(tmp, "host", 0);
  Prepared device = prepare(tmp, "device", 0);
  ASSERT_EQ(host.p.set_digests.size(), static_cast<std::size_t>(3 + host.p.pool));
  EXPECT_EQ(host.p.set_digests, device.p.set_digests);  // the checked sets and the pool's
  host.p.reference_identity = device.p.reference_identity = "the same reference";
  for (int set = 0; set < 3 + host.p.pool; ++set) {
    EXPECT_EQ(reference_set_key(host.p, set), reference_set_key(device.p, set)) << set;
  }
  EXPECT_EQ(reference_run_key(host.p, "h", "t"), reference_run_key(device.p, "h", "t"));
  // Another seed: other inputs, other keys.
  Prepared other = prepare(tmp, "host", 0, /*seed=*/8);
  other.p.reference_identity = host.p.reference_identity;
  for (int set = 0; set < 3; ++set) {
    EXPECT_NE(reference_set_key(other.p, set), reference_set_key(host.p, set)) << set;
  }
  EXPECT_NE(reference_run_key(other.p, "h", "t"), reference_run_key(host.p, "h", "t"));
}

// The inputs the checked sets share are named from the sets or from the file's metadata alone:
// what the device holds once and the pool's sets take as they are.
TEST(PrepareInputs, TheSharedWeightsAreNamedFromTheFile) {
  TempDir tmp;
  const Prepared shared = prepare(tmp, "device", 1);
  EXPECT_EQ(shared_fills(shared.sets), (std::set<std::string, std::less<>>{"B"}));
  EXPECT_EQ(shared_fills(fs::path(shared.p.inputs_file)),
            (std::set<std::string, std::less<>>{"B"}));
  const Prepared apart = prepare(tmp, "device", 0);
  EXPECT_TRUE(shared_fills(apart.sets).empty());
  EXPECT_TRUE(shared_fills(fs::path(apart.p.inputs_file)).empty());
  EXPECT_TRUE(shared_fills(fs::path(prepare(tmp, "host", 1).p.inputs_file)).empty());
}

TEST(PrepareInputs, ThePoolHoldsOneSetPerCallWithinItsBudget) {
  EXPECT_EQ(pool_sets(39, 1000, 100), 10);       // the budget bounds it
  EXPECT_EQ(pool_sets(39, 1000, 10), 39);        // the calls bound it
  EXPECT_EQ(pool_sets(39, 99, 100), 1);          // one at least
  EXPECT_EQ(pool_sets(5000, 1 << 30, 1), 1024);  // 1024 at most
  EXPECT_EQ(pool_sets(39, 1000, 0), 39);         // sets of no bytes: one per call
}

// The pool's budget counts what a pool set adds on the device: the shared weights are the checked
// sets' buffers, held once. gemm_n2048_k2048 at M = 3: A is 3 x 2048 float16 (12288 bytes), the
// weight B 2048 x 2048 float16 (8 MiB); 3 trials of 2 warmup and 12 timed calls are 39 unchecked
// calls.
TEST(PrepareInputs, ThePoolsBudgetCountsTheSharedWeightsOnce) {
  const auto pool = [](std::uint64_t share_bytes, std::uint64_t budget, bool on_device) {
    TempDir tmp;
    RunOptions o;
    o.dataset = kSource / "examples/dataset";
    o.inputs_on = on_device ? InputsOn::kDevice : InputsOn::kHost;
    o.share_weights_bytes = share_bytes;
    o.device_pool_bytes = budget;
    o.cli.num_trials = 3;
    o.cli.warmup_runs = 2;
    o.cli.iterations = 12;
    const EvalConfigFile builtin = builtin_eval_config();
    const PrepareSettings settings{o, builtin, nullptr, 7, true, inputs_made_on_device(o, true)};
    return prepare_workload(settings, load_definition(kGemm.string()), gemm_workload(),
                            tmp.path() / "w", 2)
        .pool;
  };
  constexpr std::uint64_t kA = 3 * 2048 * 2, kB = 2048 * 2048 * 2;
  EXPECT_EQ(pool(1, 10 * kA + 5, true), 10);  // each pool set adds its A alone
  EXPECT_EQ(pool(1, 100 * kA, true), 39);     // one per unchecked call
  EXPECT_EQ(pool(0, 10 * kA + 5, true), 1);   // unshared: a set is A and B
  EXPECT_EQ(pool(0, 3 * (kA + kB) + kA, true), 3);
  EXPECT_EQ(pool(1, 3 * (kA + kB) + kA, false), 3);  // host-made sets share nothing
}

}  // namespace
}  // namespace fib::bench::detail
