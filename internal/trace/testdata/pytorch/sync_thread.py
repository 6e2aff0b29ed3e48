"""A second thread's torch.cuda.synchronize() while the main thread captures
a CUDA graph in global mode: the trace must name cuCtxSynchronize from the
second thread, called from c10::cuda::device_synchronize."""
import threading

import torch

x = torch.ones(1 << 20, device="cuda")
side = torch.cuda.Stream()
side.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(side):
    for _ in range(3):
        y = x * 2  # warm up outside the capture
torch.cuda.current_stream().wait_stream(side)
torch.cuda.synchronize()

inside, synced = threading.Event(), threading.Event()


def other():
    # The runtime refuses the synchronize (900) and PyTorch raises here; the
    # capturing thread must go on either way, or the script would hang.
    try:
        inside.wait(timeout=60)
        torch.cuda.synchronize()
    except Exception as e:
        print("sync_thread: the other thread's synchronize failed:", e)
    finally:
        synced.set()


t = threading.Thread(target=other, daemon=True)
t.start()
g = torch.cuda.CUDAGraph()
try:
    with torch.cuda.graph(g, capture_error_mode="global"):
        y = x * 2
        inside.set()
        synced.wait(timeout=60)
        y = y + 1
    print("sync_thread: captured")
except Exception as e:  # PyTorch reports only the code
    print("sync_thread: capture failed:", e)
t.join(timeout=60)
