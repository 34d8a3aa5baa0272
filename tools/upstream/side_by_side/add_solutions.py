#!/usr/bin/env python3
"""Writes fib's side-by-side solutions of gemm_n4096_k4096 into a dataset's solutions/ folder, as
upstream FlashInfer-Bench's solution JSON (tools/upstream/upstream-side-by-side.sh runs both
harnesses on them beside upstream's own example):
  add_solutions.py DATASET [NAME ...]
NAME: cublas (CUDA through tvm-ffi, dependencies ["cublas"]), triton (a Triton kernel), torch (a
PyTorch C++/CUDA extension); default all three. Prints each file written."""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

SOLUTIONS = {
    "cublas": {
        "name": "fib_cublas_gemm",
        "description": "cuBLAS GEMM (float32 accumulation) through tvm-ffi",
        "source": "gemm_cublas.cu",
        "spec": {"language": "cuda", "target_hardware": ["cuda"],
                 "entry_point": "gemm_cublas.cu::gemm", "dependencies": ["cublas"],
                 "destination_passing_style": True, "binding": "tvm-ffi"},
    },
    "triton": {
        "name": "fib_triton_gemm",
        "description": "Triton GEMM (128x128x64 tiles, float32 accumulation)",
        "source": "gemm_triton.py",
        "spec": {"language": "triton", "target_hardware": ["cuda"],
                 "entry_point": "gemm_triton.py::run", "dependencies": [],
                 "destination_passing_style": True},
    },
    "torch": {
        "name": "fib_torch_extension_gemm",
        "description": "PyTorch C++/CUDA extension: ATen's matmul into C",
        "source": "gemm_torch.cu",
        "spec": {"language": "cuda", "target_hardware": ["cuda"],
                 "entry_point": "gemm_torch.cu::run", "dependencies": [],
                 "destination_passing_style": True, "binding": "torch"},
    },
}


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    dataset, names = argv[1], argv[2:] or list(SOLUTIONS)
    for name in names:
        if name not in SOLUTIONS:
            print(f"add_solutions: unknown solution '{name}' (one of {', '.join(SOLUTIONS)})",
                  file=sys.stderr)
            return 2
        s = SOLUTIONS[name]
        with open(os.path.join(HERE, s["source"])) as f:
            content = f.read()
        record = {"name": s["name"], "definition": "gemm_n4096_k4096", "author": "fib",
                  "description": s["description"], "spec": s["spec"],
                  "sources": [{"path": s["source"], "content": content}]}
        path = os.path.join(dataset, "solutions", s["name"] + ".json")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            json.dump(record, f, indent=1)
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
