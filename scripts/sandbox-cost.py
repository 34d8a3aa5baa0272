#!/usr/bin/env python3
"""The cost of the worker sandbox: time from spawning `fib worker` to its answer to "hello",
started as fib starts it unsandboxed and inside bubblewrap (the same namespaces and mounts as
src/bench/launch/bwrap.cpp), alternating, N times each. Prints the medians and their ratio.

    scripts/sandbox-cost.py build/cli/fib [N]
"""
import fcntl
import json
import os
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import time


def bwrap_prefix(exe):
    args = [shutil.which("bwrap") or os.environ.get("FIB_BWRAP", "bwrap"),
            "--unshare-user", "--unshare-pid", "--unshare-net", "--unshare-ipc",
            "--unshare-uts", "--unshare-cgroup-try", "--uid", "65534", "--gid", "65534",
            "--hostname", "fib-worker", "--die-with-parent", "--new-session",
            "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--tmpfs", "/dev/shm"]
    for top in ["/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"]:
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.exists(top):
            args += ["--ro-bind", top, top]
    # The folders of fib's libraries outside /usr (an RPATH into unpacked packages), as fib
    # binds the folders of the libraries it has loaded.
    ldd = subprocess.run(["ldd", exe], capture_output=True, text=True).stdout
    libs = {os.path.dirname(w) for w in ldd.split() if w.startswith("/") and ".so" in w}
    for path in ["/usr", "/etc/ld.so.cache", "/sys", os.path.realpath(exe)] + sorted(
            d for d in libs if not d.startswith("/usr/")):
        if os.path.exists(path):
            args += ["--ro-bind", path, path]
    return args + ["--chdir", "/tmp", "--"]


def start_ms(command):
    a, b = socket.socketpair()
    # Both above descriptor 3, which becomes the worker's channel.
    parent = socket.socket(fileno=fcntl.fcntl(a.fileno(), fcntl.F_DUPFD_CLOEXEC, 10))
    child = socket.socket(fileno=fcntl.fcntl(b.fileno(), fcntl.F_DUPFD_CLOEXEC, 10))
    a.close()
    b.close()
    env = {"PATH": "/usr/bin:/bin", "FIB_WORKER_ROLE": "solution", "HOME": "/tmp"}
    t0 = time.perf_counter()
    os.dup2(child.fileno(), 3)  # the worker's channel is descriptor 3
    proc = subprocess.Popen(command, pass_fds=(3,), env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    os.close(3)
    child.close()
    body = json.dumps({"cmd": "hello"}).encode()
    parent.sendall(struct.pack("<Q", len(body)) + body)
    header = parent.recv(8, socket.MSG_WAITALL)
    parent.recv(struct.unpack("<Q", header)[0], socket.MSG_WAITALL)
    elapsed = (time.perf_counter() - t0) * 1000
    bye = json.dumps({"cmd": "exit"}).encode()
    parent.sendall(struct.pack("<Q", len(bye)) + bye)
    parent.close()
    proc.wait()
    return elapsed


def main():
    exe = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    exe = os.path.realpath(exe)
    worker = [exe, "worker", "--channel", "3"]
    plain, boxed = [], []
    for _ in range(n):
        plain.append(start_ms(worker))
        boxed.append(start_ms(bwrap_prefix(exe) + worker))
    p, b = statistics.median(plain), statistics.median(boxed)
    print(f"worker start, median of {n}: unsandboxed {p:.1f} ms, bubblewrap {b:.1f} ms, "
          f"ratio {b / p:.2f}, difference {b - p:.1f} ms")


if __name__ == "__main__":
    main()
