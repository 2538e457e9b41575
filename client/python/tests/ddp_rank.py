"""One rank of an ordinary torch.distributed program on the backend "ringsync": the
collectives torch users call, then DistributedDataParallel training. Exits non-zero (with
the assertion) if anything is off. Run by test_ddp.py, one process per rank."""

import argparse
import hashlib

import torch
import torch.distributed as dist
import torch.nn.functional as F

import ringsync.torch  # noqa: F401  registers the backend

parser = argparse.ArgumentParser()
parser.add_argument("--rank", type=int)
parser.add_argument("--world-size", type=int)
parser.add_argument("--store")
args = parser.parse_args()
rank, n = args.rank, args.world_size

dist.init_process_group("ringsync", init_method=f"file://{args.store}", rank=rank, world_size=n)
assert dist.get_backend() == "ringsync" and dist.get_rank() == rank and dist.get_world_size() == n

# Every op the daemon has, every dtype family.
for op, want in [(dist.ReduceOp.SUM, sum(range(1, n + 1))), (dist.ReduceOp.MIN, 1),
                 (dist.ReduceOp.MAX, n), (dist.ReduceOp.PRODUCT, torch.arange(1, n + 1).prod().item())]:
    for dtype in (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32,
                  torch.int64):
        t = torch.full((5,), rank + 1, dtype=dtype)
        dist.all_reduce(t, op=op)
        assert (t == want).all(), (op, dtype, t)
t = torch.full((3,), float(rank))
dist.all_reduce(t, op=dist.ReduceOp.AVG)
assert (t == sum(range(n)) / n).all(), t

work = dist.all_reduce(torch.ones(10), async_op=True)
assert torch.equal(work.get_future().wait()[0], torch.full((10,), float(n)))
work.wait()
assert work.is_completed() and work.is_success()

b = torch.arange(6.0) * (rank + 1)
dist.broadcast(b, src=n - 1)
assert torch.equal(b, torch.arange(6.0) * n)

gathered = [torch.empty(2, dtype=torch.int64) for _ in range(n)]
dist.all_gather(gathered, torch.tensor([rank, -rank]))
assert [g.tolist() for g in gathered] == [[r, -r] for r in range(n)]
objects = [None] * n
dist.all_gather_object(objects, {"rank": rank})  # pickles through allgather
assert objects == [{"rank": r} for r in range(n)]
dist.barrier()

# What ringsync has not got says so.
for call, name in [(lambda: dist.reduce(torch.ones(1), dst=0), "reduce"),
                   (lambda: dist.all_to_all_single(torch.ones(n), torch.ones(n)), "alltoall")]:
    try:
        call()
        raise AssertionError(f"{name} did not raise")
    except RuntimeError as e:
        assert f"the ringsync backend has no {name}" in str(e), e

# An unmodified DDP loop: each rank its own data, identical models after every step.
torch.manual_seed(rank)  # different starts: DDP's broadcast from rank 0 must fix that
model = torch.nn.parallel.DistributedDataParallel(
    torch.nn.Sequential(torch.nn.Linear(20, 32), torch.nn.Tanh(), torch.nn.Linear(32, 3)),
    bucket_cap_mb=0.001)  # several buckets
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(64, 20), torch.randint(0, 3, (64,))
for step in range(5):
    opt.zero_grad()
    F.cross_entropy(model(x), y).backward()
    opt.step()
flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
digest = torch.tensor(list(hashlib.sha256(flat.numpy().tobytes()).digest()), dtype=torch.uint8)
digests = [torch.empty_like(digest) for _ in range(n)]
dist.all_gather(digests, digest)
assert all(torch.equal(d, digests[0]) for d in digests), "ranks diverged"
dist.destroy_process_group()
print(f"rank {rank}: OK")
