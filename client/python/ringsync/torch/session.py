"""The process-wide ringsync.Client of the Horovod-style API (DistributedOptimizer,
broadcast_parameters, broadcast_optimizer_state).

A worker serves one client at a time, so a process uses either this or the
torch.distributed backend, not both.
"""

import os

import ringsync

_client = None


def init(worker=None, timeout=60.0):
    """Connects to this process's worker (default: $RINGSYNC_WORKER) and returns the client."""
    global _client
    if _client is None:
        worker = worker or os.environ.get("RINGSYNC_WORKER")
        if not worker:
            raise ValueError("ringsync.torch.init: pass worker= or set $RINGSYNC_WORKER")
        _client = ringsync.connect(worker, timeout=timeout)
    return _client


def client():
    if _client is None:
        raise RuntimeError("call ringsync.torch.init(worker) first")
    return _client


def shutdown():
    global _client
    if _client is not None:
        _client.close()
        _client = None
