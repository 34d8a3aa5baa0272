// Sampling verdicts: every draw must be a token a correct sampler may draw, and each row's
// draws must follow the reference's distribution (a binned chi-square test and a noise-aware
// total-variation bound). docs/correctness.md derives the bounds.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>

#include "fib/bench/eval/compare.h"
#include "fib/reference/sampling.h"

namespace fib::bench {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr int kMaxBins = 64;            // chi-square bins per row
constexpr double kMinBinExpected = 20;  // expected draws per bin (keeps the chi-square tail honest)
constexpr double kTvdSigmas = 6;        // TVD bound: E + 6 sd of a correct sampler's TVD

// E|X - n p| for X ~ Binomial(n, p) (de Moivre): 2 (m+1) C(n, m+1) p^(m+1) (1-p)^(n-m),
// m = floor(n p).
double binomial_mad(double n, double p) {
  if (p <= 0 || p >= 1) return 0;
  const double m = std::floor(n * p);
  if (m >= n) return 0;
  const double lg = std::log(2.0) + (n - m) * std::log1p(-p) + (m + 1) * std::log(p) +
                    std::log(m + 1) + std::lgamma(n + 1) - std::lgamma(m + 2) - std::lgamma(n - m);
  return std::exp(lg);
}

// Regularized upper incomplete gamma Q(a, x): a series for P below a + 1, else a continued
// fraction (modified Lentz).
double gamma_q(double a, double x) {
  if (!(x > 0)) return 1;
  const double log_prefix = -x + a * std::log(x) - std::lgamma(a);
  if (x < a + 1) {
    double ap = a, del = 1 / a, sum = del;
    for (int n = 0; n < 100000; ++n) {
      ap += 1;
      del *= x / ap;
      sum += del;
      if (std::fabs(del) < std::fabs(sum) * 1e-16) break;
    }
    return std::max(0.0, 1 - std::exp(std::log(sum) + log_prefix));
  }
  constexpr double kTiny = 1e-300;
  double b = x + 1 - a, c = 1 / kTiny, d = 1 / b, h = d;
  for (int i = 1; i < 100000; ++i) {
    const double an = -i * (i - a);
    b += 2;
    d = an * d + b;
    if (std::fabs(d) < kTiny) d = kTiny;
    c = b + an / c;
    if (std::fabs(c) < kTiny) c = kTiny;
    d = 1 / d;
    const double del = d * c;
    h *= del;
    if (std::fabs(del - 1) < 1e-16) break;
  }
  return std::exp(log_prefix) * h;
}

std::string num(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return fmt::format("{:.4g}", v);
}

struct Bin {
  std::int64_t first_rank = 0, last_rank = 0;  // ranks by expected probability, 1-based
  double mass = 0;
  double observed = 0;
};

struct RowOutcome {
  double tvd = 0, bound = 0, expected_tvd = 0, sd = 0;
  double chi2 = 0, pvalue = 1;
  int dof = 0;
  Bin worst;  // the bin contributing most to chi2
  double max_abs = 0, max_rel = 0;
};

// Tokens in descending probability, ties by lower index (the reference's order).
std::vector<std::int64_t> sorted_tokens(const float* p, std::vector<std::int64_t> tokens) {
  std::sort(tokens.begin(), tokens.end(),
            [p](std::int64_t a, std::int64_t b) { return p[a] > p[b] || (p[a] == p[b] && a < b); });
  return tokens;
}

}  // namespace

double chi_square_survival(double x, int dof) {
  if (dof <= 0) return x > 0 ? 0.0 : 1.0;
  return gamma_q(0.5 * dof, 0.5 * x);
}

SamplingExpectation sampling_expectation(const Definition& def, const reference::Arguments& args,
                                         const ResolvedEval& cfg) {
  SamplingExpectation out;
  out.distribution = reference::sampling_distribution(def, args);
  const Tensor probs = to_float32(args.tensor("probs"));
  const std::int64_t batch = probs.dim(0), vocab = probs.dim(1);
  const Tensor* top_k = args.has("top_k") ? &args.tensor("top_k") : nullptr;
  const Tensor* top_p = args.has("top_p") ? &args.tensor("top_p") : nullptr;
  const Tensor* min_p = args.has("min_p") ? &args.tensor("min_p") : nullptr;
  const double eps = cfg.extra_number("sampling_top_p_epsilon", 1e-3);
  out.allowed = Tensor(DType::kBool, {batch, vocab});
  auto* allowed = out.allowed.data<std::uint8_t>();
  const float* dist = out.distribution.data<float>();
  for (std::int64_t r = 0; r < batch; ++r) {
    const float* p = probs.data<float>() + r * vocab;
    std::uint8_t* a = allowed + r * vocab;
    // Top-k: every token at least as probable as the k-th (ties at the cut).
    std::vector<std::int64_t> kept;
    double kept_sum = 0;  // the mass the reference renormalizes top-k by (exactly k tokens)
    const std::int64_t k = top_k ? static_cast<std::int64_t>(top_k->get(r)) : 0;
    if (0 < k && k < vocab) {
      std::vector<float> copy(p, p + vocab);
      std::nth_element(copy.begin(), copy.begin() + (k - 1), copy.end(), std::greater<float>());
      const float kth = copy[static_cast<std::size_t>(k - 1)];
      std::int64_t above = 0;
      for (std::int64_t t = 0; t < vocab; ++t) {
        if (p[t] >= kth && p[t] > 0) kept.push_back(t);
        if (p[t] > kth) {
          ++above;
          kept_sum += static_cast<double>(p[t]);
        }
      }
      kept_sum += static_cast<double>(k - above) * static_cast<double>(kth);
    } else {
      for (std::int64_t t = 0; t < vocab; ++t) {
        if (p[t] > 0) {
          kept.push_back(t);
          kept_sum += static_cast<double>(p[t]);
        }
      }
    }
    const double pp = top_p ? top_p->get(r) : 1.0;
    if (top_p && pp < 1.0 && !kept.empty()) {
      const std::vector<std::int64_t> order = sorted_tokens(p, kept);
      std::size_t n = 1;  // the most probable token is always kept
      if (pp > 0) {
        double before = static_cast<double>(p[order[0]]) / kept_sum;
        while (n < order.size() && before <= pp + eps) {
          before += static_cast<double>(p[order[n]]) / kept_sum;
          ++n;
        }
      }
      // Ties with the last kept token may be kept instead of it.
      while (n < order.size() && p[order[n]] == p[order[n - 1]]) ++n;
      for (std::size_t i = 0; i < n; ++i) a[order[i]] = 1;
    } else {
      for (auto t : kept) a[t] = 1;
    }
    if (min_p) {
      // Min-p: at least min_p times the row's maximum, give or take a relative epsilon at the
      // cut (a kernel may compare in another precision).
      const double top = *std::max_element(p, p + vocab);
      const double cut = min_p->get(r) * top * (1.0 - eps);
      for (std::int64_t t = 0; t < vocab; ++t) a[t] = p[t] > 0 && static_cast<double>(p[t]) >= cut;
    }
    for (std::int64_t t = 0; t < vocab; ++t)
      if (dist[r * vocab + t] > 0) a[t] = 1;
  }
  return out;
}

namespace {

// How many draws each row holds, and the thresholds every row is judged by.
struct SamplingLimits {
  std::int64_t draws = 0;
  double n = 0;  // draws, as the statistics use it
  double alpha = 0;
  // alpha split over the rows (Bonferroni): a correct sampler fails the call at rate <= alpha.
  double row_alpha = 0;
  double tvd_floor = 0;
};

// Draws that no correct sampler can give, and the first of them described.
struct InvalidDraws {
  std::int64_t count = 0;
  Json first;
  std::string text;
};

// Fills `v` and returns true when the draws are not [batch] or [batch, draws] of an integer
// dtype: without that layout no draw can be read.
bool reject_layout(CallVerdict& v, const std::string& out_name, std::int64_t batch,
                   const Tensor& samples) {
  const bool shape_ok =
      (samples.rank() == 1 || samples.rank() == 2) && samples.defined() && samples.dim(0) == batch;
  if (!shape_ok) {
    v.status = EvaluationStatus::kIncorrectShape;
    v.max_abs_error = v.max_rel_error = kInf;
    v.log = fmt::format("output '{}': draws of shape {}, expected [{}, draws]", out_name,
                        shape_to_string(samples.shape()), batch);
    return true;
  }
  if (!dtype_is_integer(samples.dtype())) {
    v.status = EvaluationStatus::kIncorrectDtype;
    v.max_abs_error = v.max_rel_error = kInf;
    v.log = fmt::format("output '{}': dtype {}, expected an integer dtype", out_name,
                        dtype_name(samples.dtype()));
    return true;
  }
  return false;
}

SamplingLimits sampling_limits(const ResolvedEval& cfg, std::int64_t batch, const Tensor& samples) {
  SamplingLimits lim;
  lim.draws = samples.rank() == 2 ? samples.dim(1) : 1;
  lim.n = static_cast<double>(lim.draws);
  lim.alpha = cfg.extra_number("sampling_chi2_alpha", 1e-6);
  lim.row_alpha = lim.alpha / static_cast<double>(std::max<std::int64_t>(batch, 1));
  lim.tvd_floor = cfg.extra_number("sampling_tvd_threshold", 0.2);
  return lim;
}

// The row's distribution scaled to sum to 1 (all zeros when it has no mass).
void normalize_row(const float* drow, std::vector<double>& p) {
  const auto vocab = static_cast<std::int64_t>(p.size());
  double total = 0;
  for (std::int64_t t = 0; t < vocab; ++t) total += static_cast<double>(drow[t]);
  for (std::int64_t t = 0; t < vocab; ++t)
    p[static_cast<std::size_t>(t)] = total > 0 ? static_cast<double>(drow[t]) / total : 0.0;
}

// Counts row r's draws per token into `counts` and records the invalid ones. Returns how many
// draws fell on tokens outside the distribution's support that `allowed_row` tolerates.
std::int64_t count_row_draws(const Tensor& samples, std::int64_t r, std::int64_t draws,
                             const float* drow, const std::uint8_t* allowed_row,
                             std::vector<std::int64_t>& counts, InvalidDraws& invalid) {
  const auto vocab = static_cast<std::int64_t>(counts.size());
  std::int64_t extra_allowed = 0;
  for (std::int64_t j = 0; j < draws; ++j) {
    const double raw = samples.get(r * draws + j);
    const auto t = static_cast<std::int64_t>(raw);
    std::string why;
    if (t < 0 || t >= vocab) {
      why = fmt::format("token {} is outside the vocabulary [0, {})", num(raw), vocab);
    } else if (allowed_row ? allowed_row[t] == 0 : drow[t] <= 0) {
      why = fmt::format("token {} has expected probability 0 (outside the top_k/top_p support)", t);
    } else {
      ++counts[static_cast<std::size_t>(t)];
      if (drow[t] <= 0) ++extra_allowed;
      continue;
    }
    if (invalid.count++ == 0) {
      invalid.first = {{"row", r}, {"draw", j}, {"token", static_cast<std::int64_t>(raw)}};
      invalid.text = fmt::format("row {}, draw {}: {}", r, j, why);
    }
  }
  return extra_allowed;
}

// Total variation against the distribution, and what a correct sampler's TVD would be.
void measure_tvd(const std::vector<double>& p, const std::vector<std::int64_t>& counts,
                 const SamplingLimits& lim, RowOutcome& o) {
  const double n = lim.n;
  double mad_sum = 0, var_sum = 0;
  for (std::size_t t = 0; t < p.size(); ++t) {
    const double pt = p[t];
    const double f = static_cast<double>(counts[t]) / n;
    const double diff = std::fabs(f - pt);
    o.tvd += diff;
    o.max_abs = std::max(o.max_abs, diff);
    if (pt > 0) {
      o.max_rel = std::max(o.max_rel, diff / pt);
      const double mad = binomial_mad(n, pt) / n;
      mad_sum += mad;
      var_sum += std::max(0.0, pt * (1 - pt) / n - mad * mad);
    }
  }
  o.tvd *= 0.5;
  o.expected_tvd = 0.5 * mad_sum;
  // sqrt(sum var / 2) = sqrt(2) * (0.5 sqrt(sum var)): sum_t |D_t| double-counts (the positive
  // and negative deviations are equal), which correlates the terms; sqrt(2) covers the worst
  // case (two tokens).
  o.sd = std::sqrt(0.5 * var_sum);
  o.bound = std::max(lim.tvd_floor, o.expected_tvd + kTvdSigmas * o.sd);
}

// Bins of about equal expected mass over the support, in descending probability; a last bin
// too small for the chi-square approximation joins the one before it. Tolerated draws outside
// the support count in the least probable bin.
std::vector<Bin> chi_square_bins(const float* drow, const std::vector<double>& p,
                                 const std::vector<std::int64_t>& counts, double n,
                                 std::int64_t extra_allowed) {
  std::vector<std::int64_t> support;
  for (std::size_t t = 0; t < p.size(); ++t)
    if (p[t] > 0) support.push_back(static_cast<std::int64_t>(t));
  support = sorted_tokens(drow, std::move(support));
  const int target_bins = static_cast<int>(
      std::clamp(std::floor(n / kMinBinExpected), 1.0, static_cast<double>(kMaxBins)));
  const double bin_mass = 1.0 / target_bins;
  std::vector<Bin> bins;
  Bin cur;
  for (std::size_t i = 0; i < support.size(); ++i) {
    const auto t = static_cast<std::size_t>(support[i]);
    if (cur.mass == 0) cur.first_rank = static_cast<std::int64_t>(i) + 1;
    cur.mass += p[t];
    cur.observed += static_cast<double>(counts[t]);
    cur.last_rank = static_cast<std::int64_t>(i) + 1;
    if (cur.mass >= bin_mass * (1 - 1e-9)) {
      bins.push_back(cur);
      cur = Bin{};
    }
  }
  if (cur.mass > 0) bins.push_back(cur);
  if (bins.size() >= 2 && bins.back().mass * n < kMinBinExpected) {
    Bin last = bins.back();
    bins.pop_back();
    bins.back().mass += last.mass;
    bins.back().observed += last.observed;
    bins.back().last_rank = last.last_rank;
  }
  if (!bins.empty()) bins.back().observed += static_cast<double>(extra_allowed);
  return bins;
}

// Pearson's chi-square over the bins; a single bin leaves no degree of freedom to test.
void measure_chi_square(const std::vector<Bin>& bins, double n, RowOutcome& o) {
  if (bins.size() < 2) return;
  double worst_term = -1;
  for (const Bin& b : bins) {
    const double e = b.mass * n;
    const double term = (b.observed - e) * (b.observed - e) / e;
    o.chi2 += term;
    if (term > worst_term) {
      worst_term = term;
      o.worst = b;
    }
  }
  o.dof = static_cast<int>(bins.size()) - 1;
  o.pvalue = chi_square_survival(o.chi2, o.dof);
}

RowOutcome judge_row(const float* drow, const std::vector<double>& p,
                     const std::vector<std::int64_t>& counts, std::int64_t extra_allowed,
                     const SamplingLimits& lim) {
  RowOutcome o;
  measure_tvd(p, counts, lim, o);
  measure_chi_square(chi_square_bins(drow, p, counts, lim.n, extra_allowed), lim.n, o);
  return o;
}

// Marks `v` failed and says why: the invalid draws, then the first row whose draws do not
// follow the distribution (`worst`, null when every row does).
void report_failure(CallVerdict& v, const std::string& head, std::int64_t batch,
                    const SamplingLimits& lim, const InvalidDraws& invalid, std::int64_t worst_row,
                    const RowOutcome* worst) {
  v.status = EvaluationStatus::kIncorrectNumerical;
  if (invalid.count > 0) {
    v.max_abs_error = v.max_rel_error = kInf;
    v.log = fmt::format("{}: {} of {} draws are not tokens the distribution can give\n  first: {}",
                        head, invalid.count, batch * lim.draws, invalid.text);
  }
  if (worst == nullptr) return;
  const RowOutcome& o = *worst;
  if (!v.log.empty()) v.log += '\n';
  v.log += fmt::format("{}: row {} does not follow the expected distribution", head, worst_row);
  if (o.dof > 0) {
    v.log += fmt::format(
        "\n  chi-square {} with {} degrees of freedom: p-value {} (fails below {} = alpha {} / "
        "{} rows)",
        num(o.chi2), o.dof, num(o.pvalue), num(lim.row_alpha), num(lim.alpha), batch);
  }
  v.log += fmt::format("\n  total variation {} (bound {}: a correct sampler gives {} +- {})",
                       num(o.tvd), num(o.bound), num(o.expected_tvd), num(o.sd));
  if (o.dof > 0) {
    v.log += fmt::format(
        "\n  most off: tokens ranked {}-{} by probability (mass {}): expected {:.0f} draws, got "
        "{:.0f}",
        o.worst.first_rank, o.worst.last_rank, num(o.worst.mass), o.worst.mass * lim.n,
        o.worst.observed);
  }
}

}  // namespace

CallVerdict check_sampling(const Definition& def, const ResolvedEval& cfg,
                           const SamplingExpectation& expected, const Tensor& samples) {
  const Tensor& dist_t = expected.distribution;
  if (dist_t.rank() != 2 || dist_t.dtype() != DType::kFloat32)
    throw Error(def.name, "check_sampling: the distribution must be float32 [batch, vocab]");
  const std::int64_t batch = dist_t.dim(0), vocab = dist_t.dim(1);
  if (expected.allowed.defined() && expected.allowed.shape() != dist_t.shape())
    throw Error(def.name, "check_sampling: `allowed` must have the distribution's shape");
  const std::string out_name = def.outputs.empty() ? "samples" : def.outputs.front().name;

  CallVerdict v;
  v.extra["policy"] = "sampling";
  if (reject_layout(v, out_name, batch, samples)) return v;
  const SamplingLimits lim = sampling_limits(cfg, batch, samples);

  const float* dist = dist_t.data<float>();
  const std::uint8_t* allowed =
      expected.allowed.defined() ? expected.allowed.data<std::uint8_t>() : nullptr;

  InvalidDraws invalid;
  std::vector<std::int64_t> counts(static_cast<std::size_t>(vocab));
  std::vector<double> p(static_cast<std::size_t>(vocab));
  Json tvds = Json::array();
  std::vector<RowOutcome> outcomes;
  std::int64_t worst_row = -1;  // the first row failing the distribution test
  double max_tvd = 0, min_pvalue = 1;
  for (std::int64_t r = 0; r < batch; ++r) {
    std::fill(counts.begin(), counts.end(), 0);
    const float* drow = dist + r * vocab;
    normalize_row(drow, p);
    const std::int64_t extra_allowed = count_row_draws(
        samples, r, lim.draws, drow, allowed ? allowed + r * vocab : nullptr, counts, invalid);
    const RowOutcome o = judge_row(drow, p, counts, extra_allowed, lim);
    const bool bad = o.pvalue < lim.row_alpha || o.tvd > o.bound;
    if (bad && worst_row < 0) worst_row = r;
    max_tvd = std::max(max_tvd, o.tvd);
    min_pvalue = std::min(min_pvalue, o.pvalue);
    v.max_abs_error = std::max(v.max_abs_error, o.max_abs);
    v.max_rel_error = std::max(v.max_rel_error, o.max_rel);
    tvds.push_back(o.tvd);
    outcomes.push_back(o);
  }

  Json& x = v.extra;
  x["rows"] = batch;
  x["draws_per_row"] = lim.draws;
  x["tvd"] = max_tvd;
  x["tvds_per_batch"] = tvds;
  x["chi2_pvalue"] = min_pvalue;
  x["invalid_samples"] = invalid.count;
  if (invalid.count > 0) x["first_invalid"] = invalid.first;
  const RowOutcome* worst =
      worst_row >= 0 ? &outcomes[static_cast<std::size_t>(worst_row)] : nullptr;
  if (worst != nullptr) {
    x["first_mismatch"] = {{"output", out_name},          {"row", worst_row},
                           {"tvd", worst->tvd},           {"tvd_bound", worst->bound},
                           {"chi2", worst->chi2},         {"dof", worst->dof},
                           {"chi2_pvalue", worst->pvalue}};
  }
  if (invalid.count == 0 && worst == nullptr) return v;
  report_failure(v, fmt::format("output '{}' ({} rows x {} draws)", out_name, batch, lim.draws),
                 batch, lim, invalid, worst_row, worst);
  return v;
}

}  // namespace fib::bench
