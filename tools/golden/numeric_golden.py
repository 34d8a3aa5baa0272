#!/usr/bin/env python3
"""Golden checksums of PyTorch's float conversions, for fib's numeric-format tests.

For every float32 bit pattern (all 2^32 of them), PyTorch converts to bfloat16, float16,
float8_e4m3fn and float8_e5m2 on the CPU. For each format and each value of the top byte of the
input (256 buckets of 2^24 inputs), we record sum(out_bits[i] * w(i)) with
w(i) = ((i * 0x9E3779B1) mod 2^16) + 1, where i is the input's 32-bit pattern; the sum fits in
int64. fib computes the same sums and must match exactly. Decoding tables (every code back to
float32 bits) are recorded in full. Run on a machine with PyTorch >= 2.1 (float8 types):

    python3 tools/golden/numeric_golden.py > tests/data/numeric/pytorch_golden.json
"""
import json
import sys

import torch

FORMATS = [
    ("bfloat16", torch.bfloat16, torch.int16, 0xFFFF),
    ("float16", torch.float16, torch.int16, 0xFFFF),
    ("float8_e4m3fn", torch.float8_e4m3fn, torch.uint8, 0xFF),
    ("float8_e5m2", torch.float8_e5m2, torch.uint8, 0xFF),
]


LO = torch.arange(1 << 24, dtype=torch.int64)
# The weight depends only on the low 16 bits of the pattern, so one array serves every bucket.
WEIGHTS = (((LO & 0xFFFF) * 0x9E3779B1) & 0xFFFF) + 1


def bucket_inputs(hi):
    pattern = LO | (hi << 24)
    signed = torch.where(pattern >= (1 << 31), pattern - (1 << 32), pattern).to(torch.int32)
    return signed.view(torch.float32), WEIGHTS


def main():
    torch.set_num_threads(max(1, torch.get_num_threads()))
    out = {"torch_version": torch.__version__, "weights": "((i * 0x9E3779B1) mod 2^16) + 1", "encode": {}, "decode": {}}
    for name, dtype, view, mask in FORMATS:
        sums = []
        for hi in range(256):
            x, w = bucket_inputs(hi)
            y = x.to(dtype).view(view).to(torch.int64) & mask
            sums.append(int((y * w).sum().item()))
        out["encode"][name] = sums
        codes = torch.arange(mask + 1, dtype=torch.int64)
        codes_view = torch.where(codes >= (mask + 1) // 2, codes - (mask + 1), codes) if view == torch.int16 else codes
        decoded = codes_view.to(view).view(dtype).to(torch.float32).view(torch.int32).to(torch.int64) & 0xFFFFFFFF
        out["decode"][name] = [f"{int(v):08x}" for v in decoded]
        print(f"{name}: done", file=sys.stderr, flush=True)
    # CUDA's conversions, when a GPU is present, for the record (they can differ on NaN payloads).
    if torch.cuda.is_available():
        diffs = {}
        for name, dtype, view, mask in FORMATS:
            n = 0
            for hi in range(0, 256, 15):
                x, _ = bucket_inputs(hi)
                a = x.to(dtype).view(view)
                b = x.cuda().to(dtype).view(view).cpu()
                n += int((a != b).sum().item())
            diffs[name] = n
        out["cuda_vs_cpu_mismatches_on_18_buckets"] = diffs
        out["device"] = torch.cuda.get_device_name()
    json.dump(out, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
