"""A CuPy capture (Stream.begin_capture, CuPy's default mode) during which
another thread allocates: CuPy's memory pool asks the runtime for new
device memory (cudaMalloc, from a statically linked cudart). The trace must
name the allocation with readable callers (cupy_backends...malloc, not the
static cudart's hashed symbols) and the thread ("loader").

Bounded: every wait times out, and faulthandler ends the script."""
import faulthandler
import threading

BOUND = 90
WAIT = 20
faulthandler.dump_traceback_later(BOUND, exit=True)

import cupy as cp  # noqa: E402

x = cp.ones(1 << 20, dtype=cp.float32)
y = x * 2
cp.cuda.Device().synchronize()

inside, loaded = threading.Event(), threading.Event()


def load_batch():
    try:
        if not inside.wait(timeout=WAIT):
            print(f"alloc_thread: the capture did not begin within {WAIT} s", flush=True)
        # A size the pool has not seen: new device memory.
        batch = cp.empty(37 << 20, dtype=cp.uint8)
        print("alloc_thread: allocated", batch.nbytes, flush=True)
    except Exception as e:
        print("alloc_thread: the allocation failed:", e, flush=True)
    finally:
        loaded.set()


t = threading.Thread(target=load_batch, name="loader", daemon=True)
t.start()
s = cp.cuda.Stream(non_blocking=True)
try:
    with s:
        s.begin_capture()
        y = x * 2
        inside.set()
        if not loaded.wait(timeout=WAIT):
            print(f"alloc_thread: the loader did not finish within {WAIT} s", flush=True)
        y = y + 1
        g = s.end_capture()
    g.launch(s)
    s.synchronize()
    print("alloc_thread: captured and launched, sum", float(y.sum()), flush=True)
except Exception as e:
    print("alloc_thread: capture failed:", e, flush=True)
t.join(timeout=WAIT)
faulthandler.cancel_dump_traceback_later()
