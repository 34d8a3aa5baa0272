"""Minimal safetensors reading and writing with PyTorch alone (no `safetensors` package), so the
bridge runs on Debian's python3-torch. Scalar inputs travel in the metadata as JSON values under
"fib.scalar.<name>", so ints, floats (all 17 digits) and bools come back exactly."""
import json
import struct

import torch

_CODES = {
    "F64": torch.float64,
    "F32": torch.float32,
    "F16": torch.float16,
    "BF16": torch.bfloat16,
    "I64": torch.int64,
    "I32": torch.int32,
    "I16": torch.int16,
    "I8": torch.int8,
    "U8": torch.uint8,
    "BOOL": torch.bool,
}
for _code, _name in (("F8_E4M3", "float8_e4m3fn"), ("F8_E5M2", "float8_e5m2")):
    if hasattr(torch, _name):  # PyTorch >= 2.1
        _CODES[_code] = getattr(torch, _name)
_NAMES = {v: k for k, v in _CODES.items()}


def load(path):
    """Returns ({name: tensor}, {name: python scalar}, metadata)."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n])
    meta = header.pop("__metadata__", {}) or {}
    values = {k[len("fib.scalar.") :]: json.loads(v) for k, v in meta.items() if k.startswith("fib.scalar.")}
    body = memoryview(data)[8 + n :]
    tensors = {}
    for name, entry in header.items():
        code = entry["dtype"]
        if code not in _CODES:
            raise ValueError(f"{path}: tensor {name}: dtype {code} is not supported by this PyTorch")
        begin, end = entry["data_offsets"]
        dtype = _CODES[code]
        raw = bytearray(body[begin:end])
        t = torch.frombuffer(raw, dtype=torch.uint8) if len(raw) else torch.empty(0, dtype=torch.uint8)
        tensors[name] = t.view(dtype).reshape(entry["shape"]).clone()
    return tensors, values, meta


def save(path, tensors):
    """Writes {name: tensor} (contiguous CPU tensors) in the safetensors layout."""
    header, chunks, offset = {}, [], 0
    for name, t in tensors.items():
        t = t.detach().to("cpu").contiguous()
        if t.dtype not in _NAMES:
            raise ValueError(f"output {name}: dtype {t.dtype} has no safetensors code here")
        raw = t.view(torch.uint8).numpy().tobytes() if t.numel() else b""
        header[name] = {"dtype": _NAMES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for c in chunks:
            f.write(c)
