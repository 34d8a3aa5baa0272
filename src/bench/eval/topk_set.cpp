// Top-k index outputs compared as sets per row (the DSA indexer: torch.topk's order among
// equal scores is unspecified, and a kernel may return its picks in any order), with ties
// judged by a caller-supplied score, and the DSA indexer's score itself.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <unordered_map>

#include "fib/bench/eval/compare.h"
#include "fib/bench/eval/op_family.h"
#include "fib/tensor/numeric.h"

namespace fib::bench {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr std::size_t kListed = 8;  // indices listed per kind in a log line

std::string list_text(const std::vector<std::int64_t>& v) {
  std::string s = "[";
  for (std::size_t i = 0; i < v.size() && i < kListed; ++i)
    s += (i ? ", " : "") + std::to_string(v[i]);
  if (v.size() > kListed) s += fmt::format(", ... {} more", v.size() - kListed);
  return s + "]";
}

std::string scores_text(const std::vector<double>& v) {
  std::string s = "[";
  for (std::size_t i = 0; i < v.size() && i < kListed; ++i)
    s += (i ? ", " : "") +
         (std::isnan(v[i]) ? std::string("not a candidate") : fmt::format("{:.6g}", v[i]));
  if (v.size() > kListed) s += ", ...";
  return s + "]";
}

Json head_json(const std::vector<std::int64_t>& v) {
  Json a = Json::array();
  for (std::size_t i = 0; i < v.size() && i < kListed; ++i) a.push_back(v[i]);
  return a;
}

struct RowResult {
  bool ok = true;
  std::vector<std::int64_t> missing, extra, duplicates, invalid;
  std::vector<double> missing_scores, extra_scores;  // sorted by score, descending, if scored
  std::int64_t ties = 0;
  double max_abs = 0, max_rel = 0;  // between paired scores
  std::string why;                  // when scored pairs do not match
  bool scores_differ = false;       // scored pairs exist but one differs beyond tolerance
};

// A scored tie is accepted when the returned index scores within atol + rtol * |missing score|.
struct ScoreTolerance {
  double rtol = 0, atol = 0;
};

// Reads row r of both outputs: the expected indices into `e_row`, the returned ones into
// `g_row` (-1 is padding on both sides; values below -1 are invalid). Returns how many entries
// still hold the poison value where the expected index differs.
std::int64_t read_row(const Tensor& expected, const Tensor& got, std::int64_t r, std::int64_t k,
                      std::optional<double> poison, std::vector<std::int64_t>& e_row,
                      std::vector<std::int64_t>& g_row, RowResult& rr) {
  std::int64_t unwritten = 0;
  e_row.clear();
  g_row.clear();
  for (std::int64_t j = 0; j < k; ++j) {
    const auto e = static_cast<std::int64_t>(expected.get(r * k + j));
    const double graw = got.get(r * k + j);
    const auto g = static_cast<std::int64_t>(graw);
    if (poison && graw == *poison && static_cast<double>(e) != graw) ++unwritten;
    if (e != -1) e_row.push_back(e);
    if (g < -1)
      rr.invalid.push_back(g);
    else if (g != -1)
      g_row.push_back(g);
  }
  return unwritten;
}

// Sorts both rows, records the returned indices given more than once, leaves `g_row` without
// repeats, and fills the indices missing from and extra in the returned set.
void diff_row_sets(std::vector<std::int64_t>& e_row, std::vector<std::int64_t>& g_row,
                   RowResult& rr) {
  std::sort(e_row.begin(), e_row.end());
  std::sort(g_row.begin(), g_row.end());
  for (std::size_t i = 1; i < g_row.size(); ++i)
    if (g_row[i] == g_row[i - 1] && (rr.duplicates.empty() || rr.duplicates.back() != g_row[i]))
      rr.duplicates.push_back(g_row[i]);
  g_row.erase(std::unique(g_row.begin(), g_row.end()), g_row.end());
  std::set_difference(e_row.begin(), e_row.end(), g_row.begin(), g_row.end(),
                      std::back_inserter(rr.missing));
  std::set_difference(g_row.begin(), g_row.end(), e_row.begin(), e_row.end(),
                      std::back_inserter(rr.extra));
}

// Reorders indices and their scores together by descending score (NaN last), so that the i-th
// missing index pairs with the i-th extra one.
void sort_by_score(std::vector<std::int64_t>& idx, std::vector<double>& sc) {
  std::vector<std::size_t> order(idx.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    if (std::isnan(sc[a]) != std::isnan(sc[b])) return !std::isnan(sc[a]);
    return sc[a] > sc[b];
  });
  std::vector<std::int64_t> i2;
  std::vector<double> s2;
  for (auto o : order) i2.push_back(idx[o]), s2.push_back(sc[o]);
  idx.swap(i2);
  sc.swap(s2);
}

// Accepts row r (rr.ok) when every extra index scores like the missing index it pairs with:
// the kernel broke a tie differently. `selected` and `expected` are the row's set sizes.
void judge_ties(const RowScorer& scorer, std::int64_t r, const ScoreTolerance& tol,
                std::size_t selected, std::size_t expected, RowResult& rr) {
  for (auto m : rr.missing) rr.missing_scores.push_back(scorer(r, m));
  for (auto x : rr.extra) rr.extra_scores.push_back(scorer(r, x));
  sort_by_score(rr.missing, rr.missing_scores);
  sort_by_score(rr.extra, rr.extra_scores);
  if (rr.missing.size() != rr.extra.size()) {
    rr.why = fmt::format("{} indices selected, expected {}", selected, expected);
    return;
  }
  for (std::size_t i = 0; i < rr.missing.size(); ++i) {
    const double m = rr.missing_scores[i], x = rr.extra_scores[i];
    if (std::isnan(x)) {
      rr.why = fmt::format("index {} is not a candidate of this row", rr.extra[i]);
      return;
    }
    const double abs = std::fabs(x - m);
    const double rel = abs / (std::fabs(m) + 1e-8);
    rr.max_abs = std::max(rr.max_abs, abs);
    rr.max_rel = std::max(rr.max_rel, rel);
    if (!(abs <= tol.atol + tol.rtol * std::fabs(m))) {
      rr.scores_differ = true;
      rr.why = fmt::format(
          "index {} scores {:.6g} where the missing {} scores {:.6g} (beyond atol={} + "
          "rtol={})",
          rr.extra[i], x, rr.missing[i], m, tol.atol, tol.rtol);
      return;
    }
  }
  rr.ok = true;
  rr.ties = static_cast<std::int64_t>(rr.extra.size());
}

// The log of a failed comparison: the count of rows that differ, then how the first one does.
std::string mismatch_log(std::string_view name, const Tensor& expected, std::int64_t rows_bad,
                         std::int64_t rows, std::int64_t first_bad, const RowResult& first,
                         std::int64_t unwritten, std::optional<double> poison,
                         const RowScorer* scorer) {
  std::string log = fmt::format("output '{}' {}: {} of {} rows select a different set of indices",
                                name, shape_to_string(expected.shape()), rows_bad, rows);
  log += fmt::format("\n  row {}:", first_bad);
  if (!first.invalid.empty()) log += fmt::format(" invalid values {};", list_text(first.invalid));
  if (!first.duplicates.empty())
    log += fmt::format(" duplicated indices {};", list_text(first.duplicates));
  if (!first.missing.empty()) {
    log += fmt::format(" missing {}", list_text(first.missing));
    if (!first.missing_scores.empty())
      log += fmt::format(" (scores {})", scores_text(first.missing_scores));
    log += ";";
  }
  if (!first.extra.empty()) {
    log += fmt::format(" extra {}", list_text(first.extra));
    if (!first.extra_scores.empty())
      log += fmt::format(" (scores {})", scores_text(first.extra_scores));
    log += ";";
  }
  if (log.back() == ';') log.pop_back();
  if (!first.why.empty()) log += fmt::format("\n  {}", first.why);
  if (unwritten > 0) {
    log += fmt::format("\n  never written (still the poison value {}): {}",
                       static_cast<std::int64_t>(*poison), unwritten);
  }
  if (scorer == nullptr) log += "\n  (no scorer: ties cannot be told from wrong picks)";
  return log;
}

}  // namespace

CallVerdict compare_topk_sets(std::string_view name, const ResolvedEval& cfg,
                              const Tensor& expected, const Tensor& got, const RowScorer* scorer,
                              std::optional<double> poison) {
  if (expected.shape() != got.shape() || expected.rank() == 0) {
    throw Error(std::string(name),
                fmt::format("compare_topk_sets needs equal shapes of rank >= 1 ({} vs {})",
                            shape_to_string(expected.shape()), shape_to_string(got.shape())));
  }
  ScoreTolerance tol;
  tol.rtol = cfg.extra_number("topk_score_rtol", 1e-2);
  tol.atol = cfg.extra_number("topk_score_atol", 1e-6);
  const std::int64_t k = expected.shape().back();
  const std::int64_t rows = k > 0 ? expected.numel() / k : 0;

  CallVerdict v;
  std::int64_t rows_bad = 0, ties = 0, expected_total = 0, found_total = 0, unwritten = 0;
  std::int64_t first_bad = -1;
  RowResult first;
  std::vector<std::int64_t> e_row, g_row;
  for (std::int64_t r = 0; r < rows; ++r) {
    RowResult rr;
    unwritten += read_row(expected, got, r, k, poison, e_row, g_row, rr);
    diff_row_sets(e_row, g_row, rr);
    expected_total += static_cast<std::int64_t>(e_row.size());
    found_total += static_cast<std::int64_t>(e_row.size() - rr.missing.size());

    const bool structural = !rr.invalid.empty() || !rr.duplicates.empty();
    if (!structural && rr.missing.empty() && rr.extra.empty()) continue;
    rr.ok = false;
    if (!structural && scorer != nullptr)
      judge_ties(*scorer, r, tol, g_row.size(), e_row.size(), rr);
    v.max_abs_error = std::max(v.max_abs_error, rr.max_abs);
    v.max_rel_error = std::max(v.max_rel_error, rr.max_rel);
    if (rr.ok) {
      ties += rr.ties;
      found_total += rr.ties;
      continue;
    }
    if (!rr.scores_differ) {  // nothing to measure an error by
      v.max_abs_error = kInf;
      v.max_rel_error = kInf;
    }
    if (first_bad < 0) {
      first_bad = r;
      first = rr;
    }
    ++rows_bad;
  }

  const double matched =
      expected_total > 0 ? static_cast<double>(found_total) / static_cast<double>(expected_total)
                         : 1.0;
  Json& x = v.extra;
  x["policy"] = "topk_set";
  x["rows"] = rows;
  x["rows_mismatched"] = rows_bad;
  x["ties_accepted"] = ties;
  x["matched_ratio"] = matched;
  x["mismatches"] = rows_bad;
  x["numel"] = expected.numel();
  x["unwritten"] = unwritten;
  if (first_bad < 0) return v;

  v.status = EvaluationStatus::kIncorrectNumerical;
  x["first_mismatch"] = {{"output", std::string(name)},
                         {"row", first_bad},
                         {"missing", head_json(first.missing)},
                         {"extra", head_json(first.extra)}};
  v.log = mismatch_log(name, expected, rows_bad, rows, first_bad, first, unwritten, poison, scorer);
  return v;
}

RowScorer dsa_topk_indexer_scorer(const Definition& def, const reference::Arguments& args) {
  if (def.op_type != "dsa_paged" || dsa_interface(def) != DsaInterface::kTopkIndexer)
    throw Error(def.name, "dsa_topk_indexer_scorer needs a dsa_topk_indexer definition");
  const Tensor& q = args.tensor("q_index_fp8");
  const Tensor& cache = args.tensor("k_index_cache_fp8");
  const Tensor& weights = args.tensor("weights");
  const Tensor& seq_lens = args.tensor("seq_lens");
  const Tensor& table = args.tensor("block_table");
  if (q.rank() != 3 || cache.rank() != 4 || weights.rank() != 2 || table.rank() != 2 ||
      seq_lens.rank() != 1) {
    throw Error(def.name, "dsa_topk_indexer_scorer: inputs of unexpected rank");
  }
  struct State {
    std::int64_t heads = 0, dim = 0, page_size = 0, num_pages = 0;
    std::vector<float> q, w;
    std::vector<std::int64_t> lens;
    std::vector<std::unordered_map<std::int64_t, std::int64_t>> page_slot;  // page -> slot
    Tensor cache;
  };
  auto st = std::make_shared<State>();
  st->heads = q.dim(1);
  st->dim = q.dim(2);
  st->num_pages = cache.dim(0);
  st->page_size = cache.dim(1);
  if (cache.dim(3) != st->dim + 4)
    throw Error(def.name, "dsa_topk_indexer_scorer: k_index_cache_fp8 is not head_dim + 4 bytes");
  const Tensor qf = to_float32(q);
  const Tensor wf = to_float32(weights);
  st->q.assign(qf.data<float>(), qf.data<float>() + qf.numel());
  st->w.assign(wf.data<float>(), wf.data<float>() + wf.numel());
  st->cache = cache;
  const std::int64_t batch = q.dim(0), max_pages = table.dim(1);
  st->page_slot.resize(static_cast<std::size_t>(batch));
  for (std::int64_t b = 0; b < batch; ++b) {
    const auto len = static_cast<std::int64_t>(seq_lens.get(b));
    st->lens.push_back(len);
    const std::int64_t used = std::min(max_pages, (len + st->page_size - 1) / st->page_size);
    for (std::int64_t i = 0; i < used; ++i)
      st->page_slot[static_cast<std::size_t>(b)].emplace(
          static_cast<std::int64_t>(table.get(b * max_pages + i)), i);
  }
  return [st](std::int64_t row, std::int64_t index) -> double {
    constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
    if (row < 0 || row >= static_cast<std::int64_t>(st->lens.size()) || index < 0) return kNaN;
    const std::int64_t ps = st->page_size;
    const std::int64_t page = index / ps, off = index % ps;
    const auto& slots = st->page_slot[static_cast<std::size_t>(row)];
    const auto it = slots.find(page);
    if (it == slots.end() || page >= st->num_pages) return kNaN;
    if (it->second * ps + off >= st->lens[static_cast<std::size_t>(row)]) return kNaN;
    const std::int64_t d = st->dim;
    const auto* bytes = static_cast<const std::uint8_t*>(st->cache.raw());
    const std::uint8_t* pg = bytes + page * ps * (d + 4);
    float scale;
    std::memcpy(&scale, pg + ps * d + off * 4, sizeof scale);
    const std::uint8_t* vals = pg + off * d;
    double total = 0;
    for (std::int64_t h = 0; h < st->heads; ++h) {
      const float* qh = st->q.data() + (row * st->heads + h) * d;
      double s = 0;
      for (std::int64_t e = 0; e < d; ++e) {
        const double key = static_cast<double>(numeric::fp8_e4m3fn_to_float(vals[e]) * scale);
        s += static_cast<double>(qh[e]) * key;
      }
      if (s > 0)
        total += s * static_cast<double>(st->w[static_cast<std::size_t>(row * st->heads + h)]);
    }
    return total;
  };
}

}  // namespace fib::bench
