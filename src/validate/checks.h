// Internal: the context shared by the validation checks, one function per check category.
#pragma once

#include <map>
#include <string>

#include "fib/validate/validator.h"

namespace fib::validate::detail {

struct Context {
  const TraceSet& set;
  const Options& options;
  std::map<std::string, DefinitionReport> reports;  // by definition name, sorted
  CheckResult dataset;                              // findings that belong to no definition
  bool has_blob_folder = false;

  // The report of a definition, created on first use (also for names known only from paths).
  DefinitionReport& report(const std::string& name, const std::string& op_type = {});
  CheckResult& result(const std::string& name, Check c);
  bool enabled(Check c) const;
};

Message message(Severity level, std::string text, std::string file = {}, std::string path = {},
                std::string hint = {});
Message from_diagnostic(const Diagnostic& d);

// Which definition a dataset-relative file belongs to, judged from its path, and the check
// its problems count under. Empty name when the path does not follow the layout.
struct FileOwner {
  std::string definition;
  std::string op_type;
  Check check = Check::kLayout;
};
FileOwner owner_of(const std::string& relative_path);

void check_layout(Context& ctx);
void check_definitions(Context& ctx);
void check_workloads(Context& ctx);
void check_solutions(Context& ctx);
void check_traces(Context& ctx);
void check_baselines(Context& ctx);

// Family of a definition name: the name with digit runs replaced by '*' (e.g.
// "gqa_paged_decode_h*_kv*_d*_ps*"). Definitions of one family should share an interface.
std::string name_family(const std::string& name);

}  // namespace fib::validate::detail
