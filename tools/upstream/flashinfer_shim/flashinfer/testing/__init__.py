"""GPU timing as flashinfer.testing does it when cupti-python is absent: CUDA events.

flashinfer's `bench_gpu_time_with_cupti` falls back to `bench_gpu_time_with_cuda_event` when
cupti-python (>= 13) cannot be imported, and flashinfer-bench calls it with use_cuda_graph=False
and cold_l2_cache=True. This module implements that fallback with the same protocol:

- cold L2: a buffer of twice the device's L2 size (whole MiB) is zeroed before every call;
- an estimate first: one untimed call, then five flushed calls between one pair of events
  (it sizes the dry and timed runs when their counts are not given);
- dry runs (flush, call), then the timed runs: flush, start event, call, end event, each call
  its own pair of events, one synchronisation at the end;
- the result: every timed call's milliseconds, in order (flashinfer-bench takes their median).
"""

from __future__ import annotations

import warnings
from typing import Any, Callable, List, Optional, Tuple

import torch

__all__ = ["bench_gpu_time_with_cupti", "bench_gpu_time_with_cuda_event"]


def _first_cuda_device(args: Tuple, kwargs: dict) -> Any:
    stack: List[Any] = [args, kwargs]
    while stack:
        item = stack.pop(0)
        if isinstance(item, torch.Tensor):
            if item.is_cuda:
                return item.device
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
        elif isinstance(item, dict):
            stack.extend(item.values())
    return "cuda"


def _flush_buffer(device: Any) -> torch.Tensor:
    l2_bytes = torch.cuda.get_device_properties(device).L2_cache_size
    mib = (2 * l2_bytes) // (1024 * 1024)
    return torch.empty(mib * 1024 * 1024, dtype=torch.int8, device=device)


def bench_gpu_time_with_cuda_event(
    fn: Callable,
    dry_run_iters: Optional[int] = None,
    repeat_iters: Optional[int] = None,
    dry_run_time_ms: int = 25,
    repeat_time_ms: int = 100,
    sleep_after_run: bool = False,
    input_args: Tuple = (),
    input_kwargs: Optional[dict] = None,
    cold_l2_cache: bool = True,
    **unused: Any,
) -> List[float]:
    """Per-call GPU times in milliseconds, measured with CUDA events around each call."""
    if sleep_after_run:
        raise NotImplementedError("this flashinfer stand-in does not sleep between runs")
    kwargs = input_kwargs or {}
    with_args = bool(input_args) or bool(kwargs)

    def call() -> None:
        if with_args:
            fn(*input_args, **kwargs)
        else:
            fn()

    flush = _flush_buffer(_first_cuda_device(input_args, kwargs)) if cold_l2_cache else None

    def flushed_call() -> None:
        if flush is not None:
            flush.zero_()
        call()

    torch.cuda.synchronize()
    call()
    torch.cuda.synchronize()
    begin = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    estimate_calls = 5
    begin.record()
    for _ in range(estimate_calls):
        flushed_call()
    end.record()
    torch.cuda.synchronize()
    estimate_ms = begin.elapsed_time(end) / estimate_calls
    if dry_run_iters is None:
        dry_run_iters = max(1, int(dry_run_time_ms / estimate_ms))
    if repeat_iters is None:
        repeat_iters = max(1, int(repeat_time_ms / estimate_ms))

    for _ in range(dry_run_iters):
        flushed_call()
    torch.cuda.synchronize()

    starts = [torch.cuda.Event(enable_timing=True) for _ in range(repeat_iters)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(repeat_iters)]
    for start_event, end_event in zip(starts, ends):
        if flush is not None:
            flush.zero_()
        start_event.record()
        call()
        end_event.record()
    torch.cuda.synchronize()
    return [s.elapsed_time(e) for s, e in zip(starts, ends)]


def bench_gpu_time_with_cupti(
    fn: Callable,
    dry_run_iters: Optional[int] = None,
    repeat_iters: Optional[int] = None,
    dry_run_time_ms: int = 25,
    repeat_time_ms: int = 100,
    sleep_after_run: bool = False,
    use_cuda_graph: bool = False,
    input_args: Tuple = (),
    input_kwargs: Optional[dict] = None,
    cold_l2_cache: bool = True,
    **unused: Any,
) -> List[float]:
    """flashinfer's CUPTI timer without cupti-python: its CUDA-event fallback, as flashinfer
    itself takes it (this stand-in never uses CUPTI, so it says so whether or not cupti is
    installed)."""
    if use_cuda_graph:
        raise NotImplementedError("this flashinfer stand-in has no CUDA-graph timing")
    warnings.warn(
        "flashinfer stand-in: no CUPTI; timing with CUDA events (flashinfer's fallback)",
        category=UserWarning,
        stacklevel=2,
    )
    return bench_gpu_time_with_cuda_event(
        fn,
        dry_run_iters=dry_run_iters,
        repeat_iters=repeat_iters,
        dry_run_time_ms=dry_run_time_ms,
        repeat_time_ms=repeat_time_ms,
        sleep_after_run=sleep_after_run,
        input_args=input_args,
        input_kwargs=input_kwargs,
        cold_l2_cache=cold_l2_cache,
    )
