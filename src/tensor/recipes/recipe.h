// Internal: the context an op family's input recipe works in, and helpers recipes share.
#pragma once

#include <cmath>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fib/tensor/inputs.h"
#include "fib/tensor/random.h"
#include "fib/trace/op_types.h"

namespace fib::recipes {

class RecipeContext {
 public:
  RecipeContext(const Definition& def, const AxisValues& axes, std::uint64_t seed,
                MaterializedInputs& out, bool integers_only = false, bool scalars_only = false,
                bool defer_bulk_fills = false)
      : def_(def),
        axes_(axes),
        seed_(seed),
        out_(out),
        integers_only_(integers_only),
        scalars_only_(scalars_only),
        defer_bulk_fills_(defer_bulk_fills) {}

  const Definition& definition() const { return def_; }
  // Whether the definition has this input and it still needs a value.
  bool wants(std::string_view name) const;
  bool has_tensor(std::string_view name) const { return out_.tensors.count(name) > 0; }
  std::int64_t axis(std::string_view name) const;  // throws fib::Error when absent
  std::optional<std::int64_t> maybe_axis(std::string_view name) const {
    return axis_value(axes_, name);
  }
  Rng rng(std::string_view label) const { return Rng(Rng::derive(seed_, label)); }
  std::uint64_t seed() const { return seed_; }
  // The definition's shape for an input under the workload's axes.
  Shape shape_of(std::string_view name) const;
  // Integer contents of a present tensor (given by a blob or made earlier).
  std::vector<std::int64_t> ints(std::string_view name) const;

  // Stores a synthesized tensor of the definition's dtype and shape, from int64 / double values.
  void put_ints(std::string_view name, const std::vector<std::int64_t>& values);
  void put_doubles(std::string_view name, const std::vector<double>& values);
  void put_tensor(std::string_view name, Tensor t);
  // Fills a small tensor for `name` element by element from gen(rng), one sequential stream.
  void fill(std::string_view name, const std::function<double(Rng&)>& gen);
  // A bulk fill of `name` (counter-based, any size): made now, or deferred for a device.
  void bulk(std::string_view name, const counter_random::FillSpec& fill);
  void put_scalar(std::string_view name, Scalar value, std::string why);
  void note(std::string text) { out_.notes.push_back(std::move(text)); }

 private:
  const Definition& def_;
  const AxisValues& axes_;
  std::uint64_t seed_;
  MaterializedInputs& out_;
  bool integers_only_;
  bool scalars_only_;
  bool defer_bulk_fills_;
};

using Recipe = void (*)(RecipeContext&);

// Stores `fill` as input `name`: the tensor made now, or the fill recorded in out.deferred.
void place_bulk_fill(MaterializedInputs& out, std::string_view name, BulkFill fill, bool defer,
                     InputOrigin origin);
// Bulk fill specs: N(mean, stddev^2) clamped to [lo, hi] (unclamped by default), U[lo, hi).
counter_random::FillSpec normal_spec(double mean, double stddev, double lo = -HUGE_VAL,
                                     double hi = HUGE_VAL);
counter_random::FillSpec uniform_spec(double lo, double hi);

// Splits `total` into `parts` non-negative integers. Each part gets at least `min_each` when
// total allows, and part i at most caps[i] when caps are given and the total fits under them.
std::vector<std::int64_t> split_total(Rng& rng, std::int64_t total, std::int64_t parts,
                                      std::int64_t min_each,
                                      const std::vector<std::int64_t>* caps = nullptr);
// `count` distinct values from [0, universe) in random order (with repeats only when count >
// universe, which the caller reports).
std::vector<std::int64_t> sample_indices(Rng& rng, std::int64_t count, std::int64_t universe);
// Exclusive prefix sums with a leading 0: {2, 3} -> {0, 2, 5}.
std::vector<std::int64_t> offsets(const std::vector<std::int64_t>& lengths);

// Fills a float input with N(mean, stddev) / U[lo, hi) values, if the definition wants it.
void fill_normal(RecipeContext& ctx, std::string_view name, double mean, double stddev);
void fill_uniform(RecipeContext& ctx, std::string_view name, double lo, double hi);
// Distinct slots of a pool of `pool` for each entry of `name` (repeats only when the pool is
// smaller, with a note).
void fill_slots(RecipeContext& ctx, std::string_view name, std::int64_t pool);

// The attention layouts (attention_layout.cpp): sm_scale from the description or the head
// dimension; a paged cache's indptr, indices, last-page lengths and query offsets; ragged
// key and query offsets.
void set_sm_scale(RecipeContext& ctx);
void paged_attention(RecipeContext& ctx);
void ragged_attention(RecipeContext& ctx);

// Recipes by op type (src/tensor/recipes/<op_type>.cpp), for the op types whose recipe column
// in fib/trace/op_types.def says yes. The others (gemm, rmsnorm) have none: every input of theirs
// is independent, and plain random values are right for them.
#define FIB_OP_TYPE(op, recipe, ...) FIB_OP_WHEN(recipe, void op(RecipeContext& ctx);)
#include "fib/trace/op_types.def"

}  // namespace fib::recipes
