"""torch.compile(mode="reduce-overhead"): PyTorch captures the compiled
function into CUDA graphs itself (cudagraph trees), once per input shape,
with its allocator guarding its own allocations. The trace must PASS with
several captures and no hazard.

Bounded: faulthandler ends the script after BOUND seconds (compilation
takes tens of seconds)."""
import faulthandler

BOUND = 240
faulthandler.dump_traceback_later(BOUND, exit=True)

import torch  # noqa: E402


def step(x, w):
    return torch.relu(x @ w + 1.0).sum(dim=1)


compiled = torch.compile(step, mode="reduce-overhead")
w = torch.randn(256, 256, device="cuda")
total = 0.0
for n in (64, 128, 64, 128, 64):
    for _ in range(4):
        x = torch.randn(n, 256, device="cuda")
        total += float(compiled(x, w).sum())
torch.cuda.synchronize()
faulthandler.cancel_dump_traceback_later()
print("compile_reduce_overhead: done", round(total) != 0, flush=True)
