"""A clean capture and replay: the trace must PASS."""
import torch

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
if total != 3 * (1 << 20):
    raise SystemExit(f"clean: wrong sum {total}")
print("clean: replayed")
