// One worker evaluation's files in a sandbox box (launch/sandbox.h): the box is the only folder
// of the orchestrator's a sandboxed worker sees, bound read-only at a neutral path
// (kBoxInSandbox), with its out/ folder bound read-write. A Box stages what the worker reads (the
// input-set file, a solution's library), rewrites the paths the worker is handed to the box's, and
// takes the outputs the worker wrote out of the box before the orchestrator reads them. Without a
// sandbox the Box is empty: the worker reads and writes the orchestrator's own paths and nothing
// moves. Solution workers, the native reference worker and the PyTorch reference all go through it,
// so how files enter and leave a worker's reach is decided here alone.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "fib/bench/protocol/messages.h"

namespace fib::bench::detail {

// Where the sandbox binds a box (SandboxSpec::box_inside): a neutral path, so nothing inside
// says where fib's scratch folder is.
inline constexpr const char* kBoxInSandbox = "/box";

class Box {
 public:
  // `dir`: a box made by Scratch::make_box (run/environment.h); empty: unsandboxed. `inside`:
  // where the sandbox binds it (SandboxSpec::box_inside).
  explicit Box(std::filesystem::path dir = {}, std::filesystem::path inside = kBoxInSandbox);

  bool sandboxed() const { return !dir_.empty(); }
  const std::filesystem::path& dir() const { return dir_; }
  // A path under dir() as the sandboxed process sees it (unsandboxed: itself).
  std::string inside(const std::filesystem::path& path) const;

  // A solution's library as its build made it.
  struct Library {
    std::filesystem::path file;
    std::string build_key;      // names its folder in the box
    bool whole_folder = false;  // the library's whole folder comes along (a Python build entry)
  };
  // The paths the worker is handed.
  struct Staged {
    std::string inputs, library;
  };
  // Stages the input-set file (and the library) in the box, linked or copied across file
  // systems and readable by the sandbox's uid, and clears the box of everything else (its out/
  // folder of what a worker left there for a later one). The box is bound read-only: a worker
  // cannot replace what is staged. Unsandboxed, the paths are returned as they are. Throws
  // fib::Error when a file cannot be staged.
  Staged stage(const std::string& inputs_file, const std::optional<Library>& library = {});
  // Clears the box (out/ included) for a process that is handed files written straight into it.
  void clear();

  // Where the worker writes the output the orchestrator reads at `file`: the box's out/ folder
  // (file names must differ within one evaluation), or `file` itself unsandboxed. Remembered
  // until take_outputs.
  std::string output(const std::string& file);
  // The folder where the worker writes outputs it names itself, which the orchestrator reads in
  // `folder`: the box's out/, or `folder` itself unsandboxed. Each such output is still named
  // with output(), by its path in `folder`, for take_outputs to move it.
  std::string outputs_folder(const std::string& folder) const;
  // The schedule with each trial's checked-call outputs written through output().
  protocol::Schedule outputs_in_box(protocol::Schedule schedule);
  // Moves every output named since the box was staged or cleared out of the box, to where the
  // orchestrator reads it, out of the worker's reach; an output the worker did not write is left
  // out. What arrives is held to being a regular file with one link, opened without following
  // a link (O_NOFOLLOW): anything else (a symbolic link, dangling or not, a folder, a hard
  // link) is removed and named in the message returned (empty when every output is sound).
  // `private_copies`: each output is rewritten as a fresh file fib made, so a descriptor the
  // worker kept open on the file it wrote reaches nothing fib reads (a solution's outputs).
  // `check` false: nothing is held to anything (only for red-team tests that show what the
  // check stops).
  std::string take_outputs(bool private_copies = false, bool check = true);

 private:
  void clear_except(const std::vector<std::filesystem::path>& keep);

  std::filesystem::path dir_;
  std::filesystem::path inside_;
  std::vector<std::pair<std::string, std::string>> outputs_;  // in the box, then where it goes
};

}  // namespace fib::bench::detail
