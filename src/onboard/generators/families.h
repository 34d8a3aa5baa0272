// The generators of each op type, one file per op type named by it (gemm.cpp, rmsnorm.cpp,
// gqa_paged.cpp, ...), as fib/trace/op_types.def lists them. registry.cpp dispatches a
// KernelSpec to the right one.
#pragma once

#include <vector>

#include "fib/onboard/generators.h"
#include "fib/onboard/kernel_spec.h"
#include "fib/trace/op_types.h"

namespace fib::onboard::gen {

// Each KernelSpec alternative's generator and its definition's name in the dataset's convention
// (definition_name, fib/onboard/naming.h), and the interfaces the dataset used before the
// current convention where op_types.def's legacy column says yes.
#define FIB_OP_KERNEL(op, kernel, generator)                    \
  Definition generator(const kernel& k, const GenContext& ctx); \
  std::string name_of(const kernel& k);
#define FIB_OP_TYPE(op, recipe, family, ref, ref_cuda, legacy) \
  FIB_OP_WHEN(legacy, std::vector<LegacyInterface> op##_legacy(const Definition& canonical);)
#include "fib/trace/op_types.def"

// Shared by the paged attention families: the ps>1 prefill's kv_last_page_len shaped
// [len_indptr] and no batch_size axis (corpus inconsistency 2).
std::vector<LegacyInterface> last_page_len_legacy(const Definition& canonical);

// The causal attention helper (`_attend_causal`) the GQA and MLA prefill references share.
std::string_view attend_causal_source();
// The description sentence and the `sinks` input description of the attention-sink variants.
std::string_view sink_sentence();
std::string_view sink_input_description();

}  // namespace fib::onboard::gen
