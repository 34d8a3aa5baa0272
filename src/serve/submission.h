// POST /evaluate's request: parsed, checked against the dataset, and the solution renamed as
// upstream does (name_<hash8>), so that two submissions of the same code share one solution file.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "fib/base/diagnostics.h"
#include "fib/dataset/trace_set.h"
#include "fib/serve/tokens.h"

namespace fib::serve {

struct Submission {
  Solution solution;                   // renamed
  std::string op_type;                 // its definition's (the solution file's folder)
  std::vector<std::string> workloads;  // the requested uuids, else all of the definition's
  bool gpu = false;                    // whether it runs on a CUDA device
};

// What is wrong with a request, as the HTTP answer says it: 400 (unknown definition or workload,
// as upstream), 403 (a reserved author without the admin token), 422 (the body is not a valid
// request or solution; `diagnostics` has JSON paths).
struct Rejection {
  int status = 422;
  std::string detail;
  Diagnostics diagnostics;
};

// The first 8 hex digits of the SHA-256 of the solution's content (everything but its name).
std::string solution_hash8(const Solution& s);

// Where a submission may go: whether the server has queues of each kind (a solution for a kind it
// has none of is refused), who sends it, and the leaderboard's baseline author (reserved).
struct SubmissionRules {
  bool cpu_devices = true, gpu_devices = false;
  Identity sender;
  std::string baseline_author;
};

// Parses {solution, workload_uuids?}. The solution's author becomes the sender's (a token's own
// author; the admin's is the one the solution names).
std::optional<Submission> parse_submission(const Json& body, const TraceSet& set,
                                           const SubmissionRules& rules, Rejection& rejection);

}  // namespace fib::serve
