"""A jitted JAX loop with XLA's command buffers on: XLA builds CUDA graphs
node by node (no stream capture) and launches them. The trace must SKIP,
saying that no capture began and naming the graphs built without capture
that were launched.

Run with XLA_FLAGS=--xla_gpu_enable_command_buffer=FUSION
--xla_gpu_graph_min_graph_size=1 (the script sets them when unset)."""
import faulthandler
import os

BOUND = 120
faulthandler.dump_traceback_later(BOUND, exit=True)
os.environ.setdefault("XLA_FLAGS", "--xla_gpu_enable_command_buffer=FUSION --xla_gpu_graph_min_graph_size=1")
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402


@jax.jit
def step(x):
    for _ in range(8):
        x = jnp.sin(x) * 1.0001 + 0.5
        x = jnp.tanh(x) - 0.25
    return x


x = jnp.ones((1 << 16,), dtype=jnp.float32)
for _ in range(20):
    x = step(x)
x.block_until_ready()
faulthandler.cancel_dump_traceback_later()
print("command_buffers: done", float(x[0]), flush=True)
