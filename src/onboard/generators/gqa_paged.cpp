// op_type gqa_paged: grouped-query attention over a paged KV cache, decode and causal prefill,
// page size 1 (pages are token slots) or larger (kv_last_page_len says how full the last is).
#include <fmt/format.h>

#include "fib/onboard/naming.h"
#include "onboard/generators/common.h"
#include "onboard/generators/families.h"

namespace fib::onboard::gen {

namespace {

// Page size 1: kv_indices are token slots.
constexpr std::string_view kDecodePs1 = R"PY(import math

import torch


@torch.no_grad()
def run(q, k_cache, v_cache, kv_indptr, kv_indices, @SINKS@sm_scale):
    batch_size, num_qo_heads, head_dim = q.shape
    num_pages, page_size, num_kv_heads, _ = k_cache.shape
    assert num_qo_heads == @H@
    assert num_kv_heads == @KV@
    assert head_dim == @D@
    assert page_size == 1
    assert kv_indptr.shape[0] == batch_size + 1
    assert kv_indices.shape[0] == kv_indptr[-1].item()

    group = num_qo_heads // num_kv_heads
    keys = k_cache[:, 0].to(torch.float32)  # [num_pages, num_kv_heads, head_dim]
    values = v_cache[:, 0].to(torch.float32)
    output = torch.zeros((batch_size, num_qo_heads, head_dim), dtype=torch.bfloat16, device=q.device)
    lse = torch.full((batch_size, num_qo_heads), -math.inf, dtype=torch.float32, device=q.device)
    for b in range(batch_size):
        begin, end = int(kv_indptr[b].item()), int(kv_indptr[b + 1].item())
        if begin >= end:
            continue  # no keys: output 0, lse -inf
        slots = kv_indices[begin:end].to(torch.long)
        # q head h reads kv head h // group
        k = keys[slots].repeat_interleave(group, dim=1)  # [kv_len, num_qo_heads, head_dim]
        v = values[slots].repeat_interleave(group, dim=1)
        logits = torch.einsum("hd,thd->ht", q[b].to(torch.float32), k) * sm_scale
@SOFTMAX@
    return output, lse
)PY";

constexpr std::string_view kDecodePaged = R"PY(import math

import torch


def _tokens(cache, pages, last_page_len):
    # Every page but the last holds page_size tokens; the last holds last_page_len.
    full = cache[pages[:-1]].flatten(0, 1)
    return torch.cat([full, cache[pages[-1], :last_page_len]], dim=0)


@torch.no_grad()
def run(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, @SINKS@sm_scale):
    batch_size, num_qo_heads, head_dim = q.shape
    num_pages, page_size, num_kv_heads, _ = k_cache.shape
    assert num_qo_heads == @H@
    assert num_kv_heads == @KV@
    assert head_dim == @D@
    assert page_size == @PS@
    assert kv_indptr.shape[0] == batch_size + 1
    assert kv_indices.shape[0] == kv_indptr[-1].item()

    group = num_qo_heads // num_kv_heads
    keys = k_cache.to(torch.float32)  # [num_pages, page_size, num_kv_heads, head_dim]
    values = v_cache.to(torch.float32)
    output = torch.zeros((batch_size, num_qo_heads, head_dim), dtype=torch.bfloat16, device=q.device)
    lse = torch.full((batch_size, num_qo_heads), -math.inf, dtype=torch.float32, device=q.device)
    for b in range(batch_size):
        begin, end = int(kv_indptr[b].item()), int(kv_indptr[b + 1].item())
        if begin >= end:
            continue  # no pages: output 0, lse -inf
        pages = kv_indices[begin:end].to(torch.long)
        last = int(kv_last_page_len[b].item())
        k = _tokens(keys, pages, last)
        if k.shape[0] == 0:
            continue
        v = _tokens(values, pages, last)
        # q head h reads kv head h // group
        k = k.repeat_interleave(group, dim=1)  # [kv_len, num_qo_heads, head_dim]
        v = v.repeat_interleave(group, dim=1)
        logits = torch.einsum("hd,thd->ht", q[b].to(torch.float32), k) * sm_scale
@SOFTMAX@
    return output, lse
)PY";

// Shared by the prefill references: causal attention of one sequence, in query chunks.
constexpr std::string_view kAttendCausal =
    R"PY(CHUNK = 512  # queries per step: bounds the [chunk, heads, kv_len] logits


def _attend_causal(q, k, v, sm_scale, out, lse, sinks=None):
    # q: [q_len, H, D]; k, v: [kv_len, H, D] with kv heads already expanded. Bottom-right causal:
    # query i sees key j iff j <= i + (kv_len - q_len). A query that sees no key gets output 0
    # and lse -inf (with sinks: lse of the sink alone). out and lse are views of this sequence's
    # rows. sinks: [H] logits that join every row's softmax and carry no value.
    q_len, kv_len = q.shape[0], k.shape[0]
    key_pos = torch.arange(kv_len, device=q.device)
    for start in range(0, q_len, CHUNK):
        stop = min(start + CHUNK, q_len)
        query_pos = torch.arange(start, stop, device=q.device) + (kv_len - q_len)
        logits = torch.einsum("qhd,khd->qhk", q[start:stop], k) * sm_scale
        future = key_pos[None, :] > query_pos[:, None]  # [chunk, kv_len]
        logits = logits.masked_fill(future[:, None, :], -math.inf)
        if sinks is not None:
            sink = sinks.to(torch.float32)[None, :, None].expand(logits.shape[0], -1, 1)
            logits = torch.cat([logits, sink], dim=-1)
        lse[start:stop] = torch.logsumexp(logits, dim=-1) / math.log(2.0)
        probs = torch.softmax(logits, dim=-1).nan_to_num(0.0)
        if sinks is not None:
            probs = probs[..., :-1]
        out[start:stop] = torch.einsum("qhk,khd->qhd", probs, v).to(out.dtype)
)PY";

// The softmax of one decode row, without and with a sink logit.
constexpr std::string_view kDecodeSoftmax =
    R"PY(        lse[b] = torch.logsumexp(logits, dim=-1) / math.log(2.0)
        output[b] = torch.einsum("ht,thd->hd", torch.softmax(logits, dim=-1), v).to(torch.bfloat16))PY";
constexpr std::string_view kDecodeSoftmaxSink =
    R"PY(        # The per-head sink logit joins the softmax and carries no value.
        logits = torch.cat([logits, sinks.to(torch.float32)[:, None]], dim=-1)
        lse[b] = torch.logsumexp(logits, dim=-1) / math.log(2.0)
        probs = torch.softmax(logits, dim=-1)[:, :-1]
        output[b] = torch.einsum("ht,thd->hd", probs, v).to(torch.bfloat16))PY";

constexpr std::string_view kPrefillPs1 = R"PY(import math

import torch

@ATTEND@

@torch.no_grad()
def run(q, k_cache, v_cache, qo_indptr, kv_indptr, kv_indices, @SINKS@sm_scale):
    total_q, num_qo_heads, head_dim = q.shape
    num_pages, page_size, num_kv_heads, _ = k_cache.shape
    batch_size = qo_indptr.shape[0] - 1
    assert num_qo_heads == @H@
    assert num_kv_heads == @KV@
    assert head_dim == @D@
    assert page_size == 1
    assert total_q == qo_indptr[-1].item()
    assert kv_indices.shape[0] == kv_indptr[-1].item()

    group = num_qo_heads // num_kv_heads
    keys = k_cache[:, 0].to(torch.float32)  # [num_pages, num_kv_heads, head_dim]
    values = v_cache[:, 0].to(torch.float32)
    q_f32 = q.to(torch.float32)
    output = torch.zeros((total_q, num_qo_heads, head_dim), dtype=torch.bfloat16, device=q.device)
    lse = torch.full((total_q, num_qo_heads), -math.inf, dtype=torch.float32, device=q.device)
    for b in range(batch_size):
        qs, qe = int(qo_indptr[b].item()), int(qo_indptr[b + 1].item())
        ks, ke = int(kv_indptr[b].item()), int(kv_indptr[b + 1].item())
        if qs >= qe or ks >= ke:
            continue
        slots = kv_indices[ks:ke].to(torch.long)
        k = keys[slots].repeat_interleave(group, dim=1)  # [kv_len, num_qo_heads, head_dim]
        v = values[slots].repeat_interleave(group, dim=1)
        _attend_causal(q_f32[qs:qe], k, v, sm_scale, output[qs:qe], lse[qs:qe]@SINK_ARG@)
    return output, lse
)PY";

constexpr std::string_view kPrefillPaged = R"PY(import math

import torch

@ATTEND@

def _tokens(cache, pages, last_page_len):
    # Every page but the last holds page_size tokens; the last holds last_page_len.
    full = cache[pages[:-1]].flatten(0, 1)
    return torch.cat([full, cache[pages[-1], :last_page_len]], dim=0)


@torch.no_grad()
def run(q, k_cache, v_cache, qo_indptr, kv_indptr, kv_indices, kv_last_page_len, @SINKS@sm_scale):
    total_q, num_qo_heads, head_dim = q.shape
    num_pages, page_size, num_kv_heads, _ = k_cache.shape
    batch_size = qo_indptr.shape[0] - 1
    assert num_qo_heads == @H@
    assert num_kv_heads == @KV@
    assert head_dim == @D@
    assert page_size == @PS@
    assert total_q == qo_indptr[-1].item()
    assert kv_indices.shape[0] == kv_indptr[-1].item()

    group = num_qo_heads // num_kv_heads
    keys = k_cache.to(torch.float32)  # [num_pages, page_size, num_kv_heads, head_dim]
    values = v_cache.to(torch.float32)
    q_f32 = q.to(torch.float32)
    output = torch.zeros((total_q, num_qo_heads, head_dim), dtype=torch.bfloat16, device=q.device)
    lse = torch.full((total_q, num_qo_heads), -math.inf, dtype=torch.float32, device=q.device)
    for b in range(batch_size):
        qs, qe = int(qo_indptr[b].item()), int(qo_indptr[b + 1].item())
        ks, ke = int(kv_indptr[b].item()), int(kv_indptr[b + 1].item())
        if qs >= qe or ks >= ke:
            continue
        pages = kv_indices[ks:ke].to(torch.long)
        last = int(kv_last_page_len[b].item())
        k = _tokens(keys, pages, last).repeat_interleave(group, dim=1)  # [kv_len, num_qo_heads, head_dim]
        v = _tokens(values, pages, last).repeat_interleave(group, dim=1)
        if k.shape[0] == 0:
            continue
        _attend_causal(q_f32[qs:qe], k, v, sm_scale, output[qs:qe], lse[qs:qe]@SINK_ARG@)
    return output, lse
)PY";

std::string heads_desc(const AttentionHeads& h, bool kv) {
  if (kv) {
    return fmt::format(
        "Number of key-value heads per rank{}.",
        h.tp > 1 && h.full_kv_heads < h.tp
            ? fmt::format(" ({} kv heads replicated over TP={})", h.full_kv_heads, h.tp)
            : split_note(h.full_kv_heads, h.tp, h.kv_heads));
  }
  return fmt::format("Number of query/output heads per rank{}.",
                     split_note(h.full_heads, h.tp, h.heads));
}

}  // namespace

Definition gqa_paged(const GqaPagedKernel& k, const GenContext& ctx) {
  const bool decode = k.stage == Stage::kDecode;
  const bool ps1 = k.page_size == 1;
  const auto& h = k.h;
  const std::string name = definition_name(KernelSpec{k});
  std::string description = decode
                                ? "Batched Grouped Query Attention decode with a paged KV cache"
                                : "Batched Grouped Query Attention prefill with a paged KV cache";
  if (!ps1) description += fmt::format(" (page_size={})", k.page_size);
  description += decode ? "." : ". Causal mask is applied (bottom-right aligned).";
  if (h.sinks) description += std::string(sink_sentence());
  description += fmt::format(" {}", provenance(ctx, fmt::format("TP={}", h.tp)));
  Builder b(name, "gqa_paged", std::move(description));
  b.tag(decode ? "stage:decode" : "stage:prefill").tag(std::string(kStatusTag)).tag(model_tag(ctx));
  b.tag(decode ? "fi_api:flashinfer.decode.BatchDecodeWithPagedKVCacheWrapper"
               : "fi_api:flashinfer.prefill.BatchPrefillWithPagedKVCacheWrapper");
  b.tag(fmt::format("tp:{}", h.tp));
  if (h.sinks) b.tag("variant:attention_sink");

  const std::string q_rows = decode ? "batch_size" : "total_q";
  if (decode) b.var("batch_size", "Number of sequences (one query token each).");
  b.constant("num_qo_heads", h.heads, heads_desc(h, false))
      .constant("num_kv_heads", h.kv_heads, heads_desc(h, true))
      .constant("head_dim", h.head_dim, "Dimension of each attention head.");
  if (decode) {
    b.var("num_pages", "Total number of allocated pages in the KV cache.")
        .constant("page_size", k.page_size, "Number of tokens stored per page.")
        .var("len_indptr", "Length of kv_indptr array.")
        .var("num_kv_indices", "Total number of KV page indices.");
    b.constraint("len_indptr == batch_size + 1");
  } else {
    b.constant("page_size", k.page_size, "Number of tokens stored per page.")
        .var("len_indptr",
             "Length of indptr arrays. Should be the same for qo_indptr and kv_indptr (batch_size "
             "+ 1).")
        .var("total_q", "Total number of query tokens.")
        .var("num_kv_indices", "Total number of KV page indices.")
        .var("num_pages", "Total number of allocated pages in the KV cache.");
    if (!ps1) b.var("batch_size", "Number of sequences in the batch.");
    b.constraint("total_q == qo_indptr[-1].item()");
  }
  b.constraint("num_kv_indices == kv_indptr[-1].item()");
  if (!decode && !ps1) b.constraint("len_indptr == batch_size + 1");

  b.input("q", {q_rows, "num_qo_heads", "head_dim"}, DType::kBFloat16,
          decode ? "Query tensor for decode." : "Query tensor for prefill.")
      .input("k_cache", {"num_pages", "page_size", "num_kv_heads", "head_dim"}, DType::kBFloat16,
             "Paged key cache.")
      .input("v_cache", {"num_pages", "page_size", "num_kv_heads", "head_dim"}, DType::kBFloat16,
             "Paged value cache.");
  if (!decode)
    b.input("qo_indptr", {"len_indptr"}, DType::kInt32, "Query offsets for each sequence.");
  b.input("kv_indptr", {"len_indptr"}, DType::kInt32, "KV page offsets for each sequence.")
      .input("kv_indices", {"num_kv_indices"}, DType::kInt32,
             ps1 ? "Token slots (page IDs of one token) for KV cache lookups."
                 : "Page IDs for KV cache lookups.");
  if (!ps1) {
    b.input("kv_last_page_len", {"batch_size"}, DType::kInt32,
            "Number of valid tokens in the last page for each sequence.");
  }
  if (h.sinks)
    b.input("sinks", {"num_qo_heads"}, DType::kFloat32, std::string(sink_input_description()));
  b.scalar("sm_scale", DType::kFloat32, "Softmax scale. Default is (1/sqrt(head_dim)).");
  b.output("output", {q_rows, "num_qo_heads", "head_dim"}, DType::kBFloat16,
           "Attention output tensor.")
      .output("lse", {q_rows, "num_qo_heads"}, DType::kFloat32,
              "The 2-based log-sum-exp of attention logits.");

  const std::string H = std::to_string(h.heads), KV = std::to_string(h.kv_heads),
                    D = std::to_string(h.head_dim);
  const std::string sinks_param = h.sinks ? "sinks, " : "";
  if (decode) {
    const std::string softmax(h.sinks ? kDecodeSoftmaxSink : kDecodeSoftmax);
    if (ps1) {
      b.reference(
          fill(kDecodePs1,
               {{"SINKS", sinks_param}, {"H", H}, {"KV", KV}, {"D", D}, {"SOFTMAX", softmax}}));
    } else {
      b.reference(fill(kDecodePaged, {{"SINKS", sinks_param},
                                      {"H", H},
                                      {"KV", KV},
                                      {"D", D},
                                      {"PS", std::to_string(k.page_size)},
                                      {"SOFTMAX", softmax}}));
    }
  } else {
    const std::string sink_arg = h.sinks ? ", sinks" : "";
    if (ps1) {
      b.reference(fill(kPrefillPs1, {{"ATTEND", std::string(kAttendCausal)},
                                     {"SINKS", sinks_param},
                                     {"H", H},
                                     {"KV", KV},
                                     {"D", D},
                                     {"SINK_ARG", sink_arg}}));
    } else {
      b.reference(fill(kPrefillPaged, {{"ATTEND", std::string(kAttendCausal)},
                                       {"SINKS", sinks_param},
                                       {"H", H},
                                       {"KV", KV},
                                       {"D", D},
                                       {"PS", std::to_string(k.page_size)},
                                       {"SINK_ARG", sink_arg}}));
    }
  }
  return b.build();
}

std::string_view attend_causal_source() { return kAttendCausal; }

std::string_view sink_sentence() {
  return " A learned per-head sink logit joins the softmax (it takes probability mass and carries "
         "no value); lse "
         "includes it.";
}

std::string_view sink_input_description() {
  return "Per-head attention sink logits (not scaled by sm_scale).";
}

std::vector<LegacyInterface> gqa_paged_legacy(const Definition& canonical) {
  return last_page_len_legacy(canonical);
}

std::vector<LegacyInterface> last_page_len_legacy(const Definition& canonical) {
  // Only prefill with pages larger than one token has the [len_indptr] spelling in the dataset.
  const TensorSpec* last = canonical.input("kv_last_page_len");
  if (!last || !canonical.input("qo_indptr") || !canonical.axis("batch_size")) return {};
  LegacyInterface legacy{canonical,
                         "kv_last_page_len shaped [len_indptr] and no batch_size axis, as some "
                         "older prefill definitions have it (corpus inconsistency 2)"};
  auto& d = legacy.def;
  for (auto& in : d.inputs) {
    if (in.name == "kv_last_page_len") in.shape = std::vector<std::string>{"len_indptr"};
  }
  std::erase_if(d.axes, [](const Axis& a) { return a.name == "batch_size"; });
  return {legacy};
}

std::string name_of(const GqaPagedKernel& k) {
  return fmt::format(
      "gqa_paged_{}{}_h{}_kv{}_d{}_ps{}", k.stage == Stage::kDecode ? "decode" : "prefill_causal",
      k.h.sinks ? "_attn_sink" : "", k.h.heads, k.h.kv_heads, k.h.head_dim, k.page_size);
}

}  // namespace fib::onboard::gen
