"""A second thread's torch.cuda.synchronize() while the main thread captures
a CUDA graph in global mode: the trace must name cuCtxSynchronize from the
second thread, called from c10::cuda::device_synchronize, by its Python line
(log_metrics, in this file) and the thread's name ("metrics").

Bounded: every wait has a timeout that it reports when it runs out, and
faulthandler ends the script after BOUND seconds with every thread's stack
on stderr, well before the trace's watchdog."""
import faulthandler
import threading

BOUND = 90  # seconds; the GPU test's watchdog is 120
WAIT = 20  # seconds, each wait
faulthandler.dump_traceback_later(BOUND, exit=True)

import torch  # noqa: E402 (the bound covers the import)

x = torch.ones(1 << 20, device="cuda")
side = torch.cuda.Stream()
side.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(side):
    for _ in range(3):
        y = x * 2  # warm up outside the capture
torch.cuda.current_stream().wait_stream(side)
torch.cuda.synchronize()

inside, synced = threading.Event(), threading.Event()


def log_metrics():
    # The runtime refuses the synchronize (900) and PyTorch raises here; the
    # capturing thread must go on either way, or the script would hang.
    try:
        if not inside.wait(timeout=WAIT):
            print(f"sync_thread: the capture did not begin within {WAIT} s", flush=True)
        torch.cuda.synchronize()
    except Exception as e:
        print("sync_thread: the other thread's synchronize failed:", e, flush=True)
    finally:
        synced.set()


t = threading.Thread(target=log_metrics, name="metrics", daemon=True)
t.start()
g = torch.cuda.CUDAGraph()
try:
    with torch.cuda.graph(g, capture_error_mode="global"):
        y = x * 2
        inside.set()
        if not synced.wait(timeout=WAIT):
            print(f"sync_thread: the other thread did not synchronize within {WAIT} s", flush=True)
        y = y + 1
    print("sync_thread: captured", flush=True)
except Exception as e:  # PyTorch reports only the code
    print("sync_thread: capture failed:", e, flush=True)
t.join(timeout=WAIT)
if t.is_alive():
    print(f"sync_thread: the other thread was still running after {WAIT} s", flush=True)
faulthandler.cancel_dump_traceback_later()
