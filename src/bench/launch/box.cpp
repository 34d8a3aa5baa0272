#include "fib/bench/launch/box.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>

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

// A digest of the workload's scratch folder in the name: a worker keeps the input-set files it
// mapped, by path, and the folder's own name stays out of the sandbox.
fs::path staged_inputs_path(const fs::path& box, const fs::path& inputs) {
  const std::size_t digest = std::hash<std::string>{}(inputs.parent_path().string());
  return box / fmt::format("inputs-{:016x}-{}", digest, inputs.filename().string());
}

// Whether `fd` is a regular file with one link; else what it is.
std::string unsound_file(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return std::strerror(errno);
  if (!S_ISREG(st.st_mode)) return "not a regular file";
  if (st.st_nlink != 1) return fmt::format("a file with {} links", st.st_nlink);
  return {};
}

// Copies what `fd` holds into a fresh file at `to` (replacing the one there).
void copy_fresh(int fd, const fs::path& to) {
  const fs::path tmp = to.string() + ".fib-copy";
  const int out = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (out < 0) throw Error(to.string(), fmt::format("cannot copy: {}", std::strerror(errno)));
  char buf[1 << 16];
  ssize_t n;
  bool ok = true;
  while ((n = ::read(fd, buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR)) {
    if (n > 0 && ::write(out, buf, static_cast<std::size_t>(n)) != n) ok = false;
  }
  ::close(out);
  if (n < 0 || !ok) {
    std::error_code ec;
    fs::remove(tmp, ec);
    throw Error(to.string(), "cannot copy the worker's output");
  }
  fs::rename(tmp, to);
}

constexpr fs::perms kReadable =
    fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read;
constexpr fs::perms kExecutable =
    kReadable | fs::perms::owner_exec | fs::perms::group_exec | fs::perms::others_exec;

}  // namespace

Box::Box(fs::path dir, fs::path inside) : dir_(std::move(dir)), inside_(std::move(inside)) {}

std::string Box::inside(const fs::path& path) const {
  if (!sandboxed()) return path.string();
  return (inside_ / path.lexically_relative(dir_)).string();
}

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
  Staged st{inside(inputs), {}};
  if (!library) return st;
  const fs::path staged_library = folder / library->file.filename();
  st.library = inside(staged_library);
  std::error_code ec;
  fs::create_directories(folder, ec);
  if (!library->whole_folder) {
    place(library->file, staged_library, kExecutable);
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
  return inside(in_box);
}

std::string Box::outputs_folder(const std::string& folder) const {
  return sandboxed() ? inside(dir_ / "out") : folder;
}

protocol::Schedule Box::outputs_in_box(protocol::Schedule schedule) {
  for (protocol::TrialPlan& plan : schedule.trials) {
    if (!plan.check_output.empty()) plan.check_output = output(plan.check_output);
  }
  return schedule;
}

std::string Box::take_outputs(bool private_copies, bool check) {
  std::string problems;
  for (const auto& [in_box, to] : outputs_) {
    std::error_code ec;
    // The entry moves as it is (a link stays a link), to a folder the worker cannot reach; what
    // it is is judged there, where it can no longer change.
    if (sandboxed()) fs::rename(in_box, to, ec);
    if (ec || !check || !fs::exists(fs::symlink_status(to, ec))) continue;  // not written
    const int fd = ::open(to.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    std::string unsound = fd < 0 ? (errno == ELOOP ? std::string("a symbolic link")
                                                   : std::string(std::strerror(errno)))
                                 : unsound_file(fd);
    if (unsound.empty() && private_copies) {
      try {
        copy_fresh(fd, to);
      } catch (const Error& e) {
        unsound = e.what();
      }
    }
    if (fd >= 0) ::close(fd);
    if (unsound.empty()) continue;
    fs::remove_all(to, ec);
    problems +=
        fmt::format("{}the worker's output {} is {}: fib does not read it",
                    problems.empty() ? "" : "; ", fs::path(to).filename().string(), unsound);
  }
  outputs_.clear();
  return problems;
}

}  // namespace fib::bench::detail
