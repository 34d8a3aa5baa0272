CHUNK = 512  # queries per step: bounds the [chunk, heads, kv_len] logits


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
