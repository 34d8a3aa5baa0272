// Where a run takes place: the host it records in every trace, the time stamps of traces, and the
// private scratch folder that input sets and checked outputs travel through.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "fib/trace/json_reader.h"

namespace fib::bench::detail {

std::string cpu_model();          // /proc/cpuinfo's model name, or "unknown CPU"
std::uint64_t physical_memory();  // bytes; 0 when the system does not say
// The host as traces record it: name, OS, logical CPUs and memory.
Json host_json();
// Now, in UTC with microseconds: "2025-01-31T12:00:00.123456+00:00".
std::string iso_timestamp();

// Input sets and checked outputs travel as files in a private folder, on tmpfs when there is
// one; it is removed when the run ends. Beside it (in a folder only its owner can list) are the
// sandboxed workers' boxes: what a worker sees of the run's files.
class Scratch {
 public:
  Scratch();
  ~Scratch();
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  // The orchestrator's own files (inputs, reference outputs, checked outputs): mode 0700.
  const std::filesystem::path& root() const { return root_; }
  // A worker's box `name` (made anew): staged files, and its out/ folder owned by `uid` (-1:
  // by fib's user), the only place the worker can write.
  std::filesystem::path make_box(const std::string& name, int uid) const;

 private:
  std::filesystem::path base_, root_;
  std::filesystem::path boxes_;  // the workers' boxes, apart from the scratch folder
};

}  // namespace fib::bench::detail
