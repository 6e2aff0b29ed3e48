#!/usr/bin/env python3
"""The fastest builtin solver against cuDNN's best algorithm, fp32.

Usage: cudnn-compare.py BENCH_OUTPUT [problems.yaml]

BENCH_OUTPUT is `go test -bench Conv -count 10` output of internal/bench on
the GPU (ms/conv per problem and solver). For each problem it takes each
solver's median, the fastest of them, and times torch.nn.functional.conv2d
with cudnn.benchmark on (cuDNN picks its best algorithm) and TF32 off (a
true fp32 comparison): 10 runs of 20 convolutions each, timed with CUDA
events, median of the runs. Prints a Markdown table with the ratio
builtin / cuDNN (below 1 means the builtin kernel is faster).
"""
import re
import statistics
import sys

import torch
import torch.nn.functional as F

FIELDS = {"batchsize": "n", "in_channels": "c", "in_h": "H", "in_w": "W", "out_channels": "k",
          "fil_h": "y", "fil_w": "x", "pad_h": "p", "pad_w": "q", "conv_stride_h": "u",
          "conv_stride_w": "v", "dilation_h": "l", "dilation_w": "j", "group_count": "g"}
DEFAULTS = {"n": 100, "c": 3, "H": 32, "W": 32, "k": 32, "y": 3, "x": 3, "p": 0, "q": 0,
            "u": 1, "v": 1, "l": 1, "j": 1, "g": 1}


def problems(path):
    out, name = {}, None
    for line in open(path):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if not line.startswith(" "):
            name = line.split(":")[0].strip()
            out[name] = dict(DEFAULTS)
            continue
        key, _, val = line.strip().partition(":")
        if key in FIELDS:
            out[name][FIELDS[key]] = int(val)
    return out


def builtin(path):
    pat = re.compile(r"^BenchmarkConv/([^/]+)/(\S+?)-\d+\s+\d+\s+.*?([\d.]+) ms/conv")
    per = {}
    for line in open(path):
        m = pat.match(line.strip())
        if m:
            per.setdefault(m.group(1), {}).setdefault(m.group(2), []).append(float(m.group(3)))
    return per


def cudnn_ms(p):
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    x = torch.randn(p["n"], p["c"], p["H"], p["W"], device="cuda", dtype=torch.float32)
    w = torch.randn(p["k"], p["c"] // p["g"], p["y"], p["x"], device="cuda", dtype=torch.float32)
    conv = lambda: F.conv2d(x, w, stride=(p["u"], p["v"]), padding=(p["p"], p["q"]),
                            dilation=(p["l"], p["j"]), groups=p["g"])
    for _ in range(5):
        conv()
    torch.cuda.synchronize()
    runs = []
    for _ in range(10):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(20):
            conv()
        b.record()
        b.synchronize()
        runs.append(a.elapsed_time(b) / 20)
    return statistics.median(runs), runs


def flops(p):
    ho = (p["H"] + 2 * p["p"] - p["l"] * (p["y"] - 1) - 1) // p["u"] + 1
    wo = (p["W"] + 2 * p["q"] - p["j"] * (p["x"] - 1) - 1) // p["v"] + 1
    return 2 * p["n"] * (p["c"] // p["g"]) * p["y"] * p["x"] * p["k"] * ho * wo


def main():
    bench = builtin(sys.argv[1])
    probs = problems(sys.argv[2] if len(sys.argv) > 2 else "configs/problems.yaml")
    print(f"PyTorch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}, TF32 off, cudnn.benchmark on; "
          f"medians of 10 runs (builtin: 10 benchmark runs; cuDNN: 10 runs of 20 convolutions)")
    print()
    print("| problem | fastest builtin solver | builtin ms | builtin TFLOP/s | cuDNN ms | cuDNN TFLOP/s | builtin / cuDNN |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name, solvers in bench.items():
        p = probs[name]
        best = min(solvers, key=lambda s: statistics.median(solvers[s]))
        bms = statistics.median(solvers[best])
        cms, _ = cudnn_ms(p)
        f = flops(p)
        print(f"| {name} | {best} | {bms:.4f} | {f / bms / 1e9:.1f} | {cms:.4f} | {f / cms / 1e9:.1f} | {bms / cms:.2f} |")


if __name__ == "__main__":
    main()
