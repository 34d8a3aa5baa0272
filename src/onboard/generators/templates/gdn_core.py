def _gates(A_log, a, dt_bias, b):
    # decay g = exp(-exp(A_log) * softplus(a + dt_bias)); update strength beta = sigmoid(b)
    g = torch.exp(-torch.exp(A_log.float()) * F.softplus(a.float() + dt_bias.float()))
    return g, torch.sigmoid(b.float())


def _step(state, q, k, v, g, beta, scale):
    # One token for every value head. state: [H, K, V]; q, k: [H, K]; v: [H, V]; g, beta: [H].
    state = g[:, None, None] * state
    predicted = torch.einsum("hk,hkv->hv", k, state)
    target = beta[:, None] * v + (1.0 - beta[:, None]) * predicted
    state = state + torch.einsum("hk,hv->hkv", k, target - predicted)
    return state, scale * torch.einsum("hk,hkv->hv", q, state)
