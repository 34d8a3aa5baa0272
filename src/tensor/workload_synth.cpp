// Workload synthesis by axis role. Axis names are the dataset's shared vocabulary
// (batch_size, len_indptr, total_q, num_kv_indices, num_pages, ...), so sizing them by role
// covers every op family without per-definition code.
#include "fib/tensor/workload_synth.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

#include "fib/tensor/inputs.h"
#include "fib/tensor/random.h"

namespace fib {

namespace {

std::string make_uuid(Rng& rng) {
  const std::uint64_t a = rng.next(), b = rng.next();
  // Version 4, variant 1.
  const std::uint64_t hi = (a & 0xFFFFFFFFFFFF0FFFULL) | 0x0000000000004000ULL;
  const std::uint64_t lo = (b & 0x3FFFFFFFFFFFFFFFULL) | 0x8000000000000000ULL;
  return fmt::format("{:08x}-{:04x}-{:04x}-{:04x}-{:012x}", hi >> 32, (hi >> 16) & 0xFFFF,
                     hi & 0xFFFF, lo >> 48, lo & 0xFFFFFFFFFFFFULL);
}

std::int64_t pick(Rng& rng, std::initializer_list<std::int64_t> choices) {
  const auto i = rng.randint(0, static_cast<std::int64_t>(choices.size()));
  return *(choices.begin() + i);
}

// Log-uniform integer in [lo, hi]: sequence lengths spread over orders of magnitude.
std::int64_t log_uniform(Rng& rng, std::int64_t lo, std::int64_t hi) {
  if (hi <= lo) return lo;
  const double x = std::exp(
      rng.uniform(std::log(static_cast<double>(lo)), std::log(static_cast<double>(hi) + 1.0)));
  return std::clamp<std::int64_t>(static_cast<std::int64_t>(x), lo, hi);
}

}  // namespace

std::optional<WorkloadPreset> parse_workload_preset(std::string_view name) {
  if (name == "decode") return WorkloadPreset::kDecode;
  if (name == "prefill") return WorkloadPreset::kPrefill;
  if (name == "mixed") return WorkloadPreset::kMixed;
  return std::nullopt;
}

std::string_view workload_preset_name(WorkloadPreset p) {
  switch (p) {
    case WorkloadPreset::kDecode:
      return "decode";
    case WorkloadPreset::kPrefill:
      return "prefill";
    case WorkloadPreset::kMixed:
      return "mixed";
  }
  return "?";
}

std::vector<Workload> synthesize_workloads(const Definition& def, const SynthOptions& o) {
  Rng rng(Rng::derive(o.seed, def.name));
  const auto constant = [&](std::string_view n) -> std::optional<std::int64_t> {
    const Axis* a = def.axis(n);
    return a && a->kind == AxisKind::kConst ? a->value : std::nullopt;
  };
  const std::int64_t page_size = constant("page_size").value_or(1);
  // Sparse attention selects `topk` keys: contexts shorter than that are not what it serves
  // (and the indexer's constraint topk <= max_num_pages * page_size says so).
  const std::int64_t min_kv = std::max<std::int64_t>(std::min<std::int64_t>(16, o.max_kv_len),
                                                     constant("topk").value_or(1));
  const std::int64_t max_kv = std::max(o.max_kv_len, min_kv);
  // Decode-shaped definitions (one query per sequence) take decode lengths even in "prefill".
  const bool is_decode_def = def.name.find("decode") != std::string::npos || !def.axis("total_q");
  // moe_align_block_size's output sizes, sgl-kernel's contract: every (token, slot) pair plus
  // up to block_size - 1 padding entries per expert, and one expert id per block of that.
  const auto aligned_size = [&](std::string_view name, std::int64_t tokens) {
    const std::int64_t bs = std::max<std::int64_t>(1, constant("block_size").value_or(1));
    const std::int64_t padded =
        tokens * constant("top_k").value_or(1) + constant("num_experts").value_or(0) * (bs - 1);
    return name == "max_num_tokens_padded" ? padded : (padded + bs - 1) / bs;
  };
  std::vector<Workload> out;
  for (int n = 0; n < o.count; ++n) {
    WorkloadPreset preset = o.preset;
    if (preset == WorkloadPreset::kMixed)
      preset = rng.randint(0, 2) ? WorkloadPreset::kDecode : WorkloadPreset::kPrefill;
    const bool decode = preset == WorkloadPreset::kDecode;
    std::int64_t batch =
        decode ? pick(rng, {1, 2, 4, 8, 16, 32, 64}) : pick(rng, {1, 1, 2, 3, 4, 8});
    std::vector<std::int64_t> q_lens, kv_lens;
    std::int64_t tokens = 0;
    for (std::int64_t b = 0; b < batch; ++b) {
      const std::int64_t kv = log_uniform(rng, min_kv, max_kv);
      const std::int64_t q = (decode || is_decode_def) ? 1 : log_uniform(rng, 1, kv);
      if (tokens + q > o.max_tokens && b > 0) {
        batch = b;
        break;
      }
      kv_lens.push_back(kv);
      q_lens.push_back(q);
      tokens += q;
    }
    std::int64_t total_kv = 0, pages = 0, max_pages = 0;
    for (auto kv : kv_lens) {
      total_kv += kv;
      const std::int64_t p = (kv + page_size - 1) / page_size;
      pages += p;
      max_pages = std::max(max_pages, p);
    }
    // Caches hold more pages than the batch uses, as a serving engine's pool does.
    const std::int64_t pool_pages = pages + pages / 4 + 16;
    Workload w;
    w.uuid = make_uuid(rng);
    for (const auto& name : def.var_axes()) {
      std::int64_t v;
      if (name == "batch_size" || name == "num_seqs")
        v = batch;
      else if (name == "len_indptr" || name == "len_cu_seqlens" || name == "batch_size_plus_1")
        v = batch + 1;
      else if (name == "nnz_kv")  // page_append: the step's new tokens, inside their sequences
        v = tokens;
      else if (name == "page_size")  // a var page size (MLA append): pages of one token
        v = page_size;
      else if (name == "total_q" || name == "total_seq_len" || name == "M" || name == "num_tokens")
        v = tokens;
      else if (name == "seq_len")
        v = def.axis("pool_size") ? pick(rng, {2, 3, 4, 8}) : tokens;  // gdn mtp: draft length
      else if (name == "total_kv")
        v = total_kv;
      else if (name == "num_kv_indices")
        v = pages;
      else if (name == "num_pages")
        v = def.axis("max_num_pages") ? batch * max_pages + 16 : pool_pages;
      else if (name == "max_num_pages")
        v = max_pages;
      else if (name == "pool_size" || name == "state_cache_size")
        v = batch + std::max<std::int64_t>(4, batch / 2);
      else if (name == "max_seq_len")
        v = std::max<std::int64_t>(max_kv, 16);
      else if (name == "num_qo_heads" || name == "num_kv_heads")
        v = pick(rng, {8, 16, 32});
      else if (name == "world_size")
        v = pick(rng, {2, 4, 8});  // a collective's ranks (tensor or expert parallel sizes)
      else if (name == "max_num_tokens_padded" || name == "max_num_m_blocks")
        v = aligned_size(name, tokens);
      else {
        throw Error(def.name,
                    fmt::format("cannot size var axis '{}': no synthesis rule for it", name),
                    "give the workload's axes explicitly");
      }
      w.axes.emplace_back(name, std::max<std::int64_t>(v, 1));
    }
    // Tensors are synthesized at run time; scalars get their conventional values now (the
    // recipes' choice, e.g. sm_scale = 1/sqrt(head_dim)), so the workload says what it runs.
    Workload tensors_only = w;
    for (const auto& spec : def.inputs) {
      if (spec.is_scalar()) continue;
      WorkloadInput in;
      in.name = spec.name;
      tensors_only.inputs.push_back(in);
    }
    MaterializeOptions mo;
    mo.seed = o.seed;
    mo.scalars_only = true;
    const MaterializedInputs scalars = materialize_inputs(def, tensors_only, mo);
    for (const auto& spec : def.inputs) {
      WorkloadInput in;
      in.name = spec.name;
      if (spec.is_scalar()) {
        in.kind = InputKind::kScalar;
        in.value = scalars.scalars.at(spec.name);
      }
      w.inputs.push_back(std::move(in));
    }
    out.push_back(std::move(w));
  }
  return out;
}

}  // namespace fib
