#!/usr/bin/env python3
"""Writes the reference safetensors files used by tests/tensor/safetensors_reference_test.cpp.

They are made by the real `safetensors` library (not by fib), so the test checks that fib reads
what the format's own writer produces: its key order, its header padding, its dtype codes.
Made with safetensors 0.8.0 and numpy 2.4.6:

    python3 -m pip install safetensors numpy
    python3 tests/data/safetensors/make.py

The files are checked in; the tests never run Python.
"""
import os

import numpy as np
from safetensors import _safetensors_rust as st_rust
from safetensors.numpy import save_file

HERE = os.path.dirname(os.path.abspath(__file__))


def numpy_two_tensors():
    # The public numpy API: F32 [2,3] holding 0..5, I32 [4] holding 7..10, string metadata.
    tensors = {
        "weight": np.arange(6, dtype=np.float32).reshape(2, 3),
        "ids": np.array([7, 8, 9, 10], dtype=np.int32),
    }
    save_file(tensors, os.path.join(HERE, "numpy_two_tensors.safetensors"),
              metadata={"format": "np"})  # one key: the writer does not keep key order


# (name, dtype given to the writer, storage shape, fill byte). Every tensor's bytes are its
# fill byte, so a test can tell from the data which tensor an offset points at.
MIXED = [
    ("bf16", "bfloat16", [3], 0x11),
    ("fp8", "float8_e4m3fn", [2, 2], 0x22),
    ("fp4", "float4_e2m1fn_x2", [2, 2], 0x33),  # two F4 per byte: the header says [2, 4]
    ("mask", "bool", [3], 0x01),
    ("half", "float16", [2], 0x44),
    ("bytes", "uint8", [5], 0x55),
    ("step", "int64", [], 0x66),
    ("empty", "float32", [0, 3], 0x00),
    ("nuz", "float8_e4m3fnuz", [2], 0x77),
    ("cplx", "complex64", [1], 0x88),
]
ITEM_BYTES = {"bfloat16": 2, "float8_e4m3fn": 1, "float4_e2m1fn_x2": 1, "bool": 1,
              "float16": 2, "uint8": 1, "int64": 8, "float32": 4, "float8_e4m3fnuz": 1,
              "complex64": 8}


def rust_mixed_dtypes():
    # The raw serializer, for dtypes numpy lacks (bf16, fp8, fp4).
    buffers, specs = [], {}
    for name, dtype, shape, fill in MIXED:
        n = int(np.prod(shape, dtype=np.int64)) * ITEM_BYTES[dtype]
        buf = np.full(n, fill, dtype=np.uint8)
        buffers.append(buf)  # kept alive until serialize returns
        specs[name] = st_rust.TensorSpec(dtype=dtype, shape=shape, data_ptr=buf.ctypes.data,
                                         data_len=n)
    data = st_rust.serialize(specs, {"producer": "safetensors-rust"})
    with open(os.path.join(HERE, "rust_mixed_dtypes.safetensors"), "wb") as f:
        f.write(bytes(data))


if __name__ == "__main__":
    numpy_two_tensors()
    rust_mixed_dtypes()
    for name in ("numpy_two_tensors", "rust_mixed_dtypes"):
        with open(os.path.join(HERE, name + ".safetensors"), "rb") as f:
            raw = f.read()
        n = int.from_bytes(raw[:8], "little")
        print(name, len(raw), "bytes; header", n, "bytes:", raw[8:8 + n].decode())
