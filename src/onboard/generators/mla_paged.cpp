// op_type mla_paged: multi-head latent attention (DeepSeek) in its absorbed form over a paged
// latent cache: one compressed KV (ckv, kv_lora_rank wide) plus a RoPE key (kpe) per token,
// shared by all heads; the compressed KV is both key part and value.
#include <fmt/format.h>

#include "onboard/generators/common.h"
#include "onboard/generators/families.h"

namespace fib::onboard::gen {

namespace {

constexpr std::string_view kGatherPs1 = R"PY(def _latents(ckv, kpe, pages, last_page_len):
    # page_size 1: pages are token slots.
    return ckv[pages, 0], kpe[pages, 0]
)PY";

constexpr std::string_view kGatherPaged = R"PY(def _latents(ckv, kpe, pages, last_page_len):
    # Every page but the last holds page_size tokens; the last holds last_page_len.
    def tokens(cache):
        full = cache[pages[:-1]].flatten(0, 1)
        return torch.cat([full, cache[pages[-1], :last_page_len]], dim=0)

    return tokens(ckv), tokens(kpe)
)PY";

constexpr std::string_view kDecode = R"PY(import math

import torch


@GATHER@

@torch.no_grad()
def run(q_nope, q_pe, ckv_cache, kpe_cache, kv_indptr, kv_indices, @LAST@sm_scale):
    batch_size, num_qo_heads, head_dim_ckv = q_nope.shape
    head_dim_kpe = q_pe.shape[-1]
    page_size = ckv_cache.shape[1]
    assert num_qo_heads == @H@
    assert head_dim_ckv == @CKV@
    assert head_dim_kpe == @KPE@
    assert page_size == @PS@
    assert kv_indptr.shape[0] == batch_size + 1
    assert kv_indices.shape[0] == kv_indptr[-1].item()

    ckv = ckv_cache.to(torch.float32)
    kpe = kpe_cache.to(torch.float32)
    output = torch.zeros((batch_size, num_qo_heads, head_dim_ckv), dtype=torch.bfloat16, device=q_nope.device)
    lse = torch.full((batch_size, num_qo_heads), -math.inf, dtype=torch.float32, device=q_nope.device)
    for b in range(batch_size):
        begin, end = int(kv_indptr[b].item()), int(kv_indptr[b + 1].item())
        if begin >= end:
            continue  # no keys: output 0, lse -inf
        pages = kv_indices[begin:end].to(torch.long)
        kc, kp = _latents(ckv, kpe, pages, @LAST_OF_B@)  # [kv_len, ckv], [kv_len, kpe]
        if kc.shape[0] == 0:
            continue
        logits = (q_nope[b].to(torch.float32) @ kc.T + q_pe[b].to(torch.float32) @ kp.T) * sm_scale
        lse[b] = torch.logsumexp(logits, dim=-1) / math.log(2.0)
        output[b] = (torch.softmax(logits, dim=-1) @ kc).to(torch.bfloat16)
    return output, lse
)PY";

constexpr std::string_view kPrefill = R"PY(import math

import torch

CHUNK = 512  # queries per step: bounds the [chunk, heads, kv_len] logits


@GATHER@

def _attend_latent_causal(qn, qp, kc, kp, sm_scale, out, lse):
    # qn: [q_len, H, ckv], qp: [q_len, H, kpe]; kc: [kv_len, ckv], kp: [kv_len, kpe] shared by all
    # heads. Bottom-right causal; a query that sees no key gets output 0 and lse -inf.
    q_len, kv_len = qn.shape[0], kc.shape[0]
    key_pos = torch.arange(kv_len, device=qn.device)
    for start in range(0, q_len, CHUNK):
        stop = min(start + CHUNK, q_len)
        query_pos = torch.arange(start, stop, device=qn.device) + (kv_len - q_len)
        logits = torch.einsum("qhc,kc->qhk", qn[start:stop], kc) + torch.einsum("qhp,kp->qhk", qp[start:stop], kp)
        logits = logits * sm_scale
        future = key_pos[None, :] > query_pos[:, None]
        logits = logits.masked_fill(future[:, None, :], -math.inf)
        lse[start:stop] = torch.logsumexp(logits, dim=-1) / math.log(2.0)
        probs = torch.softmax(logits, dim=-1).nan_to_num(0.0)
        out[start:stop] = torch.einsum("qhk,kc->qhc", probs, kc).to(out.dtype)


@torch.no_grad()
def run(q_nope, q_pe, ckv_cache, kpe_cache, qo_indptr, kv_indptr, kv_indices, @LAST@sm_scale):
    total_q, num_qo_heads, head_dim_ckv = q_nope.shape
    head_dim_kpe = q_pe.shape[-1]
    page_size = ckv_cache.shape[1]
    batch_size = qo_indptr.shape[0] - 1
    assert num_qo_heads == @H@
    assert head_dim_ckv == @CKV@
    assert head_dim_kpe == @KPE@
    assert page_size == @PS@
    assert total_q == qo_indptr[-1].item()
    assert kv_indices.shape[0] == kv_indptr[-1].item()

    ckv = ckv_cache.to(torch.float32)
    kpe = kpe_cache.to(torch.float32)
    qn = q_nope.to(torch.float32)
    qp = q_pe.to(torch.float32)
    output = torch.zeros((total_q, num_qo_heads, head_dim_ckv), dtype=torch.bfloat16, device=q_nope.device)
    lse = torch.full((total_q, num_qo_heads), -math.inf, dtype=torch.float32, device=q_nope.device)
    for b in range(batch_size):
        qs, qe = int(qo_indptr[b].item()), int(qo_indptr[b + 1].item())
        ks, ke = int(kv_indptr[b].item()), int(kv_indptr[b + 1].item())
        if qs >= qe or ks >= ke:
            continue
        pages = kv_indices[ks:ke].to(torch.long)
        kc, kp = _latents(ckv, kpe, pages, @LAST_OF_B@)
        if kc.shape[0] == 0:
            continue
        _attend_latent_causal(qn[qs:qe], qp[qs:qe], kc, kp, sm_scale, output[qs:qe], lse[qs:qe])
    return output, lse
)PY";

}  // namespace

Definition mla_paged(const MlaPagedKernel& k, const GenContext& ctx) {
  const bool decode = k.stage == Stage::kDecode;
  const bool ps1 = k.page_size == 1;
  const std::string name =
      fmt::format("mla_paged_{}_h{}_ckv{}_kpe{}_ps{}", decode ? "decode" : "prefill_causal",
                  k.heads, k.ckv, k.kpe, k.page_size);
  std::string description =
      decode ? "Batched Multi-head Latent Attention decode with a paged KV cache"
             : "Batched Multi-head Latent Attention prefill with a paged KV cache";
  if (!ps1) description += fmt::format(" (page_size={})", k.page_size);
  description += decode ? "." : ". Causal mask is applied (bottom-right aligned).";
  description += " Absorbed form: the compressed KV is shared by all heads and is also the value.";
  description += fmt::format(" {}", provenance(ctx, fmt::format("TP={}", k.tp)));
  Builder b(name, "mla_paged", std::move(description));
  b.tag(decode ? "stage:decode" : "stage:prefill").tag(std::string(kStatusTag)).tag(model_tag(ctx));
  b.tag("fi_api:flashinfer.mla.BatchMLAPagedAttentionWrapper").tag(fmt::format("tp:{}", k.tp));

  const std::string rows = decode ? "batch_size" : "total_q";
  if (decode) b.var("batch_size", "Number of sequences in the batch.");
  b.constant("num_qo_heads", k.heads,
             fmt::format("Number of query heads after tensor parallel split{}.",
                         split_note(k.full_heads, k.tp, k.heads)))
      .constant("head_dim_ckv", k.ckv,
                "Dimension of compressed key-value representation (kv_lora_rank).")
      .constant("head_dim_kpe", k.kpe, "Dimension of key positional encoding (qk_rope_head_dim).")
      .constant("page_size", k.page_size, "Number of tokens stored per page.");
  if (!decode) b.var("total_q", "Total number of query tokens.");
  b.var("num_pages", "Total number of allocated pages in the KV cache.")
      .var("len_indptr", "Length of indptr arrays (batch_size + 1).")
      .var("num_kv_indices", "Total number of KV page indices.");
  if (!decode && !ps1) b.var("batch_size", "Number of sequences in the batch.");
  if (decode) {
    b.constraint("len_indptr == batch_size + 1");
  } else {
    b.constraint("total_q == qo_indptr[-1].item()");
  }
  b.constraint("num_kv_indices == kv_indptr[-1].item()");
  if (!decode && !ps1) b.constraint("len_indptr == batch_size + 1");

  b.input("q_nope", {rows, "num_qo_heads", "head_dim_ckv"}, DType::kBFloat16,
          "Query tensor without positional encoding component (absorbed into the latent space).")
      .input("q_pe", {rows, "num_qo_heads", "head_dim_kpe"}, DType::kBFloat16,
             "Query positional encoding component.")
      .input("ckv_cache", {"num_pages", "page_size", "head_dim_ckv"}, DType::kBFloat16,
             "Compressed key-value cache.")
      .input("kpe_cache", {"num_pages", "page_size", "head_dim_kpe"}, DType::kBFloat16,
             "Key positional encoding cache.");
  if (!decode)
    b.input("qo_indptr", {"len_indptr"}, DType::kInt32, "Query offsets for each sequence.");
  b.input("kv_indptr", {"len_indptr"}, DType::kInt32, "KV page offsets for each sequence.")
      .input("kv_indices", {"num_kv_indices"}, DType::kInt32, "Page indices for KV cache lookups.");
  if (!ps1) {
    b.input("kv_last_page_len", {"batch_size"}, DType::kInt32,
            "Number of valid tokens in the last page for each sequence.");
  }
  b.scalar(
      "sm_scale", DType::kFloat32,
      fmt::format(
          "Softmax scale. Default is 1/sqrt({} + {}) (head dimensions before absorption); YaRN "
          "rope scaling multiplies it by mscale^2.",
          k.qk_nope, k.kpe));
  b.output("output", {rows, "num_qo_heads", "head_dim_ckv"}, DType::kBFloat16,
           "Attention output in the latent space.")
      .output("lse", {rows, "num_qo_heads"}, DType::kFloat32,
              "The 2-based log-sum-exp of attention logits.");

  const std::string last_param = ps1 ? std::string() : std::string("kv_last_page_len, ");
  const std::string last_of_b =
      ps1 ? std::string("0") : std::string("int(kv_last_page_len[b].item())");
  b.reference(
      fill(decode ? kDecode : kPrefill, {{"GATHER", std::string(ps1 ? kGatherPs1 : kGatherPaged)},
                                         {"LAST", last_param},
                                         {"H", std::to_string(k.heads)},
                                         {"CKV", std::to_string(k.ckv)},
                                         {"KPE", std::to_string(k.kpe)},
                                         {"PS", std::to_string(k.page_size)},
                                         {"LAST_OF_B", last_of_b}}));
  return b.build();
}

std::vector<LegacyInterface> mla_paged_legacy(const Definition& canonical) {
  return last_page_len_legacy(canonical);
}

std::string name_of(const MlaPagedKernel& k) {
  return fmt::format("mla_paged_{}_h{}_ckv{}_kpe{}_ps{}",
                     k.stage == Stage::kDecode ? "decode" : "prefill_causal", k.heads, k.ckv, k.kpe,
                     k.page_size);
}

}  // namespace fib::onboard::gen
