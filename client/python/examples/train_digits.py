#!/usr/bin/env python3
"""Data-parallel training of a small MLP on scikit-learn's bundled digits data set (8x8
images of handwritten digits, no download), 4 ranks each on its own shard, three ways:

  ddp-ringsync   torch DistributedDataParallel with the torch.distributed backend "ringsync"
  optimizer      ringsync.torch.DistributedOptimizer (Horovod style), no torch.distributed
  ddp-gloo       DistributedDataParallel with torch's own gloo backend: the reference

    PYTHONPATH=build/python RINGSYNC_BIN_DIR=build/bin \\
        /usr/bin/python3 client/python/examples/train_digits.py          # all three modes

Without --rank it is the launcher: it starts a local ringsync cluster (1 coordinator + 4
workers), runs the ranks of each mode as separate processes, prints rank 0's loss and
test accuracy per epoch, each mode's step time, and a verdict: in every mode all ranks
hold bitwise identical parameters and reach test accuracy >= 0.95, and the ringsync modes
end within floating-point tolerance of the gloo run. Exit status 0 iff the verdict is OK.
With --rank it is one training process: the code under "one rank" is an ordinary
DDP / Horovod-style training script.
"""

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time

MODES = ("ddp-ringsync", "optimizer", "ddp-gloo")
# Gradients are averaged in a different order by each backend (gloo's ring, ringsync's
# ring, and DDP divides before summing where ringsync's AVG divides after), so the runs
# differ by rounding, which training then carries along.
TOLERANCE = 1e-4
MIN_ACCURACY = 0.95


# ---------------------------------------------------------------------------- one rank
def load_shard(rank, world_size):
    import numpy as np
    import torch
    from sklearn.datasets import load_digits

    x, y = load_digits(return_X_y=True)
    order = np.random.default_rng(0).permutation(len(x))
    x, y = (x[order] / 16.0).astype(np.float32), y[order]
    test = 360
    x_train, y_train, x_test, y_test = x[test:], y[test:], x[:test], y[:test]
    per_rank = len(x_train) // world_size  # equal shards: DDP needs equal step counts
    shard = slice(rank * per_rank, (rank + 1) * per_rank)
    as_tensors = lambda a, b: (torch.from_numpy(a), torch.from_numpy(b).long())
    return as_tensors(x_train[shard], y_train[shard]), as_tensors(x_test, y_test)


def make_model():
    import torch

    torch.manual_seed(0)  # the same start on every rank (the broadcast makes sure)
    return torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(),
                               torch.nn.Linear(128, 64), torch.nn.ReLU(),
                               torch.nn.Linear(64, 10))


def run_rank(args):
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F

    torch.set_num_threads(1)  # 4 ranks share the machine
    (x, y), (x_test, y_test) = load_shard(args.rank, args.world_size)
    model = make_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    if args.mode.startswith("ddp-"):
        if args.mode == "ddp-ringsync":
            import ringsync.torch  # noqa: F401  registers the backend "ringsync"
        dist.init_process_group(args.mode[len("ddp-"):], init_method=f"file://{args.store}",
                                rank=args.rank, world_size=args.world_size)
        model = torch.nn.parallel.DistributedDataParallel(model)
        params = model.module
    else:
        import ringsync.torch as rst

        rst.init(os.environ["RINGSYNC_WORKER"])
        rst.broadcast_parameters(model.state_dict(), root=0)
        optimizer = rst.DistributedOptimizer(optimizer, model.named_parameters())
        rst.broadcast_optimizer_state(optimizer, root=0)
        params = model

    generator = torch.Generator().manual_seed(1 + args.rank)
    step_times, log = [], []
    for epoch in range(args.epochs):
        order = torch.randperm(len(x), generator=generator)
        total = 0.0
        for start in range(0, len(x), args.batch):
            batch = order[start:start + args.batch]
            began = time.perf_counter()
            optimizer.zero_grad()
            loss = F.cross_entropy(model(x[batch]), y[batch])
            loss.backward()
            optimizer.step()
            if epoch > 0:  # the first epoch warms up (connections, shared memory)
                step_times.append(time.perf_counter() - began)
            total += loss.item() * len(batch)
        with torch.no_grad():
            accuracy = (params(x_test).argmax(1) == y_test).float().mean().item()
        log.append({"epoch": epoch, "loss": total / len(x), "accuracy": accuracy})
        if args.rank == 0:
            print(f"  [{args.mode}] epoch {epoch:2d}  loss {total / len(x):.4f}  "
                  f"test accuracy {accuracy:.4f}", flush=True)

    flat = torch.cat([p.detach().reshape(-1) for p in params.parameters()])
    result = {"rank": args.rank, "log": log, "step_seconds": sum(step_times) / len(step_times),
              "param_sha256": hashlib.sha256(flat.numpy().tobytes()).hexdigest()}
    torch.save(flat, f"{args.result}.pt")
    with open(args.result, "w") as f:
        json.dump(result, f)
    if args.mode.startswith("ddp-"):
        dist.destroy_process_group()


# ---------------------------------------------------------------------------- launcher
def run_mode(mode, args, targets, workdir):
    store = os.path.join(workdir, f"{mode}.store")
    procs, results = [], []
    for rank in range(args.world_size):
        result = os.path.join(workdir, f"{mode}.{rank}.json")
        env = dict(os.environ)
        if targets:
            env["RINGSYNC_WORKER"] = targets[rank]
        argv = [sys.executable, os.path.abspath(__file__), f"--mode={mode}", f"--rank={rank}",
                f"--world-size={args.world_size}", f"--epochs={args.epochs}",
                f"--batch={args.batch}", f"--store={store}", f"--result={result}"]
        procs.append(subprocess.Popen(argv, env=env))
        results.append(result)
    try:
        codes = [p.wait(timeout=args.rank_timeout) for p in procs]
    finally:
        for p in procs:  # on a timeout or Ctrl-C: stop every rank we started
            if p.poll() is None:
                p.kill()
                p.wait()
    if any(codes):
        raise RuntimeError(f"{mode}: ranks exited with {codes}")
    import torch

    ranks = []
    for path in results:
        with open(path) as f:
            ranks.append(json.load(f))
    return ranks, torch.load(f"{results[0]}.pt")


def launch(args):
    from ringsync.local_cluster import LocalCluster

    modes = MODES if args.mode == "all" else (args.mode,)
    outcome, problems = {}, []
    with tempfile.TemporaryDirectory(prefix="train-digits-") as workdir:
        for mode in modes:
            print(f"{mode}: {args.world_size} ranks, {args.epochs} epochs", flush=True)
            if mode == "ddp-gloo":
                outcome[mode] = run_mode(mode, args, None, workdir)
                continue
            # A cluster of its own per mode: each mode's job starts on fresh workers.
            with LocalCluster(world_size=args.world_size) as cluster:
                outcome[mode] = run_mode(mode, args, cluster.targets, workdir)

    print("\nmode           final loss  accuracy  step time   identical on all ranks")
    for mode, (ranks, _) in outcome.items():
        last = ranks[0]["log"][-1]
        identical = len({r["param_sha256"] for r in ranks}) == 1
        step = sum(r["step_seconds"] for r in ranks) / len(ranks)
        print(f"{mode:13s}  {last['loss']:10.4f}  {last['accuracy']:8.4f}  "
              f"{step * 1e3:6.2f} ms   {'yes' if identical else 'NO'}")
        if not identical:
            problems.append(f"{mode}: ranks hold different parameters")
        if last["accuracy"] < MIN_ACCURACY:
            problems.append(f"{mode}: accuracy {last['accuracy']:.4f} < {MIN_ACCURACY}")
    if "ddp-gloo" in outcome:
        reference = outcome["ddp-gloo"][1]
        for mode in modes:
            if mode == "ddp-gloo":
                continue
            diff = (outcome[mode][1] - reference).abs().max().item()
            print(f"{mode} vs ddp-gloo: largest parameter difference {diff:.3g} "
                  f"(tolerance {TOLERANCE})")
            if diff > TOLERANCE:
                problems.append(f"{mode} differs from ddp-gloo by {diff:.3g}")
    if problems:
        print("VERDICT: FAILED: " + "; ".join(problems))
        return 1
    print(f"VERDICT: OK: {', '.join(modes)}: every rank bitwise identical, accuracy >= "
          f"{MIN_ACCURACY}" + (", ringsync matches gloo" if "ddp-gloo" in outcome and len(modes) > 1 else ""))
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", default="all", choices=MODES + ("all",))
    parser.add_argument("--world-size", type=int, default=4)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch", type=int, default=32, help="samples per rank per step")
    parser.add_argument("--rank-timeout", type=float, default=600, help="seconds per mode")
    parser.add_argument("--rank", type=int, help="run as this rank (the launcher sets it)")
    parser.add_argument("--store", help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.rank is None:
        sys.exit(launch(args))
    run_rank(args)


if __name__ == "__main__":
    main()
