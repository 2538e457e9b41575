"""One rank of a Horovod-style training program over ringsync.torch: checks that
broadcast_parameters and broadcast_optimizer_state make every rank root's, and that
DistributedOptimizer applies exactly the average of the ranks' gradients, from buckets in
memory registered with the worker, also in the step after one that failed. Run by
test_optimizer.py, one process per rank."""

import argparse
import os

import torch
import torch.nn.functional as F

import ringsync
import ringsync.torch as rst
from conftest import refused, registered_mappings

parser = argparse.ArgumentParser()
parser.add_argument("--rank", type=int)
parser.add_argument("--world-size", type=int)
args = parser.parse_args()
rank, n = args.rank, args.world_size

rs = rst.init(os.environ["RINGSYNC_WORKER"])
assert rs.rank == rank and rs.world_size == n

def new_model(seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(10, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))


model = new_model(rank)  # every rank starts elsewhere
inner = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
rst.broadcast_parameters(model.state_dict(), root=0)
root_model = new_model(0)
for p, q in zip(model.parameters(), root_model.parameters()):
    assert torch.equal(p, q), "broadcast_parameters did not copy root's parameters"

# Small buckets: several all-reduces per step, started from backward's hooks.
optimizer = rst.DistributedOptimizer(inner, model.named_parameters(), bucket_bytes=256)
assert isinstance(optimizer, torch.optim.SGD)
assert len(optimizer._buckets) > 1
mapped = registered_mappings()
for bucket in optimizer._buckets:
    assert any(start <= bucket.flat.data_ptr() < end for start, end in mapped), \
        f"bucket {bucket.index} is not in memory registered with the worker"
    assert bucket.flat.data_ptr() % 64 == 0

x, y = torch.randn(8, 10) + rank, torch.randint(0, 4, (8,))


def averaged_step(model=model, optimizer=optimizer, backward=None):
    """One step whose gradients must come out as the average of every rank's own (what
    `backward` left in .grad, default one backward over x)."""
    optimizer.zero_grad()
    (backward or (lambda: F.cross_entropy(model(x), y).backward()))()
    local = torch.cat([p.grad.reshape(-1) for p in model.parameters()])
    everyone = rs.allgather(local.clone())          # every rank's own gradient
    optimizer.synchronize()
    reduced = torch.cat([p.grad.reshape(-1) for p in model.parameters()])
    want = everyone.view(n, -1).sum(0) / n
    assert torch.allclose(reduced, want, rtol=1e-6, atol=1e-7), (reduced - want).abs().max()
    optimizer.step()


for step in range(3):
    averaged_step()

# A step that fails on every rank (rank 0's buckets ask for MAX: a mismatch found before
# any byte moves) raises from synchronize, leaves the gradients local, and the next step
# is whole again.
optimizer._op = ringsync.MAX if rank == 0 else ringsync.AVG
optimizer.zero_grad()
F.cross_entropy(model(x), y).backward()
local = [p.grad.clone() for p in model.parameters()]
try:
    optimizer.synchronize()
    raise AssertionError("a step whose ranks disagree succeeded")
except ringsync.MismatchError:
    pass
assert all(torch.equal(p.grad, g) for p, g in zip(model.parameters(), local))
optimizer._op = ringsync.AVG
averaged_step()

# Momentum buffers differ per rank only if gradients did; make rank 1's differ on purpose.
if rank == 1:
    for state in optimizer.state.values():
        state["momentum_buffer"].fill_(42.0)
    optimizer.param_groups[0]["lr"] = 0.5
rst.broadcast_optimizer_state(optimizer, root=0)
assert optimizer.param_groups[0]["lr"] == 0.1
buffers = torch.cat([s["momentum_buffer"].reshape(-1) for s in optimizer.state.values()])
everyone = rs.allgather(buffers.clone()).view(n, -1)
assert all(torch.equal(everyone[r], everyone[0]) for r in range(n)), "optimizer state differs"

flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
everyone = rs.allgather(flat.clone()).view(n, -1)
assert all(torch.equal(everyone[r], everyone[0]) for r in range(n)), "parameters differ"

# Gradient accumulation: two backwards per step, their summed gradients all-reduced once.
refused(lambda: rst.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                         backward_passes_per_step=0),
        ValueError, "backward_passes_per_step must be an int >= 1")
model2 = new_model(0)
accumulating = rst.DistributedOptimizer(torch.optim.SGD(model2.parameters(), lr=0.1),
                                        model2.named_parameters(), bucket_bytes=256,
                                        backward_passes_per_step=2)


def two_backwards():
    F.cross_entropy(model2(x[:4]), y[:4]).backward()
    assert accumulating._next_to_start == 0, "a bucket started before the step's last backward"
    F.cross_entropy(model2(x[4:]), y[4:]).backward()


for step in range(2):
    averaged_step(model2, accumulating, two_backwards)
# A step after fewer backwards all-reduces what accumulated; more than two are refused.
averaged_step(model2, accumulating)
accumulating.zero_grad()
for _ in range(2):
    F.cross_entropy(model2(x), y).backward()
refused(lambda: F.cross_entropy(model2(x), y).backward(), RuntimeError,
        "more backwards reached a parameter before step() than backward_passes_per_step=2")
accumulating.synchronize()
averaged_step(model2, accumulating, two_backwards)

# Compression: buckets of float16, half the bytes; .grad comes back in float32, the
# average of every rank's gradient as float16 (rounded, and summed in float16).
refused(lambda: rst.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                         compression="fp16"),
        ValueError, "compression must be Compression.none, .fp16 or .bf16, not 'fp16'")
model3 = new_model(0)
compressed = rst.DistributedOptimizer(torch.optim.SGD(model3.parameters(), lr=0.1),
                                      model3.named_parameters(), bucket_bytes=256,
                                      compression=rst.Compression.fp16)
assert all(bucket.flat.dtype == torch.float16 for bucket in compressed._buckets)
assert 2 * sum(b.flat.numel() * b.flat.element_size() for b in compressed._buckets) == \
    sum(p.numel() * p.element_size() for p in model3.parameters()), "not half the bytes"
for step in range(2):
    compressed.zero_grad()
    F.cross_entropy(model3(x), y).backward()
    local = torch.cat([p.grad.reshape(-1) for p in model3.parameters()]).half()
    everyone = rs.allgather(local.clone())
    compressed.step()  # synchronizes, then steps
grads = torch.cat([p.grad.reshape(-1) for p in model3.parameters()])
assert grads.dtype == torch.float32
want = everyone.view(n, -1).float().sum(0) / n
assert torch.allclose(grads, want, rtol=1e-2, atol=1e-3), (grads - want).abs().max()
assert torch.equal(grads, grads.half().float()), "the gradients did not travel as float16"
rst.shutdown()
print(f"rank {rank}: OK")
