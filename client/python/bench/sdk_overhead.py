#!/usr/bin/env python3
"""Per-call cost of the Python SDK against the C++ SDK: all-reduces of 4 B and 16 MiB
(float32 SUM) with N ranks on a local cluster, timed the way ringsync-bench times them
(time = max over ranks of batch wall time / iters, after warm-up), first by one
`ringsync-bench` process per rank (C++), then by one Python process per rank calling
ringsync.Client.allreduce_ on a numpy array (the same cluster, one after the other).

    PYTHONPATH=build/python RINGSYNC_BIN_DIR=build/bin \\
        /usr/bin/python3 client/python/bench/sdk_overhead.py [--world-size 4]

Prints one line per size: C++ time, Python time, difference. A benchmark, not a test:
on a busy machine repeat it and compare within one run.
"""

import argparse
import json
import os
import subprocess
import sys
import time

SIZES = {"4 B": (4, 2000), "16 MiB": (16 << 20, 20)}  # bytes, timed iterations
WARMUP = 5


def python_rank(args):
    import numpy as np
    import ringsync

    rs = ringsync.connect(os.environ["RINGSYNC_WORKER"])
    times = {}
    for label, (nbytes, iters) in SIZES.items():
        a = np.ones(nbytes // 4, np.float32)
        for _ in range(WARMUP):
            rs.allreduce_(a, label)
        rs.barrier()
        began = time.perf_counter()
        for _ in range(iters):
            rs.allreduce_(a, label)
        times[label] = (time.perf_counter() - began) / iters
    rs.close()
    print(json.dumps(times))


def cpp_time(bench, targets, nbytes, iters):
    procs = [subprocess.Popen([bench, f"--worker={t}", f"--min_bytes={nbytes}",
                               f"--max_bytes={nbytes}", f"--iters={iters}",
                               f"--warmup_iters={WARMUP}"], stdout=subprocess.PIPE, text=True)
             for t in targets]
    outputs = [p.communicate(timeout=600)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs), outputs
    # The data line: size count type redop time(us) algbw busbw #wrong; rank 0 prints the max.
    row = [line.split() for line in outputs[0].splitlines()
           if line.strip() and not line.startswith("#")][0]
    assert row[-1] == "0", f"ringsync-bench found wrong values: {row}"
    return float(row[4]) * 1e-6


def python_times(targets):
    procs = [subprocess.Popen([sys.executable, os.path.abspath(__file__), "--rank"],
                              env=dict(os.environ, RINGSYNC_WORKER=t), stdout=subprocess.PIPE,
                              text=True) for t in targets]
    outputs = [p.communicate(timeout=600)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs), outputs
    per_rank = [json.loads(o) for o in outputs]
    return {label: max(r[label] for r in per_rank) for label in SIZES}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--world-size", type=int, default=4)
    parser.add_argument("--rank", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.rank:
        return python_rank(args)
    from ringsync.local_cluster import LocalCluster, find_program

    bench = find_program("ringsync-bench")
    with LocalCluster(world_size=args.world_size) as cluster:
        cpp = {label: cpp_time(bench, cluster.targets, nbytes, iters)
               for label, (nbytes, iters) in SIZES.items()}
        py = python_times(cluster.targets)
    print(f"all-reduce float32 sum, N={args.world_size}: time per call (max over ranks)")
    print(f"{'size':>8}  {'C++ SDK':>10}  {'Python SDK':>10}  {'Python - C++':>12}")
    for label in SIZES:
        print(f"{label:>8}  {cpp[label] * 1e6:8.1f} us  {py[label] * 1e6:8.1f} us  "
              f"{(py[label] - cpp[label]) * 1e6:+10.1f} us")


if __name__ == "__main__":
    main()
