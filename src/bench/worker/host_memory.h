// The CPU worker's memory discipline around a solution: output buffers with checked guard bytes
// and inaccessible pages around them, buffers that are never handed out again at an address a
// solution has seen, checksums of the read-only inputs, and the fault handler that names what a
// faulting write hit (an input, or the pages past an output) before the worker dies of it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "fib/bench/inputs/input_set_file.h"
#include "fib/bench/runtime/solution_call.h"

namespace fib::bench::detail {

// Guard bytes right before and after the data (checked after every call: a small overrun is
// reported with its offset) and kGuardPages inaccessible pages beyond them on each side (any
// write further out faults at once, however far up to 64 KiB it lands). The data is poisoned
// with a pattern that changes from call to call.
//
// The mapping is never handed back to the allocator while the worker lives (up to
// kQuarantineBytes of retired buffers): a retired buffer's pages are replaced by fresh,
// writable zero pages, so a late write from a thread the solution left behind lands there,
// harmlessly, instead of in memory the next solution is given.
class HostBuffer : public OutputBuffer {
 public:
  static constexpr std::size_t kGuardBytes = 256;
  static constexpr std::size_t kGuardPages = 16;
  static constexpr std::size_t kQuarantineBytes = std::size_t{256} << 20;

  HostBuffer(DType dtype, const Shape& shape);
  ~HostBuffer() override;

  void poison(std::uint64_t k) override;
  // Offset of the first corrupted guard byte relative to the start of the data (negative:
  // before it), or nullopt when both guards are intact.
  std::optional<std::int64_t> guard_violation() const;
  // How the fault handler names this buffer ("output 'y'").
  void set_name(const std::string& name) const;

 private:
  std::byte* map_ = nullptr;  // the whole mapping, inaccessible pages included
  std::size_t map_bytes_ = 0;
  std::byte* body_ = nullptr;  // its accessible part: front guard, data, tail guard
  std::size_t body_bytes_ = 0;
};

std::unique_ptr<OutputBuffer> make_host_buffer(DType dtype, const Shape& shape);

// The evaluation's output arena (protocol::OutputArena): the orchestrator's memfd mapped shared
// and writable, with HostBuffer::kGuardPages inaccessible pages on both sides. When it goes, its
// pages are retired as a HostBuffer's are (fresh private zero pages, kept reserved): a thread
// the solution left behind that writes there afterwards reaches neither the orchestrator's
// memfd nor the next evaluation's arena.
class ArenaMapping {
 public:
  // Maps `bytes` of `fd` (closed here either way); throws fib::Error when it cannot.
  ArenaMapping(int fd, std::size_t bytes);
  ~ArenaMapping();
  ArenaMapping(const ArenaMapping&) = delete;
  ArenaMapping& operator=(const ArenaMapping&) = delete;
  std::byte* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }

 private:
  std::byte* map_ = nullptr;  // the whole reservation, inaccessible pages included
  std::size_t map_bytes_ = 0;
  std::byte* data_ = nullptr;
  std::size_t bytes_ = 0;
};

// Installs the handler that names what a faulting write hit (an input: inputs are read-only
// mappings; the inaccessible pages around an output) before the worker dies of the fault. Once
// per process.
void install_fault_handler();
// The inputs of the call about to be made, for the handler.
void watch_inputs(const InputSet& in);

// Checksums of every input tensor of every set, known before any call: a solution that makes its
// read-only mapping writable (mprotect) and changes an input is caught by the next check. Where
// the input-set file carries the orchestrator's checksums (InputSet::sums) they are the ones held
// to, so the bytes the solution sees must be the bytes fib wrote; a set without them is hashed
// here, before any call.
// The chunks of large inputs are hashed on up to eight threads (ChunkHasher), which wait, idle,
// while the calls run.
class ChunkHasher;
class InputChecksums {
 public:
  explicit InputChecksums(const std::vector<InputSet>& sets);
  ~InputChecksums();
  InputChecksums(const InputChecksums&) = delete;
  InputChecksums& operator=(const InputChecksums&) = delete;
  // The name of the first input of set `set` whose bytes changed; nullopt when none did.
  std::optional<std::string> modified(const std::vector<InputSet>& sets, std::size_t set) const;
  // The same over every set: (set, name) of the first changed input.
  std::optional<std::pair<std::size_t, std::string>> modified_any(
      const std::vector<InputSet>& sets) const;

 private:
  std::vector<std::vector<InputSum>> sums_;  // per set, per tensor in map order
  std::unique_ptr<ChunkHasher> hasher_;
};

}  // namespace fib::bench::detail
