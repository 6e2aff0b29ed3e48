"""The DataLoader pattern: a pin-memory thread allocates page-locked host
memory (cudaHostAlloc, cuMemHostAlloc) while the main thread captures a CUDA
graph in global mode. The runtime refuses the allocation (900) and the
capture is invalidated; the trace must name the allocation by its Python
line (pin_batch, in this file) and the thread's name ("pin_memory").

Bounded as the other cases: every wait times out, and faulthandler ends the
script after BOUND seconds."""
import faulthandler
import threading

BOUND = 90
WAIT = 20
faulthandler.dump_traceback_later(BOUND, exit=True)

import torch  # noqa: E402

x = torch.ones(1 << 20, device="cuda")
side = torch.cuda.Stream()
side.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(side):
    for _ in range(3):
        y = x * 2
torch.cuda.current_stream().wait_stream(side)
torch.cuda.synchronize()

inside, pinned = threading.Event(), threading.Event()


def pin_batch():
    # A batch of a size the caching host allocator has not seen: it asks
    # the driver for new page-locked memory.
    try:
        if not inside.wait(timeout=WAIT):
            print(f"pin_memory: the capture did not begin within {WAIT} s", flush=True)
        batch = torch.empty(3 << 20, dtype=torch.uint8).pin_memory()
        print("pin_memory: pinned", batch.is_pinned(), flush=True)
    except Exception as e:
        print("pin_memory: pinning failed:", e, flush=True)
    finally:
        pinned.set()


t = threading.Thread(target=pin_batch, name="pin_memory", daemon=True)
t.start()
g = torch.cuda.CUDAGraph()
try:
    with torch.cuda.graph(g, capture_error_mode="global"):
        y = x * 2
        inside.set()
        if not pinned.wait(timeout=WAIT):
            print(f"pin_memory: the pin thread did not finish within {WAIT} s", flush=True)
        y = y + 1
    print("pin_memory: captured", flush=True)
except Exception as e:
    print("pin_memory: capture failed:", e, flush=True)
t.join(timeout=WAIT)
faulthandler.cancel_dump_traceback_later()
