// sampling: top_k / top_p / top_k_top_p / min_p sampling from probabilities, and top_k / top_p
// renormalization (the filtered distribution itself, deterministic). The corpus references draw
// with torch.multinomial from the global torch RNG, so no implementation can reproduce their
// samples; this kernel applies exactly their masks (see fib/reference/sampling.h) and draws from
// the resulting distribution with its own generator, seeded by CallContext::seed: the same seed
// gives the same samples, and sampling_distribution() says what the draws follow.
#include "fib/reference/sampling.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>
#include <thread>

#include "reference/kernels.h"

namespace fib::reference {

namespace {

struct Filters {
  const Tensor* top_k = nullptr;
  const Tensor* top_p = nullptr;
  const Tensor* min_p = nullptr;
};

bool per_row(const TensorSpec* t) { return !t || (t->shape && t->shape->size() == 1); }

// probs [batch, vocab] with per-row top_k and/or top_p, or min_p alone.
bool has_filters(const Definition& def) {
  const TensorSpec* probs = def.input("probs");
  const TensorSpec* k = def.input("top_k");
  const TensorSpec* p = def.input("top_p");
  const TensorSpec* m = def.input("min_p");
  return def.op_type == "sampling" && probs && probs->shape && probs->shape->size() == 2 &&
         ((k || p) != (m != nullptr)) && per_row(k) && per_row(p) && per_row(m);
}

bool is_sampling(const Definition& def) {
  const TensorSpec* samples = def.output("samples");
  return has_filters(def) && samples && samples->shape && samples->shape->size() == 1;
}

// top_k_renorm_probs / top_p_renorm_probs: the filtered distribution itself.
bool is_renorm(const Definition& def) {
  const TensorSpec* out = def.output("renormalized");
  return has_filters(def) && !def.input("min_p") && out && out->shape && out->shape->size() == 2;
}

// Descending probability; equal probabilities keep the lower token index first.
struct Desc {
  const float* v;
  bool operator()(std::int64_t a, std::int64_t b) const {
    return v[a] > v[b] || (v[a] == v[b] && a < b);
  }
};

// filtered / filtered.sum(): the sum in double, rounded once to float32 (PyTorch sums in
// float32 in another order; the two differ by at most an ulp or so).
void renormalize(std::vector<float>& row, const std::string& where) {
  double sum = 0;
  for (float x : row) sum += static_cast<double>(x);
  const auto s = static_cast<float>(sum);
  if (!(s > 0.0f) || !std::isfinite(s))
    throw Error(where, "nothing with positive probability is left to sample");
  for (float& x : row) x /= s;
}

// One row's distribution, following the reference's steps.
std::vector<float> filter_row(const float* probs, std::int64_t vocab, const Filters& f,
                              std::int64_t r, const std::string& name) {
  const std::string where = fmt::format("{}: row {}", name, r);
  std::vector<float> row(probs, probs + vocab);
  for (std::int64_t i = 0; i < vocab; ++i) {
    if (!(row[static_cast<std::size_t>(i)] >= 0.0f) ||
        !std::isfinite(row[static_cast<std::size_t>(i)])) {
      throw Error(where, fmt::format("probs[{}] = {} is not a probability", i,
                                     row[static_cast<std::size_t>(i)]));
    }
  }
  std::vector<std::int64_t> order(static_cast<std::size_t>(vocab));
  if (f.min_p) {
    // row >= p * row.max(), in float32 as the reference compares.
    const float cut =
        static_cast<float>(f.min_p->get(r)) * *std::max_element(row.begin(), row.end());
    for (float& x : row) x = x >= cut ? x : 0.0f;
    renormalize(row, where);
  }
  if (f.top_k) {
    const auto k = static_cast<std::int64_t>(f.top_k->get(r));
    if (0 < k && k < vocab) {
      std::iota(order.begin(), order.end(), std::int64_t{0});
      std::partial_sort(order.begin(), order.begin() + k, order.end(), Desc{row.data()});
      std::vector<float> kept(row.size(), 0.0f);
      for (std::int64_t j = 0; j < k; ++j) {
        const auto i = static_cast<std::size_t>(order[static_cast<std::size_t>(j)]);
        kept[i] = row[i];
      }
      row.swap(kept);
      renormalize(row, where);
    }
  }
  if (f.top_p) {
    const auto p = static_cast<float>(f.top_p->get(r));
    if (p <= 0.0f) {
      const auto arg =
          static_cast<std::size_t>(std::max_element(row.begin(), row.end()) - row.begin());
      std::fill(row.begin(), row.end(), 0.0f);
      row[arg] = 1.0f;
      return row;
    }
    if (p < 1.0f) {
      std::iota(order.begin(), order.end(), std::int64_t{0});
      std::sort(order.begin(), order.end(), Desc{row.data()});
      std::vector<float> kept(row.size(), 0.0f);
      // The mask `cdf > p` shifted right by one keeps the first token whose cumulative sum
      // crosses p. Only top_k_top_p guards the shift with `vocab_size > 1`; with one token it
      // keeps it only if its cdf does not exceed p.
      const bool unshifted = vocab == 1 && f.top_k != nullptr;
      double cum = 0;
      float prev_cdf = 0.0f;
      for (std::int64_t j = 0; j < vocab; ++j) {
        const auto i = static_cast<std::size_t>(order[static_cast<std::size_t>(j)]);
        cum += static_cast<double>(row[i]);
        const auto cdf = static_cast<float>(cum);  // torch's CPU cumsum: double accumulator
        const bool removed = j == 0 ? (unshifted && cdf > p) : prev_cdf > p;
        if (removed) break;  // the cdf never decreases: every later token is removed too
        kept[i] = row[i];
        prev_cdf = cdf;
      }
      row.swap(kept);
      renormalize(row, where);
    }
  }
  // torch.multinomial normalizes its weights; say so in the distribution.
  double total = 0;
  for (float x : row) total += static_cast<double>(x);
  if (!(total > 0.0))
    throw Error(where, "the row has no probability mass (torch.multinomial fails)");
  for (float& x : row) x = static_cast<float>(static_cast<double>(x) / total);
  return row;
}

Filters filters_of(const Arguments& args) {
  Filters f;
  if (args.tensors.count("top_k")) f.top_k = &args.tensor("top_k");
  if (args.tensors.count("top_p")) f.top_p = &args.tensor("top_p");
  if (args.tensors.count("min_p")) f.min_p = &args.tensor("min_p");
  return f;
}

void check_rows(const Definition& def, const Tensor& probs, const Filters& f) {
  if (probs.rank() != 2) throw Error(def.name, "probs must be [batch_size, vocab_size]");
  for (const Tensor* t : {f.top_k, f.top_p, f.min_p}) {
    if (t && (t->rank() != 1 || t->dim(0) != probs.dim(0))) {
      throw Error(def.name, fmt::format("top_k/top_p/min_p have shape {}, probs has {} rows",
                                        shape_to_string(t->shape()), probs.dim(0)));
    }
  }
}

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Inverse-CDF draw over token index order; tokens with zero probability are never returned.
std::int64_t draw(const std::vector<float>& dist, std::uint64_t seed, std::int64_t r) {
  const std::uint64_t bits = splitmix64(seed ^ splitmix64(static_cast<std::uint64_t>(r)));
  const double u = static_cast<double>(bits >> 11) * 0x1p-53;  // uniform in [0, 1)
  double total = 0;
  for (float x : dist) total += static_cast<double>(x);
  const double target = u * total;
  double cum = 0;
  std::int64_t last = -1;
  for (std::size_t i = 0; i < dist.size(); ++i) {
    if (dist[i] <= 0.0f) continue;
    cum += static_cast<double>(dist[i]);
    last = static_cast<std::int64_t>(i);
    if (cum > target) return last;
  }
  return last;  // rounding left target at the very end
}

class Sampling final : public Kernel {
 public:
  std::string_view id() const override { return "sampling"; }

  bool supports(const Definition& def, std::string* why) const override {
    if (def.op_type != "sampling") return false;
    if (!is_sampling(def)) {
      *why =
          "expects probs [batch_size, vocab_size], top_k and/or top_p [batch_size] -> samples "
          "[batch_size]";
      return false;
    }
    return true;
  }

  Outputs run(const CallContext& ctx, const Arguments& args) const override {
    const Tensor& probs_t = args.tensor("probs");
    const Filters f = filters_of(args);
    check_rows(ctx.definition, probs_t, f);
    const std::vector<float> probs = detail::as_floats(probs_t);
    const std::int64_t batch = probs_t.dim(0), vocab = probs_t.dim(1);
    Tensor samples = detail::make_output(ctx, "samples");
    std::vector<std::int64_t> drawn(static_cast<std::size_t>(batch));
    detail::parallel_for(batch, ctx.threads, 1, [&](std::int64_t r0, std::int64_t r1) {
      for (std::int64_t r = r0; r < r1; ++r) {
        const std::vector<float> dist =
            filter_row(probs.data() + r * vocab, vocab, f, r, ctx.definition.name);
        drawn[static_cast<std::size_t>(r)] = draw(dist, ctx.seed, r);
      }
    });
    for (std::int64_t r = 0; r < batch; ++r)
      samples.set(r, static_cast<double>(drawn[static_cast<std::size_t>(r)]));
    Outputs out;
    out.emplace("samples", std::move(samples));
    return out;
  }
};

// top_k_renorm_probs / top_p_renorm_probs: each row's distribution after the sampler's masks.
class Renorm final : public Kernel {
 public:
  std::string_view id() const override { return "sampling.renorm"; }

  bool supports(const Definition& def, std::string* why) const override {
    if (def.op_type != "sampling" || !def.output("renormalized")) return false;
    if (!is_renorm(def)) {
      *why =
          "expects probs [batch_size, vocab_size], top_k or top_p [batch_size] -> renormalized "
          "[batch_size, vocab_size]";
      return false;
    }
    return true;
  }

  Outputs run(const CallContext& ctx, const Arguments& args) const override {
    const Tensor& probs_t = args.tensor("probs");
    const Filters f = filters_of(args);
    check_rows(ctx.definition, probs_t, f);
    const std::vector<float> probs = detail::as_floats(probs_t);
    const std::int64_t batch = probs_t.dim(0), vocab = probs_t.dim(1);
    Tensor out = detail::make_output(ctx, "renormalized");
    float* o = out.data<float>();
    detail::parallel_for(batch, ctx.threads, 1, [&](std::int64_t r0, std::int64_t r1) {
      for (std::int64_t r = r0; r < r1; ++r) {
        const std::vector<float> d =
            filter_row(probs.data() + r * vocab, vocab, f, r, ctx.definition.name);
        std::copy(d.begin(), d.end(), o + r * vocab);
      }
    });
    Outputs outs;
    outs.emplace("renormalized", std::move(out));
    return outs;
  }
};

}  // namespace

Tensor sampling_distribution(const Definition& def, const Arguments& args) {
  if (!is_sampling(def))
    throw Error(def.name,
                "not a sampling definition (probs, top_k and/or top_p, or min_p -> samples)");
  const Tensor& probs_t = args.tensor("probs");
  const Filters f = filters_of(args);
  check_rows(def, probs_t, f);
  const std::vector<float> probs = detail::as_floats(probs_t);
  const std::int64_t batch = probs_t.dim(0), vocab = probs_t.dim(1);
  Tensor out(DType::kFloat32, {batch, vocab});
  float* o = out.data<float>();
  detail::parallel_for(batch, std::max(1u, std::thread::hardware_concurrency()), 1,
                       [&](std::int64_t r0, std::int64_t r1) {
                         for (std::int64_t r = r0; r < r1; ++r) {
                           const std::vector<float> d =
                               filter_row(probs.data() + r * vocab, vocab, f, r, def.name);
                           std::copy(d.begin(), d.end(), o + r * vocab);
                         }
                       });
  return out;
}

namespace detail {
// top_k, top_p, top_k_top_p, min_p sampling; top_k and top_p renormalization.
void add_sampling(KernelList& list) {
  list.push_back(std::make_unique<Sampling>());
  list.push_back(std::make_unique<Renorm>());
}
}  // namespace detail

}  // namespace fib::reference
