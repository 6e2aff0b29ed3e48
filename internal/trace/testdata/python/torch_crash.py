"""A CUDA process that crashes, for the crash handler on a GPU machine:
PyTorch initializes the device and runs a kernel, then a native call
through ctypes reads address 0 (SIGSEGV) inside explode().

    python3 torch_crash.py [PROBABILITY]

With PROBABILITY (default 1) below 1, it crashes only that often and
otherwise exits 0: a program that crashes now and then, for
`miotool repeat`."""

import ctypes
import random
import sys

import torch

probability = float(sys.argv[1]) if len(sys.argv) > 1 else 1.0
x = torch.ones(1 << 20, device="cuda")
y = (x * 2).sum().item()


def explode():
    ctypes.string_at(0)  # line: explode


def step():
    if random.random() < probability:
        explode()


step()
print(f"torch_crash: no crash this time ({y:.0f})", flush=True)
