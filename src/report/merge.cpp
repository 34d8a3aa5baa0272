#include "fib/report/merge.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <optional>
#include <set>

#include "fib/base/json.h"
#include "fib/dataset/files.h"
#include "fib/dataset/layout.h"
#include "report/merge_plan.h"

namespace fib::report {

namespace fs = std::filesystem;

namespace {

// An open file descriptor, closed exactly once.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_;
};

std::string errno_text() { return std::strerror(errno); }

// Blobs can be large, so copies stream; the temporary name is one TraceSet::load skips.
void copy_file_atomic(const fs::path& from, const fs::path& to) {
  write_file_atomic(to, [&](int out, const fs::path& tmp) {
    Fd in(::open(from.c_str(), O_RDONLY | O_CLOEXEC));
    if (in.get() < 0) throw Error(from.string(), fmt::format("cannot read: {}", errno_text()));
    std::vector<char> buf(std::size_t{1} << 20);
    for (;;) {
      const ssize_t n = ::read(in.get(), buf.data(), buf.size());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) throw Error(from.string(), fmt::format("read failed: {}", errno_text()));
      if (n == 0) break;
      write_all(out, buf.data(), static_cast<std::size_t>(n), tmp.string());
    }
  });
}

bool same_bytes(const fs::path& a, const fs::path& b) {
  std::error_code ea, eb;
  if (fs::file_size(a, ea) != fs::file_size(b, eb) || ea || eb) return false;
  Fd fa(::open(a.c_str(), O_RDONLY | O_CLOEXEC));
  Fd fb(::open(b.c_str(), O_RDONLY | O_CLOEXEC));
  if (fa.get() < 0 || fb.get() < 0) return false;
  std::vector<char> x(std::size_t{1} << 16), y(std::size_t{1} << 16);
  for (;;) {
    const ssize_t n = ::read(fa.get(), x.data(), x.size());
    if (n < 0) return false;
    std::size_t got = 0;
    while (got < static_cast<std::size_t>(n)) {
      const ssize_t m = ::read(fb.get(), y.data() + got, static_cast<std::size_t>(n) - got);
      if (m <= 0) return false;
      got += static_cast<std::size_t>(m);
    }
    if (n == 0) return true;
    if (std::memcmp(x.data(), y.data(), static_cast<std::size_t>(n)) != 0) return false;
  }
}

fs::path normalized(const fs::path& p) {
  std::error_code ec;
  fs::path abs = fs::weakly_canonical(fs::absolute(p, ec), ec);
  if (abs.filename().empty()) abs = abs.parent_path();
  return abs;
}

bool is_within(const fs::path& inner, const fs::path& outer) {
  auto o = outer.begin();
  auto i = inner.begin();
  for (; o != outer.end(); ++o, ++i) {
    if (i == inner.end() || *i != *o) return false;
  }
  return true;
}

bool is_temp_name(const std::string& name) {
  return !name.empty() && name[0] == '.' && name.find(".tmp.") != std::string::npos;
}

struct WholeFile {  // a record file copied as it is
  std::size_t set = 0;
  std::uint32_t file = 0;
};
struct LineRef {
  std::size_t set = 0;
  std::uint32_t file = 0;
  std::uint32_t line = 0;
  auto operator<=>(const LineRef&) const = default;
};
struct OtherFile {
  std::size_t set = 0;
  fs::path source;
};

// Where every surviving record and file goes, relative to the output folder.
struct Layout {
  std::map<std::string, WholeFile> whole;
  std::map<std::string, std::vector<LineRef>> lines;
  std::map<std::string, OtherFile> other;
  std::map<std::string, std::string> claimed_by;  // output path -> source, for collisions
};

class Merger {
 public:
  Merger(const std::vector<TraceSet>& sets, MergeReport& report) : sets_(sets), report_(report) {}

  void place_records(const detail::MergePlan& plan) {
    for (const auto& p : plan.definitions) {
      op_type_of_[p.record->value.name] = p.record->value.op_type;
    }
    for (const auto& p : plan.solutions) author_of_[p.record->value.name] = p.record->value.author;

    for (const auto& p : plan.definitions) {
      const Definition& d = p.record->value;
      std::optional<fs::path> path;
      if (valid({d.op_type, d.name})) path = layout::definition_file(d.op_type, d.name);
      place_whole(p.set, p.record->source, path, fmt::format("definition '{}'", d.name),
                  report_.counts.definitions);
    }
    for (const auto& p : plan.solutions) {
      const Solution& s = p.record->value;
      std::optional<fs::path> path;
      if (auto op = op_type_of(s.definition); op && valid({s.author, *op, s.definition, s.name})) {
        path = layout::solution_file(s.author, *op, s.definition, s.name);
      }
      place_whole(p.set, p.record->source, path, fmt::format("solution '{}'", s.name),
                  report_.counts.solutions);
    }
    for (const auto& p : plan.workloads) {
      const Trace& w = p.record->value;
      std::optional<fs::path> path;
      if (auto op = op_type_of(w.definition); op && valid({*op, w.definition})) {
        path = layout::workloads_file(*op, w.definition);
      }
      place_line(p.set, p.record->source, path, fmt::format("workload '{}'", w.workload.uuid),
                 report_.counts.workloads);
    }
    for (const auto& p : plan.traces) {
      const Trace& t = p.record->value;
      std::optional<fs::path> path;
      auto op = op_type_of(t.definition);
      auto author = t.solution ? author_of(*t.solution) : std::nullopt;
      if (op && author && valid({*author, *op, t.definition})) {
        path = layout::traces_file(*author, *op, t.definition);
      }
      place_line(
          p.set, p.record->source, path,
          fmt::format("trace of '{}' on workload '{}'", t.solution.value_or(""), t.workload.uuid),
          report_.counts.traces);
    }
  }

  void place_other_files() {
    for (std::size_t si = 0; si < sets_.size(); ++si) {
      const TraceSet& set = sets_[si];
      std::set<std::string> record_files;
      for (const auto& f : set.files()) {
        if (f.kind != FileKind::kOther) record_files.insert(f.path);
      }
      std::error_code ec;
      fs::recursive_directory_iterator it(set.root(), ec), end;
      for (; !ec && it != end; it.increment(ec)) {
        const fs::path& path = it->path();
        const std::string name = path.filename().string();
        std::error_code e2;
        const std::string rel = fs::relative(path, set.root(), e2).generic_string();
        if (it->is_symlink(e2) && it->is_directory(e2)) {
          report_.diagnostics.warning(path.string(), {},
                                      "symbolic link to a folder: the records in it were merged, "
                                      "any other files in it were not copied");
          continue;
        }
        if (it->is_directory(e2)) {
          if (name == ".git") it.disable_recursion_pending();
          continue;
        }
        if (is_temp_name(name) || record_files.count(rel)) continue;
        if (!it->is_regular_file(e2)) {
          report_.diagnostics.warning(path.string(), {}, "not a regular file; not copied");
          continue;
        }
        if (auto c = layout_.claimed_by.find(rel); c != layout_.claimed_by.end()) {
          auto o = layout_.other.find(rel);
          if (o == layout_.other.end()) {
            report_.diagnostics.error(path.string(), {},
                                      fmt::format("not copied: a merged record file is written at "
                                                  "the same path (from {})",
                                                  c->second));
          } else if (same_bytes(o->second.source, path)) {
            ++report_.counts.identical_duplicates;
          } else {
            Conflict conflict;
            conflict.kind = "file";
            conflict.name = rel;
            conflict.kept = o->second.source.string();
            conflict.rejected = path.string();
            conflict.differing = {"(content)"};
            report_.conflicts.push_back(std::move(conflict));
          }
          continue;
        }
        layout_.claimed_by.emplace(rel, path.string());
        layout_.other.emplace(rel, OtherFile{si, path});
      }
      if (ec) {
        report_.diagnostics.error(set.root().string(), {},
                                  fmt::format("cannot list the folder: {}", ec.message()));
      }
    }
  }

  void write(const fs::path& output) {
    std::error_code ec;
    fs::create_directories(output, ec);
    if (ec) throw Error(output.string(), fmt::format("cannot create folder: {}", ec.message()));
    for (const auto& [rel, w] : layout_.whole) {
      const TraceSet& set = sets_[w.set];
      copy_file_atomic(set.root() / set.files()[w.file].path, output / rel);
      ++report_.counts.files_written;
    }
    for (auto& [rel, refs] : layout_.lines) write_lines(output / rel, refs);
    for (const auto& [rel, o] : layout_.other) {
      copy_file_atomic(o.source, output / rel);
      ++report_.counts.other_files;
      ++report_.counts.files_written;
    }
  }

 private:
  struct SourceText {
    std::string text;
    std::vector<JsonlLine> lines;  // views into text
  };

  static bool valid(std::initializer_list<std::string_view> parts) {
    return std::all_of(parts.begin(), parts.end(),
                       [](std::string_view p) { return layout::is_path_component(p); });
  }
  std::optional<std::string> op_type_of(const std::string& definition) const {
    auto it = op_type_of_.find(definition);
    return it == op_type_of_.end() ? std::nullopt : std::optional(it->second);
  }
  std::optional<std::string> author_of(const std::string& solution) const {
    auto it = author_of_.find(solution);
    return it == author_of_.end() ? std::nullopt : std::optional(it->second);
  }

  // The canonical path, or (said out loud) the path the record had in its source.
  std::string target(const TraceSet& set, const RecordSource& src,
                     const std::optional<fs::path>& canonical, const std::string& what) {
    if (canonical) return canonical->generic_string();
    report_.diagnostics.warning(
        detail::source_of(set, src), {},
        fmt::format("{}: no canonical path (its definition or solution is in no input, or a name "
                    "cannot be a path component); kept at its source path",
                    what));
    return set.files()[src.file].path;
  }

  void place_whole(std::size_t si, const RecordSource& src, const std::optional<fs::path>& path,
                   const std::string& what, std::size_t& written) {
    const TraceSet& set = sets_[si];
    const std::string rel = target(set, src, path, what);
    const std::string source = detail::source_of(set, src);
    auto [it, inserted] = layout_.claimed_by.emplace(rel, source);
    if (!inserted) {
      report_.diagnostics.error(
          source, {},
          fmt::format("{} not written: {} is already written from {}", what, rel, it->second));
      return;
    }
    layout_.whole.emplace(rel, WholeFile{si, src.file});
    ++written;
  }

  void place_line(std::size_t si, const RecordSource& src, const std::optional<fs::path>& path,
                  const std::string& what, std::size_t& written) {
    const TraceSet& set = sets_[si];
    const std::string rel = target(set, src, path, what);
    auto [it, inserted] = layout_.claimed_by.emplace(rel, detail::source_of(set, src));
    if (!inserted && !layout_.lines.count(rel)) {
      report_.diagnostics.error(
          detail::source_of(set, src), {},
          fmt::format("{} not written: {} is already written from {}", what, rel, it->second));
      return;
    }
    layout_.lines[rel].push_back({si, src.file, src.line});
    ++written;
  }

  const SourceText& source_text(std::size_t si, std::uint32_t file) {
    const auto key = std::make_pair(si, file);
    if (auto it = cache_.find(key); it != cache_.end()) return it->second;
    if (cache_.size() >= 8) cache_.clear();  // bounds memory on datasets with huge trace files
    const TraceSet& set = sets_[si];
    const fs::path path = set.root() / set.files()[file].path;
    Diagnostics diag;
    auto text = read_text_file(path.string(), diag, std::uint64_t{8} << 30);
    if (!text) throw Error(std::move(diag));
    SourceText& st = cache_[key];
    st.text = std::move(*text);
    st.lines = split_jsonl(st.text);
    return st;
  }

  void write_lines(const fs::path& to, std::vector<LineRef>& refs) {
    std::sort(refs.begin(), refs.end());
    const bool one_file =
        refs.front().set == refs.back().set && refs.front().file == refs.back().file;
    const SourceText& first = source_text(refs.front().set, refs.front().file);
    if (one_file && refs.size() == first.lines.size()) {
      const TraceSet& set = sets_[refs.front().set];
      copy_file_atomic(set.root() / set.files()[refs.front().file].path, to);
    } else {
      std::string content;
      for (const auto& r : refs) {
        const SourceText& st = source_text(r.set, r.file);
        auto it =
            std::lower_bound(st.lines.begin(), st.lines.end(), r.line,
                             [](const JsonlLine& l, std::uint32_t n) { return l.number < n; });
        if (it == st.lines.end() || it->number != r.line) {
          throw Error(
              fmt::format("{}:{}",
                          (sets_[r.set].root() / sets_[r.set].files()[r.file].path).string(),
                          r.line),
              "the line changed while merging", "run the merge again");
        }
        content.append(it->text);
        content += '\n';
      }
      write_file_atomic(to, content);
    }
    ++report_.counts.files_written;
  }

  const std::vector<TraceSet>& sets_;
  MergeReport& report_;
  Layout layout_;
  std::map<std::string, std::string> op_type_of_;
  std::map<std::string, std::string> author_of_;
  std::map<std::pair<std::size_t, std::uint32_t>, SourceText> cache_;
};

}  // namespace

MergeReport merge_datasets(std::span<const fs::path> inputs, const fs::path& output,
                           const MergeOptions& options) {
  if (inputs.empty()) throw Error("--local", "no dataset folder to merge", "pass --local DIR");
  if (output.empty()) throw Error("--output", "no output folder given");
  const fs::path out_abs = normalized(output);
  for (const auto& in : inputs) {
    const fs::path in_abs = normalized(in);
    if (is_within(out_abs, in_abs) || is_within(in_abs, out_abs)) {
      throw Error(output.string(),
                  fmt::format("the output folder overlaps the input {}", in.string()),
                  "choose an output folder outside every --local folder");
    }
  }
  std::error_code ec;
  if (fs::exists(output, ec)) {
    if (!fs::is_directory(output, ec))
      throw Error(output.string(), "output exists and is not a folder");
    if (!fs::is_empty(output, ec) && !options.force) {
      throw Error(output.string(), "the output folder is not empty",
                  "choose a new folder, or pass --force to write into it (files at the same paths "
                  "are replaced, others are left as they are)");
    }
  }

  std::vector<TraceSet> sets;
  for (const auto& in : inputs) sets.push_back(TraceSet::load(in, options.load));

  MergeReport report;
  for (const auto& in : inputs) report.inputs.push_back(in.string());
  report.output = output.string();
  for (const auto& set : sets) detail::append_load_diagnostics(set, report.diagnostics);

  const detail::MergePlan plan = detail::plan_merge(sets);
  report.conflicts = plan.conflicts;
  report.counts.identical_duplicates = plan.counts.identical_duplicates;
  report.counts.duplicate_traces = plan.counts.duplicate_traces;
  report.counts.dependents_dropped = plan.counts.dependents_dropped;

  Merger merger(sets, report);
  merger.place_records(plan);
  merger.place_other_files();
  merger.write(output);
  return report;
}

Json to_json(const MergeReport& r) {
  Json j;
  j["inputs"] = r.inputs;
  j["output"] = r.output;
  Json c;
  c["definitions"] = r.counts.definitions;
  c["solutions"] = r.counts.solutions;
  c["workloads"] = r.counts.workloads;
  c["traces"] = r.counts.traces;
  c["other_files"] = r.counts.other_files;
  c["files_written"] = r.counts.files_written;
  c["identical_duplicates"] = r.counts.identical_duplicates;
  c["duplicate_traces"] = r.counts.duplicate_traces;
  c["dependents_dropped"] = r.counts.dependents_dropped;
  j["counts"] = std::move(c);
  Json conflicts = Json::array();
  for (const auto& x : r.conflicts) conflicts.push_back(to_json(x));
  j["conflicts"] = std::move(conflicts);
  Json diags = Json::array();
  for (const auto& d : r.diagnostics) {
    Json dj;
    dj["severity"] = severity_name(d.severity);
    dj["file"] = d.file;
    dj["path"] = d.path;
    dj["message"] = d.message;
    dj["hint"] = d.hint;
    diags.push_back(std::move(dj));
  }
  j["diagnostics"] = std::move(diags);
  j["ok"] = !r.has_problems();
  return j;
}

std::string render_text(const MergeReport& r) {
  const MergeCounts& c = r.counts;
  std::string out = fmt::format("Merged {} dataset(s) into {}\n", r.inputs.size(), r.output);
  out += fmt::format(
      "  written: {} definitions, {} solutions, {} workloads, {} traces, {} other files ({} "
      "files)\n",
      c.definitions, c.solutions, c.workloads, c.traces, c.other_files, c.files_written);
  out +=
      fmt::format("  identical duplicates merged: {}; traces with identical content dropped: {}\n",
                  c.identical_duplicates, c.duplicate_traces);
  if (!r.conflicts.empty()) {
    out += fmt::format("\nConflicts ({}; the first source is kept):\n", r.conflicts.size());
    for (const auto& x : r.conflicts) out += fmt::format("  - {}\n", x.to_string());
  }
  if (!r.diagnostics.empty()) {
    out += fmt::format("\nFindings ({}):\n", r.diagnostics.size());
    for (const auto& d : r.diagnostics) out += fmt::format("  - {}\n", d.to_string());
  }
  if (r.has_problems()) {
    out += "\nNot everything was carried over (see above); the output was written.\n";
  }
  return out;
}

}  // namespace fib::report
