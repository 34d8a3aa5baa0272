"""python_torch: RMSNorm of rmsnorm_h2048 in PyTorch, written the way FlashInfer-Bench's Python
solutions are (language python, entry "python_torch.py::run").

Destination-passing: `output` is fib's own buffer (handed over through DLPack, no copy) and comes
after the inputs. y[r, c] = x[r, c] / sqrt(mean(x[r, :]^2) + 1e-5) * weight[c], in fp32, rounded
once to bfloat16. Runs on whichever device the tensors are on.

Expected from `fib run`: PASSED on every workload.
"""
import torch

EPS = 1e-5


@torch.no_grad()
def run(hidden_states, weight, output):
    x = hidden_states.to(torch.float32)
    inv_rms = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + EPS)
    output.copy_(x * inv_rms * weight.to(torch.float32))
