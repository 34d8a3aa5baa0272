// op_type comm: the collectives of tensor and expert parallelism as definitions, their math
// over world_size shards that one device holds (dim 0 of the input is the rank), so a reference
// computes them and a solution is checked against it: never the identity. world_size is a var
// axis: each workload records the world size it runs at.
#include <fmt/format.h>

#include "fib/onboard/naming.h"
#include "onboard/generators/common.h"
#include "onboard/generators/families.h"
#include "onboard/generators/templates.h"

namespace fib::onboard::gen {

namespace {

std::string_view comm_name(CommKind k) {
  switch (k) {
    case CommKind::kAllReduce:
      return "all_reduce";
    case CommKind::kAllGather:
      return "all_gather";
    case CommKind::kReduceScatter:
      return "reduce_scatter";
    case CommKind::kAllToAll:
      return "all_to_all";
  }
  return "all_reduce";
}

}  // namespace

Definition comm(const CommKernel& k, const GenContext& ctx) {
  using Shape = std::vector<std::string>;
  const bool pairwise = k.kind == CommKind::kReduceScatter || k.kind == CommKind::kAllToAll;
  std::string what, body;
  Shape in = {"world_size", "num_tokens", "hidden_size"}, out;
  switch (k.kind) {
    case CommKind::kAllReduce:
      what =
          "All-reduce (sum) over world_size ranks: input[r] is rank r's tensor; the output is "
          "their sum, which every rank holds.";
      body = std::string(templates::comm_all_reduce);
      out = {"num_tokens", "hidden_size"};
      break;
    case CommKind::kAllGather:
      what =
          "All-gather over world_size ranks: input[r] is rank r's shard; output[t, r] = "
          "input[r, t], the gathered rows every rank holds.";
      body = std::string(templates::comm_all_gather);
      out = {"num_tokens", "world_size", "hidden_size"};
      break;
    case CommKind::kReduceScatter:
      what =
          "Reduce-scatter (sum) over world_size ranks: input[s, r] is rank s's contribution "
          "to chunk r; output[r] is the sum over s, rank r's chunk.";
      body = std::string(templates::comm_reduce_scatter);
      in = {"world_size", "world_size", "num_tokens", "hidden_size"};
      out = {"world_size", "num_tokens", "hidden_size"};
      break;
    case CommKind::kAllToAll:
      what =
          "All-to-all over world_size ranks: input[s, d] is what rank s sends rank d; "
          "output[d, s] = input[s, d].";
      body = std::string(templates::comm_all_to_all);
      in = {"world_size", "world_size", "num_tokens", "hidden_size"};
      out = {"world_size", "world_size", "num_tokens", "hidden_size"};
      break;
  }
  Builder b(definition_name(KernelSpec{k}), "comm",
            fmt::format("{} ({}; bf16) {}", what, k.role, provenance(ctx)));
  b.tag(std::string(kStatusTag)).tag(model_tag(ctx));
  if (k.tp > 1) {
    b.tag(fmt::format("{}:{}", k.kind == CommKind::kAllToAll ? "ep" : "tp", k.tp));
  }
  b.var("world_size", "Ranks taking part (the TP or EP size); the workload records it")
      .var("num_tokens", pairwise ? "Tokens per (rank, chunk) pair" : "Tokens per rank")
      .constant("hidden_size", k.hidden, "Width of each row");
  b.input("input", in, DType::kBFloat16, "Every rank's data, rank first");
  b.output("output", out, DType::kBFloat16, "What the ranks hold after the collective");
  b.reference(fill(templates::comm, {{"H", std::to_string(k.hidden)}, {"BODY", body}}));
  return b.build();
}

std::string name_of(const CommKernel& k) {
  return fmt::format("{}_h{}", comm_name(k.kind), k.hidden);
}

}  // namespace fib::onboard::gen
