// dsa_paged (DeepSeek-V3.2) holds two interfaces: sparse attention and the top-k indexer.
//
// Sparse attention: absorbed MLA where every token attends its own
// list of KV tokens, sparse_indices[t, :], instead of a causal window. An index is a token of
// the cache flattened to [num_pages * page_size] (page * page_size + offset); -1 entries are
// padding and are dropped, every other entry is used as given (a repeated index counts twice,
// as in the reference's gather). logits = sm_scale * (q_nope . ckv + q_pe . kpe) in fp32,
// output = softmax @ ckv rounded once to the output dtype, lse = logsumexp / ln 2; a token with
// no valid index gets output 0 and lse -inf.
//
// The top-k indexer (the "lightning indexer", fp8, deep_gemm cache layout).
//
// The key cache arrives as bytes [num_pages, page_size, 1, head_dim + 4], but that view does not
// interleave values and scales per token: each page is page_size * head_dim fp8 e4m3fn values,
// token-major, followed by page_size little-endian float32 scales. K[token] = fp8 * scale.
// For batch element b with L = seq_lens[b] tokens (pages block_table[b, :ceil(L / page_size)]):
//   score[l] = sum_h relu(q[b, h] . K[l]) * weights[b, h]     (q is fp8 with no scale; fp32 math)
// and the output row holds the global tokens (page * page_size + offset) of the min(topk, L)
// best scores in descending order, then -1. seq_len 0 gives a row of -1.
//
// torch.topk leaves the order of equal scores unspecified; here ties go to the lower position,
// and NaN ranks above every number, as torch.topk ranks it. Which of two tied tokens is picked
// can therefore differ from the GPU; the upstream evaluator compares the scores at the picked
// indices, not the indices.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <numeric>

#include "fib/tensor/numeric.h"
#include "reference/attention/attention_core.h"

namespace fib::reference::detail {

namespace {

using namespace attention;

class DsaSparseAttention final : public Kernel {
 public:
  std::string_view id() const override { return "dsa_paged.sparse_attention"; }

  bool supports(const Definition& def, std::string* why) const override {
    if (def.op_type != "dsa_paged") return false;
    if (def.input("sparse_indices") == nullptr) {
      // The top-k indexer explains itself when the definition is one; otherwise say what fits.
      if (def.input("q_index_fp8") == nullptr) *why = "expects sparse_indices (sparse attention)";
      return false;
    }
    if (!shape_is(def.input("q_nope"), {"num_tokens", "num_qo_heads", "head_dim_ckv"}) ||
        !shape_is(def.input("q_pe"), {"num_tokens", "num_qo_heads", "head_dim_kpe"}) ||
        !shape_is(def.input("ckv_cache"), {"num_pages", "page_size", "head_dim_ckv"}) ||
        !shape_is(def.input("kpe_cache"), {"num_pages", "page_size", "head_dim_kpe"}) ||
        !shape_is(def.input("sparse_indices"), {"num_tokens", "topk"}) ||
        !has_scalar(def, "sm_scale") ||
        !shape_is(def.output("output"), {"num_tokens", "num_qo_heads", "head_dim_ckv"}) ||
        !shape_is(def.output("lse"), {"num_tokens", "num_qo_heads"})) {
      *why =
          "expects q_nope [num_tokens, num_qo_heads, head_dim_ckv], q_pe [num_tokens, "
          "num_qo_heads, head_dim_kpe], "
          "ckv_cache [num_pages, page_size, head_dim_ckv], kpe_cache [num_pages, page_size, "
          "head_dim_kpe], "
          "sparse_indices [num_tokens, topk], scalar sm_scale -> output [num_tokens, num_qo_heads, "
          "head_dim_ckv], "
          "lse [num_tokens, num_qo_heads]";
      return false;
    }
    for (const char* name : {"q_nope", "q_pe", "ckv_cache", "kpe_cache"}) {
      if (!float_dtype_ok(def.input(name))) {
        *why = "expects q_nope, q_pe, ckv_cache and kpe_cache in bfloat16, float16 or float32";
        return false;
      }
    }
    return true;
  }

  Outputs run(const CallContext& ctx, const Arguments& args) const override {
    const Definition& def = ctx.definition;
    Problem p;
    mla_problem(ctx, args, p);
    const Tensor& idx = args.tensor("sparse_indices");
    const std::vector<std::int64_t> indices = as_ints(idx);
    const std::int64_t topk = idx.dim(1);
    const std::int64_t tokens = axis(ctx, "num_pages") * axis(ctx, "page_size");
    for (std::int64_t t = 0; t < p.rows; ++t) {
      Sequence seq{t, t + 1, static_cast<std::int64_t>(p.slots.size()), 0};
      for (std::int64_t j = 0; j < topk; ++j) {
        const std::int64_t v = indices[static_cast<std::size_t>(t * topk + j)];
        if (v == -1) continue;
        // PyTorch would wrap other negative values around from the end; that is never meant.
        if (v < 0 || v >= tokens) {
          throw Error(
              def.name,
              fmt::format("sparse_indices[{}, {}] = {} is neither -1 nor a token of the {}-token "
                          "cache",
                          t, j, v, tokens));
        }
        p.slots.push_back(v);
      }
      seq.key_end = static_cast<std::int64_t>(p.slots.size());
      p.sequences.push_back(seq);
    }
    return finish(ctx, attend(p, ctx.threads, def.name));
  }
};

}  // namespace

namespace {

using namespace attention;

bool is_int(const TensorSpec* s) {
  return s != nullptr && (s->dtype == DType::kInt32 || s->dtype == DType::kInt64);
}

class DsaTopkIndexer final : public Kernel {
 public:
  std::string_view id() const override { return "dsa_paged.topk_indexer"; }

  bool supports(const Definition& def, std::string* why) const override {
    if (def.op_type != "dsa_paged" || def.input("q_index_fp8") == nullptr) return false;
    const TensorSpec* q = def.input("q_index_fp8");
    const TensorSpec* k = def.input("k_index_cache_fp8");
    const TensorSpec* out = def.outputs.size() == 1 ? &def.outputs[0] : nullptr;
    if (!shape_is(q, {"batch_size", "num_index_heads", "index_head_dim"}) ||
        !shape_is(k, {"num_pages", "page_size", "kv_cache_num_heads", "head_dim_with_scale"}) ||
        !shape_is(def.input("weights"), {"batch_size", "num_index_heads"}) ||
        !shape_is(def.input("seq_lens"), {"batch_size"}) ||
        !shape_is(def.input("block_table"), {"batch_size", "max_num_pages"}) ||
        !shape_is(out, {"batch_size", "topk"})) {
      *why =
          "expects q_index_fp8 [batch_size, num_index_heads, index_head_dim], k_index_cache_fp8 "
          "[num_pages, "
          "page_size, kv_cache_num_heads, head_dim_with_scale], weights [batch_size, "
          "num_index_heads], seq_lens "
          "[batch_size], block_table [batch_size, max_num_pages] -> one output [batch_size, topk]";
      return false;
    }
    if (q->dtype != DType::kFloat8E4M3FN ||
        (k->dtype != DType::kInt8 && k->dtype != DType::kUInt8) ||
        !dtype_is_float(def.input("weights")->dtype) || !is_int(def.input("seq_lens")) ||
        !is_int(def.input("block_table")) || !is_int(out)) {
      *why =
          "expects q_index_fp8 in float8_e4m3fn, k_index_cache_fp8 as int8/uint8 bytes, float "
          "weights and "
          "integer seq_lens, block_table and output";
      return false;
    }
    // The packed layout is defined for one cache head of head_dim fp8 bytes plus a 4-byte scale.
    const std::int64_t heads = const_axis(def, "kv_cache_num_heads");
    const std::int64_t d = const_axis(def, "index_head_dim"),
                       dws = const_axis(def, "head_dim_with_scale");
    if (heads != 1 || d <= 0 || dws != d + 4) {
      *why =
          "expects const kv_cache_num_heads = 1 and head_dim_with_scale = index_head_dim + 4 "
          "(deep_gemm layout)";
      return false;
    }
    return true;
  }

  Outputs run(const CallContext& ctx, const Arguments& args) const override {
    const Definition& def = ctx.definition;
    const std::int64_t batch = axis(ctx, "batch_size"), heads = axis(ctx, "num_index_heads");
    const std::int64_t d = axis(ctx, "index_head_dim"), ps = axis(ctx, "page_size");
    const std::int64_t num_pages = axis(ctx, "num_pages"), max_pages = axis(ctx, "max_num_pages");
    const std::int64_t topk = axis(ctx, "topk");
    const std::vector<float> q = as_floats(args.tensor("q_index_fp8"));
    const std::vector<float> w = as_floats(args.tensor("weights"));
    const std::vector<std::int64_t> seq_lens = as_ints(args.tensor("seq_lens"));
    const std::vector<std::int64_t> table = as_ints(args.tensor("block_table"));
    const auto* cache =
        reinterpret_cast<const unsigned char*>(args.tensor("k_index_cache_fp8").bytes().data());
    const std::int64_t page_bytes = ps * (d + 4);
    std::array<float, 256> fp8{};
    for (int i = 0; i < 256; ++i)
      fp8[static_cast<std::size_t>(i)] = numeric::fp8_e4m3fn_to_float(static_cast<std::uint8_t>(i));

    std::vector<std::int64_t> result(static_cast<std::size_t>(batch * topk), -1);
    for (std::int64_t b = 0; b < batch; ++b) {
      const std::int64_t len = seq_lens[static_cast<std::size_t>(b)];
      if (len < 0 || len > max_pages * ps) {
        throw Error(def.name,
                    fmt::format("seq_lens[{}] = {} is outside [0, max_num_pages * page_size = {}]",
                                b, len, max_pages * ps));
      }
      if (len == 0) continue;
      const std::int64_t* pages = table.data() + b * max_pages;
      for (std::int64_t i = 0; i < (len + ps - 1) / ps; ++i) {
        if (pages[i] < 0 || pages[i] >= num_pages) {
          throw Error(def.name,
                      fmt::format("block_table[{}, {}] = {} is not a page of the {}-page cache", b,
                                  i, pages[i], num_pages));
        }
      }
      std::vector<float> score(static_cast<std::size_t>(len));
      parallel_for(len, ctx.threads, 64, [&](std::int64_t begin, std::int64_t end) {
        std::vector<float> key(static_cast<std::size_t>(d));
        for (std::int64_t l = begin; l < end; ++l) {
          const unsigned char* page = cache + pages[l / ps] * page_bytes;
          const std::int64_t off = l % ps;
          float scale;
          std::memcpy(&scale, page + ps * d + off * 4, sizeof scale);  // little-endian, as the host
          const unsigned char* vals = page + off * d;
          for (std::int64_t e = 0; e < d; ++e)
            key[static_cast<std::size_t>(e)] = fp8[vals[e]] * scale;
          float total = 0.f;
          for (std::int64_t h = 0; h < heads; ++h) {
            const float* qh = q.data() + (b * heads + h) * d;
            float lane[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
            std::int64_t e = 0;
            for (; e + 8 <= d; e += 8) {
              for (int u = 0; u < 8; ++u)
                lane[u] += qh[e + u] * key[static_cast<std::size_t>(e + u)];
            }
            float s = ((lane[0] + lane[4]) + (lane[1] + lane[5])) +
                      ((lane[2] + lane[6]) + (lane[3] + lane[7]));
            for (; e < d; ++e) s += qh[e] * key[static_cast<std::size_t>(e)];
            const float relu = s < 0.f ? 0.f : s;  // NaN stays NaN, as torch.relu keeps it
            total += relu * w[static_cast<std::size_t>(b * heads + h)];
          }
          score[static_cast<std::size_t>(l)] = total;
        }
      });
      const std::int64_t take = std::min(topk, len);
      std::vector<std::int64_t> order(static_cast<std::size_t>(len));
      std::iota(order.begin(), order.end(), 0);
      std::partial_sort(order.begin(), order.begin() + take, order.end(),
                        [&score](std::int64_t x, std::int64_t y) {
                          const float a = score[static_cast<std::size_t>(x)],
                                      c = score[static_cast<std::size_t>(y)];
                          const bool na = std::isnan(a), nc = std::isnan(c);
                          if (na != nc) return na;
                          if (!na && a != c) return a > c;
                          return x < y;
                        });
      for (std::int64_t i = 0; i < take; ++i) {
        const std::int64_t l = order[static_cast<std::size_t>(i)];
        result[static_cast<std::size_t>(b * topk + i)] = pages[l / ps] * ps + l % ps;
      }
    }
    Tensor t = make_output(ctx, def.outputs[0].name);
    for (std::int64_t i = 0; i < t.numel(); ++i)
      t.set(i, static_cast<double>(result[static_cast<std::size_t>(i)]));
    Outputs out;
    out.emplace(def.outputs[0].name, std::move(t));
    return out;
  }
};

}  // namespace

// Both interfaces, told apart by the definition's inputs.
void add_dsa_paged(KernelList& list) {
  list.push_back(std::make_unique<DsaSparseAttention>());
  list.push_back(std::make_unique<DsaTopkIndexer>());
}

}  // namespace fib::reference::detail
