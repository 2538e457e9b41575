#!/usr/bin/python3
"""A training step's gradient sync in PyTorch, N ranks on this machine or on four
network-namespace hosts: the time from backward to averaged gradients, side by side:
  registered  ringsync.torch.DistributedOptimizer, buckets registered with the worker
              (reduced in place);
  plain       the same with plain tensors as buckets (the SDK copies them in and out);
  fp16        registered, with compression=Compression.fp16 (buckets of float16: half
              the bytes; not in the default --sides);
  gloo        torch.distributed Gloo doing what the optimizer does, with the same buckets
              (each bucket's all_reduce started as it fills, waited, copied back, averaged);
  ddp         DistributedDataParallel on the "ringsync" backend (its own 25 MiB buckets);
  ddp-gloo    DistributedDataParallel on Gloo.
The sides alternate ROUNDS times in one run; each round prints each side's median step and
the share of the machine's CPU left idle while its steps ran.

  PYTHONPATH=build/python RINGSYNC_BIN_DIR=build/bin \\
      /usr/bin/python3 bench/optimizer_step.py [--shapes bench/models/resnet50.shapes]
      [--hosts=netns --rate=1gbit --security=token|tls --mtu=9000]

--hosts=netns runs rank r on host wr of the compose topology (ringsync-netns; needs root),
beside that host's worker, every link shaped to --rate; torch Gloo's ranks meet on w0.

A step: a barrier (not timed), then backward of a loss whose gradient is known (every
element of rank r's gradient is r + 1), then synchronize() (Gloo: the buckets' waits and
copies back; DDP: nothing, its backward ends with the averaged gradients). Its time is
the max over ranks; a side's figure is the median over steps. Every step's averaged
gradients are checked; #wrong counts the elements that differ.
"""
import argparse
import os
import statistics
import sys
import time

import rank_hosts  # beside this file
from cpu_idle import cpu_ticks, idle_since  # beside this file

HERE = os.path.dirname(os.path.abspath(__file__))


def make_parameters(torch, shapes_path):
    from model_gloo import read_shapes
    return [torch.nn.Parameter(torch.zeros(n)) for _, n in reversed(read_shapes(shapes_path))]


def loss_of(params, factor):
    # d(loss)/dp = factor for every element: cheap to compute, exact to check.
    return sum((p * factor).sum() for p in params)


def wrong_elements(params, n):
    want = (n + 1) / 2.0
    return sum(int((p.grad != want).sum()) for p in params)


class StepTimes:
    """A side's step times after its warm-up steps, and the share of the machine's CPU time
    left idle while they ran (the hosts share its cores: near 0, the CPU bound the step)."""

    def __init__(self, warmup_steps):
        self.warmup_steps, self.seconds, self._before = warmup_steps, [], None

    def starting(self, step):
        if step == self.warmup_steps:
            self._before = cpu_ticks()

    def ended(self, step, elapsed):
        if step >= self.warmup_steps:
            self.seconds.append(elapsed)

    def idle(self):
        return idle_since(self._before)


def ddp_steps(torch, dist, args, rank):
    """One rank of a DDP side; rank 0 prints the side's figures (report)."""
    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.grads = torch.nn.ParameterList(make_parameters(torch, args.shapes))

        def forward(self, factor):
            return loss_of(self.grads, factor)

    model = Model()
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    times, wrong = StepTimes(args.warmup_steps), 0
    for step in range(args.warmup_steps + args.steps):
        times.starting(step)
        ddp.zero_grad()
        dist.barrier()
        start = time.perf_counter()
        ddp(float(rank + 1)).backward()
        times.ended(step, time.perf_counter() - start)
        wrong += wrong_elements(model.grads, dist.get_world_size())
    report(torch, dist, times, wrong, "DDP's")


def report(torch, dist, times, wrong, buckets):
    """Rank 0 prints the median step (max over ranks), elements wrong, buckets and its CPU
    idle share."""
    idle = times.idle()
    slowest = torch.tensor(times.seconds, dtype=torch.float64)
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
    total_wrong = torch.tensor([wrong], dtype=torch.int64)
    dist.all_reduce(total_wrong)
    if dist.get_rank() == 0:
        print(f"RESULT {statistics.median(slowest.tolist())} {int(total_wrong[0])} {buckets} "
              f"{idle}", flush=True)


def ringsync_ddp_rank(args):
    import torch
    import torch.distributed as dist
    import ringsync.torch  # noqa: F401  registers the backend
    torch.set_num_threads(1)
    dist.init_process_group("ringsync", init_method=f"tcp://{args.master}:{args.port}",
                            rank=args.rank, world_size=args.nranks)
    ddp_steps(torch, dist, args, args.rank)
    dist.destroy_process_group()


def gloo_ddp_rank(args):
    import torch
    import torch.distributed as dist
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://{args.master}:{args.port}",
                            rank=args.rank, world_size=args.nranks)
    ddp_steps(torch, dist, args, args.rank)
    dist.destroy_process_group()


def ringsync_rank(args):
    import torch
    import ringsync
    import ringsync.torch as rst
    torch.set_num_threads(1)
    rs = rst.init(os.environ["RINGSYNC_WORKER"])
    params = make_parameters(torch, args.shapes)
    optimizer = rst.DistributedOptimizer(
        torch.optim.SGD(params, lr=0.0), [(str(i), p) for i, p in enumerate(params)],
        bucket_bytes=args.bucket_bytes, registered_buckets=args.side in ("registered", "fp16"),
        compression=rst.Compression.fp16 if args.side == "fp16" else rst.Compression.none)
    times, wrong = StepTimes(args.warmup_steps), 0
    for step in range(args.warmup_steps + args.steps):
        times.starting(step)
        optimizer.zero_grad()
        rs.barrier()
        start = time.perf_counter()
        loss_of(params, rs.rank + 1.0).backward()
        optimizer.synchronize()
        times.ended(step, time.perf_counter() - start)
        wrong += wrong_elements(params, rs.world_size)
        optimizer.step()
    idle = times.idle()
    slowest = rs.allreduce_(torch.tensor(times.seconds, dtype=torch.float64), "times",
                            op=ringsync.MAX)
    total_wrong = rs.allreduce_(torch.tensor([wrong], dtype=torch.int64), "wrong")
    if rs.rank == 0:
        print(f"RESULT {statistics.median(slowest.tolist())} {int(total_wrong[0])} "
              f"{len(optimizer._buckets)} {idle}")
    rst.shutdown()


def gloo_rank(args):
    import torch
    import torch.distributed as dist
    from ringsync.torch.optimizer import bucket_groups
    torch.set_num_threads(1)
    n, rank = args.nranks, args.rank
    dist.init_process_group("gloo", init_method=f"tcp://{args.master}:{args.port}", rank=rank,
                            world_size=n)
    params = make_parameters(torch, args.shapes)
    buckets = bucket_groups(params, args.bucket_bytes)  # the optimizer's own
    flats = [torch.zeros(sum(p.numel() for p in b)) for b in buckets]
    slot = {}
    for i, b in enumerate(buckets):
        offset = 0
        for p in b:
            slot[p] = (i, offset)
            offset += p.numel()
    works, filled = [None] * len(buckets), [0] * len(buckets)

    def hook(p):
        def run(*_):
            i, offset = slot[p]
            flats[i][offset:offset + p.numel()].copy_(p.grad)
            filled[i] += 1
            if filled[i] == len(buckets[i]):
                works[i] = dist.all_reduce(flats[i], async_op=True)
        return run
    accumulators = []  # as DistributedOptimizer: torch 1.13 has no post-accumulate hook
    for p in params:
        accumulator = p.expand_as(p).grad_fn.next_functions[0][0]
        accumulator.register_hook(hook(p))
        accumulators.append(accumulator)
    times, wrong = StepTimes(args.warmup_steps), 0
    for step in range(args.warmup_steps + args.steps):
        times.starting(step)
        for p in params:
            p.grad = None
        filled[:] = [0] * len(buckets)
        dist.barrier()
        start = time.perf_counter()
        loss_of(params, rank + 1.0).backward()
        with torch.no_grad():
            for b, flat, work in zip(buckets, flats, works):
                work.wait()
                flat.div_(n)
                for p in b:
                    i, offset = slot[p]
                    p.grad.copy_(flat[offset:offset + p.numel()])
        times.ended(step, time.perf_counter() - start)
        wrong += wrong_elements(params, n)
    report(torch, dist, times, wrong, len(buckets))
    dist.destroy_process_group()


def run_side(side, args, hosts):
    """Runs one side, a process per rank on its host; returns (median step seconds, #wrong,
    buckets, CPU idle share) as rank 0 reports them."""
    port = rank_hosts.free_port()
    argv = [sys.executable, os.path.abspath(__file__), f"--shapes={os.path.abspath(args.shapes)}",
            f"--steps={args.steps}", f"--warmup_steps={args.warmup_steps}",
            f"--bucket_bytes={args.bucket_bytes}", f"--nranks={args.nranks}", f"--side={side}",
            f"--master={hosts.master}", f"--port={port}"]
    procs = [hosts.start(r, argv + [f"--rank={r}"],
                         {"RINGSYNC_WORKER": hosts.worker(r),
                          "GLOO_SOCKET_IFNAME": hosts.gloo_ifname})
             for r in range(args.nranks)]
    ended = [hosts.finish(p, 900) for p in procs]
    if any(rc != 0 for rc, _ in ended):
        failed = next(r for r, (rc, _) in enumerate(ended) if rc != 0)
        sys.exit(f"optimizer_step.py: the {side} side failed on rank {failed}:\n"
                 f"{ended[failed][1][-4000:]}")
    result = [line for line in ended[0][1].splitlines() if line.startswith("RESULT ")]
    _, median, wrong, buckets, idle = result[-1].split()
    return float(median), int(wrong), buckets, float(idle)


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shapes", default=os.path.join(HERE, "models", "resnet50.shapes"))
    p.add_argument("--nranks", type=int, default=4)
    p.add_argument("--steps", type=int, default=7)
    p.add_argument("--warmup_steps", type=int, default=2)
    p.add_argument("--bucket_bytes", type=int, default=25 << 20)  # DistributedOptimizer's
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--sides", default="registered,plain,gloo,ddp,ddp-gloo")
    p.add_argument("--hosts", choices=("local", "netns"), default="local")
    p.add_argument("--rate", default="1gbit", help="--hosts=netns: every link's rate")
    p.add_argument("--security", choices=("token", "tls"), default="token",
                   help="--hosts=netns: how the daemons authenticate")
    p.add_argument("--mtu", type=int, help="--hosts=netns: every link's MTU (default 1500)")
    # Internal: one rank of a side.
    p.add_argument("--side", help=argparse.SUPPRESS)
    p.add_argument("--rank", type=int, help=argparse.SUPPRESS)
    p.add_argument("--master", help=argparse.SUPPRESS)
    p.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.side:
        sys.path.insert(0, HERE)
        rank_main = {"gloo": gloo_rank, "ddp-gloo": gloo_ddp_rank, "ddp": ringsync_ddp_rank}
        rank_main.get(args.side, ringsync_rank)(args)
        return

    sides = args.sides.split(",")
    results = {side: [] for side in sides}
    idles = {side: [] for side in sides}
    failed = False
    hosts = rank_hosts.LocalHosts(args.nranks) if args.hosts == "local" else \
        rank_hosts.NetnsHosts(args.nranks, args.rate, args.security, mtu=args.mtu)
    with hosts:
        for round_ in range(args.rounds):
            for k in range(len(sides)):
                side = sides[(round_ + k) % len(sides)]  # who goes first rotates
                median, wrong, buckets, idle = run_side(side, args, hosts)
                results[side].append(median)
                idles[side].append(idle)
                failed |= wrong != 0
                print(f"round {round_ + 1}: {side:<10} {median * 1e3:8.1f} ms a step, "
                      f"{buckets} buckets, #wrong {wrong}, CPU idle {idle:.2f}", flush=True)
    where = "this machine" if args.hosts == "local" else \
        f"4 namespace hosts, {args.rate} links, {args.security}"
    print(f"== {os.path.basename(args.shapes)}, N={args.nranks} on {where}, buckets of at most "
          f"{args.bucket_bytes >> 20} MiB; median over {args.rounds} rounds of each round's "
          f"median step (max over ranks); ratio = {sides[0]}'s time / the side's "
          f"(< 1: {sides[0]} faster); CPU idle: the share of this machine's CPU time left "
          f"idle during the side's timed steps (near 0: bound by the CPU)")
    base = statistics.median(results[sides[0]])
    for side in sides:
        m = statistics.median(results[side])
        print(f"  {side:<10} {m * 1e3:8.1f} ms   ratio {base / m:5.2f}   CPU idle "
              f"{statistics.median(idles[side]):.2f}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
