#!/usr/bin/python3
"""torch.distributed Gloo doing one training step's gradient all-reduce for a model's
parameter tensors (bench/models/*.shapes), the peer bench/model_bench.cc is compared with:

  /usr/bin/python3 bench/model_gloo.py --nranks=4 --shapes=bench/models/resnet50.shapes

Same tensors, order (reverse declaration order, as backpropagation produces gradients),
inputs and timing as ringsync-model-bench, in these modes, interleaved step by step:
  per_tensor  dist.all_reduce of each tensor, one after another;
  bucketed    DDP's scheme: tensors packed in order into flat buckets of at most 25 MiB
              (the first one 1 MiB, as DDP's first bucket), each bucket all-reduced
              asynchronously as it fills, copied back after waiting — the copies in and
              out are in the timing, as in DDP without gradient_as_bucket_view;
  single      one all_reduce of a flat buffer as large as all tensors together.
A step's time is the max over ranks; a barrier, not timed, starts each step.
"""
import argparse
import sys
import time

import torch
import torch.distributed as dist

from gloo_allreduce import spawn_gloo_ranks

BUCKET_BYTES = 25 << 20
FIRST_BUCKET_BYTES = 1 << 20


def read_shapes(path):
    tensors = []
    with open(path) as f:
        for line in f:
            if line.strip() and not line.startswith("#"):
                name, dims = line.split()
                n = 1
                for d in dims.split("x"):
                    n *= int(d)
                tensors.append((name, n))
    return list(reversed(tensors))


def make_buckets(sizes):
    buckets, current, current_bytes, cap = [], [], 0, FIRST_BUCKET_BYTES
    for k, n in enumerate(sizes):
        current.append(k)
        current_bytes += 4 * n
        if current_bytes >= cap:
            buckets.append(current)
            current, current_bytes, cap = [], 0, BUCKET_BYTES
    if current:
        buckets.append(current)
    return buckets


def inputs(rank, k, n):
    return ((torch.arange(n, dtype=torch.int64) + k + 3 * rank) % 5 - 2).to(torch.float32)


def rank_main(rank, args, port):
    torch.set_num_threads(1)
    n = args.nranks
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=n)
    shapes = read_shapes(args.shapes)
    sizes = [s for _, s in shapes]
    tensors = [torch.empty(s) for s in sizes]
    flat = torch.empty(sum(sizes))
    buckets = make_buckets(sizes)
    flats = [torch.empty(sum(sizes[k] for k in b)) for b in buckets]

    def run(mode):
        if mode == "per_tensor":
            for t in tensors:
                dist.all_reduce(t)
        elif mode == "bucketed":
            works = []
            for b, buf in zip(buckets, flats):
                torch.cat([tensors[k] for k in b], out=buf)
                works.append(dist.all_reduce(buf, async_op=True))
            for b, buf, w in zip(buckets, flats, works):
                w.wait()
                at = 0
                for k in b:
                    tensors[k].copy_(buf[at:at + sizes[k]])
                    at += sizes[k]
        else:
            dist.all_reduce(flat)

    modes = args.modes.split(",")
    wrong = torch.zeros(len(modes), dtype=torch.int64)
    for m, mode in enumerate(modes):  # check each mode once on fresh inputs
        for k, t in enumerate(tensors):
            t.copy_(inputs(rank, k, sizes[k]))
        flat.copy_(torch.cat(tensors))
        run(mode)
        got = flat if mode == "single" else torch.cat(tensors)
        want = torch.cat([sum(inputs(r, k, sizes[k]) for r in range(n)) for k in range(len(sizes))])
        wrong[m] = int((got != want).sum())
    dist.all_reduce(wrong)
    seconds = torch.zeros(len(modes), args.steps, dtype=torch.float64)
    for s in range(-args.warmup_steps, args.steps):
        for m, mode in enumerate(modes):
            dist.barrier()
            start = time.perf_counter()
            run(mode)
            if s >= 0:
                seconds[m, s] = time.perf_counter() - start
    dist.all_reduce(seconds, op=dist.ReduceOp.MAX)
    if rank == 0:
        print(f"# model_gloo.py: {args.shapes}, {len(sizes)} tensors, {sum(sizes)} float32 "
              f"({sum(sizes) * 4 / 2**20:.1f} MiB), N={n}, torch {torch.__version__} gloo, "
              f"{len(buckets)} buckets; step time = max over ranks, {args.steps} steps per mode")
        single = seconds[modes.index("single")].median().item() if "single" in modes else 0
        for m, mode in enumerate(modes):
            med = seconds[m].median().item() if args.steps % 2 else seconds[m].quantile(0.5).item()
            print(f"gloo     {mode:<10} median_ms {med * 1e3:9.2f}  min_ms {seconds[m].min().item() * 1e3:9.2f}"
                  f"  vs_single {med / single if single else 0:5.3f}  wrong {int(wrong[m])}", flush=True)
    dist.destroy_process_group()
    if int(wrong.sum()):
        sys.exit(1)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nranks", type=int, default=4)
    p.add_argument("--shapes", required=True)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup_steps", type=int, default=2)
    p.add_argument("--modes", default="per_tensor,bucketed,single")
    args = p.parse_args()
    spawn_gloo_ranks(rank_main, args, "model_gloo.py")


if __name__ == "__main__":
    main()
