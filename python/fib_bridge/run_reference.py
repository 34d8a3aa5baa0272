#!/usr/bin/env python3
"""Runs definitions' PyTorch `reference` code on inputs from safetensors files, binding inputs by
name, and writes the outputs (named after the definition's outputs, in order) to safetensors.

    run_reference.py DEFINITION.json INPUTS.safetensors OUTPUTS.safetensors [--device D]
    run_reference.py --batch JOBS.jsonl [--device D]

A batch file has one JSON object per line: {"definition": path, "inputs": path, "outputs": path,
"seed": int}; a job that fails writes its traceback to outputs + ".error" and the batch goes on.
Importing torch once for many jobs is what makes parity tests over a whole corpus affordable.

Timing mode (for benchmarks): a job with "repeat": R (and optionally "threads": N, which calls
torch.set_num_threads(N) first) runs the reference once more as a warm-up after the call whose
outputs are saved, then R times, and writes outputs + ".timing.json" with the median and every
run's seconds (wall clock and process CPU time) and the device its outputs were on. Only the reference's `run(...)` call is timed: not importing torch, reading the
inputs, compiling the reference code, seeding, or writing the outputs.

Old PyTorch builds (Debian's 1.13) lack some CPU kernels for float16 (e.g. matmul). When a
reference fails with "not implemented for 'Half'", it is run again with float16 inputs upcast to
float32 and outputs cast back to the declared dtype, and a note says so on stderr; that is the
arithmetic the GPU kernels use (fp32 accumulation, one rounding).

Exit status: 0 when every job succeeded, 1 when one failed, 2 on bad arguments."""
import json
import os
import statistics
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io  # noqa: E402
import torch  # noqa: E402

_DTYPES = {
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "int64": torch.int64,
    "int32": torch.int32,
    "int16": torch.int16,
    "int8": torch.int8,
    "uint8": torch.uint8,
    "bool": torch.bool,
}
for _name in ("float8_e4m3fn", "float8_e5m2"):
    if hasattr(torch, _name):
        _DTYPES[_name] = getattr(torch, _name)


def _compile(definition):
    namespace = {"__name__": "fib_reference"}
    exec(compile(definition["reference"], f"<reference of {definition['name']}>", "exec"), namespace)
    return namespace["run"]


def _call(definition, kwargs, seed):
    run = _compile(definition)
    torch.manual_seed(seed)
    with torch.no_grad():
        return run(**kwargs)


def _time(definition, kwargs, seed, repeat, device):
    """Wall-clock and process CPU seconds of each of `repeat` calls of the reference, after one
    warm-up call."""
    run = _compile(definition)
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    wall, cpu = [], []
    for i in range(repeat + 1):
        torch.manual_seed(seed)
        sync()
        start, start_cpu = time.perf_counter(), time.process_time()
        with torch.no_grad():
            run(**kwargs)
        sync()
        if i:
            wall.append(time.perf_counter() - start)
            cpu.append(time.process_time() - start_cpu)
    return wall, cpu


def run_job(definition_path, inputs_path, outputs_path, seed, device, repeat=0, threads=0):
    if threads:
        torch.set_num_threads(threads)
    with open(definition_path) as f:
        definition = json.load(f)
    tensors, scalars, _ = safetensors_io.load(inputs_path)
    kwargs = {}
    for name in definition["inputs"]:
        if name in tensors:
            kwargs[name] = tensors[name].to(device)
        elif name in scalars:
            kwargs[name] = scalars[name]
    upcast = False
    try:
        result = _call(definition, kwargs, seed)
    except RuntimeError as e:
        if "not implemented for 'Half'" not in str(e):
            raise
        print(f"{definition['name']}: note: {e}; ran again with float16 inputs upcast to float32", file=sys.stderr)
        upcast = True
        kwargs = {k: (v.float() if isinstance(v, torch.Tensor) and v.dtype == torch.float16 else v) for k, v in kwargs.items()}
        result = _call(definition, kwargs, seed)
    names = list(definition["outputs"])
    if not isinstance(result, (tuple, list)):
        result = (result,)
    if len(result) != len(names):
        raise RuntimeError(f"reference returned {len(result)} values, the definition has {len(names)} outputs")
    out = {}
    for name, value in zip(names, result):
        if not isinstance(value, torch.Tensor):
            value = torch.tensor(value)
        declared = _DTYPES.get(definition["outputs"][name]["dtype"])
        if upcast and declared is not None and value.dtype == torch.float32 and declared != torch.float32:
            value = value.to(declared)
        out[name] = value
    safetensors_io.save(outputs_path, out)
    if repeat:
        wall, cpu = _time(definition, kwargs, seed, repeat, device)
        timing = {
            "median_s": statistics.median(wall),
            "median_cpu_s": statistics.median(cpu),
            "runs_s": wall,
            "runs_cpu_s": cpu,
            "threads": torch.get_num_threads(),
            "torch_version": torch.__version__,
            "upcast_float16": upcast,
            # Where the reference computed: the device of its outputs, whatever was asked.
            "device": str(next(iter(out.values())).device) if out else device,
        }
        with open(outputs_path + ".timing.json", "w") as f:
            json.dump(timing, f)


def main(argv):
    device = "cpu"
    args = list(argv[1:])
    if "--device" in args:
        i = args.index("--device")
        device = args[i + 1]
        del args[i : i + 2]
    if len(args) == 2 and args[0] == "--batch":
        failed = 0
        with open(args[1]) as f:
            jobs = [json.loads(line) for line in f if line.strip()]
        for job in jobs:
            try:
                run_job(job["definition"], job["inputs"], job["outputs"], int(job.get("seed", 0)), device,
                        int(job.get("repeat", 0)), int(job.get("threads", 0)))
            except Exception:
                failed += 1
                with open(job["outputs"] + ".error", "w") as err:
                    err.write(traceback.format_exc())
        return 1 if failed else 0
    if len(args) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        run_job(args[0], args[1], args[2], int(os.environ.get("FIB_SEED", "0")), device)
    except Exception:
        traceback.print_exc()
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
