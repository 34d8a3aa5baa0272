// op_type sampling: top-k, top-p and top-k-then-top-p sampling from probabilities, one
// definition per vocabulary size (the model's lm_head width).
#include <fmt/format.h>

#include "fib/onboard/naming.h"
#include "onboard/generators/common.h"
#include "onboard/generators/families.h"
#include "onboard/generators/templates.h"

namespace fib::onboard::gen {

Definition sampling(const SamplingKernel& k, const GenContext& ctx) {
  const std::string name = definition_name(KernelSpec{k});
  const bool uses_k = k.kind != SamplingKind::kTopP;
  const bool uses_p = k.kind != SamplingKind::kTopK;
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
  b.output("samples", {"batch_size"}, DType::kInt64, "Sampled token indices");
  std::string helpers;
  if (uses_k) helpers += std::string(templates::sampling_top_k);
  if (uses_k && uses_p) helpers += "\n\n";
  if (uses_p) helpers += std::string(templates::sampling_top_p);
  std::string params = "probs";
  if (uses_k) params += ", top_k";
  if (uses_p) params += ", top_p";
  // With top-p, p <= 0 degenerates to greedy decoding, as FlashInfer does.
  const std::string_view body = k.kind == SamplingKind::kTopK ? templates::sampling_body_top_k
                                : k.kind == SamplingKind::kTopP
                                    ? templates::sampling_body_top_p
                                    : templates::sampling_body_top_k_top_p;
  b.reference(fill(templates::sampling, {{"HELPERS", helpers},
                                         {"PARAMS", params},
                                         {"V", std::to_string(k.vocab)},
                                         {"BODY", std::string(body)}}));
  return b.build();
}

std::string name_of(const SamplingKernel& k) {
  return fmt::format("{}_sampling_from_probs_v{}", sampling_kind_name(k.kind), k.vocab);
}

}  // namespace fib::onboard::gen
