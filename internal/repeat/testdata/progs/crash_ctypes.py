"""A Python program that crashes now and then inside a C library it calls
through ctypes: the crashing thread is a Python thread with Python frames.

Usage: crash_ctypes.py LIBFLAKY PERMILLE [SEED]

It calls flaky_predict of LIBFLAKY (built from flakylib.c), which crashes
with SIGSEGV in model_cache_predict on the runs that fail at PERMILLE per
thousand with SEED (the run's number is MIOTOOL_REPEAT_RUN), from a worker
thread as PyTorch's test does; a run that does not fail exits 0.
"""
import ctypes
import os
import sys
import threading


def predict(lib, run, seed, permille):
    lib.flaky_predict(ctypes.c_long(run), ctypes.c_ulong(seed), ctypes.c_int(permille))


def worker(lib, run, seed, permille):
    predict(lib, run, seed, permille)


def main():
    lib = ctypes.CDLL(sys.argv[1])
    permille = int(sys.argv[2])
    seed = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    run = int(os.environ.get("MIOTOOL_REPEAT_RUN", "-1"))
    t = threading.Thread(target=worker, args=(lib, run, seed, permille), name="conv-worker")
    t.start()
    t.join()


if __name__ == "__main__":
    main()
