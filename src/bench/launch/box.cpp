#include "fib/bench/launch/box.h"

#include <fmt/format.h>

#include <algorithm>

#include "fib/base/diagnostics.h"

namespace fib::bench::detail {

namespace fs = std::filesystem;

namespace {

// A hard link where the box shares the file system, else a copy; readable by the sandbox's uid
// (the box is its, the file stays root's).
void place(const fs::path& from, const fs::path& to, fs::perms mode) {
  std::error_code ec;
  if (fs::exists(to, ec)) return;
  fs::create_hard_link(from, to, ec);
  if (ec) fs::copy_file(from, to, ec);
  if (ec) throw Error(to.string(), fmt::format("cannot stage {}: {}", from.string(), ec.message()));
  fs::permissions(to, mode, fs::perm_options::add, ec);
}

// The workload's scratch folder in the name: a worker keeps the input-set files it mapped, by
// path.
fs::path staged_inputs_path(const fs::path& box, const fs::path& inputs) {
  return box /
         ("inputs-" + inputs.parent_path().filename().string() + "-" + inputs.filename().string());
}

constexpr fs::perms kReadable =
    fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read;
constexpr fs::perms kExecutable =
    kReadable | fs::perms::owner_exec | fs::perms::group_exec | fs::perms::others_exec;

}  // namespace

Box::Box(fs::path dir) : dir_(std::move(dir)) {}

void Box::clear_except(const std::vector<fs::path>& keep) {
  outputs_.clear();
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir_, ec)) {
    if (e.path().filename() == "out" || std::find(keep.begin(), keep.end(), e.path()) != keep.end())
      continue;
    fs::remove_all(e.path(), ec);
  }
  for (const auto& e : fs::directory_iterator(dir_ / "out", ec)) fs::remove_all(e.path(), ec);
}

void Box::clear() {
  if (sandboxed()) clear_except({});
  outputs_.clear();
}

Box::Staged Box::stage(const std::string& inputs_file, const std::optional<Library>& library) {
  outputs_.clear();
  if (!sandboxed()) return Staged{inputs_file, library ? library->file.string() : std::string()};
  const fs::path inputs = staged_inputs_path(dir_, inputs_file);
  // The build key in the folder's name: a worker keeps the libraries it loaded, by path. The
  // file keeps its own name: a Python extension module's init function is named after it.
  const fs::path folder = library ? dir_ / ("lib-" + library->build_key) : fs::path();
  clear_except(library ? std::vector<fs::path>{inputs, folder} : std::vector<fs::path>{inputs});
  place(inputs_file, inputs, kReadable);
  Staged st{inputs.string(), {}};
  if (!library) return st;
  st.library = (folder / library->file.filename()).string();
  std::error_code ec;
  fs::create_directories(folder, ec);
  if (!library->whole_folder) {
    place(library->file, st.library, kExecutable);
    return st;
  }
  // A Python solution's entry imports its sibling sources: its whole build entry comes along.
  const fs::path entry = library->file.parent_path();
  for (const auto& e : fs::recursive_directory_iterator(entry, ec)) {
    const fs::path to = folder / fs::relative(e.path(), entry, ec);
    if (e.is_directory(ec)) {
      fs::create_directories(to, ec);
    } else if (e.is_regular_file(ec)) {
      place(e.path(), to, kExecutable);
    }
  }
  return st;
}

std::string Box::output(const std::string& file) {
  if (!sandboxed()) return file;
  const std::string in_box = (dir_ / "out" / fs::path(file).filename()).string();
  for (const auto& [there, to] : outputs_) {
    if (there == in_box && to != file) {
      throw Error(file,
                  fmt::format("another output of this evaluation ({}) has its file name", to));
    }
  }
  outputs_.emplace_back(in_box, file);
  return in_box;
}

std::string Box::outputs_folder(const std::string& folder) const {
  return sandboxed() ? (dir_ / "out").string() : folder;
}

protocol::Schedule Box::outputs_in_box(protocol::Schedule schedule) {
  for (protocol::TrialPlan& plan : schedule.trials) {
    if (!plan.check_output.empty()) plan.check_output = output(plan.check_output);
  }
  return schedule;
}

void Box::take_outputs() {
  for (const auto& [in_box, to] : outputs_) {
    std::error_code ec;
    fs::rename(in_box, to, ec);
  }
  outputs_.clear();
}

}  // namespace fib::bench::detail
