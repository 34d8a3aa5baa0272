// Internal: the kernels each op type adds to the reference's list (one file per op type) and
// helpers they share.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "fib/reference/reference.h"
#include "fib/trace/op_types.h"

namespace fib::reference::detail {

using KernelList = std::vector<std::unique_ptr<Kernel>>;

// Each op type's kernels, added to the list in their lookup order by the op type's file
// (src/reference/<op_type>.cpp; the attention op types' in src/reference/attention/<op_type>.cpp,
// on attention_core.cpp and ragged_prefill.cpp), for the op types whose reference column in
// fib/trace/op_types.def says yes.
#define FIB_OP_TYPE(op, recipe, family, ref, ...) FIB_OP_WHEN(ref, void add_##op(KernelList& list);)
#include "fib/trace/op_types.def"

// How a rope definition pairs the rotated dims: NeoX style (i, i + rotary_dim/2) or GPT-J style
// (2i, 2i + 1). Read from the reference text (a step-2 slice pairs adjacent elements), else the
// name (`gptj`), else NeoX.
enum class RopeStyle : std::uint8_t { kHalfSplit, kInterleaved };
RopeStyle rope_style(const Definition& def);

// An axis value of the bound axes; throws fib::Error naming the axis when absent.
std::int64_t axis(const CallContext& ctx, std::string_view name);
// A new output tensor with the definition's dtype and the shape its axes give.
Tensor make_output(const CallContext& ctx, std::string_view name);
// Whether `name` ends with/starts with a token (for kernels keyed by the definition's naming).
bool name_has(const Definition& def, std::string_view token);

}  // namespace fib::reference::detail

namespace fib::reference::detail {

// Runs fn(begin, end) over [0, n) split into contiguous chunks on up to `threads` threads.
// Chunks smaller than `grain` items are not split further (threads cost more than they save).
void parallel_for(std::int64_t n, unsigned threads, std::int64_t grain,
                  const std::function<void(std::int64_t, std::int64_t)>& fn);

// float32 copies of inputs, for kernels that compute in fp32 as the corpus references do.
std::vector<float> as_floats(const Tensor& t);
// Rounds fp32 values into `out` (any float dtype), as PyTorch's .to(dtype) does.
void store_floats(const std::vector<float>& values, Tensor& out);

// Elements [offset, offset + n) of `t` converted to fp32 into `out` (the values as_floats gives),
// and fp32 values rounded into elements [offset, offset + n) of `t` (as store_floats rounds):
// row-at-a-time conversion, so large tensors need no full fp32 copy.
void load_floats(const Tensor& t, std::int64_t offset, std::int64_t n, float* out);
void store_floats(const float* values, std::int64_t n, Tensor& t, std::int64_t offset);

// A tensor's elements as fp32: its own storage when it is float32 (no copy), else a converted
// copy.
class Floats {
 public:
  explicit Floats(const Tensor& t);
  Floats(const Floats&) = delete;  // p_ may point into copy_
  Floats& operator=(const Floats&) = delete;
  const float* data() const { return p_; }
  float operator[](std::size_t i) const { return p_[i]; }

 private:
  std::vector<float> copy_;
  const float* p_ = nullptr;
};

}  // namespace fib::reference::detail
