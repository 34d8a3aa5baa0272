// op_type embedding: embedding_v{V}_h{H}, the token embedding's gather (output[t] =
// weight[input_ids[t]]). The whole vocabulary: a vocab-parallel embedding's masked per-rank
// gather adds up to this one through its all-reduce.
#include <fmt/format.h>

#include "onboard/generators/common.h"
#include "onboard/generators/families.h"
#include "onboard/generators/templates.h"

namespace fib::onboard::gen {

Definition embedding(const EmbeddingKernel& k, const GenContext& ctx) {
  std::string description = fmt::format(
      "Token embedding lookup: output[t, :] = weight[input_ids[t], :] over a vocabulary of {} rows "
      "of hidden_size={}; every id in [0, vocab_size). {}",
      k.vocab, k.hidden, provenance(ctx));
  Builder b(name_of(k), "embedding", std::move(description));
  b.tag(std::string(kStatusTag)).tag(model_tag(ctx));
  b.var("num_tokens", "Number of tokens.")
      .constant("vocab_size", k.vocab, "Rows of the embedding table.")
      .constant("hidden_size", k.hidden, "Width of each row.");
  b.input("input_ids", {"num_tokens"}, DType::kInt64, "Token ids, each in [0, vocab_size).");
  b.input("weight", {"vocab_size", "hidden_size"}, DType::kBFloat16, "The embedding table.");
  b.output("output", {"num_tokens", "hidden_size"}, DType::kBFloat16, "The rows of the tokens.");
  b.reference(fill(templates::embedding,
                   {{"V", std::to_string(k.vocab)}, {"H", std::to_string(k.hidden)}}));
  return b.build();
}

std::string name_of(const EmbeddingKernel& k) {
  return fmt::format("embedding_v{}_h{}", k.vocab, k.hidden);
}

}  // namespace fib::onboard::gen
