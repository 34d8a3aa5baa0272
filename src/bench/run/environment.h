// Where a run takes place: the host it records in every trace, the time stamps of traces, and the
// private scratch folder that input sets and checked outputs travel through.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>

#include "fib/trace/json_reader.h"

namespace fib::bench::detail {

std::string cpu_model();          // /proc/cpuinfo's model name, or "unknown CPU"
std::uint64_t physical_memory();  // bytes; 0 when the system does not say
// The host as traces record it: name, OS, logical CPUs and memory.
Json host_json();
// The running kernel's release (`uname -r`): some GPU hosts run gVisor, whose kernel is not
// Linux's and whose seccomp, Landlock and mseal differ.
std::string kernel_release();
// Whether the ELF file at `path` has a symbol table (.symtab): a stripped worker has none.
// nullopt when the file cannot be read as ELF.
std::optional<bool> has_symbol_table(const std::filesystem::path& path);
// What environment.extra.isolation records of the workers' hardening: the kernel, the worker
// binary (stripped or not) and each measure of `greeting` (a worker's hello reply: "hardening",
// fib/bench/worker/hardening.h); `warn` is told of each measure that is off, and why.
Json hardening_record(const Json& greeting, const std::filesystem::path& worker,
                      const std::function<void(const std::string&)>& warn);

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
