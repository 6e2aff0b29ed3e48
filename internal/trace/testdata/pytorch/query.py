"""torch.cuda.current_stream().query() inside a capture: the trace must
name cuStreamQuery, called from c10::cuda::CUDAStream::query."""
import torch

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
    print("query: captured")
except Exception as e:
    print("query: capture failed:", e)
