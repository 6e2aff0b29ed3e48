#!/usr/bin/env python3
"""Compile ../kernels.cu with NVRTC, check every entry point against PyTorch's
conv2d (float64) and time the solvers' kernels against cuDNN in fp32.

Run on an NVIDIA machine with CuPy, cuda-python (cuda.bindings) and PyTorch:
    python3 gpu_check.py [--quick]
The launch geometry mirrors solver.go (chooseTile, tiledPlan and the naive
plan); keep the two in step.
"""
import math
import os
import sys

import cupy as cp
import numpy as np
import torch
from cuda.bindings import nvrtc

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = open(os.path.join(HERE, "..", "kernels.cu")).read()
BUSY_BLOCKS = 264
SHAPES = [(128, 128), (64, 128), (64, 64)]


def compile_cubin(arch, src=SRC):
    err, prog = nvrtc.nvrtcCreateProgram(src.encode(), b"kernels.cu", 0, [], [])
    assert err == nvrtc.nvrtcResult.NVRTC_SUCCESS, err
    opts = [f"--gpu-architecture={arch}".encode()]
    (err,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
    _, size = nvrtc.nvrtcGetProgramLogSize(prog)
    log = b" " * size
    nvrtc.nvrtcGetProgramLog(prog, log)
    log = log.decode(errors="replace").strip("\x00 \n")
    if log:
        print(f"NVRTC log ({arch}):\n{log}")
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        sys.exit(f"NVRTC compile failed: {err}")
    _, n = nvrtc.nvrtcGetCUBINSize(prog)
    cubin = b" " * n
    nvrtc.nvrtcGetCUBIN(prog, cubin)
    return cubin


class Problem:
    def __init__(self, n, c, h, w, k, r, s, ph=0, pw=0, sh=1, sw=1, dh=1, dw=1, g=1):
        self.n, self.c, self.h, self.w, self.k, self.r, self.s = n, c, h, w, k, r, s
        self.ph, self.pw, self.sh, self.sw, self.dh, self.dw, self.g = ph, pw, sh, sw, dh, dw, g
        self.ho = (h + 2 * ph - dh * (r - 1) - 1) // sh + 1
        self.wo = (w + 2 * pw - dw * (s - 1) - 1) // sw + 1

    def __str__(self):
        return (f"-n {self.n} -c {self.c} -H {self.h} -W {self.w} -k {self.k} -y {self.r} -x {self.s} "
                f"-p {self.ph} -q {self.pw} -u {self.sh} -v {self.sw} -l {self.dh} -j {self.dw} -g {self.g}")

    def flops(self):
        return 2 * self.n * (self.c // self.g) * self.r * self.s * self.k * self.ho * self.wo

    def pointwise(self):
        return self.r == 1 and self.s == 1 and self.sh == 1 and self.sw == 1 and self.ph == 0 and self.pw == 0

    def ints(self):
        return [self.n, self.c, self.h, self.w, self.k, self.r, self.s, self.ho, self.wo,
                self.ph, self.pw, self.sh, self.sw, self.dh, self.dw, self.g]


def cdiv(a, b):
    return (a + b - 1) // b


def choose_tile(p):
    mg, npix = p.k // p.g, p.n * p.ho * p.wo
    eff = {(128, 128): 1.0, (64, 128): 0.9, (64, 64): 0.8}
    cost = lambda t: cdiv(cdiv(mg, t[0]) * cdiv(npix, t[1]) * p.g, BUSY_BLOCKS) * t[0] * t[1] / eff[t]
    return min(SHAPES, key=cost)


def launches(p):
    """(label, kernel name, grid) for every way to run p."""
    out = [("naive", "naive_conv_fwd_nchw_f32", (cdiv(p.n * p.k * p.ho * p.wo, 256), 1, 1))]
    chosen = choose_tile(p)
    for pw in ([False, True] if p.pointwise() else [False]):
        prefix = "gemm1x1_fwd_nchw_f32" if pw else "igemm_fwd_nchw_f32"
        for bm, bn in SHAPES:
            label = ("1x1 " if pw else "igemm ") + f"{bm}x{bn}" + (" *" if (bm, bn) == chosen else "")
            grid = (cdiv(p.n * p.ho * p.wo, bn), cdiv(p.k // p.g, bm), p.g)
            out.append((label, f"{prefix}_{bm}x{bn}", grid))
    return out


def run(mod, name, grid, p, x, w, y):
    args = (x, w, y, *[np.int32(v) for v in p.ints()])
    mod.get_function(name)(grid, (256, 1, 1), args)


def check(mod, problems):
    failures = 0
    for p in problems:
        xt = torch.rand(p.n, p.c, p.h, p.w, device="cuda", dtype=torch.float32) * 2 - 1
        wt = torch.rand(p.k, p.c // p.g, p.r, p.s, device="cuda", dtype=torch.float32) * 2 - 1
        ref = torch.nn.functional.conv2d(xt.double(), wt.double(), stride=(p.sh, p.sw),
                                         padding=(p.ph, p.pw), dilation=(p.dh, p.dw), groups=p.g)
        atol = 1e-5 * math.sqrt(p.c // p.g * p.r * p.s)
        for label, name, grid in launches(p):
            y = cp.full((p.n, p.k, p.ho, p.wo), cp.nan, dtype=cp.float32)
            run(mod, name, grid, p, cp.asarray(xt), cp.asarray(wt), y)
            cp.cuda.runtime.deviceSynchronize()
            got = torch.as_tensor(y, device="cuda").double()
            diff = (got - ref).abs()
            bad = int((diff > atol + 1e-4 * ref.abs()).sum()) + int(torch.isnan(got).sum())
            rel = float((got - ref).norm() / ref.norm()) if ref.norm() > 0 else float(diff.max())
            if bad:
                failures += 1
                print(f"FAIL {label:14s} {p}: {bad} bad elements, rel {rel:.2e}, max {float(diff.max()):.2e}")
        print(f"checked {p}")
    return failures


def time_ms(fn, reps=20):
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    fn()
    cp.cuda.runtime.deviceSynchronize()
    times = []
    for _ in range(reps):
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, stop))
    return float(np.median(times))


def bench(mod, problems, skip_naive_over):
    torch.backends.cudnn.benchmark = True
    print(f"\n{'problem':78s} {'kernel':14s} {'ms':>9s} {'TFLOP/s':>8s} {'vs cuDNN':>8s}")
    for p in problems:
        xt = torch.rand(p.n, p.c, p.h, p.w, device="cuda") * 2 - 1
        wt = torch.rand(p.k, p.c // p.g, p.r, p.s, device="cuda") * 2 - 1
        conv = lambda: torch.nn.functional.conv2d(xt, wt, stride=(p.sh, p.sw), padding=(p.ph, p.pw),
                                                  dilation=(p.dh, p.dw), groups=p.g)
        torch.backends.cudnn.allow_tf32 = False
        t_fp32 = time_ms(conv)
        torch.backends.cudnn.allow_tf32 = True
        t_tf32 = time_ms(conv)
        torch.backends.cudnn.allow_tf32 = False
        tf = lambda ms: p.flops() / ms / 1e9
        print(f"{str(p):78s} {'cuDNN fp32':14s} {t_fp32:9.4f} {tf(t_fp32):8.2f}")
        print(f"{'':78s} {'cuDNN tf32':14s} {t_tf32:9.4f} {tf(t_tf32):8.2f}")
        x, w = cp.asarray(xt), cp.asarray(wt)
        y = cp.empty((p.n, p.k, p.ho, p.wo), dtype=cp.float32)
        for label, name, grid in launches(p):
            if label == "naive" and p.flops() > skip_naive_over:
                continue
            ms = time_ms(lambda: run(mod, name, grid, p, x, w, y), reps=5 if label == "naive" else 20)
            print(f"{'':78s} {label:14s} {ms:9.4f} {tf(ms):8.2f} {t_fp32 / ms:8.2f}")


TUNE_VARIANTS = [(8, 2), (16, 2), (8, 1), (16, 1)]  # (BK, min blocks per SM)


def tune_source():
    """The source with every tiled entry point instantiated once per variant."""
    lines = [l for l in SRC.splitlines() if not l.startswith("MIO_IGEMM_ENTRY(")]
    for bk, mb in TUNE_VARIANTS:
        for pw in (False, True):
            prefix = "gemm1x1_fwd_nchw_f32" if pw else "igemm_fwd_nchw_f32"
            for bm, bn in SHAPES:
                lines.append(f"MIO_IGEMM_ENTRY({prefix}_{bm}x{bn}_bk{bk}_mb{mb}, {bm}, {bn}, {bk}, "
                             f"{'true' if pw else 'false'}, {mb})")
    return "\n".join(lines) + "\n"


def tune(arch, check_problems, bench_problems):
    src = tune_source()
    open("/tmp/tune.cu", "w").write(src)
    path = "/tmp/miotool_conv_tune.cubin"
    open(path, "wb").write(compile_cubin(arch, src))
    mod = cp.RawModule(path=path)
    failures = 0
    for p in check_problems:
        xt = torch.rand(p.n, p.c, p.h, p.w, device="cuda") * 2 - 1
        wt = torch.rand(p.k, p.c // p.g, p.r, p.s, device="cuda") * 2 - 1
        ref = torch.nn.functional.conv2d(xt.double(), wt.double(), stride=(p.sh, p.sw),
                                         padding=(p.ph, p.pw), dilation=(p.dh, p.dw), groups=p.g)
        atol = 1e-5 * math.sqrt(p.c // p.g * p.r * p.s)
        for label, name, grid in launches(p)[1:]:
            for bk, mb in TUNE_VARIANTS:
                y = cp.full((p.n, p.k, p.ho, p.wo), cp.nan, dtype=cp.float32)
                run(mod, f"{name}_bk{bk}_mb{mb}", grid, p, cp.asarray(xt), cp.asarray(wt), y)
                got = torch.as_tensor(y, device="cuda").double()
                bad = int(((got - ref).abs() > atol + 1e-4 * ref.abs()).sum()) + int(torch.isnan(got).sum())
                if bad:
                    failures += 1
                    print(f"FAIL {name}_bk{bk}_mb{mb} {p}: {bad} bad")
    print(f"tune check: {failures} failures")
    hdr = "".join(f"{f'bk{bk}/mb{mb}':>11s}" for bk, mb in TUNE_VARIANTS)
    print(f"\nTFLOP/s per variant\n{'problem':78s} {'kernel':14s}{hdr}  cuDNN fp32")
    for p in bench_problems:
        xt = torch.rand(p.n, p.c, p.h, p.w, device="cuda") * 2 - 1
        wt = torch.rand(p.k, p.c // p.g, p.r, p.s, device="cuda") * 2 - 1
        torch.backends.cudnn.benchmark, torch.backends.cudnn.allow_tf32 = True, False
        t_ref = time_ms(lambda: torch.nn.functional.conv2d(xt, wt, stride=(p.sh, p.sw), padding=(p.ph, p.pw),
                                                           dilation=(p.dh, p.dw), groups=p.g))
        x, w = cp.asarray(xt), cp.asarray(wt)
        y = cp.empty((p.n, p.k, p.ho, p.wo), dtype=cp.float32)
        for i, (label, name, grid) in enumerate(launches(p)[1:]):
            cells = ""
            for bk, mb in TUNE_VARIANTS:
                ms = time_ms(lambda: run(mod, f"{name}_bk{bk}_mb{mb}", grid, p, x, w, y))
                cells += f"{p.flops() / ms / 1e9:11.2f}"
            ref_cell = f"{p.flops() / t_ref / 1e9:11.2f}" if i == 0 else ""
            print(f"{str(p) if i == 0 else '':78s} {label:14s}{cells}{ref_cell}")


def main():
    quick = "--quick" in sys.argv
    dev = cp.cuda.runtime.getDeviceProperties(0)
    arch = f"sm_{dev['major']}{dev['minor']}"
    print(f"device {dev['name'].decode()} {arch}, {dev['multiProcessorCount']} SMs")
    path = "/tmp/miotool_conv.cubin"
    open(path, "wb").write(compile_cubin(arch))
    mod = cp.RawModule(path=path)
    check_problems = [
        Problem(1, 3, 32, 32, 64, 3, 3, 1, 1),
        Problem(2, 5, 9, 11, 7, 3, 2, 2, 1, 2, 3, 1, 2),
        Problem(3, 8, 10, 10, 12, 3, 3, 1, 1, 1, 1, 2, 2, 4),
        Problem(2, 6, 12, 7, 6, 3, 3, 1, 1, 1, 2, 1, 1, 6),
        Problem(2, 16, 9, 9, 130, 1, 1),
        Problem(3, 20, 7, 6, 10, 1, 1, g=2),
        Problem(1, 3, 4, 4, 2, 3, 3, 3, 3),
        Problem(4, 64, 56, 56, 64, 3, 3, 1, 1),
        Problem(8, 256, 14, 14, 256, 3, 3, 1, 1),
        Problem(2, 3, 224, 224, 64, 7, 7, 3, 3, 2, 2),
        Problem(4, 128, 28, 28, 256, 1, 1),
        Problem(4, 256, 28, 28, 512, 1, 1, sh=2, sw=2),
        Problem(4, 1024, 14, 14, 1024, 3, 3, 1, 1, g=32),
        Problem(4, 96, 30, 30, 96, 3, 3, 1, 1, g=96),
        Problem(2, 33, 17, 19, 200, 5, 3, 2, 1, 2, 1, 3, 2, 1),
    ]
    if "--tune" in sys.argv:
        tune(arch, check_problems[:8] + check_problems[9:], bench_problems_all())
        return
    failures = check(mod, check_problems)
    bench_problems = bench_problems_all()
    if quick:
        bench_problems = bench_problems[:3]
    bench(mod, bench_problems, skip_naive_over=2e11)
    print(f"\n{failures} failing kernel/problem pairs")
    sys.exit(1 if failures else 0)


def bench_problems_all():
    return [
        Problem(1, 3, 32, 32, 64, 3, 3, 1, 1),
        Problem(1, 64, 56, 56, 64, 3, 3, 1, 1),
        Problem(32, 64, 56, 56, 64, 3, 3, 1, 1),
        Problem(32, 128, 28, 28, 128, 3, 3, 1, 1),
        Problem(32, 256, 14, 14, 256, 3, 3, 1, 1),
        Problem(32, 512, 7, 7, 512, 3, 3, 1, 1),
        Problem(32, 256, 56, 56, 64, 1, 1),
        Problem(32, 512, 28, 28, 512, 1, 1),
        Problem(32, 3, 224, 224, 64, 7, 7, 3, 3, 2, 2),
        Problem(32, 1024, 14, 14, 1024, 3, 3, 1, 1, g=32),
        Problem(32, 256, 56, 56, 256, 3, 3, 1, 1, g=256),
    ]


if __name__ == "__main__":
    main()
