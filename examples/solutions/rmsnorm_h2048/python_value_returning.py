"""python_value_returning: RMSNorm of rmsnorm_h2048 in PyTorch, value-returning (the style of a
definition's own reference): it returns a new tensor, which fib copies into a guarded, poisoned
buffer of its own inside the timed call and checks there.

Expected from `fib run`: PASSED on every workload.
"""
import torch

EPS = 1e-5


@torch.no_grad()
def run(hidden_states, weight):
    x = hidden_states.to(torch.float32)
    inv_rms = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + EPS)
    return (x * inv_rms * weight.to(torch.float32)).to(hidden_states.dtype)
