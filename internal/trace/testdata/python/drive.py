"""Drives the stand-in CUDA driver from Python through ctypes, one scenario
per run, for the observer's Python-stack tests:

    python3 drive.py LIBCUDA PYHELPER SCENARIO

Each line the tests look for carries a "# line: NAME" comment; the tests
read this file for the line numbers. The functions have qualified names
(Metrics.log) where 3.11+ reads co_qualname."""

import ctypes
import sys
import threading

libcuda_path, helper_path, scenario = sys.argv[1], sys.argv[2], sys.argv[3]
cuda = ctypes.CDLL(libcuda_path)  # every call releases the GIL
cuda_held = ctypes.PyDLL(libcuda_path)  # every call keeps it
helper = ctypes.CDLL(helper_path)
helper_held = ctypes.PyDLL(helper_path)

cuda.cuInit(0)
stream = ctypes.c_void_p()
other = ctypes.c_void_p()
cuda.cuStreamCreate(ctypes.byref(stream), 1)
cuda.cuStreamCreate(ctypes.byref(other), 1)
results = {}


class Metrics:
    def __init__(self, lib):
        self.lib = lib

    def log(self):
        results["sync"] = self.lib.cuCtxSynchronize()  # line: sync


def metrics_thread(lib):
    Metrics(lib).log()  # line: metrics_thread


def begin():
    results["begin"] = cuda.cuStreamBeginCapture_v2(stream, 0)  # line: begin


def end():
    graph = ctypes.c_void_p()
    results["end"] = cuda.cuStreamEndCapture(stream, ctypes.byref(graph))  # line: end


def capture_step(lib):
    results["query"] = lib.cuStreamQuery(stream)  # line: query


def on_thread(target, *args, name):
    t = threading.Thread(target=target, args=args, name=name)
    t.start()
    t.join()


def deadlock():
    t = threading.Thread(target=lambda: results.setdefault("sync", helper.holder_refuse()), name="holder")  # line: holder
    t.start()
    helper.wait_locked()
    helper_held.gil_waiter()  # line: gil_waiter
    t.join()


def explode():
    ctypes.string_at(0)  # line: explode


def main():
    if scenario == "crash":
        explode()
        return
    begin()
    if scenario == "released":
        on_thread(metrics_thread, cuda, name="metrics")
    elif scenario == "released-subinterpreter":
        # A sub-interpreter turns PyGILState_Check off: it answers 1 on
        # every thread from then on, the GIL held or not.
        try:
            import _xxsubinterpreters as interpreters
        except ImportError:
            import _interpreters as interpreters
        interpreters.create()
        on_thread(metrics_thread, cuda, name="metrics")
    elif scenario == "held":
        on_thread(metrics_thread, cuda_held, name="metrics")
    elif scenario == "query-released":
        capture_step(cuda)  # line: main
    elif scenario == "query-held":
        capture_step(cuda_held)
    elif scenario == "native":
        results["sync"] = helper.native_refuse()
    elif scenario == "deadlock":
        deadlock()
    else:
        sys.exit("unknown scenario " + scenario)
    end()
    print(scenario, " ".join(f"{k}={v}" for k, v in sorted(results.items())), flush=True)


main()
