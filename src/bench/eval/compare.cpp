// Correctness verdicts: structural checks, the elementwise comparison and
// the merging of trials. Top-k sets are in topk_set.cpp, sampling in sampling.cpp.
#include "fib/bench/eval/compare.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <limits>
#include <thread>
#include <vector>

#include "fib/bench/eval/op_family.h"
#include "fib/tensor/numeric.h"
#include "fib/trace/suggest.h"

namespace fib::bench {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
// The denominator floor of the relative error, as upstream's compute_error_stats.
constexpr double kRelFloor = 1e-8;

bool contains(const std::vector<std::string>& v, std::string_view s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

// "[3, 17]" for flat index `flat` of `shape` (row-major).
Json multi_index(const Shape& shape, std::int64_t flat) {
  Json idx = Json::array();
  std::vector<std::int64_t> parts(shape.size());
  for (std::size_t d = shape.size(); d-- > 0;) {
    const std::int64_t n = shape[d] > 0 ? shape[d] : 1;
    parts[d] = flat % n;
    flat /= n;
  }
  for (auto p : parts) idx.push_back(p);
  return idx;
}

std::string index_text(const Shape& shape, std::int64_t flat) {
  const Json idx = multi_index(shape, flat);
  std::string s = "[";
  for (std::size_t i = 0; i < idx.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(idx[i].get<std::int64_t>());
  }
  return s + "]";
}

std::string num(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (v == std::floor(v) && std::fabs(v) < 1e15)
    return fmt::format("{}", static_cast<std::int64_t>(v));
  return fmt::format("{:.6g}", v);
}

// ---- Typed element readers ---------------------------------------------------------------

template <typename T>
struct IntReader {
  static constexpr bool kInteger = true;
  static double at(const void* p, std::int64_t i) {
    return static_cast<double>(static_cast<const T*>(p)[i]);
  }
  static std::int64_t int_at(const void* p, std::int64_t i) {
    return static_cast<std::int64_t>(static_cast<const T*>(p)[i]);
  }
};
struct BoolReader {
  static constexpr bool kInteger = true;
  static double at(const void* p, std::int64_t i) {
    return static_cast<const std::uint8_t*>(p)[i] != 0 ? 1.0 : 0.0;
  }
  static std::int64_t int_at(const void* p, std::int64_t i) {
    return static_cast<const std::uint8_t*>(p)[i] != 0 ? 1 : 0;
  }
};
struct F32Reader {
  static constexpr bool kInteger = false;
  static double at(const void* p, std::int64_t i) {
    return static_cast<double>(static_cast<const float*>(p)[i]);
  }
};
struct F16Reader {
  static constexpr bool kInteger = false;
  static double at(const void* p, std::int64_t i) {
    return static_cast<double>(numeric::fp16_to_float(static_cast<const std::uint16_t*>(p)[i]));
  }
};
struct BF16Reader {
  static constexpr bool kInteger = false;
  static double at(const void* p, std::int64_t i) {
    return static_cast<double>(numeric::bf16_to_float(static_cast<const std::uint16_t*>(p)[i]));
  }
};
struct E4M3Reader {
  static constexpr bool kInteger = false;
  static double at(const void* p, std::int64_t i) {
    return static_cast<double>(
        numeric::fp8_e4m3fn_to_float(static_cast<const std::uint8_t*>(p)[i]));
  }
};
struct E5M2Reader {
  static constexpr bool kInteger = false;
  static double at(const void* p, std::int64_t i) {
    return static_cast<double>(numeric::fp8_e5m2_to_float(static_cast<const std::uint8_t*>(p)[i]));
  }
};
struct E2M1Reader {
  static constexpr bool kInteger = false;
  static double at(const void* p, std::int64_t i) {
    const std::uint8_t b = static_cast<const std::uint8_t*>(p)[i / 2];
    const auto nibble = static_cast<std::uint8_t>(i % 2 ? b >> 4 : b & 0xF);
    return static_cast<double>(numeric::fp4_e2m1_to_float(nibble));
  }
};

template <typename F>
void with_reader(DType t, F&& f) {
  switch (t) {
    case DType::kFloat32:
      return f(F32Reader{});
    case DType::kFloat16:
      return f(F16Reader{});
    case DType::kBFloat16:
      return f(BF16Reader{});
    case DType::kFloat8E4M3FN:
      return f(E4M3Reader{});
    case DType::kFloat8E5M2:
      return f(E5M2Reader{});
    case DType::kFloat4E2M1:
      return f(E2M1Reader{});
    case DType::kInt64:
      return f(IntReader<std::int64_t>{});
    case DType::kInt32:
      return f(IntReader<std::int32_t>{});
    case DType::kInt16:
      return f(IntReader<std::int16_t>{});
    case DType::kInt8:
      return f(IntReader<std::int8_t>{});
    case DType::kUInt8:
      return f(IntReader<std::uint8_t>{});
    case DType::kBool:
      return f(BoolReader{});
  }
}

// ---- Elementwise statistics --------------------------------------------------------------

// Wrong elements a failure names by value: the first few and the worst. A handful says where
// and how a kernel goes wrong; a full list of expected values would hand the reference's output
// for that input set to whoever reads the trace (a workload's inputs from a blob are the same on
// every run), so the list stays this short however many elements fail.
constexpr int kSampledMismatches = 4;

struct Element {
  std::int64_t at = -1;  // flat index
  double expected = 0, got = 0;
};

// Failing elements by how far beyond their tolerance they are: the smaller of |got - ref| / atol
// and rel / rtol (an element fails when both exceed 1), in the bins of kToleranceBins.
constexpr std::array<double, 3> kToleranceEdges = {2, 10, 100};
constexpr std::array<std::string_view, 4> kToleranceBins = {"1-2x", "2-10x", "10-100x", ">100x"};

struct Stats {
  std::int64_t numel = 0;
  std::int64_t mismatches = 0;  // elements failing any rule
  std::int64_t nonfinite = 0;   // of those, NaN/Inf mismatches
  std::int64_t nan = 0;         // solution NaN where the reference has none
  std::int64_t inf = 0;         // solution Inf the reference does not have (or of the other sign)
  std::int64_t unwritten = 0;   // failing elements still holding the poison value
  std::int64_t ref_nan = 0;     // reference NaNs (anything accepted there)
  std::int64_t ref_inf = 0;     // reference Infs
  std::int64_t got_nan = 0, got_inf = 0;  // every NaN and Inf of the solution's output
  std::int64_t first = -1;                // first failing element
  double first_expected = 0, first_got = 0;
  std::array<Element, kSampledMismatches> sampled{};  // the first failing elements
  int n_sampled = 0;
  Element worst;          // the failing element of the largest abs error (NaN/Inf: infinite)
  double worst_err = -1;  // its abs error
  double max_abs = 0, max_rel = 0;  // over elements where both are finite
  std::int64_t max_abs_at = -1, max_rel_at = -1;
  double sum_abs = 0, sum_rel = 0;                           // over elements where both are finite
  std::int64_t finite = 0;                                   // how many those are
  std::array<std::int64_t, kToleranceBins.size()> beyond{};  // finite failures by tolerance bin
  double sq_err = 0, sq_ref = 0;
  bool got_all_zero = true;
};

// The bin of kToleranceBins of a failing finite element.
std::size_t tolerance_bin(double abs, double rel, double atol, double rtol) {
  const double by_abs = atol > 0 ? abs / atol : kInf;
  const double by_rel = rtol > 0 ? rel / rtol : kInf;
  const double times = std::min(by_abs, by_rel);
  std::size_t b = 0;
  while (b < kToleranceEdges.size() && times > kToleranceEdges[b]) ++b;
  return b;
}

bool is_poison(double g, std::optional<double> poison) {
  if (!poison) return false;
  if (std::isnan(*poison)) return std::isnan(g);
  return g == *poison;
}

// Elements [begin, end) of the two tensors.
template <typename R>
Stats collect_range(const Tensor& expected, const Tensor& got, std::int64_t begin, std::int64_t end,
                    double atol, double rtol, bool exact, std::optional<double> poison) {
  Stats s;
  s.numel = end - begin;
  const void* ep = expected.raw();
  const void* gp = got.raw();
  auto fail = [&](std::int64_t i, double r, double g) {
    ++s.mismatches;
    if (is_poison(g, poison)) ++s.unwritten;
    if (s.first < 0) {
      s.first = i;
      s.first_expected = r;
      s.first_got = g;
    }
    if (s.n_sampled < kSampledMismatches)
      s.sampled[static_cast<std::size_t>(s.n_sampled++)] = {i, r, g};
    const double err = std::isfinite(g) && std::isfinite(r) ? std::fabs(g - r) : kInf;
    if (err > s.worst_err) s.worst_err = err, s.worst = {i, r, g};
  };
  for (std::int64_t i = begin; i < end; ++i) {
    const double r = R::at(ep, i);
    const double g = R::at(gp, i);
    if (g != 0) s.got_all_zero = false;
    if constexpr (!R::kInteger) {
      if (std::isnan(g)) ++s.got_nan;
      if (std::isinf(g)) ++s.got_inf;
      if (std::isinf(r)) ++s.ref_inf;
    }
    if constexpr (R::kInteger) {
      if (exact) {
        const std::int64_t ri = R::int_at(ep, i), gi = R::int_at(gp, i);
        const double abs = std::fabs(g - r), rel = abs / (std::fabs(r) + kRelFloor);
        ++s.finite;
        s.sum_abs += abs;
        s.sum_rel += rel;
        if (ri != gi) {
          fail(i, r, g);
          if (abs > s.max_abs) s.max_abs = abs, s.max_abs_at = i;
          if (rel > s.max_rel) s.max_rel = rel, s.max_rel_at = i;
        }
        continue;
      }
    }
    if (std::isnan(r)) {
      ++s.ref_nan;
      continue;
    }
    if (!std::isfinite(r) || !std::isfinite(g)) {
      if (g == r) continue;  // the same infinity
      ++s.nonfinite;
      if (std::isnan(g)) ++s.nan;
      if (std::isinf(g)) ++s.inf;
      fail(i, r, g);
      continue;
    }
    const double diff = g - r;
    const double abs = std::fabs(diff);
    const double rel = abs / (std::fabs(r) + kRelFloor);
    s.sq_err += diff * diff;
    s.sq_ref += r * r;
    ++s.finite;
    s.sum_abs += abs;
    s.sum_rel += rel;
    if (abs > s.max_abs) s.max_abs = abs, s.max_abs_at = i;
    if (rel > s.max_rel) s.max_rel = rel, s.max_rel_at = i;
    if (abs > atol && rel > rtol) {
      fail(i, r, g);
      ++s.beyond[tolerance_bin(abs, rel, atol, rtol)];
    }
  }
  return s;
}

// `later` covers the elements after `s`'s: the counts add, the first failure and the maxima
// stay the earliest (as one pass in order would find them).
void merge_stats(Stats& s, const Stats& later) {
  s.numel += later.numel;
  s.mismatches += later.mismatches;
  s.nonfinite += later.nonfinite;
  s.nan += later.nan;
  s.inf += later.inf;
  s.unwritten += later.unwritten;
  s.ref_nan += later.ref_nan;
  s.ref_inf += later.ref_inf;
  s.got_nan += later.got_nan;
  s.got_inf += later.got_inf;
  for (int k = 0; k < later.n_sampled && s.n_sampled < kSampledMismatches; ++k)
    s.sampled[static_cast<std::size_t>(s.n_sampled++)] = later.sampled[static_cast<std::size_t>(k)];
  if (later.worst_err > s.worst_err) s.worst_err = later.worst_err, s.worst = later.worst;
  s.sum_abs += later.sum_abs;
  s.sum_rel += later.sum_rel;
  s.finite += later.finite;
  for (std::size_t b = 0; b < s.beyond.size(); ++b) s.beyond[b] += later.beyond[b];
  if (s.first < 0 && later.first >= 0) {
    s.first = later.first;
    s.first_expected = later.first_expected;
    s.first_got = later.first_got;
  }
  if (later.max_abs > s.max_abs) s.max_abs = later.max_abs, s.max_abs_at = later.max_abs_at;
  if (later.max_rel > s.max_rel) s.max_rel = later.max_rel, s.max_rel_at = later.max_rel_at;
  s.sq_err += later.sq_err;
  s.sq_ref += later.sq_ref;
  s.got_all_zero = s.got_all_zero && later.got_all_zero;
}

// Large outputs (a GEMM's 32M elements took about half a second in one pass) are compared in
// fixed chunks of 1M elements on up to all cores, merged in order. The chunking does not depend
// on the machine, so the sums (NMSE) are the same everywhere.
template <typename R>
Stats collect(const Tensor& expected, const Tensor& got, double atol, double rtol, bool exact,
              std::optional<double> poison) {
  constexpr std::int64_t kChunk = 1 << 20;
  const std::int64_t numel = expected.numel();
  const std::int64_t chunks = std::max<std::int64_t>(1, (numel + kChunk - 1) / kChunk);
  if (chunks == 1) return collect_range<R>(expected, got, 0, numel, atol, rtol, exact, poison);
  std::vector<Stats> parts(static_cast<std::size_t>(chunks));
  std::atomic<std::int64_t> next{0};
  auto work = [&] {
    for (std::int64_t c = next++; c < chunks; c = next++) {
      parts[static_cast<std::size_t>(c)] = collect_range<R>(
          expected, got, c * kChunk, std::min(numel, (c + 1) * kChunk), atol, rtol, exact, poison);
    }
  };
  const auto threads = static_cast<std::int64_t>(
      std::min<unsigned>(std::max(1u, std::thread::hardware_concurrency()), 16u));
  std::vector<std::thread> pool;
  for (std::int64_t t = 1; t < std::min(threads, chunks); ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  Stats s = parts.front();
  for (std::size_t c = 1; c < parts.size(); ++c) merge_stats(s, parts[c]);
  return s;
}

Json extended(double v) { return write_extended_number(v); }

void merge_extra_into(Json& total, const Json& e) {
  auto add_int = [&](const char* k) {
    if (e.contains(k)) total[k] = total.value(k, std::int64_t{0}) + e[k].get<std::int64_t>();
  };
  add_int("mismatches");
  add_int("numel");
  add_int("nan");
  add_int("inf");
  add_int("unwritten");
  if (e.contains("matched_ratio") && e["matched_ratio"].is_number()) {
    const double m = e["matched_ratio"].get<double>();
    total["matched_ratio"] =
        total.contains("matched_ratio") ? std::min(total["matched_ratio"].get<double>(), m) : m;
  }
  if (e.contains("nmse") && !e["nmse"].is_null()) {
    const double n = e["nmse"].is_number() ? e["nmse"].get<double>() : kInf;
    const double prev = !total.contains("nmse") || total["nmse"].is_null()
                            ? -1.0
                            : (total["nmse"].is_number() ? total["nmse"].get<double>() : kInf);
    if (n > prev) total["nmse"] = e["nmse"];
  }
  if (e.contains("first_mismatch") && !total.contains("first_mismatch"))
    total["first_mismatch"] = e["first_mismatch"];
}

// " (abs 1.25, rel 1)", or what a poison or non-finite value means.
std::string element_detail(double expected, double got, std::optional<double> poison) {
  if (is_poison(got, poison)) {
    return std::isnan(got) ? " (the NaN poison: probably never written)"
                           : " (the poison value: never written)";
  }
  if (!std::isfinite(got) || !std::isfinite(expected)) return "";
  const double abs = std::fabs(got - expected);
  return fmt::format(" (abs {}, rel {})", num(abs), num(abs / (std::fabs(expected) + kRelFloor)));
}

Json element_json(const Shape& shape, const Element& e) {
  return Json{{"index", multi_index(shape, e.at)},
              {"expected", extended(e.expected)},
              {"got", extended(e.got)}};
}

// The worst failing element (when it is not the first) and the other sampled ones, as log lines.
std::string more_wrong_elements(const Shape& shape, const Stats& s, std::optional<double> poison) {
  std::string out;
  if (s.worst.at >= 0 && s.worst.at != s.first) {
    out += fmt::format("\n  worst at {}: expected {}, got {}{}", index_text(shape, s.worst.at),
                       num(s.worst.expected), num(s.worst.got),
                       element_detail(s.worst.expected, s.worst.got, poison));
  }
  std::vector<std::string> others;
  for (int k = 1; k < s.n_sampled; ++k) {
    const Element& e = s.sampled[static_cast<std::size_t>(k)];
    others.push_back(fmt::format("{} expected {}, got {}", index_text(shape, e.at), num(e.expected),
                                 num(e.got)));
  }
  if (!others.empty()) out += fmt::format("\n  next wrong: {}", fmt::join(others, "; "));
  return out;
}

// Mean errors over the finite elements and the failures by how far beyond tolerance they are.
std::string error_distribution_text(const Stats& s, bool exact) {
  if (s.finite == 0) return {};
  const auto n = static_cast<double>(s.finite);
  std::string out = fmt::format("\n  mean abs error {}, mean rel error {} over {} finite elements",
                                num(s.sum_abs / n), num(s.sum_rel / n), s.finite);
  if (exact) return out;
  std::vector<std::string> bins;
  for (std::size_t b = 0; b < kToleranceBins.size(); ++b)
    bins.push_back(fmt::format("{} {}", kToleranceBins[b], s.beyond[b]));
  return out + fmt::format("; beyond tolerance by: {}", fmt::join(bins, ", "));
}

// The feedback of correctness.extra (docs/correctness.md, section 6): the worst and the first
// few wrong elements, the error distribution and the non-finite values on both sides. All of it
// comes from outputs the orchestrator read and compared itself.
void add_feedback(Json& x, std::string_view name, const Shape& shape, const Stats& s, bool exact) {
  if (s.worst.at >= 0) {
    x["worst_mismatch"] = element_json(shape, s.worst);
    x["worst_mismatch"]["output"] = std::string(name);
  }
  if (s.n_sampled > 0) {
    Json sampled = Json::array();
    for (int k = 0; k < s.n_sampled; ++k)
      sampled.push_back(element_json(shape, s.sampled[static_cast<std::size_t>(k)]));
    x["mismatch_samples"] = sampled;
  }
  Json dist = Json::object();
  const auto n = static_cast<double>(std::max<std::int64_t>(s.finite, 1));
  dist["compared"] = s.finite;
  dist["mean_abs_error"] = s.sum_abs / n;
  dist["mean_rel_error"] = s.sum_rel / n;
  if (!exact) {
    Json bins = Json::object();
    for (std::size_t b = 0; b < kToleranceBins.size(); ++b)
      bins[std::string(kToleranceBins[b])] = s.beyond[b];
    dist["beyond_tolerance"] = bins;
  }
  x["error_distribution"] = dist;
  x["nonfinite"] = Json{{"output", Json{{"nan", s.got_nan}, {"inf", s.got_inf}}},
                        {"reference", Json{{"nan", s.ref_nan}, {"inf", s.ref_inf}}}};
}

}  // namespace

// ---- Policy ------------------------------------------------------------------------------

std::string_view policy_name(PolicyKind k) {
  switch (k) {
    case PolicyKind::kElementwise:
      return "elementwise";
    case PolicyKind::kMatchedRatio:
      return "matched_ratio";
    case PolicyKind::kTopkSet:
      return "topk_set";
    case PolicyKind::kSampling:
      return "sampling";
    case PolicyKind::kCanonical:
      return "canonical";
  }
  return "elementwise";
}

EvalPolicy policy_for(const Definition& def) { return op_family(def).policy(def); }

// ---- Structure ---------------------------------------------------------------------------

CallVerdict check_output_structure(const Definition& def, const EvalPolicy& policy,
                                   const Outputs& expected, const Outputs& got) {
  CallVerdict v;
  std::vector<std::string> problems;
  auto problem = [&](EvaluationStatus s, std::string text) {
    if (v.status == EvaluationStatus::kPassed) v.status = s;
    problems.push_back(std::move(text));
  };
  std::vector<std::string> names;
  for (const auto& spec : def.outputs) names.push_back(spec.name);
  for (const auto& spec : def.outputs) {
    const auto g = got.find(spec.name);
    if (g == got.end() || !g->second.defined()) {
      if (!contains(policy.optional_outputs, spec.name))
        problem(EvaluationStatus::kIncorrectShape,
                fmt::format("output '{}' is missing", spec.name));
      continue;
    }
    const auto e = expected.find(spec.name);
    if (e == expected.end() || !e->second.defined())
      throw Error(def.name, fmt::format("the reference produced no output '{}'", spec.name));
    const Shape& gs = g->second.shape();
    const Shape& es = e->second.shape();
    if (gs != es) {
      problem(EvaluationStatus::kIncorrectShape,
              gs.size() != es.size()
                  ? fmt::format("output '{}': shape {} (rank {}), expected {} (rank {})", spec.name,
                                shape_to_string(gs), gs.size(), shape_to_string(es), es.size())
                  : fmt::format("output '{}': shape {}, expected {}", spec.name,
                                shape_to_string(gs), shape_to_string(es)));
      continue;
    }
    if (g->second.dtype() != spec.dtype) {
      problem(EvaluationStatus::kIncorrectDtype,
              fmt::format("output '{}': dtype {}, expected {}", spec.name,
                          dtype_name(g->second.dtype()), dtype_name(spec.dtype)));
    }
  }
  for (const auto& [name, t] : got) {
    if (def.output(name) == nullptr) {
      problem(EvaluationStatus::kIncorrectShape,
              fmt::format("unexpected output '{}' ({})", name, suggest(name, names)));
    }
  }
  for (const auto& p : problems) {
    if (!v.log.empty()) v.log += '\n';
    v.log += p;
  }
  if (!v.passed()) {
    v.max_abs_error = kInf;
    v.max_rel_error = kInf;
  }
  return v;
}

// ---- One output --------------------------------------------------------------------------

CallVerdict compare_tensor(std::string_view name, const ResolvedEval& cfg, const Tensor& expected,
                           const Tensor& got, std::optional<double> poison) {
  if (expected.shape() != got.shape() || expected.dtype() != got.dtype()) {
    throw Error(std::string(name),
                fmt::format("compare_tensor needs equal shapes and dtypes ({} {} vs {} {})",
                            dtype_name(expected.dtype()), shape_to_string(expected.shape()),
                            dtype_name(got.dtype()), shape_to_string(got.shape())));
  }
  const DType dt = expected.dtype();
  const bool is_float = dtype_is_float(dt);
  const bool exact = !is_float && cfg.atol == 0 && cfg.rtol == 0;
  Stats s;
  with_reader(dt, [&](auto reader) {
    s = collect<decltype(reader)>(expected, got, cfg.atol, cfg.rtol, exact, poison);
  });

  CallVerdict v;
  const std::int64_t counted = s.numel - s.ref_nan;
  const double matched =
      counted > 0 ? 1.0 - static_cast<double>(s.mismatches) / static_cast<double>(counted) : 1.0;
  std::optional<double> nmse;
  if (is_float) {
    if (s.nonfinite > 0)
      nmse = kInf;
    else if (s.sq_ref > 0)
      nmse = s.sq_err / s.sq_ref;
  }

  bool failed_elements = false;
  if (s.nonfinite > 0) {
    failed_elements = true;
  } else if (s.mismatches > 0) {
    failed_elements = !cfg.required_matched_ratio || matched < *cfg.required_matched_ratio;
  }
  const bool failed_nmse = nmse && *nmse > cfg.max_nmse;

  v.max_abs_error = s.nonfinite > 0 ? kInf : s.max_abs;
  v.max_rel_error = s.nonfinite > 0 ? kInf : s.max_rel;
  Json& x = v.extra;
  x["matched_ratio"] = matched;
  x["nmse"] = nmse ? extended(*nmse) : Json(nullptr);
  x["mismatches"] = s.mismatches;
  x["numel"] = s.numel;
  x["nan"] = s.nan;
  x["inf"] = s.inf;
  x["unwritten"] = s.unwritten;
  if (s.first >= 0) {
    x["first_mismatch"] = {{"output", std::string(name)},
                           {"index", multi_index(expected.shape(), s.first)},
                           {"expected", extended(s.first_expected)},
                           {"got", extended(s.first_got)}};
  }
  add_feedback(x, name, expected.shape(), s, exact);
  if (!failed_elements && !failed_nmse) return v;

  v.status = EvaluationStatus::kIncorrectNumerical;
  const Shape& shape = expected.shape();
  std::string& log = v.log;
  const std::string head =
      fmt::format("output '{}' {} {}", name, shape_to_string(shape), dtype_name(dt));
  if (s.mismatches > 0) {
    const double pct = 100.0 * static_cast<double>(s.mismatches) /
                       static_cast<double>(std::max<std::int64_t>(counted, 1));
    if (exact) {
      log += fmt::format("{}: {} of {} elements ({:.3g}%) differ (exact comparison)", head,
                         s.mismatches, counted, pct);
    } else {
      log += fmt::format("{}: {} of {} elements ({:.3g}%) outside atol={} and rtol={}", head,
                         s.mismatches, counted, pct, num(cfg.atol), num(cfg.rtol));
    }
    if (cfg.required_matched_ratio) {
      log += fmt::format(" (matched ratio {:.6g}, required {})", matched,
                         num(*cfg.required_matched_ratio));
    }
    log += fmt::format("\n  first at {}: expected {}, got {}{}", index_text(shape, s.first),
                       num(s.first_expected), num(s.first_got),
                       element_detail(s.first_expected, s.first_got, poison));
    log += more_wrong_elements(shape, s, poison);
  } else {
    log += fmt::format("{}: every element is within atol={} or rtol={}", head, num(cfg.atol),
                       num(cfg.rtol));
  }
  if (s.max_abs_at >= 0) {
    log += fmt::format("\n  max abs error {} at {}; max rel error {} at {}", num(s.max_abs),
                       index_text(shape, s.max_abs_at), num(s.max_rel),
                       index_text(shape, s.max_rel_at));
  }
  if (s.mismatches > 0) log += error_distribution_text(s, exact);
  if (nmse) {
    log += fmt::format("\n  nmse {} (max {}){}", num(*nmse), num(cfg.max_nmse),
                       failed_nmse ? " exceeded" : "");
    if (failed_nmse && s.got_all_zero) log += ": the output is all zeros";
  }
  if (s.nan > 0 || s.inf > 0 || s.unwritten > 0) {
    log += fmt::format("\n  NaN: {}, Inf: {} (where the reference has none)", s.nan, s.inf);
    if (poison) log += fmt::format("; never written (still the poison value): {}", s.unwritten);
  }
  if (s.got_nan + s.got_inf + s.ref_nan + s.ref_inf > 0) {
    log += fmt::format("\n  non-finite values: output NaN {}, Inf {}; reference NaN {}, Inf {}",
                       s.got_nan, s.got_inf, s.ref_nan, s.ref_inf);
  }
  return v;
}

// ---- One call ----------------------------------------------------------------------------

namespace {
// Deep copies of the outputs (the caller's stay as they are), in the family's canonical form.
Outputs canonical_copy(const Definition& def, const EvalPolicy& policy, const Outputs& outputs) {
  Outputs copy;
  for (const auto& [name, t] : outputs) copy.emplace(name, t.clone());
  policy.canonicalize(def, copy);
  return copy;
}
}  // namespace

CallVerdict compare_outputs(const Definition& def, const EvalPolicy& policy,
                            const OutputEvals& evals, const Outputs& expected, const Outputs& got,
                            const CompareOptions& options) {
  if (policy.kind == PolicyKind::kSampling) {
    throw Error(def.name,
                "a sampling definition is judged over many draws: use check_sampling, not "
                "compare_outputs");
  }
  CallVerdict v = check_output_structure(def, policy, expected, got);
  v.extra["policy"] = std::string(policy_name(policy.kind));
  if (!v.passed()) return v;
  if (policy.kind == PolicyKind::kCanonical && policy.canonicalize != nullptr) {
    Outputs e = canonical_copy(def, policy, expected), g = canonical_copy(def, policy, got);
    EvalPolicy plain = policy;
    plain.kind = PolicyKind::kElementwise;
    CallVerdict c = compare_outputs(def, plain, evals, e, g, options);
    c.extra["policy"] = std::string(policy_name(policy.kind));
    return c;
  }

  std::vector<std::pair<std::string, CallVerdict>> results;
  for (const auto& spec : def.outputs) {
    const auto g = got.find(spec.name);
    if (g == got.end() || !g->second.defined()) continue;  // an optional output left out
    const auto cfg_it = evals.find(spec.name);
    if (cfg_it == evals.end())
      throw Error(def.name, fmt::format("no resolved eval settings for output '{}'", spec.name));
    ResolvedEval cfg = cfg_it->second;
    if (policy.kind == PolicyKind::kMatchedRatio && !cfg.required_matched_ratio)
      cfg.required_matched_ratio = policy.default_matched_ratio;
    const Tensor& e = expected.find(spec.name)->second;
    std::optional<double> poison;
    if (options.poison) {
      const auto p = options.poison->find(spec.name);
      if (p != options.poison->end()) poison = p->second;
    }
    if (policy.kind == PolicyKind::kTopkSet && contains(policy.set_outputs, spec.name)) {
      results.emplace_back(spec.name,
                           compare_topk_sets(spec.name, cfg, e, g->second, options.scorer, poison));
    } else {
      results.emplace_back(spec.name, compare_tensor(spec.name, cfg, e, g->second, poison));
    }
  }

  Json per_output = Json::object();
  int failed = 0;
  constexpr int kLoggedOutputs = 3;
  for (const auto& [name, r] : results) {
    v.max_abs_error = std::max(v.max_abs_error, r.max_abs_error);
    v.max_rel_error = std::max(v.max_rel_error, r.max_rel_error);
    merge_extra_into(v.extra, r.extra);
    for (auto it = r.extra.begin(); it != r.extra.end(); ++it) {
      if (!v.extra.contains(it.key())) v.extra[it.key()] = it.value();
    }
    per_output[name] = r.extra;
    per_output[name]["max_abs_error"] = extended(r.max_abs_error);
    per_output[name]["max_rel_error"] = extended(r.max_rel_error);
    if (r.passed()) continue;
    if (v.passed()) v.status = r.status;
    if (failed < kLoggedOutputs) {
      if (!v.log.empty()) v.log += '\n';
      v.log += r.log;
    }
    ++failed;
  }
  if (failed > kLoggedOutputs)
    v.log += fmt::format("\n... and {} more outputs fail", failed - kLoggedOutputs);
  if (results.size() > 1) v.extra["outputs"] = per_output;
  return v;
}

// ---- Trials ------------------------------------------------------------------------------

int status_severity(EvaluationStatus s) {
  switch (s) {
    case EvaluationStatus::kPassed:
      return 0;
    case EvaluationStatus::kIncorrectNumerical:
      return 1;
    case EvaluationStatus::kIncorrectDtype:
      return 2;
    case EvaluationStatus::kIncorrectShape:
      return 3;
    case EvaluationStatus::kRuntimeError:
      return 4;
    case EvaluationStatus::kTimeout:
      return 5;
    case EvaluationStatus::kCompileError:
      return 6;
  }
  return 6;
}

CallVerdict merge_trials(std::span<const TrialVerdict> trials) {
  CallVerdict m;
  Json failed = Json::array();
  const TrialVerdict* worst = nullptr;
  std::optional<double> matched;
  std::optional<double> nmse;
  for (const auto& t : trials) {
    const CallVerdict& v = t.verdict;
    m.max_abs_error = std::max(m.max_abs_error, v.max_abs_error);
    m.max_rel_error = std::max(m.max_rel_error, v.max_rel_error);
    if (std::isnan(v.max_abs_error)) m.max_abs_error = v.max_abs_error;
    if (std::isnan(v.max_rel_error)) m.max_rel_error = v.max_rel_error;
    if (v.extra.contains("matched_ratio") && v.extra["matched_ratio"].is_number()) {
      const double r = v.extra["matched_ratio"].get<double>();
      matched = matched ? std::min(*matched, r) : r;
    }
    if (v.extra.contains("nmse") && !v.extra["nmse"].is_null()) {
      const double n = v.extra["nmse"].is_number() ? v.extra["nmse"].get<double>() : kInf;
      nmse = nmse ? std::max(*nmse, n) : n;
    }
    if (v.passed()) continue;
    failed.push_back(t.trial);
    if (worst == nullptr || status_severity(v.status) > status_severity(worst->verdict.status))
      worst = &t;
  }
  if (worst != nullptr) {
    m.status = worst->verdict.status;
    m.extra = worst->verdict.extra;
    m.extra["trial"] = worst->trial;
    m.extra["seed"] = worst->seed;
    m.log = fmt::format("trial {} of {} (seed {}): {}", worst->trial, trials.size(), worst->seed,
                        status_name(worst->verdict.status));
    if (!worst->verdict.log.empty()) m.log += "\n" + worst->verdict.log;
    std::vector<std::string> others;
    for (const auto& t : trials) {
      if (&t == worst || t.verdict.passed()) continue;
      others.push_back(
          fmt::format("trial {} (seed {}): {}", t.trial, t.seed, status_name(t.verdict.status)));
    }
    if (!others.empty()) {
      m.log += "\nalso failed: ";
      for (std::size_t i = 0; i < others.size(); ++i) m.log += (i ? "; " : "") + others[i];
    }
  } else if (!trials.empty()) {
    m.extra = trials.front().verdict.extra;
  }
  m.extra["trials"] = trials.size();
  m.extra["failed_trials"] = failed;
  if (matched) m.extra["matched_ratio"] = *matched;
  if (nmse) m.extra["nmse"] = extended(*nmse);
  return m;
}

Correctness to_correctness(const CallVerdict& v) {
  Correctness c;
  c.max_absolute_error = v.max_abs_error;
  c.max_relative_error = v.max_rel_error;
  c.extra = v.extra;
  return c;
}

}  // namespace fib::bench
