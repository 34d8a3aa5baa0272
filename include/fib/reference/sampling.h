// The sampling references (top_k / top_p / top_k_top_p sampling from probs) draw at random, so a
// solution cannot be compared sample by sample. These give the exact distribution the native
// sampler draws from, so a check can compare empirical frequencies with it (and test support
// membership: a token with probability 0 must never be drawn).
#pragma once

#include "fib/reference/reference.h"
#include "fib/tensor/tensor.h"
#include "fib/trace/definition.h"

namespace fib::reference {

// Per-row probabilities [batch, vocab] (float32, each row summing to 1 up to rounding) after the
// definition's masks, as its reference applies them:
// - top_k (when 0 < k < vocab): the k most probable tokens, renormalized;
// - top_p (when 0 < p < 1): tokens in descending order of probability up to and including the
//   first whose cumulative sum exceeds p, renormalized; p <= 0 is a one-hot at the argmax (the
//   first maximal index); p >= 1 keeps everything;
// - top_k_top_p: top_k first, then top_p on the renormalized row;
// - min_p: the tokens with probability >= min_p * max (float32), renormalized.
// Ties in probability are broken by the lower token index first (the reference's sort leaves
// tie order implementation-defined). The cumulative sum is accumulated in double and rounded
// to float32 per element, as PyTorch's CPU cumsum does. Throws fib::Error when `def` is not a
// sampling definition, an input is missing, or a row is not a distribution (negative, NaN or
// infinite entries, or nothing left with positive mass), where torch.multinomial would fail.
Tensor sampling_distribution(const Definition& def, const Arguments& args);

}  // namespace fib::reference
