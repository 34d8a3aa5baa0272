#!/usr/bin/env python3
"""`fib run` over MPI ranks on the bundled example, on the CPU (docs/mpi.md).

Several ranks share this host's cores here (--oversubscribe): the tests compare which
(definition, workload, solution, status) the traces hold, never timings. Exit 77 (skipped) when
mpirun or fib's MPI support is missing.
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

DEFINITIONS = "rmsnorm_h2048,silu_and_mul_h16384"
SOLUTIONS = ("rmsnorm_h2048_naive,rmsnorm_h2048_fast,rmsnorm_h2048_wrong_shape,"
             "rmsnorm_h2048_compile_error,rmsnorm_h2048_crashes,silu_and_mul_h16384_tvm_ffi")
FAST = ["--warmup-runs", "1", "--iterations", "10", "--num-trials", "1",
        "--max-trial-seconds", "0.05", "--max-warmup-seconds", "0.01", "--seed", "7",
        "--threads", "1", "--timeout", "120"]
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--mca", "btl", "self,tcp"]


def triples(dataset):
    """The (definition, workload, solution, status) of every trace, and each line checked whole."""
    found = []
    for root, _, files in os.walk(os.path.join(dataset, "traces")):
        for name in files:
            with open(os.path.join(root, name)) as f:
                for line in f:
                    if not line.strip():
                        continue
                    t = json.loads(line)  # a torn line fails the test here
                    found.append((t["definition"], t["workload"]["uuid"], t["solution"],
                                  t["evaluation"]["status"]))
    return found


class Case:
    def __init__(self, fib, source, tmp):
        self.fib, self.source, self.tmp = fib, source, tmp
        self.env = dict(os.environ, FIB_CACHE_DIR=os.path.join(tmp, "cache"))

    def dataset(self, name):
        d = os.path.join(self.tmp, name)
        shutil.copytree(os.path.join(self.source, "examples", "dataset"), d)
        shutil.rmtree(os.path.join(d, "traces"), ignore_errors=True)
        return d

    def args(self, d, *extra):
        return [self.fib, "run", "--local", d, "--definitions", DEFINITIONS, "--solutions", SOLUTIONS,
                "--signing-key",
                os.path.join(self.tmp, "key.pem"), *FAST, *extra]

    def run(self, cmd, expect=0):
        t0 = time.time()
        r = subprocess.run(cmd, env=self.env, capture_output=True, text=True, timeout=170)
        if r.returncode != expect:
            sys.exit(f"{' '.join(cmd)}: exit {r.returncode}, expected {expect}\n"
                     f"{r.stdout}\n{r.stderr}")
        print(f"{time.time() - t0:5.1f} s  {' '.join(cmd[:8])} ...", flush=True)
        return r


def rank_pid(mpirun_pid, rank):
    """The pid of the given rank among mpirun's descendants (from their environment)."""
    todo, seen = [mpirun_pid], []
    while todo:
        pid = todo.pop()
        for task in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{task}/children") as f:
                    todo += [int(c) for c in f.read().split()]
            except FileNotFoundError:
                pass
        seen.append(pid)
    for pid in seen:
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = f.read().split(b"\0")
        except (FileNotFoundError, ProcessLookupError):
            continue
        if f"OMPI_COMM_WORLD_RANK={rank}".encode() in env:
            with open(f"/proc/{pid}/comm") as f:
                if f.read().strip() == "fib":
                    return pid
    return None


def kill_rank_mid_run(case, d, extra):
    """Starts a 3-rank run, kill -9s rank 1 once a trace is written; returns mpirun's status."""
    p = subprocess.Popen(MPIRUN + extra + ["-n", "3"] + case.args(d, "--rank-lost-after", "3"),
                         env=case.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.time() + 150
    while time.time() < deadline and p.poll() is None and not triples(d):
        time.sleep(0.05)
    pid = rank_pid(p.pid, 1)
    if pid is None or p.poll() is not None:
        p.kill()
        sys.exit("rank 1 was not found running once the first trace was written")
    os.kill(pid, signal.SIGKILL)
    out, _ = p.communicate(timeout=170)
    return p.returncode, out, len(triples(d))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fib", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--have-mpi", type=int, default=1)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        case = Case(a.fib, a.source, tmp)
        # Slurm through its variables: a task of srun whose MPI does not see the other tasks.
        slurm = dict(SLURM_NTASKS="2", SLURM_PROCID="0", SLURM_LOCALID="0", SLURM_JOB_ID="1")
        env = dict(case.env, **slurm)
        r = subprocess.run(case.args(case.dataset("slurm")), env=env, capture_output=True,
                           text=True, timeout=60)
        want = ("slurm started 2 ranks, but MPI sees 1" if a.have_mpi
                else "this fib was built without MPI")
        if r.returncode != 2 or want not in r.stderr:
            sys.exit(f"under Slurm's variables: exit {r.returncode}\n{r.stderr}")
        if not a.have_mpi or not shutil.which("mpirun"):
            print("SKIP: fib without MPI or no mpirun (apt-get install libopenmpi-dev openmpi-bin)")
            return 77

        one = case.dataset("one")
        case.run(case.args(one))
        expected = sorted(triples(one))
        if len(expected) < 4 or len(set(expected)) != len(expected):
            sys.exit(f"one process wrote {expected}")

        many = case.dataset("many")
        r = case.run(MPIRUN + ["-n", "3"] + case.args(many))
        if sorted(triples(many)) != expected:
            sys.exit(f"3 ranks: {sorted(triples(many))}\none process: {expected}")
        if "(3 ranks)" not in r.stdout:
            sys.exit(f"no summary from rank 0:\n{r.stdout}")
        if "several ranks evaluate on the CPU of" not in r.stdout + r.stderr:
            sys.exit(f"no warning that two CPU ranks share a host:\n{r.stderr}")

        # --enable-recovery: the job outlives the killed rank; its item runs on another one.
        kept = case.dataset("recovered")
        rc, out, _ = kill_rank_mid_run(case, kept, ["--enable-recovery"])
        if rc != 0 or "rank 1" not in out or "lost" not in out:
            sys.exit(f"with --enable-recovery: exit {rc}\n{out}")
        if sorted(triples(kept)) != expected:
            sys.exit(f"after the kill: {sorted(triples(kept))}\nexpected {expected}\n{out}")

        # Without it mpirun ends the job; what was written stays whole and --resume completes.
        torn = case.dataset("aborted")
        rc, out, written = kill_rank_mid_run(case, torn, [])
        if rc == 0:
            sys.exit(f"mpirun survived a killed rank without --enable-recovery:\n{out}")
        case.run(MPIRUN + ["-n", "3"] + case.args(torn, "--resume"))
        if sorted(triples(torn)) != expected:
            sys.exit(f"after --resume: {sorted(triples(torn))}\nexpected {expected}")
        print(f"ok: {len(expected)} traces; {written} kept at the abort")
    return 0


if __name__ == "__main__":
    sys.exit(main())
