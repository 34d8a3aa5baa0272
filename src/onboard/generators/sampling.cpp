// op_type sampling: top-k, top-p, top-k-then-top-p and min-p sampling from probabilities, and
// top-k / top-p renormalization of probabilities (FlashInfer's top_k_renorm_probs and
// top_p_renorm_probs, which SGLang runs before sampling), one definition per vocabulary size
// (the model's lm_head width).
#include <fmt/format.h>

#include "fib/onboard/naming.h"
#include "onboard/generators/common.h"
#include "onboard/generators/families.h"
#include "onboard/generators/templates.h"

namespace fib::onboard::gen {

namespace {

bool is_renorm(SamplingKind k) {
  return k == SamplingKind::kTopKRenorm || k == SamplingKind::kTopPRenorm;
}

// Filters probs to the top-k or top-p tokens, renormalized: the same masks as the samplers'.
Definition renorm(const SamplingKernel& k, const GenContext& ctx) {
  const bool top_k = k.kind == SamplingKind::kTopKRenorm;
  const std::string what =
      top_k ? "Top-k renormalization of probabilities with vocab_size={}: keeps the k most "
              "probable tokens per row and renormalizes them to sum to 1; the rest become 0."
            : "Top-p renormalization of probabilities with vocab_size={}: keeps the smallest "
              "prefix of tokens (by probability) whose mass reaches p per row, renormalized to "
              "sum to 1; the rest become 0.";
  Builder b(definition_name(KernelSpec{k}), "sampling",
            fmt::format("{} {}", fmt::format(fmt::runtime(what), k.vocab), provenance(ctx)));
  b.tag(std::string(kStatusTag)).tag(model_tag(ctx));
  b.tag(fmt::format("fi_api:flashinfer.sampling.{}_probs", sampling_kind_name(k.kind)));
  b.var("batch_size", "Number of rows")
      .constant("vocab_size", k.vocab,
                fmt::format("Size of the vocabulary of {}", ctx.display_name));
  b.input("probs", {"batch_size", "vocab_size"}, DType::kFloat32,
          "Probability distributions (after softmax)");
  if (top_k) {
    b.input("top_k", {"batch_size"}, DType::kInt32, "Number of top tokens kept per row");
  } else {
    b.input("top_p", {"batch_size"}, DType::kFloat32, "Cumulative probability threshold per row");
  }
  b.output("renormalized", {"batch_size", "vocab_size"}, DType::kFloat32,
           "The filtered probabilities, each row summing to 1");
  b.reference(
      fill(templates::sampling_renorm,
           {{"HELPERS", std::string(top_k ? templates::sampling_top_k : templates::sampling_top_p)},
            {"PARAM", top_k ? "top_k" : "top_p"},
            {"V", std::to_string(k.vocab)},
            {"FILTER", top_k ? "_top_k(probs[i], int(top_k[i].item()))"
                             : "_top_p(probs[i], float(top_p[i].item()))"}}));
  return b.build();
}

}  // namespace

Definition sampling(const SamplingKernel& k, const GenContext& ctx) {
  if (is_renorm(k.kind)) return renorm(k, ctx);
  const std::string name = definition_name(KernelSpec{k});
  const bool min_p = k.kind == SamplingKind::kMinP;
  const bool uses_k = k.kind == SamplingKind::kTopK || k.kind == SamplingKind::kTopKTopP;
  const bool uses_p = k.kind == SamplingKind::kTopP || k.kind == SamplingKind::kTopKTopP;
  std::string what;
  switch (k.kind) {
    case SamplingKind::kTopK:
      what =
          "Top-k sampling from probabilities with vocab_size={}. Keeps only the k highest "
          "probability tokens, "
          "renormalizes, then samples from the filtered distribution.";
      break;
    case SamplingKind::kTopP:
      what =
          "Top-p (nucleus) sampling from probabilities with vocab_size={}. Filters probabilities "
          "using the "
          "cumulative probability threshold, then samples from the filtered distribution.";
      break;
    case SamplingKind::kTopKTopP:
      what =
          "Top-k top-p (nucleus) sampling from probabilities with vocab_size={}. Applies top-k, "
          "then top-p on "
          "the renormalized distribution, then samples.";
      break;
    case SamplingKind::kMinP:
      what =
          "Min-p sampling from probabilities with vocab_size={}. Keeps the tokens at least min_p "
          "times as probable as the most probable one, renormalizes, then samples.";
      break;
    case SamplingKind::kTopKRenorm:
    case SamplingKind::kTopPRenorm:
      break;
  }
  Builder b(name, "sampling",
            fmt::format("{} {}", fmt::format(fmt::runtime(what), k.vocab), provenance(ctx)));
  b.tag(std::string(kStatusTag)).tag(model_tag(ctx));
  b.tag(
      fmt::format("fi_api:flashinfer.sampling.{}_sampling_from_probs", sampling_kind_name(k.kind)));
  b.var("batch_size", "Number of sequences to sample from")
      .constant("vocab_size", k.vocab,
                fmt::format("Size of the vocabulary of {}", ctx.display_name));
  b.input("probs", {"batch_size", "vocab_size"}, DType::kFloat32,
          "Probability distributions (after softmax)");
  if (uses_k) {
    b.input("top_k", {"batch_size"}, DType::kInt32,
            "Number of top tokens to consider for sampling per sequence");
  }
  if (uses_p) {
    b.input("top_p", {"batch_size"}, DType::kFloat32,
            "Cumulative probability threshold for nucleus sampling per sequence");
  }
  if (min_p) {
    b.input("min_p", {"batch_size"}, DType::kFloat32,
            "Per-sequence fraction of the highest probability a token needs to be kept");
  }
  b.output("samples", {"batch_size"}, DType::kInt64, "Sampled token indices");
  std::string helpers;
  if (uses_k) helpers += std::string(templates::sampling_top_k);
  if (uses_k && uses_p) helpers += "\n\n";
  if (uses_p) helpers += std::string(templates::sampling_top_p);
  if (min_p) helpers += std::string(templates::sampling_min_p);
  std::string params = "probs";
  if (uses_k) params += ", top_k";
  if (uses_p) params += ", top_p";
  if (min_p) params += ", min_p";
  // With top-p, p <= 0 degenerates to greedy decoding, as FlashInfer does.
  const std::string_view body = k.kind == SamplingKind::kTopK   ? templates::sampling_body_top_k
                                : k.kind == SamplingKind::kTopP ? templates::sampling_body_top_p
                                : min_p                         ? templates::sampling_body_min_p
                                        : templates::sampling_body_top_k_top_p;
  b.reference(fill(templates::sampling, {{"HELPERS", helpers},
                                         {"PARAMS", params},
                                         {"V", std::to_string(k.vocab)},
                                         {"BODY", std::string(body)}}));
  return b.build();
}

std::string name_of(const SamplingKernel& k) {
  if (is_renorm(k.kind)) return fmt::format("{}_probs_v{}", sampling_kind_name(k.kind), k.vocab);
  return fmt::format("{}_sampling_from_probs_v{}", sampling_kind_name(k.kind), k.vocab);
}

}  // namespace fib::onboard::gen
