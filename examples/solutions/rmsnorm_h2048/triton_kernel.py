"""triton_kernel: RMSNorm of rmsnorm_h2048 as a Triton kernel, written the way FlashInfer-Bench's
Triton solutions are (language triton, entry "triton_kernel.py::run", target hardware cuda).

One program per row: the row and the weight loaded once, the sum of squares in fp32, one
rounding to bfloat16. The launch goes on torch's current stream, which fib sets to the stream it
times. Destination-passing: `output` comes after the inputs.

Expected from `fib run --device cuda:N`: PASSED on every workload. Without a GPU and triton
(CI), RUNTIME_ERROR saying that triton does not import.
"""
import torch
import triton
import triton.language as tl

EPS = 1e-5


@triton.jit
def _rmsnorm_kernel(x_ptr, w_ptr, y_ptr, hidden, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < hidden
    x = tl.load(x_ptr + row * hidden + cols, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    inv_rms = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / hidden + eps)
    tl.store(y_ptr + row * hidden + cols, (x * inv_rms * w).to(tl.bfloat16), mask=mask)


@torch.no_grad()
def run(hidden_states, weight, output):
    batch, hidden = hidden_states.shape
    _rmsnorm_kernel[(batch,)](hidden_states, weight, output, hidden, EPS,
                              BLOCK=triton.next_power_of_2(hidden))
