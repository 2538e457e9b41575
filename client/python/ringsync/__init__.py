"""ringsync for Python: all-reduce numpy arrays and CPU torch tensors through this
process's ringsync worker.

    import numpy as np, ringsync
    with ringsync.connect("unix:/run/ringsync/w0.sock") as rs:
        grad = np.ones(1024, np.float32)
        rs.allreduce_(grad, "grad/fc1", op=ringsync.AVG)    # in place, every rank equal
        h = rs.allreduce_async(grad2, "grad/fc2")           # several may be in flight
        h.wait()

Every rank must issue the same collectives in the same order. Failures raise
ringsync.Error or one of its subclasses (MismatchError, TimeoutError, PeerLostError,
MembershipChangedError, WorkerUnavailable, InvalidArgument, InDoubtError); the array
is then unchanged. ringsync.ElasticState keeps a training loop's state across membership
changes (commit / restore / sync, as Horovod Elastic's). InDoubtError: this rank failed
but another may have completed the collective.
`ringsync.torch` adds the torch.distributed backend and a Horovod-style optimizer.
"""

from ringsync._ringsync import (  # noqa: F401  (the package's public names)
    AVG,
    MAX,
    MIN,
    PROD,
    SUM,
    Error,
    Handle,
    InDoubtError,
    InvalidArgument,
    MembershipChanged,
    MembershipChangedError,
    MismatchError,
    PeerLostError,
    ReduceOp,
    TimeoutError,
    WorkerUnavailable,
)
from ringsync.client import Client, connect  # noqa: F401
from ringsync.elastic import ElasticState  # noqa: F401

__all__ = [
    "connect", "Client", "Handle", "ReduceOp", "SUM", "AVG", "MIN", "MAX", "PROD",
    "Error", "MismatchError", "TimeoutError", "PeerLostError", "MembershipChanged",
    "MembershipChangedError", "WorkerUnavailable", "InvalidArgument", "ElasticState",
    "InDoubtError",
]
