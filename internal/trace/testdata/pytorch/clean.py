"""A clean capture and replay: the trace must PASS.

Bounded: it waits only for the device, and faulthandler ends it after
BOUND seconds with its stack on stderr, well before the trace's
watchdog."""
import faulthandler

BOUND = 90  # seconds; the GPU test's watchdog is 120
faulthandler.dump_traceback_later(BOUND, exit=True)

import torch  # noqa: E402 (the bound covers the import)

x = torch.ones(1 << 20, device="cuda")
side = torch.cuda.Stream()
side.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(side):
    for _ in range(3):
        y = x * 2 + 1
torch.cuda.current_stream().wait_stream(side)
torch.cuda.synchronize()

g = torch.cuda.CUDAGraph()
with torch.cuda.graph(g):
    y = x * 2 + 1
for _ in range(3):
    g.replay()
torch.cuda.synchronize()
total = y.sum().item()
faulthandler.cancel_dump_traceback_later()
if total != 3 * (1 << 20):
    raise SystemExit(f"clean: wrong sum {total}")
print("clean: replayed", flush=True)
