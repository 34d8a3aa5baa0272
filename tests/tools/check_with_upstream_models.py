#!/usr/bin/env python3
"""Loads FlashInfer-Trace datasets with upstream flashinfer-bench's own pydantic data models.

usage: check_with_upstream_models.py UPSTREAM_SOURCE DATASET...

UPSTREAM_SOURCE is a flashinfer-bench source tree (scripts/upstream-models.sh provides one at the
pinned commit). Only its data models are imported, and without running flashinfer_bench's own
package __init__ (which imports torch, flashinfer, tvm-ffi and the whole benchmark): the
flashinfer_bench and flashinfer_bench.data packages are registered by path, so the modules'
own imports (`from .utils import ...`, `from flashinfer_bench.utils import ...`) resolve to
upstream's files. Where upstream's TraceSet can be imported (it needs torch and safetensors), each
dataset is loaded with TraceSet.from_path itself; elsewhere every record file TraceSet.from_path
would read (the same folders and patterns) is loaded with upstream's load_json_file /
load_jsonl_file and its Definition, Solution and Trace models, and the loader's own rules
(unique names, workload records under workloads/, evaluations under traces/) are checked.

Every failure is printed (file, and pydantic's message); the exit status is 1 if there was any,
0 otherwise. The last line counts what was loaded.
"""

import importlib
import sys
import types
from pathlib import Path


def register_package(name, path):
    module = types.ModuleType(name)
    module.__path__ = [str(path)]
    module.__file__ = str(path / "__init__.py")
    sys.modules[name] = module


def load_upstream_data(source):
    package = Path(source) / "flashinfer_bench"
    if not (package / "data" / "solution.py").is_file():
        sys.exit(f"check_with_upstream_models: {source} is not a flashinfer-bench source tree")
    register_package("flashinfer_bench", package)
    register_package("flashinfer_bench.data", package / "data")
    names = ["definition", "solution", "workload", "trace", "json_utils"]
    return {n: importlib.import_module("flashinfer_bench.data." + n) for n in names}


def upstream_trace_set():
    """Upstream's TraceSet class, or None where its imports (torch, safetensors) are missing."""
    try:
        return importlib.import_module("flashinfer_bench.data.trace_set").TraceSet
    except ImportError as e:
        print(f"note: upstream's TraceSet is not importable here ({e}); loading every record "
              "file with upstream's models instead")
        return None


def check_files(root, data, failures):
    """Loads every record file TraceSet.from_path reads, with upstream's models; counts them."""
    load_json = data["json_utils"].load_json_file
    load_jsonl = data["json_utils"].load_jsonl_file
    Definition = data["definition"].Definition
    Solution = data["solution"].Solution
    Trace = data["trace"].Trace
    counts = {"definitions": 0, "solutions": 0, "workloads": 0, "traces": 0}
    seen = {"definitions": set(), "solutions": set()}

    def attempt(path, load):
        try:
            return load()
        except Exception as e:  # pydantic's ValidationError, a JSON error, ...
            failures.append(f"{path.relative_to(root)}: {type(e).__name__}: {e}")
            return None

    for folder, model in (("definitions", Definition), ("solutions", Solution)):
        for p in sorted((root / folder).rglob("*.json")):
            record = attempt(p, lambda: load_json(model, p))
            if record is None:
                continue
            if record.name in seen[folder]:
                failures.append(f"{p.relative_to(root)}: duplicate name {record.name}")
            seen[folder].add(record.name)
            counts[folder] += 1
    for folder, workload_records in (("workloads", True), ("traces", False)):
        for p in sorted((root / folder).rglob("*.jsonl")):
            records = attempt(p, lambda: load_jsonl(Trace, p)) or []
            for i, t in enumerate(records):
                if t.is_workload_trace() != workload_records:
                    failures.append(f"{p.relative_to(root)}: record {i + 1} belongs under "
                                    f"{'traces' if workload_records else 'workloads'}/")
            counts[folder] += len(records)
    return counts


def check_with_trace_set(root, trace_set_class, failures):
    try:
        ts = trace_set_class.from_path(str(root))
    except Exception as e:
        failures.append(f"{root}: TraceSet.from_path: {type(e).__name__}: {e}")
        return None
    return {
        "definitions": len(ts.definitions),
        "solutions": sum(len(v) for v in ts.solutions.values()),
        "workloads": sum(len(v) for v in ts.workloads.values()),
        "traces": sum(len(v) for v in ts.traces.values()),
    }


def main(argv):
    if len(argv) < 3:
        sys.exit(__doc__)
    data = load_upstream_data(argv[1])
    trace_set_class = upstream_trace_set()
    status = 0
    for dataset in argv[2:]:
        root = Path(dataset)
        failures = []
        if trace_set_class is not None:
            counts = check_with_trace_set(root, trace_set_class, failures)
        else:
            counts = check_files(root, data, failures)
        for f in failures:
            print(f"FAIL {f}")
        status = status or (1 if failures else 0)
        if counts is not None:
            print(f"{dataset}: {counts['definitions']} definitions, {counts['solutions']} "
                  f"solutions, {counts['workloads']} workloads, {counts['traces']} traces; "
                  f"{len(failures)} failures")
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv))
