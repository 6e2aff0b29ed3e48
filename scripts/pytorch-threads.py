#!/usr/bin/env python3
"""PyTorch's test_cudnn_multiple_threads_same_device, each run in a fresh process.

Usage: pytorch-threads.py --runs N [--miotool-json FILE]
       pytorch-threads.py --once

Runs the test body (2 threads, a barrier, 3 trials of 1000 iterations of a
2x2 convolution of ones and a division by 4 on a 1x1x2048x2048 input, each
thread on its own CUDA stream, the sum checked) in N fresh Python processes
one after another, and prints a Markdown table: runs, passes, failures, and
the median, min and max wall time per run. With --miotool-json (the JSON
result of a `miotool stress-threads` run, builtin or with --target) it adds
miotool's wall time per run from that result, named by its command, and the
ratio.
With --once it runs the test body once, in this process, and exits 0 when
every sum was right (1 for a wrong sum): one run, for a harness that makes
the fresh processes itself (miotool repeat -- python3 pytorch-threads.py
--once).
Standard library plus torch.
"""
import argparse
import json
import statistics
import subprocess
import sys
import time

BODY = r"""
import threading, torch
weight = torch.ones((1, 1, 2, 2), device="cuda")
results = {}
num_threads, trials, test_iters = 2, 3, 1000
barrier = threading.Barrier(num_threads)
with torch.backends.cudnn.flags(enabled=True):
    def _worker(t):
        my_stream = torch.cuda.Stream()
        torch.cuda.synchronize()
        barrier.wait()
        with torch.cuda.stream(my_stream):
            for _ in range(test_iters):
                results[t] = torch.nn.functional.conv2d(results[t], weight, padding=0)
                results[t].div_(4.0)
        torch.cuda.synchronize()
    for _ in range(trials):
        for t in range(num_threads):
            results[t] = torch.ones((1, 1, 2048, 2048), device="cuda")
        threads = [threading.Thread(target=_worker, args=(t,)) for t in range(num_threads)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        for t in range(num_threads):
            s = results[t].sum().item()
            if s != (2048 - test_iters) ** 2:
                raise SystemExit(f"wrong sum {s}")
"""


def go_ms(d):
    """A Go duration string (1.5s, 850ms, 1m2.5s, 300µs) in milliseconds."""
    units = {"h": 3600e3, "m": 60e3, "s": 1e3, "ms": 1, "us": 1e-3, "µs": 1e-3, "ns": 1e-6}
    total, num, i = 0.0, "", 0
    while i < len(d):
        ch = d[i]
        if ch.isdigit() or ch == ".":
            num += ch
            i += 1
            continue
        for u in ("ms", "us", "µs", "ns", "h", "m", "s"):
            if d.startswith(u, i):
                total += float(num) * units[u]
                num, i = "", i + len(u)
                break
        else:
            raise ValueError(f"not a duration: {d}")
    return total


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--miotool-json")
    ap.add_argument("--once", action="store_true")
    a = ap.parse_args()
    if a.once:
        exec(compile(BODY, "test_cudnn_multiple_threads_same_device", "exec"), {"__name__": "__body__"})
        return
    walls, passed, failed = [], 0, []
    for i in range(a.runs):
        t0 = time.monotonic()
        p = subprocess.run([sys.executable, "-c", BODY], capture_output=True, text=True)
        walls.append((time.monotonic() - t0) * 1000)
        if p.returncode == 0:
            passed += 1
        else:
            failed.append(f"run {i + 1}: exit {p.returncode}: {(p.stderr or p.stdout).strip().splitlines()[-1:]}")
    import torch
    med = statistics.median(walls)
    print(f"PyTorch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}; the test body in {a.runs} fresh processes, one after another")
    print()
    print("| harness | runs | passed | wall ms per run (median) | min - max |")
    print("| --- | --- | --- | --- | --- |")
    print(f"| PyTorch test body | {a.runs} | {passed} | {med:.0f} | {min(walls):.0f} - {max(walls):.0f} |")
    if a.miotool_json:
        r = json.load(open(a.miotool_json))
        c = r.get("counters", {})
        label = r.get("command", "miotool stress-threads").replace(" --format json", "")
        row = None
        for t in r.get("tables", []):
            if t["title"].startswith("wall time per run"):
                row = next((x["cells"] for x in t["rows"] if x["cells"][0] in ("completed", "passed")), None)
        if row and row[2] != "-":
            mw, lo, hi = (go_ms(v) for v in row[2:5])
            print(f"| `{label}` | {c.get('runs', '?')} | {c.get('passed', '?')} | {mw:.0f} | {lo:.0f} - {hi:.0f} |")
            print()
            print(f"miotool / PyTorch, median wall time per fresh-process run: {mw / med:.2f}")
        else:
            print(f"| `{label}` | {c.get('runs', '?')} | {c.get('passed', '?')} | no passed run | - |")
    for f in failed:
        print(f"- {f}")


if __name__ == "__main__":
    main()
