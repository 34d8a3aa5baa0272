"""gemm_n4096_k4096 (C = A @ B.T, float16, float32 accumulation) as a Triton kernel, written as
upstream FlashInfer-Bench writes Triton solutions (language triton, entry "gemm_triton.py::run",
destination-passing: C comes after the inputs). One fixed tile configuration (no autotuning, so
neither harness times a tuning pass): 128x128 tiles of C, 64-wide steps along K, grouped along M
for L2 reuse. The launch goes on torch's current stream, which fib sets to the stream it times.
Both harnesses run it in tools/upstream/upstream-side-by-side.sh."""
import torch
import triton
import triton.language as tl

BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M = 128, 128, 64, 8


@triton.jit
def _gemm_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bn, stride_cm,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                 GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    # A's rows [BLOCK_M, BLOCK_K]; B's rows read as B.T's columns [BLOCK_K, BLOCK_N].
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :]
    b_ptrs = b_ptr + offs_n[None, :] * stride_bn + offs_k[:, None]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        k_left = K - k * BLOCK_K
        a = tl.load(a_ptrs, mask=(offs_m[:, None] < M) & (offs_k[None, :] < k_left), other=0.0)
        b = tl.load(b_ptrs, mask=(offs_n[None, :] < N) & (offs_k[:, None] < k_left), other=0.0)
        acc += tl.dot(a, b)
        a_ptrs += BLOCK_K
        b_ptrs += BLOCK_K
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :]
    tl.store(c_ptrs, acc.to(tl.float16), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


@torch.no_grad()
def run(A, B, C):
    M, K = A.shape
    N = B.shape[0]
    grid = (triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N),)
    _gemm_kernel[grid](A, B, C, M, N, K, A.stride(0), B.stride(0), C.stride(0),
                       BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, GROUP_M=GROUP_M,
                       num_warps=8, num_stages=3)
