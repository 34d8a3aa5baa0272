#include "reference/attention/attention_core.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>

#include "fib/tensor/numeric.h"

namespace fib::reference::detail::attention {

namespace {

inline float load(float x) { return x; }
inline float load(std::uint16_t bf16) { return numeric::bf16_to_float(bf16); }

// fp32 dot product with eight independent partial sums, so that the loop vectorizes without
// reassociation flags; PyTorch's matmul also sums in blocks, so neither order is "the" order,
// and the difference is far below one bfloat16 ulp of the result.
template <typename T>
float dot(const float* a, const T* b, std::int64_t n) {
  float lane[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
  std::int64_t d = 0;
  for (; d + 8 <= n; d += 8) {
    for (int k = 0; k < 8; ++k) lane[k] += a[d + k] * load(b[d + k]);
  }
  float s =
      ((lane[0] + lane[4]) + (lane[1] + lane[5])) + ((lane[2] + lane[6]) + (lane[3] + lane[7]));
  for (; d < n; ++d) s += a[d] * load(b[d]);
  return s;
}

// Slots a [slots, heads, dim] tensor holds.
std::int64_t slot_count(const Tensor& t, std::int64_t heads, std::int64_t dim) {
  return heads * dim == 0 ? 0 : t.numel() / (heads * dim);
}

// T is the storage type every float operand has been brought to (bfloat16 bits or float).
template <typename T>
void run_core(const Problem& p, const std::vector<const T*>& q, const std::vector<const T*>& k,
              const T* v, const std::vector<std::int64_t>& row_seq, std::int64_t max_keys,
              unsigned threads, Result& r) {
  const std::int64_t hq = p.qo_heads, group = p.qo_heads / p.kv_heads, dv = p.v_dim;
  const std::size_t nparts = p.parts.size();
  const auto ln2 = static_cast<float>(std::numbers::ln2);
  // Work items are (row, head) pairs, dealt out round-robin: under a causal mask later rows see
  // more keys, so contiguous ranges would leave the thread with the first rows idle early.
  const std::int64_t items = p.rows * hq;
  const std::int64_t blocks = std::min<std::int64_t>(items, std::max(1u, threads));
  parallel_for(blocks, threads, 1, [&](std::int64_t first_block, std::int64_t last_block) {
    std::vector<float> logits(static_cast<std::size_t>(std::max<std::int64_t>(1, max_keys)));
    std::vector<float> acc(static_cast<std::size_t>(dv));
    std::vector<std::vector<float>> qrow(nparts);
    for (std::size_t i = 0; i < nparts; ++i)
      qrow[i].resize(static_cast<std::size_t>(p.parts[i].dim));
    for (std::int64_t block = first_block; block < last_block; ++block) {
      for (std::int64_t idx = block; idx < items; idx += blocks) {
        const std::int64_t row = idx / hq, h = idx % hq;
        const std::int64_t s = row_seq[static_cast<std::size_t>(row)];
        if (s < 0) continue;
        const Sequence& seq = p.sequences[static_cast<std::size_t>(s)];
        const std::int64_t q_len = seq.q_end - seq.q_begin, kv_len = seq.key_end - seq.key_begin;
        // Bottom-right causal window. A query that sees no key (only when kv_len < q_len) keeps
        // output 0 and lse -inf, as the loop-style references leave it; the vectorized ones
        // produce NaN there (softmax over nothing but -inf).
        const std::int64_t visible = std::min(kv_len, (row - seq.q_begin) + 1 + (kv_len - q_len));
        if (visible <= 0) continue;
        const std::int64_t kvh = h / group;
        for (std::size_t i = 0; i < nparts; ++i) {
          const std::int64_t d = p.parts[i].dim;
          const T* src = q[i] + (row * hq + h) * d;
          for (std::int64_t e = 0; e < d; ++e) qrow[i][static_cast<std::size_t>(e)] = load(src[e]);
        }
        const std::int64_t* slots = p.slots.data() + seq.key_begin;
        float m = -std::numeric_limits<float>::infinity();
        for (std::int64_t j = 0; j < visible; ++j) {
          float logit = 0.f;
          for (std::size_t i = 0; i < nparts; ++i) {
            const std::int64_t d = p.parts[i].dim;
            const float part = dot(qrow[i].data(), k[i] + (slots[j] * p.kv_heads + kvh) * d, d);
            logit = i == 0 ? part : logit + part;
          }
          logit *= p.sm_scale;
          logits[static_cast<std::size_t>(j)] = logit;
          m = std::max(m, logit);
        }
        // Natural-exp softmax; its log-sum-exp is reported in base 2 (divided by ln 2), as the
        // references do with logsumexp(...) / math.log(2.0).
        float sum = 0.f;
        for (std::int64_t j = 0; j < visible; ++j) {
          float& e = logits[static_cast<std::size_t>(j)];
          e = std::exp(e - m);
          sum += e;
        }
        r.lse[static_cast<std::size_t>(row * hq + h)] = (m + std::log(sum)) / ln2;
        const float inv_sum = 1.0f / sum;
        std::fill(acc.begin(), acc.end(), 0.f);
        for (std::int64_t j = 0; j < visible; ++j) {
          const float w = logits[static_cast<std::size_t>(j)] * inv_sum;
          const T* vr = v + (slots[j] * p.kv_heads + kvh) * dv;
          for (std::int64_t e = 0; e < dv; ++e) acc[static_cast<std::size_t>(e)] += w * load(vr[e]);
        }
        std::copy(acc.begin(), acc.end(), r.out.begin() + (row * hq + h) * dv);
      }
    }
  });
}

template <typename T>
const T* storage(const Tensor& t) {
  return t.data<T>();
}

}  // namespace

Result attend(const Problem& p, unsigned threads, const std::string& def_name) {
  if (p.qo_heads <= 0 || p.kv_heads <= 0 || p.qo_heads % p.kv_heads != 0) {
    throw Error(def_name, fmt::format("{} query heads cannot share {} kv heads evenly", p.qo_heads,
                                      p.kv_heads));
  }
  // Every slot must exist in every k and v tensor.
  std::int64_t slots_held = slot_count(*p.v, p.kv_heads, p.v_dim);
  for (const auto& part : p.parts)
    slots_held = std::min(slots_held, slot_count(*part.k, p.kv_heads, part.dim));
  for (std::size_t i = 0; i < p.slots.size(); ++i) {
    if (p.slots[i] < 0 || p.slots[i] >= slots_held) {
      throw Error(def_name,
                  fmt::format("a sequence reads KV token {}, but the cache holds {} tokens",
                              p.slots[i], slots_held));
    }
  }
  // Each query row belongs to at most one sequence, so threads never write the same row.
  std::vector<std::int64_t> row_seq(static_cast<std::size_t>(p.rows), -1);
  std::int64_t max_keys = 0;
  for (std::size_t s = 0; s < p.sequences.size(); ++s) {
    const Sequence& seq = p.sequences[s];
    if (seq.q_begin < 0 || seq.q_end > p.rows || seq.q_begin > seq.q_end) {
      throw Error(
          def_name,
          fmt::format("sequence {} has query rows [{}, {}), outside the {} rows of the query", s,
                      seq.q_begin, seq.q_end, p.rows));
    }
    for (std::int64_t row = seq.q_begin; row < seq.q_end; ++row) {
      auto& owner = row_seq[static_cast<std::size_t>(row)];
      if (owner >= 0) {
        throw Error(def_name,
                    fmt::format("query row {} belongs to sequences {} and {}", row, owner, s));
      }
      owner = static_cast<std::int64_t>(s);
    }
    max_keys = std::max(max_keys, seq.key_end - seq.key_begin);
  }
  Result r;
  r.out.assign(static_cast<std::size_t>(p.rows * p.qo_heads * p.v_dim), 0.f);
  r.lse.assign(static_cast<std::size_t>(p.rows * p.qo_heads),
               -std::numeric_limits<float>::infinity());

  // bfloat16 operands (every corpus definition) are read in place; anything else is brought to
  // float32 once, which is exact for every narrower float format.
  bool all_bf16 = p.v->dtype() == DType::kBFloat16;
  for (const auto& part : p.parts) {
    all_bf16 =
        all_bf16 && part.q->dtype() == DType::kBFloat16 && part.k->dtype() == DType::kBFloat16;
  }
  if (all_bf16) {
    std::vector<const std::uint16_t*> q, k;
    for (const auto& part : p.parts) {
      q.push_back(storage<std::uint16_t>(*part.q));
      k.push_back(storage<std::uint16_t>(*part.k));
    }
    run_core<std::uint16_t>(p, q, k, storage<std::uint16_t>(*p.v), row_seq, max_keys, threads, r);
  } else {
    std::vector<Tensor> keep;
    auto f32 = [&keep](const Tensor& t) -> const float* {
      keep.push_back(t.dtype() == DType::kFloat32 ? t : to_float32(t));
      return keep.back().data<float>();
    };
    keep.reserve(2 * p.parts.size() + 1);
    std::vector<const float*> q, k;
    for (const auto& part : p.parts) {
      q.push_back(f32(*part.q));
      k.push_back(f32(*part.k));
    }
    run_core<float>(p, q, k, f32(*p.v), row_seq, max_keys, threads, r);
  }
  return r;
}

Outputs run_ragged_prefill(const CallContext& ctx, const Arguments& args, std::int64_t qo_heads,
                           std::int64_t kv_heads, std::int64_t qk_dim, std::int64_t v_dim) {
  const std::string& name = ctx.definition.name;
  const Tensor& q = args.tensor("q");
  const Tensor& k = args.tensor("k");
  const Tensor& v = args.tensor("v");
  Problem p;
  p.rows = q.dim(0);
  p.qo_heads = qo_heads;
  p.kv_heads = kv_heads;
  p.parts = {{&q, &k, qk_dim}};
  p.v = &v;
  p.v_dim = v_dim;
  p.sm_scale = static_cast<float>(args.scalar_double("sm_scale"));
  const std::vector<std::int64_t> qo =
      checked_indptr(args.tensor("qo_indptr"), p.rows, "qo_indptr", name);
  const std::vector<std::int64_t> kv =
      checked_indptr(args.tensor("kv_indptr"), k.dim(0), "kv_indptr", name);
  if (kv.size() != qo.size()) {
    throw Error(name,
                fmt::format("qo_indptr has {} entries and kv_indptr {}", qo.size(), kv.size()));
  }
  for (std::int64_t t = 0; t < k.dim(0); ++t) p.slots.push_back(t);
  for (std::size_t b = 0; b + 1 < qo.size(); ++b)
    p.sequences.push_back({qo[b], qo[b + 1], kv[b], kv[b + 1]});
  return finish(ctx, attend(p, ctx.threads, name));
}

void mla_problem(const CallContext& ctx, const Arguments& args, Problem& p) {
  const Tensor& ckv = args.tensor("ckv_cache");
  p.rows = args.tensor("q_nope").dim(0);
  p.qo_heads = axis(ctx, "num_qo_heads");
  p.kv_heads = 1;
  p.parts = {{&args.tensor("q_nope"), &ckv, axis(ctx, "head_dim_ckv")},
             {&args.tensor("q_pe"), &args.tensor("kpe_cache"), axis(ctx, "head_dim_kpe")}};
  p.v = &ckv;
  p.v_dim = axis(ctx, "head_dim_ckv");
  p.sm_scale = static_cast<float>(args.scalar_double("sm_scale"));
}

Outputs finish(const CallContext& ctx, Result&& r) {
  Outputs out;
  Tensor o = make_output(ctx, "output");
  store_floats(r.out, o);
  out.emplace("output", std::move(o));
  Tensor l = make_output(ctx, "lse");
  store_floats(r.lse, l);
  out.emplace("lse", std::move(l));
  return out;
}

std::vector<std::int64_t> as_ints(const Tensor& t) {
  std::vector<std::int64_t> v(static_cast<std::size_t>(t.numel()));
  if (t.dtype() == DType::kInt32) {
    const std::int32_t* p = t.data<std::int32_t>();
    std::copy(p, p + t.numel(), v.begin());
  } else if (t.dtype() == DType::kInt64) {
    const std::int64_t* p = t.data<std::int64_t>();
    std::copy(p, p + t.numel(), v.begin());
  } else {
    for (std::int64_t i = 0; i < t.numel(); ++i)
      v[static_cast<std::size_t>(i)] = static_cast<std::int64_t>(t.get(i));
  }
  return v;
}

std::vector<std::int64_t> checked_indptr(const Tensor& t, std::int64_t limit, std::string_view what,
                                         const std::string& def_name) {
  std::vector<std::int64_t> v = as_ints(t);
  if (v.empty())
    throw Error(def_name,
                fmt::format("{} is empty; it needs one entry more than there are sequences", what));
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (v[i] < 0 || v[i] > limit || (i > 0 && v[i] < v[i - 1])) {
      throw Error(def_name,
                  fmt::format("{}[{}] = {}: an indptr must be non-decreasing within [0, {}]", what,
                              i, v[i], limit));
    }
  }
  return v;
}

PagedKv::PagedKv(const Arguments& args, std::int64_t page_size, std::int64_t num_pages,
                 std::string def_name)
    : page_size_(page_size), num_pages_(num_pages), def_name_(std::move(def_name)) {
  indices_ = as_ints(args.tensor("kv_indices"));
  indptr_ = checked_indptr(args.tensor("kv_indptr"), static_cast<std::int64_t>(indices_.size()),
                           "kv_indptr", def_name_);
  has_last_len_ = args.tensors.count("kv_last_page_len") > 0;
  if (has_last_len_) {
    last_len_ = as_ints(args.tensor("kv_last_page_len"));
    if (static_cast<std::int64_t>(last_len_.size()) < sequences()) {
      throw Error(def_name_, fmt::format("kv_last_page_len has {} entries for {} sequences",
                                         last_len_.size(), sequences()));
    }
  }
}

void PagedKv::add(std::int64_t b, std::int64_t q_begin, std::int64_t q_end, Problem& p) const {
  if (b >= sequences()) {
    throw Error(def_name_, fmt::format("kv_indptr has {} entries; sequence {} needs {}",
                                       indptr_.size(), b, b + 2));
  }
  const std::int64_t first = indptr_[static_cast<std::size_t>(b)],
                     last = indptr_[static_cast<std::size_t>(b) + 1];
  Sequence seq{q_begin, q_end, static_cast<std::int64_t>(p.slots.size()), 0};
  for (std::int64_t i = first; i < last; ++i) {
    const std::int64_t page = indices_[static_cast<std::size_t>(i)];
    if (page < 0 || page >= num_pages_) {
      throw Error(def_name_, fmt::format("kv_indices[{}] = {} is not a page of the {}-page cache",
                                         i, page, num_pages_));
    }
    std::int64_t tokens = page_size_;
    if (i == last - 1 && has_last_len_) {
      tokens = last_len_[static_cast<std::size_t>(b)];
      // 0 is accepted (the last page then adds nothing, as slicing [:0] does in the references);
      // past page_size the references disagree (slicing clamps, the loop ones count the excess).
      if (tokens < 0 || tokens > page_size_) {
        throw Error(def_name_,
                    fmt::format("kv_last_page_len[{}] = {} is outside [0, page_size = {}]", b,
                                tokens, page_size_));
      }
    }
    for (std::int64_t t = 0; t < tokens; ++t) p.slots.push_back(page * page_size_ + t);
  }
  seq.key_end = static_cast<std::int64_t>(p.slots.size());
  p.sequences.push_back(seq);
}

bool shape_is(const TensorSpec* spec, std::initializer_list<std::string_view> axes) {
  if (spec == nullptr || !spec->shape || spec->shape->size() != axes.size()) return false;
  return std::equal(axes.begin(), axes.end(), spec->shape->begin());
}

std::int64_t const_axis(const Definition& def, std::string_view name) {
  const Axis* a = def.axis(name);
  return a && a->kind == AxisKind::kConst && a->value ? *a->value : -1;
}

bool has_scalar(const Definition& def, std::string_view name) {
  const TensorSpec* s = def.input(name);
  return s != nullptr && s->is_scalar();
}

bool float_dtype_ok(const TensorSpec* spec) {
  return spec != nullptr && (spec->dtype == DType::kBFloat16 || spec->dtype == DType::kFloat16 ||
                             spec->dtype == DType::kFloat32);
}

}  // namespace fib::reference::detail::attention
