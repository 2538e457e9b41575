#!/usr/bin/env python3
"""Elastic data-parallel training (ringsync.torch.elastic, Horovod Elastic's API) of the
digits MLP of train_digits.py: the job loses a worker and its training process mid-run,
goes on with three ranks, and takes a new process in when the worker is back.

    PYTHONPATH=build/python RINGSYNC_BIN_DIR=build/bin \\
        /usr/bin/python3 client/python/examples/train_digits_elastic.py

Without --rank it is the launcher: it starts an elastic local cluster (4 workers, going
on with 3), runs 4 training processes, SIGKILLs worker 2 and its process after epoch 2,
starts the worker again once the others have trained on 3 ranks for a while, and a new
process beside it, which receives the model, the optimizer's state and the sampler's
place in the epoch. The verdict: every rank bitwise identical at the end, test accuracy
>= 0.95, steps run on 3 ranks and the job ended on 4. Exit status 0 iff it is OK. With
--rank it is one training process: the code under "one rank" is an ordinary elastic
training script.
"""

import argparse
import hashlib
import os
import re
import subprocess
import sys
import tempfile
import time

MIN_ACCURACY = 0.95


# ---------------------------------------------------------------------------- one rank
def run_rank(args):
    import numpy as np
    import torch
    import torch.nn.functional as F
    from sklearn.datasets import load_digits

    import ringsync.torch as rst
    from train_digits import make_model  # beside this file

    torch.set_num_threads(1)
    x, y = load_digits(return_X_y=True)
    order = np.random.default_rng(0).permutation(len(x))
    x = torch.from_numpy((x[order] / 16.0).astype(np.float32))
    y = torch.from_numpy(y[order]).long()
    x_train, y_train, x_test, y_test = x[360:], y[360:], x[:360], y[:360]

    rst.init(os.environ["RINGSYNC_WORKER"])
    model = make_model()
    optimizer = rst.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9),
                                         model.named_parameters())
    sampler = rst.elastic.ElasticSampler(range(len(x_train)), seed=1)
    loader = torch.utils.data.DataLoader(range(len(x_train)), batch_size=args.batch,
                                         sampler=sampler)
    state = rst.elastic.TorchState(model, optimizer, sampler=sampler, epoch=0)
    state.register_reset_callbacks([lambda: print(
        f"reset: rank {rst.client().rank} of {rst.client().world_size}", flush=True)])

    @rst.elastic.run
    def train(state):
        for state.epoch in range(state.epoch, args.epochs):
            sampler.set_epoch(state.epoch)
            for rows in loader:
                optimizer.zero_grad()
                F.cross_entropy(model(x_train[rows]), y_train[rows]).backward()
                optimizer.step()  # averages the gradients over the ring as it is now
                sampler.record_batch(len(rows))
                state.commit()
                time.sleep(args.step_pause)  # a real step's compute
            print(f"epoch {state.epoch:2d}  world {sampler.shared_among}  "
                  f"test accuracy {accuracy_of(model):.4f}", flush=True)

    def accuracy_of(model):
        with torch.no_grad():
            return (model(x_test).argmax(1) == y_test).float().mean().item()

    train(state)
    accuracy = accuracy_of(model)
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    print(f"DONE accuracy {accuracy:.4f} resets {state.resets} "
          f"parameters {hashlib.sha256(flat.numpy().tobytes()).hexdigest()}", flush=True)
    rst.shutdown()


# ---------------------------------------------------------------------------- launcher
def launch(args):
    from ringsync.local_cluster import LocalCluster

    victim, n = 2, 4
    flags = ["--heartbeat_interval=100ms", "--heartbeat_timeout=1s"]  # a loss seen in ~1 s
    with tempfile.TemporaryDirectory(prefix="train-digits-elastic-") as workdir, \
            LocalCluster(world_size=n, min_world_size=n - 1, coordinator_flags=flags,
                         on_worker_exit="wait") as cluster:
        def start(rank, name):
            log = os.path.join(workdir, f"{name}.log")
            argv = [sys.executable, os.path.abspath(__file__), f"--rank={rank}",
                    f"--epochs={args.epochs}", f"--batch={args.batch}",
                    f"--step-pause={args.step_pause}"]
            env = dict(os.environ, RINGSYNC_WORKER=cluster.targets[rank])
            with open(log, "w") as out:
                return subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT), log

        def rank0():
            with open(logs[0]) as f:
                return f.read()

        shown = [0]

        def follow():  # rank 0's complete lines not shown yet
            lines = rank0().splitlines(keepends=True)
            complete = [line for line in lines if line.endswith("\n")]
            for line in complete[shown[0]:]:
                print(f"  [rank 0] {line}", end="", flush=True)
            shown[0] = len(complete)

        def epochs_on(world):
            return len(re.findall(rf"^epoch +\d+  world {world} ", rank0(), re.M))

        def wait_for(what, condition):
            deadline = time.monotonic() + args.rank_timeout
            while True:
                follow()
                if condition():
                    return
                running = [p for r, p in enumerate(procs) if r != victim or p.returncode != -9]
                if any(p.poll() not in (None, 0) for p in running) or time.monotonic() > deadline:
                    raise RuntimeError(f"while {what}: a rank failed or timed out:\n{rank0()}")
                time.sleep(0.05)

        procs, logs = map(list, zip(*(start(r, f"rank{r}") for r in range(n))))
        try:
            print(f"{n} ranks, {args.epochs} epochs; rank 0's progress:", flush=True)
            wait_for("training on 4", lambda: epochs_on(4) >= 2)
            print(f"== SIGKILL worker {victim} and its training process", flush=True)
            procs[victim].kill()
            procs[victim].wait()
            cluster.kill_worker(victim)
            wait_for("training on 3", lambda: epochs_on(3) >= 1)
            print(f"== worker {victim} starts again, and a new training process beside it",
                  flush=True)
            cluster.restart_exited_workers()
            procs[victim], logs[victim] = start(victim, f"rank{victim}-new")
            wait_for("finishing", lambda: all(p.poll() is not None for p in procs))
            follow()
            codes = [p.returncode for p in procs]
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
        done = {}
        for rank, log in enumerate(logs):
            with open(log) as f:
                found = re.search(r"^DONE accuracy ([\d.]+) resets (\d+) parameters (\w+)",
                                  f.read(), re.M)
            if codes[rank] != 0 or not found:
                print(f"VERDICT: FAILED: rank {rank} exited {codes[rank]}; see its log")
                return 1
            done[rank] = found
        text0 = rank0()
    problems = []
    worlds = re.findall(r"^epoch +\d+  world (\d+) ", text0, re.M)
    if "3" not in worlds or worlds[-1] != "4":
        problems.append(f"rank 0's epochs ran on {worlds} ranks, not 4, then 3, then 4")
    if len({d.group(3) for d in done.values()}) != 1:
        problems.append("the ranks hold different parameters")
    accuracy = float(done[0].group(1))
    if accuracy < MIN_ACCURACY:
        problems.append(f"accuracy {accuracy:.4f} < {MIN_ACCURACY}")
    if problems:
        print("VERDICT: FAILED: " + "; ".join(problems))
        return 1
    print(f"VERDICT: OK: trained on 4, then 3, then 4 ranks (rank 0 reset {done[0].group(2)} "
          f"times); every rank bitwise identical; test accuracy {accuracy:.4f} >= {MIN_ACCURACY}")
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=12)
    parser.add_argument("--batch", type=int, default=32, help="samples per rank per step")
    parser.add_argument("--step-pause", type=float, default=0.02,
                        help="seconds each step sleeps, as a larger model's compute would take")
    parser.add_argument("--rank-timeout", type=float, default=600, help="seconds for the job")
    parser.add_argument("--rank", type=int, help="run as this rank (the launcher sets it)")
    args = parser.parse_args()
    if args.rank is None:
        sys.exit(launch(args))
    run_rank(args)


if __name__ == "__main__":
    main()
