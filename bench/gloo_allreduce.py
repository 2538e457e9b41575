#!/usr/bin/python3
"""torch.distributed Gloo all-reduce sweep, the peer ringsync-bench is compared with.

Same sizes, inputs, iteration policy and columns as bench/ringsync_bench.cc, so the two
tables line up row by row (bench/compare_with_gloo.sh joins them):

  /usr/bin/python3 bench/gloo_allreduce.py --nranks=4 --min_bytes=1M --max_bytes=256M

N ranks are processes (multiprocessing spawn) meeting at tcp://127.0.0.1:<free port>;
Gloo itself is pinned to the loopback interface. Gloo has no AVG: avg runs as SUM then an
in-place division (truncating for integers, as ringsync defines it), inside the timing.
"""
import argparse
import os
import resource
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import rank_hosts  # beside this file

DTYPES = {"float32": torch.float32, "float64": torch.float64, "float16": torch.float16,
          "bfloat16": torch.bfloat16, "int32": torch.int32, "int64": torch.int64,
          "int8": torch.int8, "uint8": torch.uint8}
OPS = {"sum": dist.ReduceOp.SUM, "avg": dist.ReduceOp.SUM, "min": dist.ReduceOp.MIN,
       "max": dist.ReduceOp.MAX, "prod": dist.ReduceOp.PRODUCT}
BYTES_PER_BATCH = 1 << 30  # as ringsync-bench: fewer iterations for large sizes
PERIOD = 15
BLOCK = PERIOD << 16  # elements per fill/check block; a multiple of PERIOD


def parse_bytes(text):
    s = text.upper().removesuffix("IB").removesuffix("B")
    shift = {"K": 10, "M": 20, "G": 30}.get(s[-1:], 0)
    return int(s[:-1] if shift else s) << shift


def input_values(op, rank, n_elements):
    """Rank `rank`'s inputs as int64: the small integers ringsync-bench uses."""
    i = torch.arange(n_elements, dtype=torch.int64)
    if op == "prod":
        return torch.tensor([2, 1, -1])[(i + rank) % 3]
    return (i + 3 * rank) % 5 - 2


def expected_pattern(op, dtype, n):
    """PERIOD elements of the exact result (integers wrap like ringsync's reducer)."""
    ins = torch.stack([input_values(op, r, PERIOD) for r in range(n)])
    if not dtype.is_floating_point:
        ins = ins.to(dtype)  # min/max compare in the element type (uint8 -1 is 255)
        wide = ins.to(torch.int64)
        if op in ("sum", "avg"):
            total = wide.sum(0).to(dtype)
            return torch.div(total, n, rounding_mode="trunc").to(dtype) if op == "avg" else total
        if op == "prod":
            return wide.prod(0).to(dtype)
        return ins.min(0).values if op == "min" else ins.max(0).values
    wide = ins.to(torch.float64)
    result = {"sum": wide.sum(0), "prod": wide.prod(0), "min": wide.min(0).values,
              "max": wide.max(0).values}.get(op)
    if op == "avg":  # divided in float32 (float64 for float64), rounded once
        div_type = torch.float64 if dtype == torch.float64 else torch.float32
        result = wide.sum(0).to(div_type) / n
    return result.to(torch.float32).to(dtype) if dtype != torch.float64 else result


def blocks(t, pattern):
    """(slice of t, same-length slice of the repeated pattern), a block at a time, so
    neither filling nor checking needs a second full-size tensor (peak RSS stays honest)."""
    block = pattern.repeat(BLOCK // PERIOD)
    for start in range(0, t.numel(), BLOCK):
        part = t[start:start + BLOCK]
        yield part, block[:part.numel()]


def all_reduce(t, args, n):
    dist.all_reduce(t, op=OPS[args.op])
    if args.op == "avg":
        if t.dtype.is_floating_point:
            t.div_(n)
        else:
            torch.div(t, n, rounding_mode="trunc", out=t)


def sizes(args, element):
    last, size = None, parse_bytes(args.min_bytes)
    while size <= parse_bytes(args.max_bytes):
        count = max(1, size // element)
        if count != last:
            yield count
        last, size = count, size * args.step_factor


def rank_main(rank, args, port):
    torch.set_num_threads(1)  # 4 ranks share the cores; Gloo has its own threads
    n = args.nranks
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=n)
    dtype = DTYPES[args.dtype]
    element = torch.tensor([], dtype=dtype).element_size()
    bus = 2.0 * (n - 1) / n
    try:  # one element first, so an unsupported dtype/op fails with a plain message
        all_reduce(torch.zeros(1, dtype=dtype), args, n)
    except RuntimeError as e:  # e.g. torch 1.13's Gloo has no bfloat16 all-reduce
        if rank == 0:
            print(f"gloo_allreduce.py: this torch's Gloo cannot all-reduce {args.dtype} "
                  f"({args.op}): {e}", file=sys.stderr)
        sys.exit(3)
    if rank == 0:
        print(f"# gloo_allreduce.py all-reduce: nranks {n}, torch {torch.__version__}, backend gloo"
              f"{' (avg = sum, then divide)' if args.op == 'avg' else ''}")
        print(f"# time = max over ranks of (batch wall time / iters); algbw = size / time; "
              f"busbw = algbw * 2(N-1)/N = algbw * {bus:.3f}\n#")
        print("#%11s  %12s  %8s  %6s  %10s  %7s  %7s  %6s" % ("size", "count", "type", "redop", "time",
                                                           "algbw", "busbw", "#wrong"))
        print("#%11s  %12s  %8s  %6s  %10s  %7s  %7s  %6s" % ("(B)", "(elements)", "", "", "(us)",
                                                           "(GB/s)", "(GB/s)", ""), flush=True)
    total_wrong = 0
    for count in sizes(args, element):
        size = count * element
        budget = max(1, BYTES_PER_BATCH // size)
        iters, warmups = max(2, min(args.iters, budget)), min(args.warmup_iters, budget)
        pattern = input_values(args.op, rank, PERIOD).to(dtype)
        t = torch.empty(count, dtype=dtype)
        for part, values in blocks(t, pattern):
            part.copy_(values)
        for _ in range(warmups):
            all_reduce(t, args, n)
        dist.barrier()
        start = time.perf_counter()
        for _ in range(iters):
            all_reduce(t, args, n)
        slowest = torch.tensor([(time.perf_counter() - start) / iters], dtype=torch.float64)
        dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
        wrong = torch.zeros(1, dtype=torch.int64)
        if args.check:
            for part, values in blocks(t, pattern):
                part.copy_(values)
            all_reduce(t, args, n)
            for part, want in blocks(t, expected_pattern(args.op, dtype, n)):
                wrong += (part != want).sum()
        dist.all_reduce(wrong)
        total_wrong += int(wrong)
        seconds = float(slowest)
        algbw = size / seconds / 1e9
        if rank == 0:
            print("%12d  %12d  %8s  %6s  %10.1f  %7.3f  %7.3f  %6d" % (
                size, count, args.dtype, args.op, seconds * 1e6, algbw, algbw * bus, int(wrong)),
                flush=True)
    rss = torch.tensor([resource.getrusage(resource.RUSAGE_SELF).ru_maxrss], dtype=torch.int64)
    gathered = [torch.zeros(1, dtype=torch.int64) for _ in range(n)]
    dist.all_gather(gathered, rss)
    if rank == 0:
        print(f"# Out of bounds values : {total_wrong} {'FAILED' if total_wrong else 'OK'}")
        print("# Gloo process peak RSS per rank, MiB: " +
              " ".join(f"{int(x) / 1024:.1f}" for x in gathered), flush=True)
    dist.destroy_process_group()
    if total_wrong:
        sys.exit(1)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nranks", type=int, default=4)
    p.add_argument("--min_bytes", default="4")
    p.add_argument("--max_bytes", default="256M")
    p.add_argument("--step_factor", type=int, default=2)
    p.add_argument("--dtype", default="float32", choices=DTYPES)
    p.add_argument("--op", default="sum", choices=OPS)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--warmup_iters", type=int, default=5)
    p.add_argument("--check", type=int, default=1)
    args = p.parse_args()
    spawn_gloo_ranks(rank_main, args, "gloo_allreduce.py")


def spawn_gloo_ranks(rank_main, args, program):
    """Runs rank_main(rank, args, port) in args.nranks processes meeting at
    tcp://127.0.0.1:port over loopback; exits non-zero, naming `program`, if a rank fails."""
    os.environ["GLOO_SOCKET_IFNAME"] = "lo"  # only ever 127.0.0.1, never the host's name
    port = rank_hosts.free_port()
    ctx = mp.spawn(rank_main, args=(args, port), nprocs=args.nranks, join=False)
    try:
        while not ctx.join():
            pass
    except mp.ProcessRaisedException as e:
        print(f"{program}: {e}", file=sys.stderr)
        sys.exit(1)
    except mp.ProcessExitedException as e:
        sys.exit(e.exit_code or 1)


if __name__ == "__main__":
    main()
