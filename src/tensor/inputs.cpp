// Input materialization: scalars, blobs, per-family recipes, then seeded random values.
#include "fib/tensor/inputs.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <regex>
#include <thread>
#include <unordered_set>

#include "fib/tensor/safetensors.h"
#include "fib/trace/suggest.h"
#include "tensor/recipes/recipe.h"

namespace fib {

namespace {

struct RecipeEntry {
  std::string_view op_type;
  recipes::Recipe recipe;
};
// Every op type fib knows (fib/trace/op_types.def), with its structure-aware recipe; null where
// plain random values are right (every input independent).
constexpr RecipeEntry kRecipes[] = {
#define FIB_OP_TYPE(op, recipe, ...) \
  {#op, FIB_OP_WHEN(recipe, recipes::op) FIB_OP_UNLESS(recipe, nullptr)},
#include "fib/trace/op_types.def"
};

recipes::Recipe find_recipe(std::string_view op_type) {
  for (const auto& e : kRecipes) {
    if (e.op_type == op_type) return e.recipe;
  }
  return nullptr;
}

// Values of a dtype with no structure to respect: floats N(0, 1) (float8 clamped to [-2, 2]
// as upstream does), integers in [0, 64), bools 0/1.
counter_random::FillSpec random_spec(DType d) {
  counter_random::FillSpec f;
  if (dtype_is_float(d)) {
    if (d == DType::kFloat8E4M3FN || d == DType::kFloat8E5M2) {
      f.lo = -2.0f;
      f.hi = 2.0f;
    }
    return f;
  }
  f.dist = counter_random::Dist::kInteger;
  f.span = d == DType::kBool ? 2 : 64;
  return f;
}

Tensor load_blob(const Definition& def, const TensorSpec& spec, const WorkloadInput& in,
                 const Shape& shape, const std::filesystem::path& root) {
  const std::filesystem::path file = root / std::filesystem::path(in.path).lexically_normal();
  auto st = SafetensorsFile::open(file);
  Tensor t = st.read(in.tensor_key);
  if (t.dtype() != spec.dtype) {
    throw Error(in.path,
                fmt::format("tensor '{}' is {} but {} input '{}' is {}", in.tensor_key,
                            dtype_name(t.dtype()), def.name, spec.name, dtype_name(spec.dtype)));
  }
  if (t.shape() != shape) {
    throw Error(in.path,
                fmt::format("tensor '{}' has shape {} but the workload's axes give {}",
                            in.tensor_key, shape_to_string(t.shape()), shape_to_string(shape)));
  }
  return t;
}

bool unsafe_blob_path(const std::string& p) {
  if (p.empty() || p.front() == '/') return true;
  for (const auto& part : std::filesystem::path(p)) {
    if (part == "..") return true;
  }
  return false;
}

}  // namespace

std::string_view input_origin_name(InputOrigin o) {
  switch (o) {
    case InputOrigin::kScalar:
      return "scalar";
    case InputOrigin::kBlob:
      return "blob";
    case InputOrigin::kSynthesized:
      return "synthesized";
    case InputOrigin::kRandom:
      return "random";
  }
  return "?";
}

bool has_input_recipe(std::string_view op_type) {
  return std::any_of(std::begin(kRecipes), std::end(kRecipes),
                     [&](const RecipeEntry& e) { return e.op_type == op_type; });
}

MaterializedInputs materialize_inputs(const Definition& def, const Workload& w,
                                      const MaterializeOptions& options) {
  auto bound = def.bind_axes(w.axes);
  if (!bound) {
    throw Error(def.name, fmt::format("workload {} does not give every var axis ({})", w.uuid,
                                      fmt::join(def.var_axes(), ", ")));
  }
  MaterializedInputs out;
  out.seed = options.seed;
  std::vector<std::string> absent;  // optional inputs the workload leaves out
  for (const auto& spec : def.inputs) {
    const WorkloadInput* in = w.input(spec.name);
    if (in == nullptr) {
      if (spec.is_optional()) absent.push_back(spec.name);
      continue;
    }
    if (in->kind == InputKind::kScalar) {
      out.scalars.emplace(spec.name, in->value);
      out.origins[spec.name] = InputOrigin::kScalar;
    } else if (in->kind == InputKind::kSafetensors && !spec.is_scalar()) {
      if (unsafe_blob_path(in->path)) {
        throw Error(in->path,
                    fmt::format("blob path of input '{}' must stay inside the dataset", spec.name));
      }
      const auto file = options.dataset_root / std::filesystem::path(in->path).lexically_normal();
      if (options.scalars_only) continue;
      if (options.use_blobs && std::filesystem::exists(file)) {
        out.tensors.emplace(spec.name, load_blob(def, spec, *in, *def.concrete_shape(spec, *bound),
                                                 options.dataset_root));
        out.origins[spec.name] = InputOrigin::kBlob;
      } else if (options.use_blobs) {
        out.notes.push_back(
            fmt::format("{}: blob {} is not present; synthesized instead", spec.name, in->path));
      }
    }
  }
  // Structure first, from the op family's recipe; it sees what the blobs provided.
  if (auto recipe = find_recipe(def.op_type)) {
    recipes::RecipeContext ctx(def, *bound, options.seed, out, options.integers_only,
                               options.scalars_only, options.defer_bulk_fills);
    recipe(ctx);
  }
  for (const auto& spec : def.inputs) {
    if (out.tensors.count(spec.name) || out.scalars.count(spec.name) ||
        out.deferred.count(spec.name))
      continue;
    if (std::find(absent.begin(), absent.end(), spec.name) != absent.end()) continue;
    if (spec.is_scalar()) {
      // A scalar nobody gave: its conventional value, never noise (a random sm_scale of -0.3
      // is not a workload anyone runs).
      Scalar v = std::int64_t{0};
      std::string why = "0";
      if (auto s = described_inverse_sqrt(spec)) {
        v = s->value;
        why = "the 1/sqrt(d) its description states";
      } else if (dtype_is_float(spec.dtype)) {
        v = 1.0;
        why = "1.0";
      } else if (spec.dtype == DType::kBool) {
        v = false;
        why = "false";
      }
      out.scalars.emplace(spec.name, v);
      out.origins[spec.name] = InputOrigin::kSynthesized;
      out.notes.push_back(
          fmt::format("{}: scalar not given; set to {} ({})", spec.name, scalar_to_string(v), why));
      continue;
    }
    if (options.scalars_only || (options.integers_only && dtype_is_float(spec.dtype))) continue;
    recipes::place_bulk_fill(out, spec.name,
                             BulkFill{random_spec(spec.dtype), Rng::derive(options.seed, spec.name),
                                      spec.dtype, *def.concrete_shape(spec, *bound)},
                             options.defer_bulk_fills, InputOrigin::kRandom);
  }
  return out;
}

std::vector<std::string> check_input_constraints(const Definition& def, const Workload& w,
                                                 const MaterializedInputs& inputs) {
  std::vector<std::string> problems;
  auto bound = def.bind_axes(w.axes);
  if (!bound) return {"the workload does not give every var axis"};
  auto element = [&](std::string_view name,
                     std::span<const std::int64_t> index) -> std::optional<Scalar> {
    auto it = inputs.tensors.find(name);
    if (it == inputs.tensors.end()) return std::nullopt;
    const Tensor& t = it->second;
    std::int64_t flat = 0;
    for (std::size_t k = 0; k < index.size() && k < t.rank(); ++k)
      flat = flat * t.dim(k) + index[k];
    const double v = t.get(flat);
    if (dtype_is_float(t.dtype())) return Scalar{v};
    if (t.dtype() == DType::kBool) return Scalar{v != 0};
    return Scalar{static_cast<std::int64_t>(v)};
  };
  WorkloadConstraintEnv env(def, *bound, element);
  env.set_scalars(w);
  for (const auto& c : def.parsed_constraints) {
    const auto r = c.evaluate(env);
    if (r.verdict == Verdict::kViolated)
      problems.push_back(fmt::format("'{}' is violated: {}", c.text(), r.detail));
    if (r.verdict == Verdict::kError)
      problems.push_back(fmt::format("'{}' cannot be evaluated: {}", c.text(), r.detail));
  }
  return problems;
}

namespace recipes {

bool RecipeContext::wants(std::string_view name) const {
  const TensorSpec* spec = def_.input(name);
  if (spec == nullptr) return false;
  if (scalars_only_ && !spec->is_scalar()) return false;
  if (integers_only_ && !spec->is_scalar() && dtype_is_float(spec->dtype)) return false;
  return out_.tensors.count(name) == 0 && out_.scalars.count(name) == 0 &&
         out_.deferred.count(name) == 0;
}

std::int64_t RecipeContext::axis(std::string_view name) const {
  auto v = axis_value(axes_, name);
  if (!v) throw Error(def_.name, fmt::format("the input recipe needs axis '{}'", name));
  return *v;
}

Shape RecipeContext::shape_of(std::string_view name) const {
  const TensorSpec* spec = def_.input(name);
  if (!spec) throw Error(def_.name, fmt::format("no input '{}'", name));
  return *def_.concrete_shape(*spec, axes_);
}

std::vector<std::int64_t> RecipeContext::ints(std::string_view name) const {
  const Tensor& t = out_.tensors.at(std::string(name));
  std::vector<std::int64_t> v(static_cast<std::size_t>(t.numel()));
  for (std::int64_t i = 0; i < t.numel(); ++i)
    v[static_cast<std::size_t>(i)] = static_cast<std::int64_t>(t.get(i));
  return v;
}

void RecipeContext::put_tensor(std::string_view name, Tensor t) {
  out_.tensors.insert_or_assign(std::string(name), std::move(t));
  out_.origins[std::string(name)] = InputOrigin::kSynthesized;
}

void RecipeContext::put_ints(std::string_view name, const std::vector<std::int64_t>& values) {
  const TensorSpec* spec = def_.input(name);
  Tensor t(spec->dtype, shape_of(name));
  if (static_cast<std::int64_t>(values.size()) != t.numel()) {
    throw Error(def_.name, fmt::format("recipe made {} values for '{}' of {} elements",
                                       values.size(), name, t.numel()));
  }
  if (spec->dtype == DType::kInt64) {
    std::copy(values.begin(), values.end(), t.data<std::int64_t>());
  } else if (spec->dtype == DType::kInt32) {
    std::transform(values.begin(), values.end(), t.data<std::int32_t>(),
                   [](std::int64_t v) { return static_cast<std::int32_t>(v); });
  } else {
    for (std::size_t i = 0; i < values.size(); ++i)
      t.set(static_cast<std::int64_t>(i), static_cast<double>(values[i]));
  }
  put_tensor(name, std::move(t));
}

void RecipeContext::put_doubles(std::string_view name, const std::vector<double>& values) {
  const TensorSpec* spec = def_.input(name);
  Tensor f(DType::kFloat32, shape_of(name));
  if (static_cast<std::int64_t>(values.size()) != f.numel()) {
    throw Error(def_.name, fmt::format("recipe made {} values for '{}' of {} elements",
                                       values.size(), name, f.numel()));
  }
  float* p = f.data<float>();
  for (std::size_t i = 0; i < values.size(); ++i) p[i] = static_cast<float>(values[i]);
  put_tensor(name, spec->dtype == DType::kFloat32 ? std::move(f) : cast(f, spec->dtype));
}

void RecipeContext::fill(std::string_view name, const std::function<double(Rng&)>& gen) {
  const TensorSpec* spec = def_.input(name);
  Tensor f(DType::kFloat32, shape_of(name));
  Rng rng(Rng::derive(seed_, name));
  float* p = f.data<float>();
  for (std::int64_t i = 0; i < f.numel(); ++i) p[i] = static_cast<float>(gen(rng));
  put_tensor(name, spec->dtype == DType::kFloat32 ? std::move(f) : cast(f, spec->dtype));
}

void RecipeContext::bulk(std::string_view name, const counter_random::FillSpec& fill) {
  const TensorSpec* spec = def_.input(name);
  place_bulk_fill(out_, name, BulkFill{fill, Rng::derive(seed_, name), spec->dtype, shape_of(name)},
                  defer_bulk_fills_, InputOrigin::kSynthesized);
}

void place_bulk_fill(MaterializedInputs& out, std::string_view name, BulkFill fill, bool defer,
                     InputOrigin origin) {
  if (defer) {
    out.deferred.insert_or_assign(std::string(name), std::move(fill));
  } else {
    out.tensors.insert_or_assign(std::string(name), make_bulk_fill(fill));
  }
  out.origins[std::string(name)] = origin;
}

void RecipeContext::put_scalar(std::string_view name, Scalar value, std::string why) {
  out_.scalars.insert_or_assign(std::string(name), value);
  out_.origins[std::string(name)] = InputOrigin::kSynthesized;
  out_.notes.push_back(
      fmt::format("{}: scalar not given; set to {} ({})", name, scalar_to_string(value), why));
}

std::vector<std::int64_t> split_total(Rng& rng, std::int64_t total, std::int64_t parts,
                                      std::int64_t min_each,
                                      const std::vector<std::int64_t>* caps) {
  std::vector<std::int64_t> out(static_cast<std::size_t>(std::max<std::int64_t>(parts, 0)), 0);
  if (parts <= 0) return out;
  std::int64_t left = total;
  if (total >= min_each * parts) {
    for (auto& v : out) v = min_each;
    left -= min_each * parts;
  }
  std::int64_t room = 0;
  if (caps) {
    for (std::size_t i = 0; i < out.size(); ++i)
      room += std::max<std::int64_t>(0, (*caps)[i] - out[i]);
  }
  const bool respect_caps = caps && left <= room;
  // Random weights spread the rest unevenly, like real batches of mixed lengths.
  std::vector<double> weight(out.size());
  for (auto& x : weight) x = rng.uniform(0.05, 1.0);
  while (left > 0) {
    double sum = 0;
    for (std::size_t i = 0; i < out.size(); ++i) {
      if (!respect_caps || out[i] < (*caps)[i]) sum += weight[i];
    }
    if (sum <= 0) break;
    std::int64_t given = 0;
    for (std::size_t i = 0; i < out.size() && left - given > 0; ++i) {
      if (respect_caps && out[i] >= (*caps)[i]) continue;
      std::int64_t share =
          static_cast<std::int64_t>(std::floor(static_cast<double>(left) * weight[i] / sum));
      if (respect_caps) share = std::min(share, (*caps)[i] - out[i]);
      share = std::min(share, left - given);
      out[i] += share;
      given += share;
    }
    if (given == 0) {  // rounding left a remainder: hand it out one by one
      for (std::size_t i = 0; i < out.size() && left - given > 0; ++i) {
        if (respect_caps && out[i] >= (*caps)[i]) continue;
        out[i] += 1;
        given += 1;
      }
    }
    left -= given;
  }
  if (left > 0) out.back() += left;  // caps cannot hold the total: the caller notes it
  return out;
}

std::vector<std::int64_t> sample_indices(Rng& rng, std::int64_t count, std::int64_t universe) {
  std::vector<std::int64_t> out;
  if (count <= 0 || universe <= 0) return out;
  out.reserve(static_cast<std::size_t>(count));
  if (count > universe) {
    for (std::int64_t i = 0; i < count; ++i) out.push_back(rng.randint(0, universe));
    return out;
  }
  if (universe <= 4 * count || universe <= (1 << 20)) {
    std::vector<std::int64_t> all(static_cast<std::size_t>(universe));
    std::iota(all.begin(), all.end(), 0);
    for (std::int64_t i = 0; i < count; ++i) {
      std::swap(all[static_cast<std::size_t>(i)],
                all[static_cast<std::size_t>(rng.randint(i, universe))]);
    }
    out.assign(all.begin(), all.begin() + count);
    return out;
  }
  // Sparse sample of a huge universe: draw until distinct.
  std::unordered_set<std::int64_t> seen;
  seen.reserve(static_cast<std::size_t>(count) * 2);
  while (static_cast<std::int64_t>(out.size()) < count) {
    const std::int64_t v = rng.randint(0, universe);
    if (seen.insert(v).second) out.push_back(v);
  }
  return out;
}

std::vector<std::int64_t> offsets(const std::vector<std::int64_t>& lengths) {
  std::vector<std::int64_t> out(lengths.size() + 1, 0);
  for (std::size_t i = 0; i < lengths.size(); ++i) out[i + 1] = out[i] + lengths[i];
  return out;
}

}  // namespace recipes
}  // namespace fib
