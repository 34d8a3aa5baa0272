// op_type sampling: top-k, top-p and top-k-then-top-p sampling from probabilities, one
// definition per vocabulary size (the model's lm_head width).
#include <fmt/format.h>

#include "fib/onboard/naming.h"
#include "onboard/generators/common.h"
#include "onboard/generators/families.h"

namespace fib::onboard::gen {

namespace {

constexpr std::string_view kTopK = R"PY(def _top_k(row, k):
    # Keep the k most probable tokens and renormalize; k outside (0, vocab) keeps everything.
    if 0 < k < row.shape[0]:
        kept = torch.argsort(row, descending=True)[:k]
        filtered = torch.zeros_like(row)
        filtered[kept] = row[kept]
        row = filtered / filtered.sum()
    return row
)PY";

constexpr std::string_view kTopP = R"PY(def _top_p(row, p):
    # Keep the smallest prefix (by probability) whose mass reaches p - the token that crosses p
    # is kept - and renormalize; p >= 1 keeps everything.
    if p < 1.0:
        values, order = torch.sort(row, descending=True)
        # mass strictly before each token
        before = torch.cat([values.new_zeros(1), torch.cumsum(values, dim=0)[:-1]])
        kept = order[before <= p]
        kept = kept if kept.numel() > 0 else order[:1]
        filtered = torch.zeros_like(row)
        filtered[kept] = row[kept]
        row = filtered / filtered.sum()
    return row
)PY";

constexpr std::string_view kRun = R"PY(import torch

@HELPERS@

@torch.no_grad()
def run(@PARAMS@):
    batch_size, vocab_size = probs.shape
    assert vocab_size == @V@

    probs = probs.to(torch.float32)
    samples = torch.empty(batch_size, dtype=torch.int64, device=probs.device)
    for i in range(batch_size):
        row = probs[i]
@BODY@
        samples[i] = torch.multinomial(row, 1, replacement=True).squeeze(0)
    return samples
)PY";

// p <= 0 degenerates to greedy decoding, as FlashInfer does.
constexpr std::string_view kBodyTopK = R"PY(        row = _top_k(row, int(top_k[i].item())))PY";
constexpr std::string_view kBodyTopP = R"PY(        p = float(top_p[i].item())
        if p <= 0.0:
            samples[i] = torch.argmax(row)
            continue
        row = _top_p(row, p))PY";
constexpr std::string_view kBodyTopKTopP =
    R"PY(        # top-k first, then top-p on the renormalized distribution
        row = _top_k(row, int(top_k[i].item()))
        p = float(top_p[i].item())
        if p <= 0.0:
            samples[i] = torch.argmax(row)
            continue
        row = _top_p(row, p))PY";

}  // namespace

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
  if (uses_k) helpers += std::string(kTopK);
  if (uses_k && uses_p) helpers += "\n\n";
  if (uses_p) helpers += std::string(kTopP);
  std::string params = "probs";
  if (uses_k) params += ", top_k";
  if (uses_p) params += ", top_p";
  const std::string_view body = k.kind == SamplingKind::kTopK   ? kBodyTopK
                                : k.kind == SamplingKind::kTopP ? kBodyTopP
                                                                : kBodyTopKTopP;
  b.reference(fill(kRun, {{"HELPERS", helpers},
                          {"PARAMS", params},
                          {"V", std::to_string(k.vocab)},
                          {"BODY", std::string(body)}}));
  return b.build();
}

std::string name_of(const SamplingKernel& k) {
  return fmt::format("{}_sampling_from_probs_v{}", sampling_kind_name(k.kind), k.vocab);
}

}  // namespace fib::onboard::gen
