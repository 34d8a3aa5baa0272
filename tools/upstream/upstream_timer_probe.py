#!/usr/bin/env python3
"""Where upstream's timer and fib's part on short kernels (tools/upstream/upstream-side-by-side.sh,
part `probe`). For each solution of the side-by-side dataset, built by upstream's own builder, at
a few M, the median of 50 timed calls after 10 warmups, measured three ways:
  upstream   upstream's timer as flashinfer-bench calls it (flashinfer.testing's CUDA-event
             protocol; tools/upstream/flashinfer_shim): flush L2, start event, call, end event;
  busy       the same with a spin kernel queued before the start event, so the host's part of the
             call (Python, tvm-ffi's argument conversion, the launch) runs while the GPU is busy
             and only GPU time falls between the events;
  kernels    the kernels' own durations from CUPTI (torch.profiler's trace), summed per call.
upstream - busy is the host time upstream's window holds; busy ~ kernels says the rest is GPU time.
  upstream_timer_probe.py DATASET [M ...]"""
import glob
import json
import os
import statistics
import sys
import tempfile

import torch
from flashinfer.testing import bench_gpu_time_with_cupti
from flashinfer_bench.compile import BuilderRegistry
from flashinfer_bench.data import TraceSet

WARMUP, ITERS = 10, 50
SPIN_CYCLES = 400_000  # about 200 us at the H100's and H200's clocks: longer than any host part


def flush_buffer():
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    return torch.empty((2 * l2) // (1 << 20) << 20, dtype=torch.int8, device="cuda")


def busy_median_us(fn, args, flush):
    for _ in range(WARMUP):
        flush.zero_()
        fn(*args)
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(ITERS)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(ITERS)]
    torch.cuda.synchronize()
    for s, e in zip(starts, ends):
        flush.zero_()
        torch.cuda._sleep(SPIN_CYCLES)
        s.record()
        fn(*args)
        e.record()
    torch.cuda.synchronize()
    return 1000 * statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends))


def kernel_us_per_call(fn, args, flush):
    """Median over calls of the summed durations of the call's kernels (CUPTI, via kineto), and
    the number of kernels per call. The flush's fill kernels are told apart by their names."""
    for _ in range(WARMUP):
        flush.zero_()
        fn(*args)
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(ITERS):
            flush.zero_()
            fn(*args)
        torch.cuda.synchronize()
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "trace.json")
        prof.export_chrome_trace(path)
        events = json.load(open(path)).get("traceEvents", [])
    kernels = sorted((e for e in events if e.get("cat") == "kernel"), key=lambda e: e["ts"])
    per_call, current = [], None
    for k in kernels:
        if "elementwise" in k["name"] or "fill" in k["name"].lower():
            current = []
            per_call.append(current)
        elif current is not None:
            current.append(k["dur"])
    sums = [sum(c) for c in per_call if c]
    counts = {len(c) for c in per_call if c}
    return (statistics.median(sums) if sums else float("nan")), sorted(counts)


def main():
    dataset = sys.argv[1]
    ms = [int(m) for m in sys.argv[2:]] or [1, 64, 256, 8192]
    ts = TraceSet.from_path(dataset)
    registry = BuilderRegistry.get_instance()
    flush = flush_buffer()
    print(f"{'solution':<24} {'M':>5}  {'upstream us':>11}  {'busy us':>8}  {'kernels us':>10}  "
          f"{'upstream-busy':>13}  kernels/call")
    for def_name, solutions in sorted(ts.solutions.items()):
        definition = ts.definitions[def_name]
        for solution in sorted(solutions, key=lambda s: s.name):
            fn = registry.build(definition, solution)
            for m in ms:
                torch.manual_seed(m)
                a = torch.randn(m, 4096, dtype=torch.float16, device="cuda")
                b = torch.randn(4096, 4096, dtype=torch.float16, device="cuda")
                c = torch.empty(m, 4096, dtype=torch.float16, device="cuda")
                args = [a, b, c]
                up = 1000 * statistics.median(bench_gpu_time_with_cupti(
                    fn=fn, dry_run_iters=WARMUP, repeat_iters=ITERS, input_args=tuple(args),
                    cold_l2_cache=True, use_cuda_graph=False))
                busy = busy_median_us(fn, args, flush)
                try:
                    kern, counts = kernel_us_per_call(fn, args, flush)
                except Exception as e:  # the profiler is a witness, not the measurement
                    print(f"probe: no CUPTI kernel times: {e}", file=sys.stderr)
                    kern, counts = float("nan"), []
                print(f"{solution.name:<24} {m:>5}  {up:11.2f}  {busy:8.2f}  {kern:10.2f}  "
                      f"{up - busy:13.2f}  {counts}", flush=True)


if __name__ == "__main__":
    main()
