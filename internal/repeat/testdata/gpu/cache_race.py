"""PyTorch's test_cudnn_multiple_threads_same_device's shape over a library
with ROCM-27477's defect (libcache_race, cache_race.c): two threads meet at
a barrier and predict with the same model, which neither has loaded yet;
now and then the second insert destroys the first thread's model while it
predicts, and the process ends with SIGSEGV in model_predict, called from
Python through ctypes.

Usage: cache_race.py LIBCACHE_RACE [KEYS]

KEYS (default 1) is how many models each thread asks for in turn. It exits
0 when every prediction ran, 4 when there is no CUDA driver (see
cache_race.c for CACHE_RACE_HOST_ONLY and the other variables).
"""
import ctypes
import sys
import threading


def predict(lib, key, second):
    return lib.cache_race_predict(ctypes.c_long(key), ctypes.c_int(second))


def worker(lib, barrier, keys, second):
    barrier.wait()
    for key in range(keys):
        predict(lib, key, second)


def main():
    lib = ctypes.CDLL(sys.argv[1])
    lib.cache_race_predict.restype = ctypes.c_float
    keys = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    rc = lib.cache_race_init()
    if rc == 1:
        sys.exit(4)
    if rc != 0:
        sys.exit(3)
    barrier = threading.Barrier(2)
    threads = [threading.Thread(target=worker, args=(lib, barrier, keys, i), name=f"conv-worker-{i}") for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


if __name__ == "__main__":
    main()
