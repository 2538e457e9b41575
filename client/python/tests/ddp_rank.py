"""One rank of an ordinary torch.distributed program on the backend "ringsync": the
collectives torch users call, then DistributedDataParallel training. Exits non-zero (with
the assertion) if anything is off. Run by test_ddp.py, one process per rank."""

import argparse
import hashlib
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

import ringsync.torch  # noqa: F401  registers the backend
from conftest import refused

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

# The ops composed from those collectives (torch's Gloo backend has them too).
root = 1
t = torch.full((4,), float(rank + 1))
dist.reduce(t, dst=root)
want = sum(range(1, n + 1)) if rank == root else rank + 1  # the others' tensors unchanged
assert torch.equal(t, torch.full((4,), float(want))), t
m = torch.tensor([rank + 1], dtype=torch.int64)
dist.reduce(m, dst=0, op=dist.ReduceOp.MAX)
assert m.item() == (n if rank == 0 else rank + 1), m

# Gathered into tensors of any layout (a transposed view here).
gathered = [torch.empty(3, 2).t() for _ in range(n)] if rank == root else None
dist.gather(torch.full((2, 3), float(rank)), gathered, dst=root)
if rank == root:
    assert all(torch.equal(g, torch.full((2, 3), float(r))) for r, g in enumerate(gathered))
mine = torch.empty(3, dtype=torch.int32)
pieces = [torch.arange(3, dtype=torch.int32) + 10 * r for r in range(n)] if rank == root else None
dist.scatter(mine, pieces, src=root)
assert torch.equal(mine, torch.arange(3, dtype=torch.int32) + 10 * rank), mine
for src in range(n):  # the daemon's scatter from every root, async
    mine = torch.empty(2, dtype=torch.float64)
    pieces = [torch.full((2,), float(100 * src + r), dtype=torch.float64) for r in range(n)]
    dist.scatter(mine, pieces if rank == src else None, src=src, async_op=True).wait()
    assert torch.equal(mine, torch.full((2,), float(100 * src + rank), dtype=torch.float64)), mine
for dst in range(n):  # the daemon's gather to every root, async
    got = [torch.empty(2, dtype=torch.float64) for _ in range(n)] if rank == dst else None
    mine = torch.full((2,), float(100 * dst + rank), dtype=torch.float64)
    dist.gather(mine, got, dst=dst, async_op=True).wait()
    assert rank != dst or all(torch.equal(g, torch.full((2,), float(100 * dst + r),
                                                        dtype=torch.float64))
                              for r, g in enumerate(got)), got
objects = [None] * n if rank == 0 else None
dist.gather_object({"rank": rank}, objects, dst=0)  # pickles through gather
assert rank != 0 or objects == [{"rank": r} for r in range(n)], objects
received = [None]
dist.scatter_object_list(received, [{"to": r} for r in range(n)] if rank == 0 else None, src=0)
assert received == [{"to": rank}], received

# reduce_scatter: rank r gets the sum over ranks of their r-th input.
out = torch.empty(2)
dist.reduce_scatter(out, [torch.full((2,), float(rank * n + r)) for r in range(n)])
assert torch.equal(out, torch.full((2,), float(sum(q * n + rank for q in range(n))))), out
flat_in = torch.arange(3 * n, dtype=torch.float64) * (rank + 1)
kept = flat_in.clone()
out = torch.empty(3, dtype=torch.float64)
work = dist._reduce_scatter_base(out, flat_in, async_op=True)
expected = torch.arange(3 * rank, 3 * rank + 3, dtype=torch.float64) * (n * (n + 1) // 2)
assert torch.equal(work.get_future().wait()[0], expected), out
assert torch.equal(flat_in, kept), "reduce_scatter changed its input"

# all_to_all: rank r gets block r of every rank's input, as block q from rank q — from
# one tensor (all_to_all_single, equal splits given or not) and from lists.
single_in = torch.arange(2 * n, dtype=torch.int64) + 100 * rank  # block q: 2 rows for q
single_out = torch.empty(2 * n, dtype=torch.int64)
dist.all_to_all_single(single_out, single_in)
want = torch.cat([torch.arange(2 * rank, 2 * rank + 2, dtype=torch.int64) + 100 * q
                  for q in range(n)])
assert torch.equal(single_out, want), single_out
single_out.zero_()
dist.all_to_all_single(single_out, single_in, [2] * n, [2] * n, async_op=True).wait()
assert torch.equal(single_out, want), single_out
lists_out = [torch.empty(3).t() for _ in range(n)]  # any layout
dist.all_to_all(lists_out, [torch.full((3,), float(10 * rank + q)) for q in range(n)])
assert all(torch.equal(o, torch.full((3,), float(10 * q + rank))) for q, o in enumerate(lists_out))

# Uneven splits (a mixture of experts' token dispatch): rank q sends rank r (q + r) % 3 rows
# of 2, holding 100 * q + 10 * r + i, into an output of the rows it receives.
sends = [(rank + r) % 3 for r in range(n)]
receives = [(q + rank) % 3 for q in range(n)]
tokens = torch.tensor([[100.0 * rank + 10 * r + i] * 2 for r in range(n) for i in range(sends[r])])
tokens = tokens.reshape(-1, 2)
routed = torch.full((sum(receives), 2), -1.0)
dist.all_to_all_single(routed, tokens, receives, sends)
want = torch.tensor([[100.0 * q + 10 * rank + i] * 2 for q in range(n) for i in range(receives[q])])
assert torch.equal(routed, want.reshape(-1, 2)), routed
# The list form with tensors of different sizes; and splits given on one side only (the
# other split evenly).
uneven_out = [torch.empty(receives[q]) for q in range(n)]
dist.all_to_all(uneven_out, [torch.full((sends[r],), float(10 * rank + r)) for r in range(n)])
assert all(torch.equal(o, torch.full((receives[q],), float(10 * q + rank)))
           for q, o in enumerate(uneven_out)), uneven_out
half = torch.empty(n, dtype=torch.int64)
dist.all_to_all_single(half, torch.arange(n, dtype=torch.int64) + 10 * rank, None, [1] * n)
assert torch.equal(half, torch.arange(n, dtype=torch.int64) * 10 + rank), half

# An input that requires grad is read for its values, as by torch's own backends.
out = torch.empty(2)
dist._reduce_scatter_base(out, torch.ones(2 * n, requires_grad=True))
assert torch.equal(out, torch.full((2,), float(n))), out

# Their scratch buffers are reused from call to call: each call's result is its own.
for i in range(3):
    out = torch.empty(2)
    dist.reduce_scatter(out, [torch.full((2,), float(i * rank + r)) for r in range(n)])
    assert torch.equal(out, torch.full((2,), float(sum(i * q + rank for q in range(n))))), (i, out)
    gathered = [torch.empty(3) for _ in range(n)] if rank == 0 else None
    dist.gather(torch.full((3,), float(10 * i + rank)), gathered, dst=0)
    assert rank != 0 or [g[0].item() for g in gathered] == [10 * i + r for r in range(n)], i

# From 1 MiB their scratch lies in memory registered with the worker, where scatter's and
# reduce_scatter's lists, reduce's all-reduce and the gathers run in place: the same
# results, also when a call finds the previous call's scratch again.
big = 300_000  # 1.2 MB of float32
for i in range(2):
    mine = torch.arange(big, dtype=torch.float32) + 1000 * rank + i
    everyone = [torch.empty(big) for _ in range(n)]
    dist.all_gather(everyone, mine)
    assert all(torch.equal(e, torch.arange(big, dtype=torch.float32) + 1000 * r + i)
               for r, e in enumerate(everyone)), i
    gathered = [torch.empty(big) for _ in range(n)] if rank == root else None
    dist.gather(mine, gathered, dst=root)
    assert rank != root or all(torch.equal(g, e) for g, e in zip(gathered, everyone)), i
    piece = torch.empty(big)
    dist.scatter(piece, everyone if rank == root else None, src=root)
    assert torch.equal(piece, everyone[rank]), i
    total = mine.clone()
    dist.reduce(total, dst=root)
    assert torch.equal(total, sum(everyone) if rank == root else mine), i
    shard = torch.empty(big)
    dist.reduce_scatter(shard, [mine + r for r in range(n)])  # in place in the scratch
    assert torch.equal(shard, sum(everyone) + n * rank), i
    exchanged = [torch.empty(big) for _ in range(n)]
    dist.all_to_all(exchanged, [mine + r for r in range(n)])  # in place in the scratch
    assert all(torch.equal(x, everyone[q] + rank) for q, x in enumerate(exchanged)), i

# The coalesced forms: one collective for the whole list.
tensors = [torch.full((3,), float(rank)), torch.full((2, 2), float(2 * rank))]
dist.all_reduce_coalesced(tensors)
assert torch.equal(tensors[0], torch.full((3,), float(sum(range(n)))))
assert torch.equal(tensors[1], torch.full((2, 2), float(2 * sum(range(n)))))
outputs = [[torch.empty(2), torch.empty(1)] for _ in range(n)]
dist.all_gather_coalesced(outputs, [torch.full((2,), float(rank)), torch.full((1,), -float(rank))])
for r, (a, b) in enumerate(outputs):
    assert torch.equal(a, torch.full((2,), float(r))) and torch.equal(b, torch.full((1,), -float(r)))

# What ringsync has not got (point to point) says so, and bad arguments say what is wrong
# before anything is sent (every rank makes the same bad call).
for call, message in [
        (lambda: dist.all_to_all_single(torch.ones(n + 1), torch.ones(n + 1),
                                        [2] + [1] * (n - 1), [1] * n),
         f"the input split sizes add up to {n} rows; the input has {n + 1}"),
        (lambda: dist.send(torch.ones(1), dst=(rank + 1) % n), "the ringsync backend has no send"),
        (lambda: dist.reduce_scatter(torch.empty(2), [torch.ones(3)] * n),
         "each of the input tensors must hold 2 elements of Float (one holds 3 of Float)"),
        (lambda: dist.all_reduce_coalesced([torch.ones(1), torch.ones(1, dtype=torch.float64)]),
         "dtype")]:
    refused(call, RuntimeError, message)
dist.barrier()

# A bad call on one rank only: its error refuses the collective in its turn, so the other
# ranks' same call fails at once (not at the 60 s timeout) naming rank 1 and the cause, and
# the ranks stay in step.
started = time.monotonic()
cause = f"ringsync allgather: expected {n} output tensors, got {n - 1}"
outputs = [torch.empty(2) for _ in range(n - 1 if rank == 1 else n)]
refused(lambda: dist.all_gather(outputs, torch.ones(2)), RuntimeError,
        cause if rank == 1 else f"rank 1 gave up: worker w1 refused its client's request: its "
        f"training process refused its own call: {cause}")
assert time.monotonic() - started < 20
dist.barrier()

# DDP loops, unmodified: each rank its own data, identical models after every step; also
# with torch's float16 compression hook (its all-reduce of float16 buckets and the
# future's then()).
def train_identically(comm_hook=None):
    torch.manual_seed(rank)  # different starts: DDP's broadcast from rank 0 must fix that
    model = torch.nn.parallel.DistributedDataParallel(
        torch.nn.Sequential(torch.nn.Linear(20, 32), torch.nn.Tanh(), torch.nn.Linear(32, 3)),
        bucket_cap_mb=0.001)  # several buckets
    if comm_hook is not None:
        model.register_comm_hook(None, comm_hook)
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


train_identically()
train_identically(default_hooks.fp16_compress_hook)
dist.destroy_process_group()
print(f"rank {rank}: OK")
