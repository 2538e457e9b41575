"""The torch.distributed backend "ringsync": a c10d ProcessGroup written in C++
(ringsync._c10d) over this process's ringsync worker.

The worker comes from $RINGSYNC_WORKER. torch's rendezvous (init_method, the store) is
still used by init_process_group itself; ringsync's collectives go through the worker.
torch's default timeout (30 minutes) leaves each collective to the worker's
--collective_timeout; an explicit `timeout=` bounds each collective instead.
"""

import datetime
import os

import torch.distributed as dist

BACKEND_NAME = "ringsync"
WORKER_ENV = "RINGSYNC_WORKER"

# torch.distributed's default timeout: "not chosen by the user".
_TORCH_DEFAULT_TIMEOUT = datetime.timedelta(minutes=30)


def _create_process_group(store, rank, world_size, timeout):
    from ringsync import _c10d  # loads torch's libraries: only when a group is made

    worker = os.environ.get(WORKER_ENV)
    if not worker:
        raise RuntimeError(
            f"the ringsync backend needs ${WORKER_ENV}: the SDK target of this rank's "
            "ringsync worker, e.g. unix:/run/ringsync/w0.sock")
    seconds = timeout.total_seconds()
    collective_timeout = None if timeout == _TORCH_DEFAULT_TIMEOUT else seconds
    return _c10d.create_process_group(worker, rank, world_size, min(seconds, 600.0),
                                      collective_timeout)


def register_backend():
    """Makes dist.init_process_group("ringsync") available; idempotent."""
    if BACKEND_NAME.upper() not in dist.Backend._plugins:
        dist.Backend.register_backend(BACKEND_NAME, _create_process_group)
