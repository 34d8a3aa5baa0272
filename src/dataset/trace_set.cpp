#include "fib/dataset/trace_set.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <algorithm>
#include <atomic>
#include <map>
#include <set>
#include <thread>
#include <unordered_map>

#include "fib/base/json.h"
#include "fib/dataset/files.h"
#include "fib/dataset/layout.h"
#include "fib/trace/json_reader.h"

namespace fib {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view kTopFolders[] = {"definitions", "workloads", "solutions", "traces"};

// Runs fn(i) for i in [0, n) on up to `threads` threads.
template <typename Fn>
void parallel_for(std::size_t n, unsigned threads, Fn fn) {
  if (threads <= 1 || n <= 1) {
    for (std::size_t i = 0; i < n; ++i) fn(i);
    return;
  }
  std::atomic<std::size_t> next{0};
  auto worker = [&] {
    for (std::size_t i = next.fetch_add(1); i < n; i = next.fetch_add(1)) fn(i);
  };
  std::vector<std::thread> pool;
  const unsigned count = static_cast<unsigned>(std::min<std::size_t>(threads, n));
  for (unsigned t = 1; t < count; ++t) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
}

bool is_temp_name(const std::string& name) {
  return !name.empty() && name[0] == '.' && name.find(".tmp.") != std::string::npos;
}

// The path by which the walk reached `p`, relative to the root. Lexical on purpose:
// fs::relative resolves symbolic links, which renames files reached through a linked folder
// and turns a looping link into "" (it cannot be resolved).
std::string relative_to(const fs::path& p, const fs::path& root) {
  return p.lexically_relative(root).generic_string();
}

// Collects every file under root/<top>, following folder symlinks but reporting loops.
void walk(const fs::path& root, std::string_view top, std::vector<DatasetFile>& out,
          Diagnostics& diag) {
  const fs::path start = root / std::string(top);
  std::error_code ec;
  if (!fs::exists(start, ec)) return;
  if (!fs::is_directory(start, ec)) {
    diag.error(std::string(top), {}, "expected a folder, found a file");
    return;
  }
  std::set<std::pair<dev_t, ino_t>> seen;
  std::vector<fs::path> stack{start};
  while (!stack.empty()) {
    const fs::path dir = stack.back();
    stack.pop_back();
    struct stat st {};
    if (::stat(dir.c_str(), &st) != 0) {
      diag.error(relative_to(dir, root), {},
                 "cannot read folder (symbolic link loop or broken link)");
      continue;
    }
    if (!seen.insert({st.st_dev, st.st_ino}).second) {
      diag.error(relative_to(dir, root), {}, "symbolic link loop: this folder was already visited",
                 "remove the link");
      continue;
    }
    std::vector<fs::directory_entry> entries;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
      entries.push_back(*it);
    if (ec) {
      diag.error(relative_to(dir, root), {}, fmt::format("cannot list folder: {}", ec.message()));
      continue;
    }
    for (const auto& e : entries) {
      const std::string name = e.path().filename().string();
      if (is_temp_name(name)) continue;  // an atomic write in progress (or abandoned)
      const std::string rel = relative_to(e.path(), root);
      struct stat est {};
      if (::stat(e.path().c_str(), &est) != 0) {
        const int err = errno;
        diag.error(
            rel, {},
            err == ELOOP ? "symbolic link loop" : "broken symbolic link or unreadable entry");
        continue;
      }
      if (S_ISDIR(est.st_mode)) {
        stack.push_back(e.path());
        continue;
      }
      DatasetFile f;
      f.path = rel;
      const std::string ext = e.path().extension().string();
      if (top == "definitions" && ext == ".json")
        f.kind = FileKind::kDefinition;
      else if (top == "solutions" && ext == ".json")
        f.kind = FileKind::kSolution;
      else if (top == "workloads" && ext == ".jsonl")
        f.kind = FileKind::kWorkloads;
      else if (top == "traces" && ext == ".jsonl")
        f.kind = FileKind::kTraces;
      out.push_back(std::move(f));
    }
  }
}

struct ParsedChunk {
  std::vector<Record<Definition>> definitions;
  std::vector<Record<Solution>> solutions;
  std::vector<Record<Trace>> workloads;
  std::vector<Record<Trace>> traces;
  Diagnostics diag;
};

struct Task {
  std::uint32_t file = 0;
  std::vector<JsonlLine> lines;  // empty for a JSON file
  bool whole_file = false;
};

const std::vector<Record<Trace>> kNoWorkloads;
const RecordList<Trace> kNoTraces;
const std::vector<Record<Solution>> kNoSolutions;

// Throws unless `root` is a folder holding at least one of the dataset's top folders.
void check_dataset_root(const fs::path& root) {
  std::error_code ec;
  if (!fs::exists(root, ec)) {
    throw Error(root.string(), "dataset folder does not exist",
                "check the path; fib never creates a missing dataset");
  }
  if (!fs::is_directory(root, ec)) throw Error(root.string(), "dataset path is not a folder");
  bool any = false;
  for (auto top : kTopFolders) any = any || fs::is_directory(root / std::string(top), ec);
  if (!any) {
    throw Error(root.string(),
                "not a FlashInfer-Trace dataset: it has none of definitions/, workloads/, "
                "solutions/, traces/",
                "point --dataset/--local at the folder that contains definitions/");
  }
}

// Phase 1: the text of every record file, in parallel; empty where read_diag[i] says why not.
std::vector<std::string> read_record_files(const fs::path& root,
                                           const std::vector<DatasetFile>& files, unsigned threads,
                                           std::vector<Diagnostics>& read_diag) {
  std::vector<std::string> contents(files.size());
  parallel_for(files.size(), threads, [&](std::size_t i) {
    if (files[i].kind == FileKind::kOther) return;
    const std::uint64_t limit =
        (files[i].kind == FileKind::kTraces || files[i].kind == FileKind::kWorkloads)
            ? (std::uint64_t{8} << 30)
            : kMaxJsonFileBytes;
    if (auto t = read_text_file((root / files[i].path).string(), read_diag[i], limit)) {
      contents[i] = std::move(*t);
    }
  });
  return contents;
}

// Phase 2: JSONL files cut into chunks of lines, so that one big file still uses every core;
// definition and solution files read without errors, one task each.
std::vector<Task> cut_into_tasks(const std::vector<DatasetFile>& files,
                                 const std::vector<std::string>& contents,
                                 const std::vector<Diagnostics>& read_diag) {
  std::vector<Task> tasks;
  for (std::uint32_t i = 0; i < files.size(); ++i) {
    const FileKind k = files[i].kind;
    if (k == FileKind::kDefinition || k == FileKind::kSolution) {
      if (!read_diag[i].has_errors()) tasks.push_back({i, {}, true});
    } else if (k == FileKind::kWorkloads || k == FileKind::kTraces) {
      auto lines = split_jsonl(contents[i]);
      constexpr std::size_t kChunk = 4096;
      for (std::size_t b = 0; b < lines.size(); b += kChunk) {
        Task t;
        t.file = i;
        t.lines.assign(
            lines.begin() + static_cast<std::ptrdiff_t>(b),
            lines.begin() + static_cast<std::ptrdiff_t>(std::min(lines.size(), b + kChunk)));
        tasks.push_back(std::move(t));
      }
    }
  }
  return tasks;
}

// A definition or solution file, parsed whole.
void parse_whole_file(const Task& task, const DatasetFile& file, const std::string& text,
                      ParsedChunk& out) {
  auto j = parse_json(text, file.path, out.diag);
  if (!j) return;
  ReadContext ctx{file.path, &out.diag};
  if (file.kind == FileKind::kDefinition) {
    if (auto d = definition_from_json(*j, ctx))
      out.definitions.push_back({std::move(*d), {task.file, 0}});
  } else if (auto s = solution_from_json(*j, ctx)) {
    out.solutions.push_back({std::move(*s), {task.file, 0}});
  }
}

// One line of a workloads or traces file: a workload record under workloads/, an evaluation
// trace under traces/.
void parse_trace_line(const JsonlLine& line, std::uint32_t file_index, const DatasetFile& file,
                      ParsedChunk& out) {
  const std::string where = fmt::format("{}:{}", file.path, line.number);
  Diagnostics line_diag;
  auto j = parse_json(line.text, where, line_diag);
  if (!j) {
    if (!line.terminated) {
      out.diag.error(where, {},
                     "the last line is incomplete: the file ends in the middle of a record "
                     "(an interrupted write?)",
                     "delete the partial line; the records before it are intact");
    } else {
      out.diag.append(line_diag);
    }
    return;
  }
  ReadContext ctx{where, &out.diag};
  auto t = trace_from_json(*j, ctx);
  if (!t) return;
  const RecordSource src{file_index, static_cast<std::uint32_t>(line.number)};
  if (file.kind == FileKind::kWorkloads) {
    if (!t->is_workload_trace()) {
      out.diag.error(where, {}, "a record under workloads/ carries a solution and evaluation",
                     "evaluation traces belong under traces/");
      return;
    }
    out.workloads.push_back({std::move(*t), src});
  } else {
    if (t->is_workload_trace()) {
      out.diag.error(where, {}, "a record under traces/ has no solution or evaluation",
                     "workload records belong under workloads/");
      return;
    }
    out.traces.push_back({std::move(*t), src});
  }
}

// Phase 3, one task: its records into `out`.
void parse_task(const Task& task, const DatasetFile& file, const std::string& text,
                ParsedChunk& out) {
  if (task.whole_file) {
    parse_whole_file(task, file, text, out);
    return;
  }
  for (const auto& line : task.lines) parse_trace_line(line, task.file, file, out);
}

// Phase 4: the parsed chunks merged in order into the set being loaded (the containers are its
// own, edited in place), reporting duplicates.
struct Merger {
  const TraceSet& set;  // for lookups, which see what was merged so far
  Diagnostics& diag;
  std::vector<Record<Definition>>& definitions;
  std::unordered_map<std::string, std::size_t>& definition_index;
  std::unordered_map<std::string, std::vector<Record<Solution>>>& solutions;
  std::unordered_map<std::string, std::pair<std::string, std::size_t>>& solution_index;
  std::unordered_map<std::string, std::vector<Record<Trace>>>& workloads;
  std::unordered_map<std::string, std::pair<std::string, std::size_t>>& workload_index;
  std::unordered_map<std::string, RecordList<Trace>>& traces;
  // Consecutive traces nearly always name the same definition, so the previous one's list is
  // reused without hashing its name.
  RecordList<Trace>* last_traces = nullptr;
  const std::string* last_traces_def = nullptr;

  void add(ParsedChunk& chunk) {
    diag.append(chunk.diag);
    for (auto& d : chunk.definitions) add_definition(d);
    for (auto& s : chunk.solutions) add_solution(s);
    for (auto& w : chunk.workloads) {
      auto& list = workloads[w.value.definition];
      workload_index.emplace(w.value.workload.uuid,
                             std::make_pair(w.value.definition, list.size()));
      list.push_back(std::move(w));
    }
    for (auto& t : chunk.traces) {
      if (last_traces == nullptr || *last_traces_def != t.value.definition) {
        auto it = traces.try_emplace(t.value.definition).first;
        last_traces_def = &it->first;
        last_traces = &it->second;
      }
      last_traces->push_back(std::move(t));
    }
  }

  void add_definition(Record<Definition>& d) {
    if (const auto* prev = set.definition_record(d.value.name)) {
      diag.error(set.where(d.source), "$.name",
                 fmt::format("duplicate definition name '{}' (also defined in {}); this "
                             "file is ignored",
                             d.value.name, set.where(prev->source)));
      return;
    }
    definition_index[d.value.name] = definitions.size();
    definitions.push_back(std::move(d));
  }

  void add_solution(Record<Solution>& s) {
    if (const auto* prev = set.solution(s.value.name)) {
      diag.error(set.where(s.source), "$.name",
                 fmt::format("duplicate solution name '{}' (also in {}); this file is "
                             "ignored",
                             s.value.name, set.where(prev->source)));
      return;
    }
    auto& list = solutions[s.value.definition];
    solution_index[s.value.name] = {s.value.definition, list.size()};
    list.push_back(std::move(s));
  }
};

}  // namespace

TraceSet::TraceSet(fs::path root) : root_(std::move(root)) {}

TraceSet TraceSet::load(const fs::path& root, const LoadOptions& options) {
  check_dataset_root(root);
  TraceSet set(root);
  // The new set is the only holder of its values: these stay the same objects while it loads.
  std::vector<DatasetFile>& files = set.files_.edit();
  Diagnostics& load_diag = set.load_diag_.edit();
  for (auto top : kTopFolders) walk(root, top, files, load_diag);
  std::sort(files.begin(), files.end(),
            [](const DatasetFile& a, const DatasetFile& b) { return a.path < b.path; });

  const unsigned threads =
      options.threads ? options.threads : std::max(1u, std::thread::hardware_concurrency());
  std::vector<Diagnostics> read_diag(files.size());
  std::vector<std::string> contents = read_record_files(root, files, threads, read_diag);
  for (std::size_t i = 0; i < read_diag.size(); ++i) {
    for (auto d : read_diag[i]) {
      d.file = files[i].path;
      load_diag.add(std::move(d));
    }
  }
  const std::vector<Task> tasks = cut_into_tasks(files, contents, read_diag);
  // Phase 3: parse in parallel, each task into its own chunk; merged in order below.
  std::vector<ParsedChunk> parsed(tasks.size());
  parallel_for(tasks.size(), threads, [&](std::size_t ti) {
    parse_task(tasks[ti], files[tasks[ti].file], contents[tasks[ti].file], parsed[ti]);
  });
  contents.clear();
  Merger merger{set,
                load_diag,
                set.definitions_.edit(),
                set.definition_index_.edit(),
                set.solutions_.edit(),
                set.solution_index_.edit(),
                set.workloads_.edit(),
                set.workload_index_.edit(),
                set.traces_};
  for (std::size_t ti = 0; ti < parsed.size(); ++ti) {
    const ParsedChunk& chunk = parsed[ti];
    files[tasks[ti].file].records += chunk.definitions.size() + chunk.solutions.size() +
                                     chunk.workloads.size() + chunk.traces.size();
    merger.add(parsed[ti]);
  }
  return set;
}

std::string TraceSet::where(const RecordSource& s) const {
  const std::vector<DatasetFile>& files = *files_;
  if (s.file >= files.size()) return "(in memory)";
  if (s.line == 0) return files[s.file].path;
  return fmt::format("{}:{}", files[s.file].path, s.line);
}

const Definition* TraceSet::definition(std::string_view name) const {
  const auto* r = definition_record(name);
  return r ? &r->value : nullptr;
}
const Record<Definition>* TraceSet::definition_record(std::string_view name) const {
  auto it = definition_index_->find(std::string(name));
  return it == definition_index_->end() ? nullptr : &(*definitions_)[it->second];
}
std::vector<const Definition*> TraceSet::definitions_with_op_type(std::string_view op_type) const {
  std::vector<const Definition*> out;
  for (const auto& d : *definitions_) {
    if (d.value.op_type == op_type) out.push_back(&d.value);
  }
  return out;
}
std::vector<const Definition*> TraceSet::definitions_with_tag(std::string_view tag) const {
  std::vector<const Definition*> out;
  for (const auto& d : *definitions_) {
    if (d.value.has_tag(tag)) out.push_back(&d.value);
  }
  return out;
}
std::vector<std::string> TraceSet::op_types() const {
  std::set<std::string> s;
  for (const auto& d : *definitions_) s.insert(d.value.op_type);
  return {s.begin(), s.end()};
}
const std::vector<Record<Trace>>& TraceSet::workloads(std::string_view definition) const {
  auto it = workloads_->find(std::string(definition));
  return it == workloads_->end() ? kNoWorkloads : it->second;
}
const Record<Trace>* TraceSet::workload(std::string_view uuid) const {
  auto it = workload_index_->find(std::string(uuid));
  if (it == workload_index_->end()) return nullptr;
  return &workloads_->at(it->second.first)[it->second.second];
}
const std::vector<Record<Solution>>& TraceSet::solutions(std::string_view definition) const {
  auto it = solutions_->find(std::string(definition));
  return it == solutions_->end() ? kNoSolutions : it->second;
}
const Record<Solution>* TraceSet::solution(std::string_view name) const {
  auto it = solution_index_->find(std::string(name));
  if (it == solution_index_->end()) return nullptr;
  return &solutions_->at(it->second.first)[it->second.second];
}
const RecordList<Trace>& TraceSet::traces(std::string_view definition) const {
  auto it = traces_.find(std::string(definition));
  return it == traces_.end() ? kNoTraces : it->second;
}
std::vector<const Trace*> TraceSet::traces_of_solution(std::string_view solution) const {
  std::vector<const Trace*> out;
  const auto* s = this->solution(solution);
  auto scan = [&](const RecordList<Trace>& list) {
    for (const auto& t : list) {
      if (t.value.solution && *t.value.solution == solution) out.push_back(&t.value);
    }
  };
  if (s) {
    scan(traces(s->value.definition));
  } else {
    for (const auto& [_, list] : traces_) scan(list);
  }
  return out;
}
std::vector<std::string> TraceSet::orphan_definition_names() const {
  std::set<std::string> names;
  for (const auto& [n, _] : *workloads_) {
    if (!definition(n)) names.insert(n);
  }
  for (const auto& [n, _] : *solutions_) {
    if (!definition(n)) names.insert(n);
  }
  for (const auto& [n, _] : traces_) {
    if (!definition(n)) names.insert(n);
  }
  return {names.begin(), names.end()};
}
std::size_t TraceSet::trace_count() const {
  std::size_t n = 0;
  for (const auto& [_, l] : traces_) n += l.size();
  return n;
}
std::size_t TraceSet::workload_count() const {
  std::size_t n = 0;
  for (const auto& [_, l] : *workloads_) n += l.size();
  return n;
}
std::size_t TraceSet::solution_count() const { return solution_index_->size(); }

std::vector<const Trace*> TraceSet::best_per_workload(
    std::string_view definition, const std::function<bool(const Trace&)>& include) const {
  std::map<std::string, const Trace*> best;
  for (const auto& r : traces(definition)) {
    const Trace& t = r.value;
    if (!t.passed() || !t.evaluation->performance) continue;
    if (include && !include(t)) continue;
    const double lat = t.evaluation->performance->latency_ms;
    if (lat <= 0) continue;
    auto& slot = best[t.workload.uuid];
    if (slot == nullptr || lat < slot->evaluation->performance->latency_ms) slot = &t;
  }
  std::vector<const Trace*> out;
  std::set<std::string> emitted;
  for (const auto& w : workloads(definition)) {
    auto it = best.find(w.value.workload.uuid);
    if (it != best.end() && emitted.insert(it->first).second) out.push_back(it->second);
  }
  for (const auto& [uuid, t] : best) {
    if (emitted.insert(uuid).second) out.push_back(t);
  }
  return out;
}

void TraceSet::add_definition(Definition d) {
  const std::string name = d.name;
  if (definition_index_->count(name))
    throw Error(name, "a definition with this name already exists");
  auto& definitions = definitions_.edit();
  definition_index_.edit()[name] = definitions.size();
  definitions.push_back({std::move(d), {static_cast<std::uint32_t>(files_->size()), 0}});
}
void TraceSet::add_solution(Solution s) {
  if (solution_index_->count(s.name))
    throw Error(s.name, "a solution with this name already exists");
  auto& list = solutions_.edit()[s.definition];
  solution_index_.edit()[s.name] = {s.definition, list.size()};
  list.push_back({std::move(s), {static_cast<std::uint32_t>(files_->size()), 0}});
}
void TraceSet::add_workload(Trace w) {
  auto& list = workloads_.edit()[w.definition];
  workload_index_.edit().emplace(w.workload.uuid, std::make_pair(w.definition, list.size()));
  list.push_back({std::move(w), {static_cast<std::uint32_t>(files_->size()), 0}});
}
void TraceSet::add_trace(Trace t) {
  const std::string def = t.definition;
  traces_[def].push_back({std::move(t), {static_cast<std::uint32_t>(files_->size()), 0}});
}

TraceSet TraceSet::with_traces(std::span<const Trace> traces, Diagnostics& diag) const {
  TraceSet copy = *this;
  for (const Trace& t : traces) {
    const std::string where = fmt::format("{} (appended trace)", t.definition);
    const std::string line = dump_json_line(to_json(t));
    auto j = parse_json(line, where, diag);
    if (!j) continue;
    ReadContext ctx{where, &diag};
    auto read = trace_from_json(*j, ctx);
    if (!read) continue;
    if (read->is_workload_trace()) {
      diag.error(where, {}, "a trace to append has no solution or evaluation",
                 "workload records belong under workloads/");
      continue;
    }
    copy.add_trace(std::move(*read));
  }
  return copy;
}

TraceSet TraceSet::without_traces() const {
  TraceSet copy(root_);
  copy.load_diag_ = load_diag_;
  copy.files_ = files_;
  copy.definitions_ = definitions_;
  copy.definition_index_ = definition_index_;
  copy.workloads_ = workloads_;
  copy.workload_index_ = workload_index_;
  copy.solutions_ = solutions_;
  copy.solution_index_ = solution_index_;
  return copy;
}

void append_traces(TraceSet& set, std::span<const Trace> traces) {
  std::map<fs::path, std::vector<std::string>> by_file;
  for (const auto& t : traces) {
    if (!t.solution) throw Error(t.definition, "cannot append a trace without a solution");
    const auto* s = set.solution(*t.solution);
    const auto* d = set.definition(t.definition);
    if (!s) throw Error(*t.solution, "trace names a solution that is not in the dataset");
    if (!d) throw Error(t.definition, "trace names a definition that is not in the dataset");
    by_file[set.root() / layout::traces_file(s->value.author, d->op_type, d->name)].push_back(
        dump_json_line(to_json(t)));
  }
  for (const auto& [path, lines] : by_file) append_jsonl(path, lines);
  for (const auto& t : traces) set.add_trace(t);
}

void append_workloads(TraceSet& set, std::span<const Trace> workloads) {
  std::map<fs::path, std::vector<std::string>> by_file;
  for (const auto& w : workloads) {
    const auto* d = set.definition(w.definition);
    if (!d) throw Error(w.definition, "workload names a definition that is not in the dataset");
    by_file[set.root() / layout::workloads_file(d->op_type, d->name)].push_back(
        dump_json_line(to_json(w)));
  }
  for (const auto& [path, lines] : by_file) append_jsonl(path, lines);
  for (const auto& w : workloads) set.add_workload(w);
}

void write_definition(const fs::path& root, const Definition& d) {
  write_file_atomic(root / layout::definition_file(d.op_type, d.name),
                    dump_json_pretty(to_json(d)));
}

void write_solution(const fs::path& root, const Solution& s, std::string_view op_type) {
  write_file_atomic(root / layout::solution_file(s.author, op_type, s.definition, s.name),
                    dump_json_pretty(to_json(s)));
}

}  // namespace fib
