"""Fixtures for the Python SDK's tests: a real local cluster (coordinator + workers on
127.0.0.1, sockets in a temporary directory) and one connected ringsync.Client per rank.

A worker serves one client at a time but a process may hold clients of several workers,
so most tests run every rank as a thread of the test process (run_ranks); the DDP and
optimizer tests run real training processes, one per rank.
"""

import concurrent.futures
import os
import subprocess
import sys

import pytest

import ringsync
from ringsync.local_cluster import LocalCluster

WORLD_SIZE = 4
HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture(scope="module")
def cluster():
    with LocalCluster(world_size=WORLD_SIZE) as c:
        yield c


@pytest.fixture(scope="module")
def clients(cluster):
    with concurrent.futures.ThreadPoolExecutor(WORLD_SIZE) as pool:
        connected = list(pool.map(lambda t: ringsync.connect(t, timeout=30), cluster.targets))
    yield connected
    for c in connected:
        c.close()


def registered_mappings():
    """{(start, end)} of this process's mappings of the SDK's registered memory (memfds)."""
    found = set()
    with open("/proc/self/maps") as maps:
        for line in maps:
            if "memfd:ringsync-registered" in line:
                start, end = line.split()[0].split("-")
                found.add((int(start, 16), int(end, 16)))
    return found


def refused(call, error, message):
    """Asserts that call() raises `error` saying `message`."""
    try:
        call()
    except error as e:
        assert message in str(e), e
    else:
        raise AssertionError(f"not refused: {message}")


def run_ranks(clients, fn, timeout=60):
    """Calls fn(client) for every rank at once, each on its own thread; returns the results
    in rank order and re-raises the first exception (by rank)."""
    with concurrent.futures.ThreadPoolExecutor(len(clients)) as pool:
        futures = [pool.submit(fn, c) for c in clients]
        return [f.result(timeout=timeout) for f in futures]


def run_rank_processes(script, targets, extra_args=(), timeout=300):
    """Runs `script` once per rank as its own process (RINGSYNC_WORKER = its worker) and
    returns [(exit code, output)]; every process is stopped, also on timeout."""
    procs = []
    for rank, target in enumerate(targets):
        env = dict(os.environ, RINGSYNC_WORKER=target)
        procs.append(subprocess.Popen(
            [sys.executable, os.path.join(HERE, script), f"--rank={rank}",
             f"--world-size={len(targets)}", *extra_args],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    try:
        outputs = [p.communicate(timeout=timeout)[0] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return [(p.returncode, out) for p, out in zip(procs, outputs)]
