"""python_mutates_inputs: RMSNorm of rmsnorm_h2048 in PyTorch that squares hidden_states in
place as scratch before computing a correct output from a copy.

Broken on purpose: inputs are read-only to a solution (fib maps them read-only on the CPU and
checksums them on a GPU). Expected from `fib run`: RUNTIME_ERROR on every workload.
"""
import torch

EPS = 1e-5


@torch.no_grad()
def run(hidden_states, weight, output):
    x = hidden_states.to(torch.float32)
    inv_rms = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + EPS)
    output.copy_(x * inv_rms * weight.to(torch.float32))
    hidden_states.mul_(hidden_states)
