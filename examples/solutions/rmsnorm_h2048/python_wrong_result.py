"""python_wrong_result: RMSNorm of rmsnorm_h2048 in PyTorch that forgets the weight.

Broken on purpose. Expected from `fib run`: INCORRECT_NUMERICAL on every workload.
"""
import torch

EPS = 1e-5


@torch.no_grad()
def run(hidden_states, weight, output):
    x = hidden_states.to(torch.float32)
    output.copy_(x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + EPS))
