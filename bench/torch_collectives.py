#!/usr/bin/python3
"""torch.distributed's collectives on the "ringsync" backend beside the same calls on
torch's Gloo, N ranks on this machine (or on namespace hosts): all_reduce, broadcast,
all_gather, gather, scatter, reduce_scatter and all_to_all_single (ringsync collectives;
torch 1.13's Gloo has no reduce_scatter), and reduce, which the ringsync backend composes
from an all-reduce (more bytes than a dedicated algorithm). Each row:
ITERS calls back to back after a barrier, the slowest rank's time per call, then one call
on known inputs checked (#wrong counts the elements that differ); ratio = ringsync's
time / Gloo's.

  PYTHONPATH=build/python RINGSYNC_BIN_DIR=build/bin \\
      /usr/bin/python3 bench/torch_collectives.py [--nranks 4] [--sizes 1M,16M] [--iters 7]
      [--hosts=netns --rate=1gbit --security=token|tls --mtu=9000]

--hosts=netns runs rank r on host wr of the compose topology (ringsync-netns; needs root),
beside that host's worker, every link shaped to --rate; torch Gloo's ranks meet on w0.

--sizes: bytes of float32 each rank contributes (all_gather, gather, reduce_scatter's
output) or holds (all_reduce, reduce, broadcast, scatter's output, all_to_all_single's
input and output; all_to_all_uneven's on average over the ranks, rank q sending rank r
1 + (q + 2r) mod N shares).
"""
import argparse
import os
import sys
import time

import rank_hosts  # beside this file

HERE = os.path.dirname(os.path.abspath(__file__))
OPS = ("all_reduce", "reduce", "broadcast", "all_gather", "gather", "scatter",
       "reduce_scatter", "all_to_all_single", "all_to_all_uneven")


def prepare(torch, dist, op, n, rank, count):
    """A call of `op` on tensors made once, and the check of its last result: (call,
    wrong) where wrong() counts the elements that differ from what one call gives."""
    x = torch.full((count,), float(rank + 1))
    total = float(n * (n + 1) // 2)
    mine = torch.full((count,), float(rank + 1))
    every = torch.cat([torch.full((count,), float(r + 1)) for r in range(n)])
    outs = [torch.empty(count) for _ in range(n)]
    if op == "all_reduce":
        return (lambda: dist.all_reduce(x)), (lambda: int((x != total).sum()))
    if op == "reduce":  # only the root's result is defined (Gloo writes the others' too)
        return (lambda: dist.reduce(x, dst=0)), \
            (lambda: int((x != total).sum()) if rank == 0 else 0)
    if op == "broadcast":
        return (lambda: dist.broadcast(x, src=0)), (lambda: int((x != 1.0).sum()))
    if op == "all_gather":
        return (lambda: dist.all_gather(outs, mine)), \
            (lambda: int((torch.cat(outs) != every).sum()))
    if op == "gather":
        return (lambda: dist.gather(mine, outs if rank == 0 else None, dst=0)), \
            (lambda: int((torch.cat(outs) != every).sum()) if rank == 0 else 0)
    if op == "scatter":
        pieces = list(every.chunk(n)) if rank == 0 else None
        return (lambda: dist.scatter(x, pieces, src=0)), (lambda: int((x != mine).sum()))
    if op == "all_to_all_single":  # rank r's block q goes to rank q as its block r
        blocks = torch.arange(count, dtype=torch.float32) // max(count // n, 1)
        sent = blocks + 100 * rank
        got = torch.empty(count)
        want = rank + 100 * blocks
        return (lambda: dist.all_to_all_single(got, sent)), \
            (lambda: int((got != want).sum()))
    if op == "all_to_all_uneven":  # all_to_all_single with split sizes, as a MoE dispatch
        unit = max(count // (n * (n + 1) // 2), 1)  # rank q sends rank r rows(q, r) elements

        def rows(q, r):
            return unit * (1 + (q + 2 * r) % n)
        sends = [rows(rank, r) for r in range(n)]
        receives = [rows(q, rank) for q in range(n)]
        sent = torch.cat([torch.full((rows(rank, r),), float(1000 * rank + r)) for r in range(n)])
        got = torch.empty(sum(receives))
        want = torch.cat([torch.full((rows(q, rank),), float(1000 * q + rank)) for q in range(n)])
        return (lambda: dist.all_to_all_single(got, sent, receives, sends)), \
            (lambda: int((got != want).sum()))
    inputs = [mine] * n  # reduce_scatter: rank r's block r summed over ranks
    return (lambda: dist.reduce_scatter(x, inputs)), (lambda: int((x != total).sum()))


def rank_main(args):
    import torch
    import torch.distributed as dist
    if args.backend == "ringsync":
        import ringsync.torch  # noqa: F401  registers the backend
    torch.set_num_threads(1)
    dist.init_process_group(args.backend, init_method=f"tcp://{args.master}:{args.port}",
                            rank=args.rank, world_size=args.nranks)
    from gloo_allreduce import parse_bytes  # beside this file
    n, rank = args.nranks, args.rank
    for size in args.sizes.split(","):
        count = parse_bytes(size) // 4
        for op in OPS:
            if op == "reduce_scatter" and args.backend == "gloo":
                continue
            # A warm-up, then a timed batch after one barrier (time = batch / iters, the
            # slowest rank's), then one call on fresh inputs, checked.
            call, _ = prepare(torch, dist, op, n, rank, count)
            for _ in range(args.warmup_iters):
                call()
            dist.barrier()
            start = time.perf_counter()
            for _ in range(args.iters):
                call()
            seconds = torch.tensor([(time.perf_counter() - start) / args.iters],
                                   dtype=torch.float64)
            call, wrong = prepare(torch, dist, op, n, rank, count)
            call()
            errors = torch.tensor([wrong()], dtype=torch.int64)
            dist.all_reduce(seconds, op=dist.ReduceOp.MAX)
            dist.all_reduce(errors)
            if rank == 0:
                print(f"ROW {op} {count * 4} {float(seconds[0])} {int(errors[0])}", flush=True)
    dist.destroy_process_group()


def run_backend(args, backend, hosts):
    """Runs every rank of `backend` on `hosts`; returns {(op, bytes): (seconds, wrong)}."""
    port = rank_hosts.free_port()
    argv = [sys.executable, os.path.abspath(__file__), f"--backend={backend}", f"--port={port}",
            f"--master={hosts.master}",
            f"--nranks={args.nranks}", f"--sizes={args.sizes}", f"--iters={args.iters}",
            f"--warmup_iters={args.warmup_iters}"]
    procs = [hosts.start(r, argv + [f"--rank={r}"], {"RINGSYNC_WORKER": hosts.worker(r),
                                                     "GLOO_SOCKET_IFNAME": hosts.gloo_ifname})
             for r in range(args.nranks)]
    ended = [hosts.finish(p, 1800) for p in procs]
    for rank, (rc, output) in enumerate(ended):
        if rc != 0:
            sys.exit(f"torch_collectives.py: {backend} rank {rank} failed:\n{output[-4000:]}")
    rows = {}
    for line in ended[0][1].splitlines():
        if line.startswith("ROW "):
            _, op, size, seconds, wrong = line.split()
            rows[(op, int(size))] = (float(seconds), int(wrong))
    return rows


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nranks", type=int, default=4)
    p.add_argument("--sizes", default="1M,16M")
    p.add_argument("--iters", type=int, default=7)
    p.add_argument("--warmup_iters", type=int, default=2)
    p.add_argument("--hosts", choices=("local", "netns"), default="local")
    p.add_argument("--rate", default="1gbit", help="--hosts=netns: every link's rate")
    p.add_argument("--security", choices=("token", "tls"), default="token",
                   help="--hosts=netns: how the daemons authenticate")
    p.add_argument("--mtu", type=int, help="--hosts=netns: every link's MTU (default 1500)")
    p.add_argument("--backend", help=argparse.SUPPRESS)
    p.add_argument("--master", help=argparse.SUPPRESS)
    p.add_argument("--rank", type=int, help=argparse.SUPPRESS)
    p.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.backend:
        sys.path.insert(0, HERE)
        rank_main(args)
        return

    hosts = rank_hosts.LocalHosts(args.nranks) if args.hosts == "local" else \
        rank_hosts.NetnsHosts(args.nranks, args.rate, args.security, mtu=args.mtu)
    with hosts:
        ours = run_backend(args, "ringsync", hosts)
        gloo = run_backend(args, "gloo", hosts)
    where = "this machine" if args.hosts == "local" else \
        f"4 namespace hosts, {args.rate} links, {args.security}"
    print(f"== torch.distributed, N={args.nranks} on {where}, float32 SUM; {args.iters} "
          "calls back to back, the slowest rank's time per call; ratio = ringsync / gloo")
    print(f"{'op':>15} {'size (B)':>10} {'ringsync':>12} {'gloo':>12} {'ratio':>7} {'#wrong':>7}")
    for (op, size), (seconds, wrong) in ours.items():
        theirs = gloo.get((op, size))
        ratio = f"{seconds / theirs[0]:7.2f}" if theirs else "    n/a"
        gloo_ms = f"{theirs[0] * 1e3:9.2f} ms" if theirs else "   (no op)  "
        print(f"{op:>15} {size:>10} {seconds * 1e3:9.2f} ms {gloo_ms} {ratio} "
              f"{wrong + (theirs[1] if theirs else 0):>7}")


if __name__ == "__main__":
    main()
