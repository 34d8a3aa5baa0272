// The CUDA references cover exactly the op types whose reference_cuda column in
// fib/trace/op_types.def says yes (tests/bench/op_family_test.cpp checks the other registries).
// Listing the kernels needs no GPU.
#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

#include "fib/reference_cuda/reference_cuda.h"
#include "fib/trace/op_types.h"

namespace fib::testing {
namespace {

TEST(CudaReferenceRegistry, CoversExactlyTheListedOpTypes) {
  std::vector<std::string> listed;
#define FIB_OP_TYPE(op, recipe, family, ref, ref_cuda, ...) \
  FIB_OP_WHEN(ref_cuda, listed.emplace_back(#op);)
#include "fib/trace/op_types.def"
  // By the kernels' ids ("cuda:moe", "cuda:dsa_paged.topk_indexer").
  std::vector<std::string> covered;
  for (const auto& k : reference_cuda::kernels()) {
    std::string_view id = k->id();
    ASSERT_EQ(id.substr(0, 5), "cuda:") << id;
    id.remove_prefix(5);
    const std::string op(id.substr(0, id.find('.')));
    if (covered.empty() || covered.back() != op) covered.push_back(op);
  }
  EXPECT_EQ(covered, listed);
}

}  // namespace
}  // namespace fib::testing
