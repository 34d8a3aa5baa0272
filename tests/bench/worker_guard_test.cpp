// Unit tests of the worker's guards: the host output buffer between inaccessible pages, retired
// buffers whose addresses are not handed out again, input checksums, the draw of the checked
// call, and the orchestrator's cross-check of the worker's clock.
#include <gtest/gtest.h>

#include <cstring>
#include <set>

#include "bench/worker/host_memory.h"
#include "bench/worker/worker_common.h"
#include "fib/bench/protocol/trial_timing.h"

namespace fib::bench::detail {
namespace {

TEST(WorkerGuard, AHostOutputEndsBeforeItsGuardBytesAndInaccessiblePages) {
  HostBuffer b(DType::kBFloat16, Shape{3, 7});  // 42 bytes: rounded up, the tail guard grows
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(b.data()) % kTensorAlignment, 0u);
  b.poison(1);
  EXPECT_FALSE(b.guard_violation());
  b.data()[b.bytes()] = std::byte{1};  // one byte past the end: a guard byte, reported
  EXPECT_EQ(b.guard_violation(), std::optional<std::int64_t>(42));
  b.data()[b.bytes()] = std::byte{0xFD};
  b.data()[-1] = std::byte{0};
  EXPECT_EQ(b.guard_violation(), std::optional<std::int64_t>(-1));
}

TEST(WorkerGuard, AWriteFarPastAHostOutputFaults) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        HostBuffer b(DType::kFloat32, Shape{1024});
        reinterpret_cast<volatile std::byte*>(b.data())[b.bytes() + 4096] = std::byte{1};
      },
      "");
  EXPECT_DEATH(
      {
        HostBuffer b(DType::kFloat32, Shape{1024});
        reinterpret_cast<volatile std::byte*>(b.data())[-4096] = std::byte{1};
      },
      "");
}

TEST(WorkerGuard, ARetiredOutputsAddressIsNotHandedOutAgain) {
  std::set<std::byte*> seen;
  for (int i = 0; i < 64; ++i) {
    auto b = std::make_unique<HostBuffer>(DType::kFloat32, Shape{4096});
    EXPECT_TRUE(seen.insert(b->data()).second) << "buffer " << i << " reused an address";
    std::byte* data = b->data();
    b.reset();
    data[0] = std::byte{1};  // a late write to a retired buffer lands harmlessly
  }
}

TEST(WorkerGuard, InputChecksumsNameTheChangedInput) {
  std::vector<InputSet> sets(2);
  sets[0].tensors.emplace("a", Tensor(DType::kFloat32, Shape{16}));
  sets[0].tensors.emplace("b", Tensor(DType::kFloat32, Shape{16}));
  sets[1].tensors.emplace("a", Tensor(DType::kFloat32, Shape{16}));
  for (auto& s : sets) {
    for (auto& [name, t] : s.tensors) std::memset(t.raw(), 0, t.nbytes());
  }
  const InputChecksums sums(sets);
  EXPECT_FALSE(sums.modified(sets, 0));
  static_cast<float*>(sets[0].tensors.at("b").raw())[5] = 1.0f;
  EXPECT_EQ(sums.modified(sets, 0), std::optional<std::string>("b"));
  EXPECT_FALSE(sums.modified(sets, 1));
}

TEST(WorkerGuard, InputChecksumsHashLargeInputsInChunksAndFindAChangeInAnyOfThem) {
  // Three and a half chunks: hashed in parallel, the same checksum as hashed serially.
  std::vector<InputSet> sets(3);
  for (auto& s : sets) {
    Tensor t(DType::kUInt8, Shape{static_cast<std::int64_t>(kInputSumChunk * 7 / 2)});
    for (std::size_t i = 0; i < t.nbytes(); ++i) static_cast<std::uint8_t*>(t.raw())[i] = i % 251;
    s.tensors.emplace("x", std::move(t));
  }
  const Tensor& x = sets[2].tensors.at("x");
  const InputChecksums sums(sets);
  EXPECT_FALSE(sums.modified(sets, 2));
  EXPECT_FALSE(sums.modified_any(sets));
  static_cast<std::uint8_t*>(const_cast<void*>(x.raw()))[x.nbytes() - 1] ^= 1;  // the last chunk
  EXPECT_EQ(sums.modified(sets, 2), std::optional<std::string>("x"));
  EXPECT_FALSE(sums.modified(sets, 1));
  const auto changed = sums.modified_any(sets);
  ASSERT_TRUE(changed);
  EXPECT_EQ(changed->first, 2u);
  EXPECT_EQ(changed->second, "x");
}

TEST(WorkerGuard, InputChecksumsHoldTheMappingToTheSumsTheFileCarries) {
  // The orchestrator's checksums (metadata of the input-set file) are what the bytes are held
  // to: bytes that differ from what fib wrote are a modified input before any call.
  std::vector<InputSet> sets(1);
  Tensor t(DType::kFloat32, Shape{64});
  std::memset(t.raw(), 0, t.nbytes());
  sets[0].sums.emplace("a", input_sum(t.raw(), t.nbytes()));
  sets[0].tensors.emplace("a", std::move(t));
  {
    const InputChecksums sums(sets);
    EXPECT_FALSE(sums.modified(sets, 0));
  }
  sets[0].sums["a"].low ^= 1;
  const InputChecksums sums(sets);
  EXPECT_EQ(sums.modified(sets, 0), std::optional<std::string>("a"));
}

TEST(WorkerGuard, TheCheckedCallIsDrawnUniformlyAfterTheCalls) {
  // A named position is kept exactly; a drawn one replaces the kept call with probability
  // 1/(i+1), so over many trials of 8 calls each position ends up checked about 1/8 of the time.
  EXPECT_TRUE(checked_call_kept(3, 3));
  EXPECT_FALSE(checked_call_kept(3, 2));
  EXPECT_TRUE(checked_call_kept(-1, 0));  // the first call is always kept, for now
  std::vector<int> counts(8, 0);
  constexpr int kTrials = 8000;
  for (int t = 0; t < kTrials; ++t) {
    int kept = -1;
    for (std::size_t i = 0; i < counts.size(); ++i) {
      if (checked_call_kept(-1, i)) kept = static_cast<int>(i);
    }
    ++counts.at(static_cast<std::size_t>(kept));
  }
  for (int c : counts) {
    // 1000 expected, standard deviation ~30: 6 sigma either way.
    EXPECT_GT(c, 820);
    EXPECT_LT(c, 1180);
  }
}

protocol::EvaluateReply reply_with(std::optional<double> worker_ms, std::vector<double> samples) {
  protocol::EvaluateReply r;
  r.worker_ms = worker_ms;
  protocol::TrialResult t;
  t.samples_ms = std::move(samples);
  r.trials.push_back(t);
  return r;
}

TEST(WorkerGuard, TheWorkersClockIsHeldAgainstTheOrchestrators) {
  // Honest: the worker's span a few ms short of the wall time.
  EXPECT_EQ(check_worker_clock(383.2, reply_with(382.9, {100, 100, 100})).mismatch, "");
  EXPECT_EQ(check_worker_clock(20, reply_with(12, {5})).mismatch, "");
  // A clock 60x slow from the first call on: most of the wall time unaccounted for.
  const ClockCheck slow = check_worker_clock(400, reply_with(400.0 / 60, {6}));
  EXPECT_EQ(slow.mismatch.rfind("TIMER_MISMATCH", 0), 0u) << slow.mismatch;
  EXPECT_GT(slow.record["unaccounted_ms"].get<double>(), slow.record["allowed_ms"].get<double>());
  // Reports that cannot be: a negative span, calls longer than the span, a span longer than the
  // wall time.
  EXPECT_NE(check_worker_clock(50, reply_with(-3, {1})).mismatch, "");
  EXPECT_NE(check_worker_clock(50, reply_with(20, {30})).mismatch, "");
  EXPECT_NE(check_worker_clock(50, reply_with(80, {30})).mismatch, "");
  // Not reported (a worker that does not say): recorded, not flagged.
  const ClockCheck none = check_worker_clock(50, reply_with(std::nullopt, {30}));
  EXPECT_EQ(none.mismatch, "");
  EXPECT_FALSE(none.record["checked"].get<bool>());
}

}  // namespace
}  // namespace fib::bench::detail
