"""torch.cuda.current_stream().query() inside a capture: the trace must
name cuStreamQuery, called from c10::cuda::CUDAStream::query.

Bounded: it waits for nothing, and faulthandler ends it after BOUND seconds
with its stack on stderr, well before the trace's watchdog."""
import faulthandler

BOUND = 90  # seconds; the GPU test's watchdog is 120
faulthandler.dump_traceback_later(BOUND, exit=True)

import torch  # noqa: E402 (the bound covers the import)

x = torch.ones(1 << 20, device="cuda")
side = torch.cuda.Stream()
side.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(side):
    for _ in range(3):
        y = x * 2
torch.cuda.current_stream().wait_stream(side)
torch.cuda.synchronize()

g = torch.cuda.CUDAGraph()
try:
    with torch.cuda.graph(g):
        y = x * 2
        torch.cuda.current_stream().query()
    print("query: captured", flush=True)
except Exception as e:
    print("query: capture failed:", e, flush=True)
faulthandler.cancel_dump_traceback_later()
