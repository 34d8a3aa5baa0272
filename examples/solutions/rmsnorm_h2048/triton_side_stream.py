"""triton_side_stream: triton_kernel's RMSNorm launched on a stream of its own, never joined back
to the stream fib times, so the kernel escapes the timing window (the Triton form of
side_stream_cuda.cu).

Broken on purpose. Expected from `fib run --device cuda:N`: RUNTIME_ERROR on every workload.
Without a GPU and triton (CI), RUNTIME_ERROR saying that triton does not import.
"""
import torch
import triton
import triton.language as tl

EPS = 1e-5
_side = []


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
    if not _side:
        _side.append(torch.cuda.Stream(device=hidden_states.device))
    batch, hidden = hidden_states.shape
    with torch.cuda.stream(_side[0]):
        _rmsnorm_kernel[(batch,)](hidden_states, weight, output, hidden, EPS,
                                  BLOCK=triton.next_power_of_2(hidden))
