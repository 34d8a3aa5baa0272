// Helpers for the attention reference tests: valid random index layouts (indptr, distinct page
// ids, last-page lengths), small definitions written inline, and a comparison that knows about
// causal rows with no visible key.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "fib/reference/reference.h"
#include "fib/tensor/tensor.h"
#include "fib/trace/definition.h"
#include "reference_test_util.h"

namespace fib::testing {

inline Tensor int32_tensor(const std::vector<std::int64_t>& v) {
  Tensor t(DType::kInt32, {static_cast<std::int64_t>(v.size())});
  for (std::size_t i = 0; i < v.size(); ++i)
    t.data<std::int32_t>()[i] = static_cast<std::int32_t>(v[i]);
  return t;
}

// The var axes of `def` among `values` (workloads bind only var axes; some definitions of a
// family have a var batch_size and others do not).
inline AxisValues var_axes_of(const Definition& def,
                              const std::map<std::string, std::int64_t>& values) {
  AxisValues out;
  for (const auto& name : def.var_axes()) {
    auto it = values.find(name);
    if (it != values.end()) out.emplace_back(name, it->second);
  }
  return out;
}

inline Definition inline_definition(const std::string& json) {
  Diagnostics diag;
  ReadContext ctx{"test", &diag};
  auto d = definition_from_json(Json::parse(json), ctx);
  EXPECT_TRUE(d) << diag.to_string();
  return *d;
}

// A paged KV layout for given per-sequence KV lengths: sequence b gets ceil(kv_len / page_size)
// distinct pages drawn at random from a cache with a few spare pages, the last one holding the
// remainder (in [1, page_size]).
struct PagedLayout {
  std::vector<std::int64_t> kv_indptr{0}, kv_indices, last_page_len;
  std::int64_t num_pages = 0;
};

inline PagedLayout paged_layout(const std::vector<std::int64_t>& kv_lens, std::int64_t page_size,
                                std::mt19937_64& rng) {
  PagedLayout l;
  std::int64_t used = 0;
  for (std::int64_t len : kv_lens) used += (len + page_size - 1) / page_size;
  l.num_pages = used + 3;
  std::vector<std::int64_t> ids(static_cast<std::size_t>(l.num_pages));
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  std::size_t next = 0;
  for (std::int64_t len : kv_lens) {
    const std::int64_t pages = (len + page_size - 1) / page_size;
    for (std::int64_t i = 0; i < pages; ++i) l.kv_indices.push_back(ids[next++]);
    l.kv_indptr.push_back(static_cast<std::int64_t>(l.kv_indices.size()));
    l.last_page_len.push_back(pages == 0 ? 1 : len - (pages - 1) * page_size);
  }
  return l;
}

inline std::vector<std::int64_t> indptr_of(const std::vector<std::int64_t>& lens) {
  std::vector<std::int64_t> p{0};
  for (std::int64_t n : lens) p.push_back(p.back() + n);
  return p;
}

// Query rows whose bottom-right causal window is empty (query i of a sequence with q_len
// queries and kv_len keys, i + kv_len - q_len < 0).
inline std::vector<bool> masked_rows(const std::vector<std::int64_t>& q_lens,
                                     const std::vector<std::int64_t>& kv_lens) {
  std::vector<bool> m;
  for (std::size_t b = 0; b < q_lens.size(); ++b) {
    for (std::int64_t i = 0; i < q_lens[b]; ++i)
      m.push_back(kv_lens[b] > 0 && i + kv_lens[b] - q_lens[b] < 0);
  }
  return m;
}

struct AttentionStats {
  double out_err = 0, lse_err = 0;                // worst absolute differences seen
  std::int64_t out_total = 0, out_differing = 0;  // output elements compared, and not bit-equal
  int masked_rows_zero = 0;  // masked rows where the reference gave output 0 (loop style)
  int masked_rows_nan = 0;   // ... and where it gave NaN (vectorized style)
};

// Native vs PyTorch `output`/`lse`. On rows flagged in `masked` (by query row), the native kernel
// must give output 0 and lse -inf, and the reference lse -inf and an output of 0 or NaN (the two
// reference styles, corpus inconsistency 3); every other element must be within tolerance.
inline ::testing::AssertionResult attention_close(const reference::Outputs& native,
                                                  const reference::Outputs& torch,
                                                  const std::vector<bool>& masked, double out_atol,
                                                  double out_rtol, double lse_atol, double lse_rtol,
                                                  AttentionStats& stats) {
  const Tensor& no = native.at("output");
  const Tensor& nl = native.at("lse");
  Tensor to = torch.at("output").clone();
  const Tensor& tl = torch.at("lse");
  if (no.shape() != to.shape() || nl.shape() != tl.shape())
    return ::testing::AssertionFailure() << "shape mismatch";
  const std::int64_t rows = nl.dim(0), heads = nl.dim(1), dv = no.dim(2);
  for (std::int64_t r = 0; r < rows && r < static_cast<std::int64_t>(masked.size()); ++r) {
    if (!masked[static_cast<std::size_t>(r)]) continue;
    bool any_nan = false;
    constexpr double kNegInf = -std::numeric_limits<double>::infinity();
    for (std::int64_t h = 0; h < heads; ++h) {
      if (nl.get(r * heads + h) != kNegInf || tl.get(r * heads + h) != kNegInf) {
        return ::testing::AssertionFailure()
               << "masked row " << r << " head " << h << ": lse native " << nl.get(r * heads + h)
               << ", reference " << tl.get(r * heads + h);
      }
      for (std::int64_t e = 0; e < dv; ++e) {
        const std::int64_t i = (r * heads + h) * dv + e;
        const double ref = to.get(i);
        if (no.get(i) != 0.0 || !(ref == 0.0 || std::isnan(ref))) {
          return ::testing::AssertionFailure()
                 << "masked row " << r << ": output native " << no.get(i) << ", reference " << ref;
        }
        if (std::isnan(ref)) {
          any_nan = true;
          to.set(i, 0.0);
        }
      }
    }
    ++(any_nan ? stats.masked_rows_nan : stats.masked_rows_zero);
  }
  for (std::int64_t i = 0; i < no.numel(); ++i) {
    if (std::isfinite(to.get(i)))
      stats.out_err = std::max(stats.out_err, std::fabs(no.get(i) - to.get(i)));
    ++stats.out_total;
    if (no.get(i) != to.get(i)) ++stats.out_differing;
  }
  for (std::int64_t i = 0; i < nl.numel(); ++i) {
    if (std::isfinite(tl.get(i)))
      stats.lse_err = std::max(stats.lse_err, std::fabs(nl.get(i) - tl.get(i)));
  }
  auto out = tensors_close(no, to, out_atol, out_rtol);
  if (!out) return out << " (output)";
  auto lse = tensors_close(nl, tl, lse_atol, lse_rtol);
  if (!lse) return lse << " (lse)";
  return ::testing::AssertionSuccess();
}

inline void print_stats(const char* family, const AttentionStats& s, int definitions, int calls) {
  std::printf(
      "[ parity  ] %s: %d definitions, %d calls; max |d output| %.3g (%lld of %lld elements not "
      "bit-equal), max |d lse| %.3g; masked rows: %d reference 0 (loop style), %d reference NaN "
      "(vectorized)\n",
      family, definitions, calls, s.out_err, static_cast<long long>(s.out_differing),
      static_cast<long long>(s.out_total), s.lse_err, s.masked_rows_zero, s.masked_rows_nan);
}

}  // namespace fib::testing
