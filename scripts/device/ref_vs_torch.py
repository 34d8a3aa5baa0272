#!/usr/bin/env python3
"""fib's CUDA native references against the definitions' own PyTorch references, on the GPU, on
the same inputs (docs/benchmarks.md, "CUDA references vs PyTorch references").

    ref_vs_torch.py --fib BUILD/fib --corpus CORPUS --work DIR [--cases a,b] [--out results.json]

For each case of CASES (a corpus definition and one of its corpus workloads, or, for the families
the corpus has no workloads for, a workload with fixed axes written into a scratch copy of the
corpus):
  1. `fib inputs` writes the workload's inputs (seed 1; missing blobs are synthesized, as fib run
     does);
  2. `fib reference --device cuda:0 --time --json` times the CUDA reference with fib's GPU timer
     (events, L2 flush before each call, blocking kernel, warmup 3, noise stop, at most 100
     samples or 1 s);
  3. the definition's `reference` source is exec'd and its run(...) called with the same inputs
     (safetensors -> torch tensors on cuda:0, same dtypes, bound by name), timed with CUDA events
     around the call after the same kind of L2 flush (a buffer twice the L2 written, then read),
     3 warmup calls, the same noise criterion, at most 100 samples or 1 s (but at least 3);
  4. the two outputs are compared (largest |difference| over entries finite on both sides) as a
     check that both computed the same thing;
  5. once every case is timed, for each case below the target, where the time goes: the CUDA
     reference's kernels (fib's timer in CUPTI mode) and the PyTorch reference's kernels
     (torch.profiler, one call), counted and summed (--no-breakdown skips this). It comes last:
     the profiler leaves CUPTI attached to the process after it stops (PyTorch issue 144455),
     and launch-bound PyTorch references timed after a profile ran 30-40% slower.
A PyTorch reference that fails is reported with its error, never left out. Prints a markdown table
(definition, axes, CUDA median, PyTorch median, ratio, ...) and the min and geometric mean of the
ratios; writes every figure to --out as JSON."""
import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python", "fib_bridge"))
import safetensors_io  # noqa: E402
import torch  # noqa: E402

TARGET = 20.0

# (label, definition, workload): workload is a corpus uuid, or {"axes": ..., "scalars": ...} for a
# workload written into the scratch dataset (every tensor synthesized by fib's recipes).
CASES = [
    ("rmsnorm", "rmsnorm_h4096", "841b0afa-80fa-449a-9e1d-f294da92d02f"),  # batch 14509 (largest)
    ("rmsnorm_small", "rmsnorm_h4096", "864d596c"),  # batch 1 (decode-sized)
    ("fused_add_rmsnorm", "fused_add_rmsnorm_h7168", "d9c27791-1f27-4feb-adb6-aa8a8c20556f"),
    ("gemm", "gemm_n28672_k4096", "32cd2698-78a7-4446-9691-2b3e42fc68b7"),  # M 8192 (largest)
    ("gemm_small", "gemm_n4096_k4096", "e39649a6"),  # M 1 (a unique uuid prefix is enough)
    ("rope", "rope_with_cos_sin_cache_neox_style_d128_rd64",
     {"axes": {"num_tokens": 8192, "num_qo_heads": 32, "num_kv_heads": 8, "max_seq_len": 8192}}),
    ("gqa_paged_decode", "gqa_paged_decode_h32_kv8_d128_ps1",
     "5444fc56"),  # batch 64, 58966 KV tokens (largest of the definition)
    ("gqa_paged_prefill", "gqa_paged_prefill_causal_h32_kv8_d128_ps1", "94a059b3"),
    ("gqa_ragged", "gqa_ragged_prefill_causal_h32_kv8_d128",
     "6f3e1bfe-2209-4921-9be4-beed5c9744cb"),  # 13557 tokens (largest)
    ("mla_paged_decode", "mla_paged_decode_h16_ckv512_kpe64_ps1",
     "1c3743b9-d48e-453a-a023-9b52b1b73989"),  # batch 64, 68745 KV tokens (largest)
    ("mla_paged_prefill", "mla_paged_prefill_causal_h16_ckv512_kpe64_ps1",
     "0e70750d"),  # 10870 queries (largest)
    ("moe", "moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048", "1a4c6ba1"),  # 901
    ("moe_full", "moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048",
     "5e8dc11c"),  # 14107 tokens (largest)
    ("gdn_decode", "gdn_decode_qk16_v32_d128_k_last", {"axes": {"batch_size": 32}}),
    ("gdn_prefill", "gdn_prefill_qk16_v32_d128_k_last",
     {"axes": {"total_seq_len": 1024, "num_seqs": 4, "len_cu_seqlens": 5}}),
    ("mamba_ssu", "mamba_ssu_decode_h128_d64_s128_ng8",
     {"axes": {"batch_size": 64, "state_cache_size": 256}}),
    ("dsa_sparse", "dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps64",
     {"axes": {"num_tokens": 128, "num_pages": 1024}}),
    ("sampling", "top_k_top_p_sampling_from_probs_v128256", {"axes": {"batch_size": 64}}),
]

NOISE_MIN_SAMPLES = 10
NOISE_REL_PRECISION = 0.005


def precise_enough(samples):
    """fib_bench's noise criterion (src/bench/timing/stats.cpp): the ~95% confidence half-width of
    the median, from the IQR, within 0.5% of the median, after at least 10 samples."""
    if len(samples) < NOISE_MIN_SAMPLES:
        return False
    med = statistics.median(samples)
    if med <= 0:
        return True
    sigma = (percentile(samples, 0.75) - percentile(samples, 0.25)) / 1.349
    half = 1.96 * 1.2533 * sigma / math.sqrt(len(samples))
    return half / med <= NOISE_REL_PRECISION


def percentile(samples, p):
    s = sorted(samples)
    pos = p * (len(s) - 1)
    lo = int(math.floor(pos))
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


class L2Flush:
    """A buffer twice the L2, written then read before each timed call (fib's timer does the same
    with its own kernels), so every call starts with a cold L2."""

    def __init__(self, device):
        l2 = torch.cuda.get_device_properties(device).L2_cache_size
        self.buf = torch.empty(2 * l2 // 4, dtype=torch.int32, device=device)
        self.bytes = self.buf.numel() * 4
        self.value = 0

    def __call__(self):
        self.value += 1
        self.buf.fill_(self.value)
        self.sink = self.buf.sum()


def time_torch(run, kwargs, flush, warmup=3, max_iters=100, max_seconds=1.0, min_iters=3):
    with torch.no_grad():
        for _ in range(warmup):
            flush()
            run(**kwargs)
        torch.cuda.synchronize()
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        samples, stop = [], "iterations"
        t0 = time.perf_counter()
        while len(samples) < max_iters:
            flush()
            start.record()
            run(**kwargs)
            end.record()
            end.synchronize()
            samples.append(start.elapsed_time(end))
            if precise_enough(samples):
                stop = "noise"
                break
            if len(samples) >= min_iters and time.perf_counter() - t0 >= max_seconds:
                stop = "time"
                break
    return samples, stop


def sh(cmd, timeout):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    return r.returncode, r.stdout, r.stderr


def definition_path(corpus, name):
    for op in sorted(os.listdir(os.path.join(corpus, "definitions"))):
        p = os.path.join(corpus, "definitions", op, name + ".json")
        if os.path.exists(p):
            return p
    raise FileNotFoundError(f"{corpus}: no definition named {name}")


def resolve_workload(dataset, definition, spec, label):
    """The workload uuid: a corpus uuid (a unique prefix is enough), or a new record appended to
    the scratch dataset's workload file."""
    path = os.path.join(dataset, "workloads", definition["op_type"], definition["name"] + ".jsonl")
    if isinstance(spec, str):
        with open(path) as f:
            rows = [json.loads(line) for line in f if line.strip()]
        hits = [r["workload"] for r in rows if r["workload"]["uuid"].startswith(spec)]
        if len(hits) != 1:
            raise RuntimeError(f"{path}: {len(hits)} workloads match '{spec}'")
        return hits[0]["uuid"], "corpus"
    uuid = f"ref-vs-torch-{label}"
    inputs = {k: {"type": "scalar", "value": v} for k, v in spec.get("scalars", {}).items()}
    row = {"definition": definition["name"], "solution": None,
           "workload": {"uuid": uuid, "axes": spec["axes"], "inputs": inputs}, "evaluation": None}
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "a") as f:
        f.write(json.dumps(row) + "\n")
    return uuid, "synthesized"


def compare(cuda_out, torch_out, names):
    """Largest |difference| over entries finite on both sides, per float output; None for integer
    outputs (sampling draws random tokens on both sides, from different generators)."""
    worst, where, nonfinite = 0.0, "", 0
    for name, value in zip(names, torch_out):
        a = cuda_out[name].to("cuda")
        b = value if isinstance(value, torch.Tensor) else torch.tensor(value)
        b = b.to("cuda")
        if not a.is_floating_point():
            return None
        a, b = a.float(), b.float().reshape(a.shape)
        both = torch.isfinite(a) & torch.isfinite(b)
        nonfinite += int((torch.isfinite(a) != torch.isfinite(b)).sum())
        if both.any():
            d = float((a - b).abs()[both].max())
            if d >= worst:
                worst, where = d, name
    return {"max_abs_diff": worst, "output": where, "finite_mismatch": nonfinite}


def top_kernels(pairs, n=2):
    """'name (ms, xK)' of the n kernels with the largest total, from (name, ms) pairs."""
    total, count = {}, {}
    for name, ms in pairs:
        total[name] = total.get(name, 0.0) + ms
        count[name] = count.get(name, 0) + 1
    best = sorted(total, key=total.get, reverse=True)[:n]
    short = lambda x: x if len(x) <= 48 else x[:45] + "..."  # noqa: E731
    return [f"{short(k)} {total[k]:.3f} ms" + (f" x{count[k]}" if count[k] > 1 else "")
            for k in best]


def cuda_breakdown(args, dataset, name, inputs, work):
    """The CUDA reference's kernels in one call, from fib's timer in CUPTI mode."""
    rc, out, err = sh([args.fib, "reference", "--dataset", dataset, "--definition", name,
                       "--inputs", inputs, "--output", os.path.join(work, "cupti.safetensors"),
                       "--device", "cuda:0", "--time", "--json", "--mode", "cupti",
                       "--iterations", "5", "--warmup", "1", "--seed", "1"], args.timeout)
    if rc != 0:
        return {"error": err.strip()[-300:]}
    t = json.loads(out)["timing"]
    ks = [(k["name"], k["duration_ms"]) for k in t.get("kernels", [])]
    return {"kernels": len(ks), "kernel_ms": sum(ms for _, ms in ks), "span_median_ms":
            t["median_ms"], "top": top_kernels(ks)}


def torch_breakdown(run, kwargs, flush, median_ms):
    """The PyTorch reference's GPU work in one call (torch.profiler): kernels and copies, their
    summed time, and that sum as a share of the call's median (near 1: the GPU is busy the whole
    call; far below: the call waits on Python and launches)."""
    from torch.profiler import ProfilerActivity, profile
    flush()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        with torch.no_grad():
            run(**kwargs)
        torch.cuda.synchronize()
    ks = [(e.name, e.time_range.elapsed_us() / 1e3) for e in prof.events()
          if e.device_type == torch.autograd.DeviceType.CUDA]
    if not ks:  # builds that attach kernels to the CPU op that launched them
        ks = [(k.name, k.duration / 1e3) for e in prof.events() for k in getattr(e, "kernels", [])]
    busy = sum(ms for _, ms in ks)
    return {"kernels": len(ks), "kernel_ms": busy, "busy_share": busy / median_ms,
            "top": top_kernels(ks)}


def fmt_ms(x):
    if x is None:
        return "—"
    return f"{x:.3f}" if x < 10 else f"{x:.1f}" if x < 1000 else f"{x:.0f}"


def run_case(args, dataset, label, name, spec, flush):
    res = {"label": label, "definition": name}
    dpath = definition_path(dataset, name)
    with open(dpath) as f:
        definition = json.load(f)
    uuid, source = resolve_workload(dataset, definition, spec, label)
    res.update(workload=uuid, source=source)
    work = os.path.join(args.work, label)
    os.makedirs(work, exist_ok=True)
    inputs = os.path.join(work, "in.safetensors")
    rc, out, err = sh([args.fib, "inputs", "--dataset", dataset, "--definition", name,
                       "--workload", uuid, "--output", inputs, "--seed", "1"], args.timeout)
    if rc not in (0, 1):
        res["error"] = f"fib inputs failed ({rc}): {err.strip()[-400:]}"
        return res
    if rc == 1:
        res["input_note"] = err.strip()[-400:]
    # fib's CUDA reference, timed by fib's GPU timer.
    cuda_out = os.path.join(work, "cuda_out.safetensors")
    rc, out, err = sh([args.fib, "reference", "--dataset", dataset, "--definition", name,
                       "--inputs", inputs, "--output", cuda_out, "--device", "cuda:0", "--time",
                       "--json", "--seed", "1"], args.timeout)
    if rc != 0:
        res["error"] = f"fib reference failed ({rc}): {err.strip()[-600:]}"
        return res
    fib = json.loads(out)
    t = fib["timing"]
    res.update(axes=fib["axes"], kernel=fib["kernel"], device_name=fib["device_name"],
               cuda_median_ms=t["median_ms"], cuda_p10_ms=t["p10_ms"], cuda_p90_ms=t["p90_ms"],
               cuda_samples=t["count"], cuda_method=t["method"], cuda_first_call_ms=fib["run_ms"])
    # The definition's own PyTorch reference on the same inputs, on the GPU.
    try:
        run, kwargs = load_call(definition, inputs)
        torch.manual_seed(1)
        with torch.no_grad():
            result = run(**kwargs)
        torch.cuda.synchronize()
        if not isinstance(result, (tuple, list)):
            result = (result,)
        cuda_tensors, _, _ = safetensors_io.load(cuda_out)
        res["compare"] = compare(cuda_tensors, result, list(definition["outputs"]))
        del result, cuda_tensors
        samples, stop = time_torch(run, kwargs, flush)
        res.update(torch_median_ms=statistics.median(samples),
                   torch_p10_ms=percentile(samples, 0.1), torch_p90_ms=percentile(samples, 0.9),
                   torch_samples=len(samples), torch_stop=stop)
        res["ratio"] = res["torch_median_ms"] / res["cuda_median_ms"]
    except Exception as e:  # reported, never hidden
        lines = traceback.format_exception_only(type(e), e)
        res["torch_error"] = " ".join(x.strip() for x in lines)[-400:]
    finally:
        kwargs = None
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
    return res


def table(results):
    rows = ["| definition | workload | axes | CUDA ref ms (p10–p90, n) | PyTorch ms (p10–p90, n) "
            "| ratio | max abs diff |",
            "|---|---|---|---:|---:|---:|---|"]
    for r in results:
        axes = ", ".join(f"{k} {v}" for k, v in r.get("axes", {}).items())
        wl = {"corpus": r.get("workload", "")[:8], "synthesized": "synth."}.get(r.get("source"), "")
        if "error" in r:
            rows.append(f"| {r['definition']} | {wl} | | failed: {r['error']} | | | |")
            continue
        cu = (f"{fmt_ms(r['cuda_median_ms'])} ({fmt_ms(r['cuda_p10_ms'])}–"
              f"{fmt_ms(r['cuda_p90_ms'])}, {r['cuda_samples']})")
        if not r["cuda_method"].get("blocking_kernel", True):
            cu += " †"
        if "torch_error" in r:
            rows.append(f"| {r['definition']} | {wl} | {axes} | {cu} | failed: {r['torch_error']}"
                        " | — | |")
            continue
        th = (f"{fmt_ms(r['torch_median_ms'])} ({fmt_ms(r['torch_p10_ms'])}–"
              f"{fmt_ms(r['torch_p90_ms'])}, {r['torch_samples']})")
        c = r.get("compare")
        diff = "draws (random)" if c is None else (
            f"{c['max_abs_diff']:.3g} ({c['output']})"
            + (f", {c['finite_mismatch']} non-finite on one side" if c["finite_mismatch"] else ""))
        mark = "" if r["ratio"] >= TARGET else " (below 20x)"
        rows.append(f"| {r['definition']} | {wl} | {axes} | {cu} | {th} | "
                    f"**{r['ratio']:.1f}x**{mark} | {diff} |")
    return "\n".join(rows)


def load_call(definition, inputs):
    """The definition's PyTorch run() and its keyword arguments (inputs on cuda:0, by name)."""
    tensors, scalars, _ = safetensors_io.load(inputs)
    kwargs = {}
    for n in definition["inputs"]:
        if n in tensors:
            kwargs[n] = tensors[n].to("cuda")
        elif n in scalars:
            kwargs[n] = scalars[n]
    namespace = {"__name__": "fib_reference"}
    exec(compile(definition["reference"], f"<reference of {definition['name']}>", "exec"),
         namespace)
    return namespace["run"], kwargs


def breakdown_case(args, dataset, r, flush):
    """Kernel breakdowns of one timed case, from the inputs its timing run left in its folder."""
    work = os.path.join(args.work, r["label"])
    inputs = os.path.join(work, "in.safetensors")
    r["cuda_breakdown"] = cuda_breakdown(args, dataset, r["definition"], inputs, work)
    kwargs = None
    try:
        with open(definition_path(dataset, r["definition"])) as f:
            definition = json.load(f)
        run, kwargs = load_call(definition, inputs)
        torch.manual_seed(1)
        with torch.no_grad():  # a warmup call, outside the profile
            flush()
            run(**kwargs)
        r["torch_breakdown"] = torch_breakdown(run, kwargs, flush, r["torch_median_ms"])
    except Exception as e:
        r["torch_breakdown"] = {"error": f"{type(e).__name__}: {e}"[-300:]}
    finally:
        kwargs = None
        torch.cuda.synchronize()
        torch.cuda.empty_cache()


def breakdown_table(results):
    rows = [r for r in results if "cuda_breakdown" in r or "torch_breakdown" in r]
    if not rows:
        return ""
    out = ["| definition (axes) | CUDA ref: kernels, their sum, largest | PyTorch: kernels, their "
           "sum (share of its median), largest |", "|---|---|---|"]
    for r in rows:
        c, t = r.get("cuda_breakdown", {}), r.get("torch_breakdown", {})
        cs = c.get("error") or (f"{c['kernels']}, {fmt_ms(c['kernel_ms'])} ms; "
                                + "; ".join(c["top"]))
        ts = t.get("error") or (f"{t['kernels']}, {fmt_ms(t['kernel_ms'])} ms "
                                f"({100 * t['busy_share']:.0f}%); " + "; ".join(t["top"]))
        axes = ", ".join(f"{k} {v}" for k, v in r.get("axes", {}).items())
        out.append(f"| {r['definition']} ({axes}) | {cs} | {ts} |")
    return "\n".join(out)


def summary(results):
    ratios = [(r["ratio"], r["label"]) for r in results if "ratio" in r]
    if not ratios:
        return "no case produced a ratio"
    geo = math.exp(sum(math.log(x) for x, _ in ratios) / len(ratios))
    lo = min(ratios)
    met = sum(1 for x, _ in ratios if x >= TARGET)
    failed = len(results) - len(ratios)
    return (f"min ratio {lo[0]:.1f}x ({lo[1]}), geomean {geo:.1f}x over {len(ratios)} cases; "
            f"{met} of {len(ratios)} at or above the {TARGET:.0f}x target"
            + (f"; {failed} case(s) failed" if failed else ""))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--fib", required=True, help="the fib executable (a CUDA build)")
    p.add_argument("--corpus", required=True, help="the corpus folder (definitions/, workloads/)")
    p.add_argument("--work", required=True, help="scratch folder (inputs are written here)")
    p.add_argument("--cases", default="", help="comma-separated labels (default: all)")
    p.add_argument("--out", default="", help="write every figure here as JSON")
    p.add_argument("--timeout", type=int, default=300, help="seconds for one fib command")
    p.add_argument("--no-breakdown", dest="breakdown", action="store_false",
                   help="skip the kernel breakdown of cases below the target")
    args = p.parse_args()
    if not torch.cuda.is_available():
        print("ref_vs_torch: PyTorch sees no CUDA device", file=sys.stderr)
        return 2
    chosen = [c for c in CASES if not args.cases or c[0] in args.cases.split(",")]
    os.makedirs(args.work, exist_ok=True)
    dataset = os.path.join(args.work, "dataset")
    shutil.rmtree(dataset, ignore_errors=True)
    shutil.copytree(args.corpus, dataset)  # synthesized workloads are appended to the copy
    flush = L2Flush("cuda")
    print(f"ref_vs_torch: torch {torch.__version__}, {torch.cuda.get_device_name(0)}, L2 flush "
          f"{flush.bytes >> 20} MiB; {len(chosen)} cases", flush=True)
    results = []

    def save():  # after every case, so a run cut short keeps what it measured
        if args.out:
            with open(args.out, "w") as f:
                json.dump({"torch": torch.__version__, "device": torch.cuda.get_device_name(0),
                           "results": results}, f, indent=1)

    for label, name, spec in chosen:
        t0 = time.perf_counter()
        try:
            r = run_case(args, dataset, label, name, spec, flush)
        except Exception as e:
            r = {"label": label, "definition": name, "error": f"{type(e).__name__}: {e}"}
        r["case_seconds"] = time.perf_counter() - t0
        results.append(r)
        brief = (f"{r['ratio']:.1f}x" if "ratio" in r else r.get("error") or r.get("torch_error"))
        print(f"  {label}: {brief} ({r['case_seconds']:.1f} s)", flush=True)
        save()
        if not (args.breakdown and r.get("ratio", TARGET) < TARGET):
            shutil.rmtree(os.path.join(args.work, label), ignore_errors=True)
    if args.breakdown:
        for r in results:
            if r.get("ratio", TARGET) < TARGET:
                print(f"  {r['label']}: kernel breakdown", flush=True)
                breakdown_case(args, dataset, r, flush)
                save()
                shutil.rmtree(os.path.join(args.work, r["label"]), ignore_errors=True)
    print()
    print(table(results))
    print()
    print(summary(results))
    extra = breakdown_table(results)
    if extra:
        print()
        print("Where the time goes (cases below the target; kernels from fib's timer in CUPTI "
              "mode and from torch.profiler, one call each after an L2 flush):")
        print()
        print(extra)
    if any(not r["cuda_method"].get("blocking_kernel", True) for r in results if "cuda_method" in r):
        print("† the call waits on the device (a host copy inside the reference), so fib's timer "
              "sampled it without the blocking kernel (launch latency included)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
