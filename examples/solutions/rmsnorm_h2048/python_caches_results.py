"""python_caches_results: RMSNorm of rmsnorm_h2048 in PyTorch that serves calls from an output
cache keyed on a cheap fingerprint of its inputs (their shapes and dtypes; hashing the data
would cost as much as the kernel), the Python form of the cheat in caches_results.cpp.

Broken on purpose: against a harness that times the same inputs over and over it looks correct
and very fast. fib's checked calls get fresh inputs from a seed the solution cannot see, so the
cache hands back an earlier input's output. Expected from `fib run`: INCORRECT_NUMERICAL on
every workload.
"""
import torch

EPS = 1e-5
_cache = {}


@torch.no_grad()
def run(hidden_states, weight, output):
    key = (tuple(hidden_states.shape), hidden_states.dtype, tuple(weight.shape))
    cached = _cache.get(key)
    if cached is not None:
        output.copy_(cached)
        return
    x = hidden_states.to(torch.float32)
    inv_rms = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + EPS)
    output.copy_(x * inv_rms * weight.to(torch.float32))
    _cache[key] = output.clone()
