// Level-10 call dumps (FLASHINFER_DUMP_DIR/<call folder>/) into workloads/<op_type>/<def>.jsonl
// and blob/workloads/<op_type>/<def>/<def>_<id>.safetensors.
#include <stdlib.h>

#include <fmt/format.h>

#include <map>
#include <set>

#include "bind.h"
#include "call_dump.h"
#include "common.h"
#include "fib/base/files.h"
#include "fib/dataset/layout.h"
#include "fib/tensor/safetensors.h"

namespace fib::import {
namespace {

namespace fs = std::filesystem;

std::vector<Definition> load_definitions(const fs::path& dataset) {
  std::vector<Definition> defs;
  const fs::path root = dataset / "definitions";
  if (!fs::is_directory(root))
    throw Error(root.string(), "no definitions",
                "import the definitions first: fib import flashinfer-defs");
  for (const fs::path& op : sorted_entries(root, ""))
    for (const fs::path& file : sorted_entries(op, ".json")) defs.push_back(load_definition(file));
  return defs;
}

std::string hex64(std::uint64_t v) { return fmt::format("{:016x}", v); }

// A stable id from the workload's content, so importing the same dump twice adds nothing.
std::string content_id(const Definition& def, const Binding& b) {
  std::uint64_t h1 = 0xcbf29ce484222325ULL, h2 = 0x84222325cbf29ce4ULL;
  const auto feed = [&](const void* p, std::size_t n) {
    const auto* c = static_cast<const unsigned char*>(p);
    for (std::size_t i = 0; i < n; ++i) {
      h1 = (h1 ^ c[i]) * 0x100000001b3ULL;
      h2 = (h2 ^ c[i]) * 0x100000001b3ULL + 1;
    }
  };
  feed(def.name.data(), def.name.size());
  for (const auto& [name, v] : b.axes) feed(&v, sizeof v);
  for (const auto& [name, t] : b.tensors) feed(t.bytes().data(), t.bytes().size());
  return hex64(h1) + hex64(h2);
}

std::string axes_key(const AxisValues& axes) {
  Json j = Json::object();
  for (const auto& [name, v] : axes) j[name] = v;
  return dump_json_line(j);
}

std::string uuid_of(const std::string& id) {
  return fmt::format("{}-{}-{}-{}-{}", id.substr(0, 8), id.substr(8, 4), id.substr(12, 4),
                     id.substr(16, 4), id.substr(20, 12));
}

struct DefinitionState {
  std::set<std::string> axes_seen;  // axes_key of every workload, the dataset's and the new
  std::size_t added = 0;
  std::vector<std::string> new_lines;
};

// The axes of the workloads the dataset already has for `def`.
DefinitionState existing_state(const fs::path& dataset, const Definition& def) {
  DefinitionState s;
  Diagnostics ignored;
  const fs::path file = dataset / layout::workloads_file(def.op_type, def.name);
  if (!fs::exists(file)) return s;
  const std::optional<std::string> text = read_text_file(file.string(), ignored);
  std::size_t start = 0;
  while (text && start < text->size()) {
    const std::size_t end = std::min(text->find('\n', start), text->size());
    const auto j = parse_json(std::string_view(*text).substr(start, end - start), "", ignored);
    start = end + 1;
    if (!j || !j->is_object() || !j->contains("workload")) continue;
    const Json& workload = (*j)["workload"];
    if (!workload.is_object() || !workload.contains("axes") || !workload["axes"].is_object())
      continue;
    AxisValues axes;
    for (const auto& [name, v] : workload["axes"].items())
      if (v.is_number_integer()) axes.emplace_back(name, v.get<std::int64_t>());
    s.axes_seen.insert(axes_key(axes));
  }
  return s;
}

std::string write_workload(const fs::path& dataset, const Definition& def, const Binding& b) {
  const std::string id = content_id(def, b);
  const std::string blob = layout::blob_file(def.op_type, def.name, id).generic_string();
  write_safetensors(dataset / blob, b.tensors);
  Json inputs = Json::object();
  for (const TensorSpec& spec : def.inputs) {
    if (spec.is_scalar()) {
      for (const auto& [name, v] : b.scalars)
        if (name == spec.name) inputs[name] = {{"type", "scalar"}, {"value", v}};
    } else {
      inputs[spec.name] = {
          {"type", "safetensors"}, {"path", "./" + blob}, {"tensor_key", spec.name}};
    }
  }
  Json axes = Json::object();
  for (const auto& [name, v] : b.axes) axes[name] = v;
  const Json line = {{"definition", def.name},
                     {"solution", nullptr},
                     {"workload", {{"uuid", uuid_of(id)}, {"axes", axes}, {"inputs", inputs}}},
                     {"evaluation", nullptr}};
  return dump_json_line(line);
}

class Importer {
 public:
  Importer(fs::path dataset, const WorkloadImportOptions& options)
      : dataset_(std::move(dataset)), options_(options), defs_(load_definitions(dataset_)) {}
  Importer(const Importer&) = delete;
  Importer& operator=(const Importer&) = delete;
  ~Importer() {
    std::error_code ec;
    if (!scratch_.empty()) fs::remove_all(scratch_, ec);
  }

  // Reads every .pt dump of the folders at once (one sandboxed Python start for them all).
  void convert_pickles(const fs::path& dump_dir, const std::vector<fs::path>& folders);

  FileReport import_call(const fs::path& folder);
  void flush();

 private:
  FileReport place(const Call& call, FileReport report);
  DefinitionState& state(const Definition& def);

  fs::path dataset_;
  WorkloadImportOptions options_;
  fs::path scratch_;  // the .pt dumps' tensors as safetensors
  std::vector<Definition> defs_;
  std::map<std::string, DefinitionState> states_;
  // The last plan() of each wrapper object (process, self_id): run() reads the index tensors
  // and scalars it was planned with.
  std::map<std::pair<std::int64_t, std::int64_t>, Call> plans_;
};

DefinitionState& Importer::state(const Definition& def) {
  auto it = states_.find(def.name);
  if (it == states_.end()) it = states_.emplace(def.name, existing_state(dataset_, def)).first;
  return it->second;
}

void Importer::convert_pickles(const fs::path& dump_dir, const std::vector<fs::path>& folders) {
  std::vector<std::string> pickles;
  for (const fs::path& f : folders)
    if (!fs::exists(f / "inputs.safetensors") && fs::exists(f / "inputs.pt"))
      pickles.push_back(f.filename().string());
  std::string templ = (fs::temp_directory_path() / "fib-import-XXXXXX").string();
  if (!::mkdtemp(templ.data())) throw Error(templ, "cannot make a scratch folder");
  scratch_ = templ;
  if (pickles.empty()) return;
  try {
    pt_to_safetensors(dump_dir, pickles, scratch_, options_.python, options_.bwrap);
  } catch (const Error& e) {
    for (const std::string& p : pickles) write_file_atomic(scratch_ / (p + ".error"), e.what());
  }
}

FileReport Importer::import_call(const fs::path& folder) {
  FileReport report;
  report.file = folder.filename().string();
  // Calls captured in a CUDA graph are written there after each replay, in another layout.
  if (report.file == "graph_flushes") {
    report.outcome = Outcome::kSkipped;
    report.notes.push_back("CUDA-graph replay snapshots are not read; dump with CUDA graphs off");
    return report;
  }
  Diagnostics diag;
  std::optional<Call> call = read_call(folder, {.converted = scratch_}, diag);
  if (!call) return error_report(std::move(report), diag);
  const std::string& fn = call->function_name;
  if (fn.ends_with(".plan") || fn.ends_with(".__init__")) {
    if (fn.ends_with(".plan") && call->self_id) plans_[{call->process_id, *call->self_id}] = *call;
    report.outcome = Outcome::kSkipped;
    report.notes.push_back(fmt::format("{}: its tensors go with the wrapper's next run()", fn));
    return report;
  }
  if (call->self_id)
    if (auto it = plans_.find({call->process_id, *call->self_id}); it != plans_.end()) {
      call->tensors.insert(it->second.tensors.begin(), it->second.tensors.end());
      call->scalars.insert(it->second.scalars.begin(), it->second.scalars.end());
    }
  return place(*call, std::move(report));
}

FileReport Importer::place(const Call& call, FileReport report) {
  std::vector<std::string> misfits;
  for (const Definition& def : defs_) {
    if (!names_api(def, call.function_name)) continue;
    std::string why;
    const std::optional<Binding> b = bind(def, call, &why);
    if (!b) {
      misfits.push_back(fmt::format("{}: {}", def.name, why));
      continue;
    }
    report.definition = def.name;
    report.notes = sanitize(def, *b);
    if (!report.notes.empty()) {
      report.outcome = Outcome::kError;
      return report;
    }
    report.notes = b->notes;
    DefinitionState& s = state(def);
    report.outcome = Outcome::kSkipped;
    if (!s.axes_seen.insert(axes_key(b->axes)).second) {
      report.notes.push_back(
          fmt::format("the dataset has a workload of axes {} already", axes_key(b->axes)));
    } else if (s.added >= options_.max_per_definition) {
      report.notes.push_back(
          fmt::format("over --max-per-definition {}", options_.max_per_definition));
    } else {
      s.new_lines.push_back(write_workload(dataset_, def, *b));
      ++s.added;
      report.outcome = Outcome::kAdded;
      report.target = layout::workloads_file(def.op_type, def.name).generic_string();
    }
    return report;
  }
  report.outcome = misfits.empty() ? Outcome::kSkipped : Outcome::kError;
  report.notes = misfits.empty()
                     ? std::vector<std::string>{fmt::format(
                           "no definition of the dataset has fi_api {}", call.function_name)}
                     : misfits;
  return report;
}

// The workload files are rewritten whole, atomically, once every call has been read.
void Importer::flush() {
  for (const Definition& def : defs_) {
    auto it = states_.find(def.name);
    if (it == states_.end() || it->second.new_lines.empty()) continue;
    const fs::path file = dataset_ / layout::workloads_file(def.op_type, def.name);
    Diagnostics ignored;
    std::string text = fs::exists(file) ? read_text_file(file.string(), ignored).value_or("") : "";
    if (!text.empty() && text.back() != '\n') text += '\n';
    for (const std::string& line : it->second.new_lines) text += line + "\n";
    write_file_atomic(file, text);
  }
}

}  // namespace

Report import_workloads(const fs::path& dump_dir, const fs::path& dataset,
                        const WorkloadImportOptions& options) {
  Importer importer(dataset, options);
  Report report;
  const std::vector<fs::path> folders = sorted_entries(dump_dir, "");
  importer.convert_pickles(dump_dir, folders);
  for (const fs::path& folder : folders) {
    try {
      report.files.push_back(importer.import_call(folder));
    } catch (const Error& e) {
      FileReport failed;
      failed.file = folder.filename().string();
      report.files.push_back(error_report(std::move(failed), e.diagnostics()));
    }
  }
  importer.flush();
  return report;
}

}  // namespace fib::import
