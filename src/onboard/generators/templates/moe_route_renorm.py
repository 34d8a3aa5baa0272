def _route(routing_logits, top_k):
    # Renormalize: top-k of the logits, softmax over the k chosen; the weight scales the output.
    top_logits, chosen = routing_logits.to(torch.float32).topk(top_k, dim=-1)
    return chosen, torch.softmax(top_logits, dim=-1), False
