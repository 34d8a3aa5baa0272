"""Makes fib import's test fixtures in the formats FlashInfer writes (run from this folder).

trace/: definition dumps as FLASHINFER_TRACE_DUMP=1 writes them (one JSON per op and shape, the
  templates' `_<name>_reference`, plan-time index dtypes "unknown", in-place outputs), one per
  operation of FlashInfer's trace coverage list (docs/fi_trace.rst).
calls_safetensors/, calls_pt/: level-10 call folders (FLASHINFER_LOGLEVEL=10: metadata.jsonl,
  inputs.safetensors or inputs.pt keyed arg_<i> / kwarg_<name>).
broken_trace/, broken_calls/: malformed dumps.
The .pt files need torch (Debian's /usr/bin/python3); the rest is plain Python.
"""
import json
import os
import shutil
import struct
import random

H, V, HD, PS = 64, 128, 16, 4  # small const axes keep every fixture a few KB

RMS = '''import torch

def _{n}_reference(hidden_states, weight):
    x = hidden_states.float()
    y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)
    return (y * weight.float()).to(hidden_states.dtype)
'''
FUSED = '''import torch

def _fused_add_rmsnorm_reference(hidden_states, residual, weight):
    x = hidden_states.float() + residual.float()
    y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)
    return (y * weight.float()).to(hidden_states.dtype)
'''
SAMPLE = '''import torch

def _{n}_reference(probs, {params}):
    p = probs.float()
{body}    p = p / p.sum(-1, keepdim=True)
    return torch.multinomial(p, 1).squeeze(-1).to(torch.int64)
'''
TOPK = '''    kth = torch.topk(p, int(top_k.max()), dim=-1).values
    p = torch.where(p >= kth.gather(-1, (top_k.long() - 1).unsqueeze(-1)), p, torch.zeros_like(p))
'''
TOPP = '''    s, i = torch.sort(p, dim=-1, descending=True)
    keep = (s.cumsum(-1) - s) < top_p.unsqueeze(-1)
    p = torch.zeros_like(p).scatter(-1, i, s * keep)
'''
GEMM = '''import torch

def _{n}_reference({args}):
    return {expr}
'''
PAGED = '''import torch

def _{n}_reference(q, k_cache, v_cache, {idx}, sm_scale):
    out = torch.empty_like(q)
    lse = torch.empty(q.shape[0], q.shape[1], dtype=torch.float32)
    group = q.shape[1] // k_cache.shape[2]
    for b in range(len(kv_indptr) - 1):
        pages = kv_indices[kv_indptr[b]:kv_indptr[b + 1]].long()
        k = k_cache[pages].flatten(0, 1).float().repeat_interleave(group, 1)
        v = v_cache[pages].flatten(0, 1).float().repeat_interleave(group, 1)
        rows = {rows}
        s = torch.einsum("qhd,khd->hqk", q[rows].float(), k) * sm_scale
        lse[rows] = torch.logsumexp(s, -1).transpose(0, 1) / 0.6931471805599453
        out[rows] = torch.einsum("hqk,khd->qhd", s.softmax(-1), v).to(q.dtype)
    return out, lse
'''
RAGGED = '''import torch

def _gqa_ragged_prefill_reference(q, k, v, qo_indptr, kv_indptr, sm_scale):
    out = torch.empty_like(q)
    lse = torch.empty(q.shape[0], q.shape[1], dtype=torch.float32)
    group = q.shape[1] // k.shape[1]
    for b in range(len(qo_indptr) - 1):
        qs, ks = slice(qo_indptr[b], qo_indptr[b + 1]), slice(kv_indptr[b], kv_indptr[b + 1])
        kb = k[ks].float().repeat_interleave(group, 1)
        vb = v[ks].float().repeat_interleave(group, 1)
        s = torch.einsum("qhd,khd->hqk", q[qs].float(), kb) * sm_scale
        lse[qs] = torch.logsumexp(s, -1).transpose(0, 1) / 0.6931471805599453
        out[qs] = torch.einsum("hqk,khd->qhd", s.softmax(-1), vb).to(q.dtype)
    return out, lse
'''
MLA = '''import torch

def _mla_paged_decode_reference(q_nope, q_pe, ckv_cache, kpe_cache, kv_indptr, kv_indices, sm_scale):
    out = torch.empty_like(q_nope)
    lse = torch.empty(q_nope.shape[0], q_nope.shape[1], dtype=torch.float32)
    for b in range(len(kv_indptr) - 1):
        pages = kv_indices[kv_indptr[b]:kv_indptr[b + 1]].long()
        ckv = ckv_cache[pages].flatten(0, 1).float()
        kpe = kpe_cache[pages].flatten(0, 1).float()
        s = (q_nope[b].float() @ ckv.T + q_pe[b].float() @ kpe.T) * sm_scale
        lse[b] = torch.logsumexp(s, -1) / 0.6931471805599453
        out[b] = (s.softmax(-1) @ ckv).to(q_nope.dtype)
    return out, lse
'''
GDN = '''import torch
import torch.nn.functional as F

def _{n}_reference(q, k, v, state, A_log, a, dt_bias, b, scale):
    g = torch.exp(-torch.exp(A_log) * F.softplus(a.float() + dt_bias))
    beta = torch.sigmoid(b.float())
    s = state.clone()
    out = torch.empty_like(v)
    for t in range(q.shape[1]):
        qt, kt, vt = q[:, t].float() * scale, k[:, t].float(), v[:, t].float()
        s = s * g[:, t, :, None, None]
        err = vt - torch.einsum("bhkv,bhk->bhv", s, kt)
        s = s + torch.einsum("bhk,bhv->bhkv", kt, beta[:, t, :, None] * err)
        out[:, t] = torch.einsum("bhkv,bhk->bhv", s, qt).to(v.dtype)
    return out, s
'''
MOE = '''import torch

def _{n}_reference(routing_logits, hidden_states, gemm1_weights, gemm2_weights):
    w, e = torch.topk(routing_logits.float().softmax(-1), {topk}, dim=-1)
    x = hidden_states.float()
    out = torch.zeros_like(x)
    for t in range(x.shape[0]):
        for j in range(w.shape[1]):
            up = gemm1_weights[e[t, j]].float() @ x[t]
            gate, lin = up.chunk(2)
            out[t] += w[t, j] * (gemm2_weights[e[t, j]].float() @ (torch.nn.functional.silu(gate) * lin))
    return out.to(hidden_states.dtype)
'''
ROUTER = '''import torch

def _alphamoe_fused_router_reference(router_logits):
    w, i = torch.topk(router_logits.float().softmax(-1), 2, dim=-1)
    return (w / w.sum(-1, keepdim=True)), i.to(torch.int32)
'''


def t(shape, dtype, **kw):
    return {"shape": shape, "dtype": dtype, **kw}


def defn(name, op_type, api, axes, inputs, outputs, reference, extra_tags=()):
    return {
        "name": name,
        "description": f"{name} as FlashInfer's trace template dumps it.",
        "op_type": op_type,
        "tags": [f"fi_api:{api}", "status:verified", *extra_tags],
        "axes": axes,
        "inputs": inputs,
        "outputs": outputs,
        "reference": reference,
    }


var = {"type": "var"}


def const(v):
    return {"type": "const", "value": v}


def definitions():
    d = []
    d.append(defn(f"rmsnorm_h{H}", "rmsnorm", "flashinfer.norm.rmsnorm",
                  {"batch_size": var, "hidden_size": const(H)},
                  {"hidden_states": t(["batch_size", "hidden_size"], "bfloat16"),
                   "weight": t(["hidden_size"], "bfloat16")},
                  {"output": t(["batch_size", "hidden_size"], "bfloat16")}, RMS.format(n="rmsnorm")))
    d.append(defn(f"fused_add_rmsnorm_h{H}", "rmsnorm", "flashinfer.norm.fused_add_rmsnorm",
                  {"batch_size": var, "hidden_size": const(H)},
                  {"hidden_states": t(["batch_size", "hidden_size"], "bfloat16"),
                   "residual": t(["batch_size", "hidden_size"], "bfloat16"),
                   "weight": t(["hidden_size"], "bfloat16")},
                  {"output": t(["batch_size", "hidden_size"], "bfloat16"),
                   "residual": t(["batch_size", "hidden_size"], "bfloat16")}, FUSED))
    for n, params, body, extra in [
            ("top_k_sampling_from_probs", "top_k", TOPK, {"top_k": t(["batch_size"], "int32")}),
            ("top_p_sampling_from_probs", "top_p", TOPP, {"top_p": t(["batch_size"], "float32")}),
            ("top_k_top_p_sampling_from_probs", "top_k, top_p", TOPK + TOPP,
             {"top_k": t(["batch_size"], "int32"), "top_p": t(["batch_size"], "float32")})]:
        d.append(defn(f"{n}_v{V}", "sampling", f"flashinfer.sampling.{n}",
                      {"batch_size": var, "vocab_size": const(V)},
                      {"probs": t(["batch_size", "vocab_size"], "float32"), **extra},
                      {"samples": t(["batch_size"], "int64")},
                      SAMPLE.format(n=n, params=params, body=body)))
    gemm_mk = {"M": var, "N": const(H), "K": const(H)}
    d.append(defn(f"gemm_bf16_n{H}_k{H}", "gemm_bf16", "flashinfer.gemm.mm_bf16", gemm_mk,
                  {"a": t(["M", "K"], "bfloat16"), "b": t(["K", "N"], "bfloat16")},
                  {"out": t(["M", "N"], "bfloat16")},
                  GEMM.format(n="mm_bf16", args="a, b", expr="(a.float() @ b.float()).to(a.dtype)")))
    for op, api, dt in [("gemm_fp8", "mm_fp8", "float8_e4m3fn"), ("gemm_mxfp8", "mm_mxfp8", "float8_e4m3fn")]:
        d.append(defn(f"{op}_n{H}_k{H}", op, f"flashinfer.gemm.{api}", gemm_mk,
                      {"a": t(["M", "K"], dt), "b": t(["K", "N"], dt), "alpha": t(None, "float32")},
                      {"out": t(["M", "N"], "bfloat16")},
                      GEMM.format(n=api, args="a, b, alpha",
                                  expr="(alpha * (a.float() @ b.float())).to(torch.bfloat16)")))
    d.append(defn(f"gemm_fp4_n{H}_k{H}", "gemm_fp4", "flashinfer.gemm.mm_fp4",
                  {"M": var, "N": const(H), "K_half": const(H // 2)},
                  {"a": t(["M", "K_half"], "uint8"), "b": t(["N", "K_half"], "uint8"),
                   "alpha": t(None, "float32")},
                  {"out": t(["M", "N"], "bfloat16")},
                  GEMM.format(n="mm_fp4", args="a, b, alpha", expr="(alpha * (_unpack(a) @ _unpack(b).T)).to(torch.bfloat16)")
                  + '''
def _unpack(x):
    lut = torch.tensor([0, .5, 1, 1.5, 2, 3, 4, 6, -0., -.5, -1, -1.5, -2, -3, -4, -6])
    return torch.stack([lut[(x & 15).long()], lut[(x >> 4).long()]], -1).flatten(-2)
'''))
    paged_axes = {"batch_size": var, "num_qo_heads": const(4), "num_kv_heads": const(2),
                  "head_dim": const(HD), "page_size": const(PS), "num_pages": var,
                  "len_indptr": var, "num_kv_indices": var}
    cache = t(["num_pages", "page_size", "num_kv_heads", "head_dim"], "bfloat16")
    dec_in = {"q": t(["batch_size", "num_qo_heads", "head_dim"], "bfloat16"), "k_cache": cache,
              "v_cache": cache, "kv_indptr": t(["len_indptr"], "unknown"),
              "kv_indices": t(["num_kv_indices"], "unknown"),
              "kv_last_page_len": t(["batch_size"], "unknown"), "sm_scale": t(None, "float32")}
    attn_out = lambda rows: {"output": t([rows, "num_qo_heads", "head_dim"], "bfloat16"),
                             "lse": t([rows, "num_qo_heads"], "float32")}
    idx = "kv_indptr, kv_indices, kv_last_page_len"
    dec = defn(f"gqa_paged_decode_h4_kv2_d{HD}_ps{PS}", "gqa_paged",
               "flashinfer.decode.BatchDecodeWithPagedKVCacheWrapper", paged_axes, dec_in,
               attn_out("batch_size"), PAGED.format(n="gqa_paged_decode", idx=idx, rows="[b]"),
               ["stage:decode"])
    dec["constraints"] = ["len_indptr == batch_size + 1", "num_kv_indices == kv_indptr[-1].item()"]
    d.append(dec)
    pre_axes = dict(paged_axes, total_q=var)
    pre_in = {"q": t(["total_q", "num_qo_heads", "head_dim"], "bfloat16"), "k_cache": cache,
              "v_cache": cache, "qo_indptr": t(["len_indptr"], "unknown"),
              "kv_indptr": t(["len_indptr"], "unknown"),
              "kv_indices": t(["num_kv_indices"], "unknown"),
              "kv_last_page_len": t(["batch_size"], "unknown"), "sm_scale": t(None, "float32")}
    pre = defn(f"gqa_paged_prefill_h4_kv2_d{HD}_ps{PS}", "gqa_paged",
               "flashinfer.prefill.BatchPrefillWithPagedKVCacheWrapper", pre_axes, pre_in,
               attn_out("total_q"),
               PAGED.format(n="gqa_paged_prefill", idx="qo_indptr, " + idx,
                            rows="slice(qo_indptr[b], qo_indptr[b + 1])"), ["stage:prefill"])
    pre["constraints"] = ["len_indptr == batch_size + 1", "total_q == qo_indptr[-1].item()",
                          "num_kv_indices == kv_indptr[-1].item()"]
    d.append(pre)
    rag = defn(f"gqa_ragged_prefill_h4_kv2_d{HD}", "gqa_ragged",
               "flashinfer.prefill.BatchPrefillWithRaggedKVCacheWrapper",
               {"total_q": var, "total_kv": var, "len_indptr": var, "num_qo_heads": const(4),
                "num_kv_heads": const(2), "head_dim": const(HD)},
               {"q": t(["total_q", "num_qo_heads", "head_dim"], "bfloat16"),
                "k": t(["total_kv", "num_kv_heads", "head_dim"], "bfloat16"),
                "v": t(["total_kv", "num_kv_heads", "head_dim"], "bfloat16"),
                "qo_indptr": t(["len_indptr"], "unknown"), "kv_indptr": t(["len_indptr"], "unknown"),
                "sm_scale": t(None, "float32")}, attn_out("total_q"), RAGGED, ["stage:prefill"])
    rag["constraints"] = ["total_q == qo_indptr[-1].item()", "total_kv == kv_indptr[-1].item()"]
    d.append(rag)
    mla = defn("mla_paged_decode_h4_ckv32_kpe8_ps1", "mla_paged",
               "flashinfer.mla.BatchMLAPagedAttentionWrapper",
               {"batch_size": var, "num_qo_heads": const(4), "head_dim_ckv": const(32),
                "head_dim_kpe": const(8), "page_size": const(1), "num_pages": var,
                "len_indptr": var, "num_kv_indices": var},
               {"q_nope": t(["batch_size", "num_qo_heads", "head_dim_ckv"], "bfloat16"),
                "q_pe": t(["batch_size", "num_qo_heads", "head_dim_kpe"], "bfloat16"),
                "ckv_cache": t(["num_pages", "page_size", "head_dim_ckv"], "bfloat16"),
                "kpe_cache": t(["num_pages", "page_size", "head_dim_kpe"], "bfloat16"),
                "kv_indptr": t(["len_indptr"], "unknown"), "kv_indices": t(["num_kv_indices"], "unknown"),
                "sm_scale": t(None, "float32")},
               {"output": t(["batch_size", "num_qo_heads", "head_dim_ckv"], "bfloat16"),
                "lse": t(["batch_size", "num_qo_heads"], "float32")}, MLA, ["stage:decode"])
    mla["constraints"] = ["len_indptr == batch_size + 1", "num_kv_indices == kv_indptr[-1].item()"]
    d.append(mla)
    gdn_axes = {"batch_size": var, "seq_len": var, "num_heads": const(2), "head_size": const(8)}
    bsh = ["batch_size", "seq_len", "num_heads"]
    gdn_in = {"q": t(bsh + ["head_size"], "bfloat16"), "k": t(bsh + ["head_size"], "bfloat16"),
              "v": t(bsh + ["head_size"], "bfloat16"),
              "state": t(["batch_size", "num_heads", "head_size", "head_size"], "float32"),
              "A_log": t(["num_heads"], "float32"), "a": t(bsh, "bfloat16"),
              "dt_bias": t(["num_heads"], "float32"), "b": t(bsh, "bfloat16"),
              "scale": t(None, "float32")}
    gdn_out = {"output": t(bsh + ["head_size"], "bfloat16"),
               "new_state": t(["batch_size", "num_heads", "head_size", "head_size"], "float32")}
    for n, api in [("gdn_decode", "gated_delta_rule_decode"), ("gdn_mtp", "gated_delta_rule_mtp"),
                   ("gdn_prefill", "chunk_gated_delta_rule")]:
        mod = "gdn_prefill" if n == "gdn_prefill" else "gdn_decode"
        d.append(defn(f"{n}_h2_d8", "gdn", f"flashinfer.{mod}.{api}", gdn_axes, gdn_in, gdn_out,
                      GDN.format(n=n)))
    for n, api, wdt in [("moe_fp8_block_scale_default_routing_topk2_e4_h16_i8", "trtllm_fp8_block_scale_moe", "float32"),
                        ("moe_fp4_block_scale_default_routing_topk2_e4_h16_i8", "trtllm_fp4_block_scale_moe", "float32")]:
        d.append(defn(n, "moe", f"flashinfer.fused_moe.{api}",
                      {"seq_len": var, "num_experts": const(4), "hidden_size": const(16),
                       "intermediate_size": const(8), "gemm1_out_size": const(16)},
                      {"routing_logits": t(["seq_len", "num_experts"], "float32"),
                       "hidden_states": t(["seq_len", "hidden_size"], "bfloat16"),
                       "gemm1_weights": t(["num_experts", "gemm1_out_size", "hidden_size"], wdt),
                       "gemm2_weights": t(["num_experts", "hidden_size", "intermediate_size"], wdt)},
                      {"output": t(["seq_len", "hidden_size"], "bfloat16")},
                      MOE.format(n=n.split("_routing")[0], topk=2)))
    d.append(defn("alphamoe_fused_router_e8_topk2", "moe_routing",
                  "flashinfer.fused_moe.alphamoe_fused_router",
                  {"num_tokens": var, "num_experts": const(8), "top_k": const(2)},
                  {"router_logits": t(["num_tokens", "num_experts"], "float32")},
                  {"topk_weights": t(["num_tokens", "top_k"], "float32"),
                   "topk_ids": t(["num_tokens", "top_k"], "int32")}, ROUTER))
    return d


# ---- level-10 call dumps --------------------------------------------------------------------

ST = {"float32": ("F32", 4), "bfloat16": ("BF16", 2), "float8_e4m3fn": ("F8_E4M3", 1),
      "int32": ("I32", 4), "int64": ("I64", 8), "uint8": ("U8", 1)}
# Var axes and index contents of each fixture call (the indices satisfy the constraints).
SIZES = {
    "gqa_paged_decode": ({"batch_size": 2, "num_pages": 6, "len_indptr": 3, "num_kv_indices": 5},
                         {"kv_indptr": [0, 2, 5], "kv_indices": [0, 1, 2, 3, 4], "kv_last_page_len": [4, 1]}),
    "gqa_paged_prefill": ({"batch_size": 2, "num_pages": 6, "len_indptr": 3, "num_kv_indices": 5, "total_q": 3},
                          {"qo_indptr": [0, 1, 3], "kv_indptr": [0, 2, 5], "kv_indices": [5, 4, 3, 2, 1],
                           "kv_last_page_len": [2, 3]}),
    "gqa_ragged": ({"total_q": 3, "total_kv": 5, "len_indptr": 3},
                   {"qo_indptr": [0, 1, 3], "kv_indptr": [0, 2, 5]}),
    "mla_paged": ({"batch_size": 2, "num_pages": 5, "len_indptr": 3, "num_kv_indices": 5},
                  {"kv_indptr": [0, 2, 5], "kv_indices": [4, 3, 2, 1, 0]}),
    "gdn_mtp": ({"batch_size": 1, "seq_len": 2}, {}),
    "top_k": ({"batch_size": 2}, {"top_k": [5, 9]}),
}
DEFAULT_SIZES = {"batch_size": 2, "seq_len": 1, "M": 2, "num_tokens": 3}


def sizes_of(d):
    for prefix, (sizes, contents) in SIZES.items():
        if d["name"].startswith(prefix):
            return {**DEFAULT_SIZES, **sizes}, contents
    return DEFAULT_SIZES, {}


def tensor_bytes(name, spec, dtype, shape, contents, rng):
    n = 1
    for s in shape:
        n *= s
    if name in contents:
        return struct.pack(f"<{n}i", *contents[name])
    if dtype == "float32":
        return struct.pack(f"<{n}f", *[rng.uniform(0.05, 1) for _ in range(n)])
    if dtype == "bfloat16":
        return b"".join(struct.pack("<f", rng.uniform(-1, 1))[2:] for _ in range(n))
    if dtype == "float8_e4m3fn":
        return bytes(rng.randrange(0, 0x7E) for _ in range(n))
    if dtype == "uint8":
        return bytes(rng.randrange(0, 256) for _ in range(n))
    if dtype == "int32":
        return struct.pack(f"<{n}i", *[rng.randrange(0, 4) for _ in range(n)])
    raise ValueError(dtype)


def call_tensors(d, rng, override=None):
    """{name: (dtype, shape, bytes)} for the definition's tensor inputs, and its scalars."""
    sizes, contents = sizes_of(d)
    contents = {**contents, **(override or {})}
    axes = {k: v.get("value", sizes.get(k)) for k, v in d["axes"].items()}
    tensors, scalars = {}, {}
    for name, spec in d["inputs"].items():
        if spec["shape"] is None:
            scalars[name] = 0.25
            continue
        dtype = "int32" if spec["dtype"] == "unknown" else spec["dtype"]
        shape = [axes[a] for a in spec["shape"]]
        tensors[name] = (dtype, shape, tensor_bytes(name, spec, dtype, shape, contents, rng))
    return tensors, scalars


def write_safetensors(path, tensors):
    header, blobs, off = {}, [], 0
    for key, (dtype, shape, data) in tensors.items():
        header[key] = {"dtype": ST[dtype][0], "shape": shape, "data_offsets": [off, off + len(data)]}
        blobs.append(data)
        off += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def write_pt(path, tensors):
    import torch
    dt = {"float32": torch.float32, "bfloat16": torch.bfloat16, "int32": torch.int32,
          "int64": torch.int64, "uint8": torch.uint8}
    out = {}
    for key, (dtype, shape, data) in tensors.items():
        out[key] = torch.frombuffer(bytearray(data), dtype=dt[dtype]).reshape(shape).clone()
    torch.save(out, path)


class Dumper:
    def __init__(self, root, fmt):
        self.root, self.fmt, self.seq, self.clock = root, fmt, {}, 0

    def call(self, function_name, signature, tensors, scalars, self_id=None):
        self.seq[function_name] = self.seq.get(function_name, 0) + 1
        self.clock += 1
        stamp = f"20260101_120000_{self.clock:03d}"
        folder = os.path.join(self.root, f"{stamp}_pid4242_{function_name}_call{self.seq[function_name]:04d}")
        os.makedirs(folder)
        record = {"function_name": function_name, "module": "flashinfer",
                  "call_sequence": self.seq[function_name], "timestamp": stamp, "process_id": 4242,
                  "input_metadata": scalars, "output_metadata": {},
                  "tensor_info": {"input_tensor_keys": list(tensors), "output_tensor_keys": []},
                  "tensor_format": "safetensors" if self.fmt == "safetensors" else "torch",
                  "function_signature": signature, "execution_status": "inputs_saved",
                  "graph_capture": False}
        if self_id is not None:
            record["self_id"] = self_id
        if tensors:
            (write_safetensors if self.fmt == "safetensors" else write_pt)(
                os.path.join(folder, f"inputs.{'safetensors' if self.fmt == 'safetensors' else 'pt'}"), tensors)
        with open(os.path.join(folder, "metadata.jsonl"), "w") as f:
            f.write(json.dumps(record) + "\n")
            f.write(json.dumps(dict(record, execution_status="completed")) + "\n")
        return folder


DECODE_PLAN = ("(self, indptr: torch.Tensor, indices: torch.Tensor, last_page_len: torch.Tensor, "
               "num_qo_heads: int, num_kv_heads: int, head_dim: int, page_size: int, "
               "pos_encoding_mode: str = 'NONE', sm_scale: Optional[float] = None) -> None")
DECODE_RUN = ("(self, q: torch.Tensor, paged_kv_cache: Union[torch.Tensor, Tuple[torch.Tensor, "
              "torch.Tensor]], *, out: Optional[torch.Tensor] = None, return_lse: bool = False) -> torch.Tensor")
RMSNORM_SIG = ("(input: torch.Tensor, weight: torch.Tensor, eps: float = 1e-06, out: "
               "Optional[torch.Tensor] = None, enable_pdl: Optional[bool] = None) -> torch.Tensor")


def dump_call(dumper, d, rng, override=None):
    """One call of d's API as FlashInfer's level-10 logging records it."""
    tensors, scalars = call_tensors(d, rng, override)
    api = next(t for t in d["tags"] if t.startswith("fi_api:")).split(".")[-1]
    if d["op_type"] == "rmsnorm" and not d["name"].startswith("fused"):
        dumper.call(api, RMSNORM_SIG, {"arg_0": tensors["hidden_states"], "arg_1": tensors["weight"]},
                    {"kwarg_eps": 1e-6})
        return
    if api.endswith("Wrapper"):
        self_id = 140000000 + dumper.clock
        plan_keys = [k for k in tensors if "indptr" in k or "indices" in k or "last_page_len" in k]
        if d["name"].startswith("gqa_paged_decode"):
            dumper.call(f"{api}.plan", DECODE_PLAN,
                        {"arg_1": tensors["kv_indptr"], "arg_2": tensors["kv_indices"],
                         "arg_3": tensors["kv_last_page_len"]},
                        {"arg_0": {"type": api, "repr": "<wrapper>"}, "arg_4": 4, "arg_5": 2,
                         "arg_6": HD, "arg_7": PS, "kwarg_sm_scale": 0.25}, self_id)
            dumper.call(f"{api}.run", DECODE_RUN,
                        {"arg_1": tensors["q"], "arg_2__0": tensors["k_cache"], "arg_2__1": tensors["v_cache"]},
                        {"arg_0": {"type": api, "repr": "<wrapper>"}}, self_id)
            return
        plan_sig = "(self, " + ", ".join(f"{k}: torch.Tensor" for k in plan_keys) + ", sm_scale: float = 1.0)"
        run_keys = [k for k in tensors if k not in plan_keys]
        run_sig = "(self, " + ", ".join(f"{k}: torch.Tensor" for k in run_keys) + ")"
        dumper.call(f"{api}.plan", plan_sig, {f"kwarg_{k}": tensors[k] for k in plan_keys},
                    {"kwarg_sm_scale": 0.25}, self_id)
        dumper.call(f"{api}.run", run_sig, {f"kwarg_{k}": tensors[k] for k in run_keys}, {}, self_id)
        return
    sig = "(" + ", ".join(f"{k}" for k in d["inputs"]) + ")"
    dumper.call(api, sig, {f"kwarg_{k}": v for k, v in tensors.items()},
                {f"kwarg_{k}": v for k, v in scalars.items()})


def reset(path):
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)


def main():
    defs = definitions()
    reset("trace")
    for d in defs:
        with open(f"trace/{d['name']}.json", "w") as f:
            json.dump(d, f, indent=2)
    rng = random.Random(7)
    st = Dumper("calls_safetensors", "safetensors")
    reset(st.root)
    for d in defs:
        dump_call(st, d, rng)
    # A second rmsnorm call of the same shape (deduplicated) and one of another batch size.
    rms = defs[0]
    dump_call(st, rms, rng)
    SIZES["rmsnorm"] = ({"batch_size": 3}, {})
    dump_call(st, rms, rng)
    del SIZES["rmsnorm"]
    try:
        import torch  # noqa: F401
        pt = Dumper("calls_pt", "pt")
        reset(pt.root)
        for d in defs:
            if not any(s["dtype"].startswith("float8") for s in d["inputs"].values()):
                dump_call(pt, d, rng)
    except ImportError:
        print("no torch: calls_pt/ left as it was")
    make_broken(defs, rng)


def make_broken(defs, rng):
    reset("broken_trace")
    with open("trace/rmsnorm_h64.json") as f:
        good = f.read()
    with open("broken_trace/malformed.json", "w") as f:
        f.write(good.replace('"op_type": "rmsnorm",', '"op_type": "rmsnorm"'))
    with open("broken_trace/truncated.json", "w") as f:
        f.write(good[:200])
    bad = json.loads(good)
    bad["name"] = "rmsnorm_unknown_weight_h64"
    bad["inputs"]["weight"]["dtype"] = "unknown"
    with open("broken_trace/unknown_dtype.json", "w") as f:
        json.dump(bad, f, indent=2)
    reset("broken_calls")
    b = Dumper("broken_calls", "safetensors")
    rms = defs[0]
    folder = b.call("rmsnorm", RMSNORM_SIG, {}, {})
    with open(os.path.join(folder, "metadata.jsonl"), "a") as f:
        f.write('{"function_name": "rmsnorm", "execution_status": \n')
    tensors, _ = call_tensors(rms, rng)
    folder = b.call("rmsnorm", RMSNORM_SIG, {"arg_0": tensors["hidden_states"], "arg_1": tensors["weight"]}, {})
    path = os.path.join(folder, "inputs.safetensors")
    with open(path, "rb") as f:
        data = f.read()
    with open(path, "wb") as f:
        f.write(data[:len(data) - 40])
    w = tensors["weight"]
    f32 = ("float32", w[1], struct.pack(f"<{w[1][0]}f", *[1.0] * w[1][0]))
    b.call("rmsnorm", RMSNORM_SIG, {"arg_0": tensors["hidden_states"], "arg_1": f32}, {})
    decode = next(d for d in defs if d["name"].startswith("gqa_paged_decode"))
    dump_call(b, decode, rng, {"kv_indices": [0, 1, 2, 3, 9]})


if __name__ == "__main__":
    main()
