def _route(routing_logits, top_k):
    # Llama-4: sigmoid scores, top-k; the weight scales the expert input. routing_bias is not
    # used by this routing (the kernel ignores it too).
    weights, chosen = torch.sigmoid(routing_logits.to(torch.float32)).topk(top_k, dim=-1)
    return chosen, weights, True
