"""A stand-in for the flashinfer-python package, holding only what flashinfer-bench's timer uses.

flashinfer-bench (flashinfer_bench/bench/timing.py) imports one function from flashinfer:
`flashinfer.testing.bench_gpu_time_with_cupti`. The whole flashinfer-python wheel is too large to
carry to the GPU machine, so tools/upstream/upstream-side-by-side.sh puts this folder on
PYTHONPATH instead. Written for fib from flashinfer's documented behaviour; not flashinfer's code.
"""

__version__ = "0.0.0+fib.shim"
