#include "python_solutions.h"

#include <fstream>

#include "fib/base/json.h"
#include "fib/dataset/trace_set.h"

namespace fib::testing {

namespace fs = std::filesystem;

void write_python_solution(const fs::path& root, const std::string& op_type,
                           const std::string& definition, const std::string& name,
                           const std::string& source) {
  Json j = {{"name", name},
            {"definition", definition},
            {"author", "test"},
            {"spec",
             {{"language", "python"},
              {"target_hardware", Json::array({"cpu"})},
              {"entry_point", "main.py::run"},
              {"destination_passing_style", false}}},
            {"sources", Json::array({{{"path", "main.py"}, {"content", source}}})}};
  const fs::path dir = root / "solutions" / "test" / op_type / definition;
  fs::create_directories(dir);
  std::ofstream(dir / (name + ".json")) << j.dump(2);
}

std::map<std::string, std::string> solution_statuses(const fs::path& root,
                                                     const std::string& definition) {
  std::map<std::string, std::string> out;
  const TraceSet set = TraceSet::load(root);
  for (const auto& t : set.traces(definition)) {
    if (t.value.is_workload_trace() || !t.value.evaluation) continue;
    auto& s = out[t.value.solution.value_or("?")];
    const std::string st(status_name(t.value.evaluation->status));
    if (s.empty() || st != "PASSED") s = st;
  }
  return out;
}

}  // namespace fib::testing
