"""python_writes_past_end: RMSNorm of rmsnorm_h2048 in PyTorch that writes a correct output, then
two bytes just past its end through ctypes (what a torch extension with an off-by-one does).

Broken on purpose: fib surrounds every output with guard bytes it checks after each call.
Expected from `fib run`: RUNTIME_ERROR on every workload (CPU tensors; ctypes cannot reach
device memory).
"""
import ctypes

import torch

EPS = 1e-5


@torch.no_grad()
def run(hidden_states, weight, output):
    x = hidden_states.to(torch.float32)
    inv_rms = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + EPS)
    output.copy_(x * inv_rms * weight.to(torch.float32))
    end = output.data_ptr() + output.numel() * output.element_size()
    ctypes.memset(end, 0x7F, 2)
