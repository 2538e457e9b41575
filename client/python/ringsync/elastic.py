"""ringsync.ElasticState: a training loop's state across changes of the ring's membership,
with Horovod Elastic's commit / restore / sync (the C++ SDK's ringsync/elastic_state.h).

    state = ringsync.ElasticState(client, weights=w, momentum=m)   # numpy arrays / CPU tensors
    state.sync()                          # a newly admitted rank receives the survivors' state
    while state.step < steps:
        grad = compute(w, shard(data, client.rank, client.world_size))
        try:
            client.allreduce_(grad, "grad", op=ringsync.AVG)
        except ringsync.MembershipChangedError:
            state.restore()               # back to the last commit
            state.sync()                  # every rank agrees on the newest commit
            continue                      # re-shard by the new rank and world size
        apply(grad, w)
        state.step += 1
        state.commit()

commit() copies every registered array and the step; restore() copies them back. sync()
gives every rank of the current ring the newest committed state: an all-reduce (MAX) of
the committed steps, an all-reduce (MIN) choosing the lowest rank holding it, a broadcast
of every array from that rank; then every rank commits. A rank without a commit takes
part with no step and receives the state; without any commit, rank 0's arrays are it. A
membership change during sync() starts it again on the new ring, within sync_timeout
seconds. Every rank registers the same arrays (names, shapes, dtypes); sync() is a
collective call, made at the same point of the loop on every rank.

What the state is, how it is copied and how it travels are three methods a subclass may
replace (_snapshot, _load, _receive_from): ringsync.torch.elastic.TorchState keeps a
model and its optimizer that way.
"""

import time

import numpy as np

from ringsync import _ringsync

_NO_COMMIT = -1
_MAX_BACKOFF = 1.0


def _copy(tensor):
    clone = getattr(tensor, "clone", None)  # torch
    return clone() if clone is not None else np.array(tensor, copy=True)


def _assign(tensor, value):
    copy_ = getattr(tensor, "copy_", None)  # torch
    if copy_ is not None:
        copy_(value)
    else:
        np.copyto(tensor, value)


class ElasticState:
    """Arrays (numpy or CPU torch, written in place) and a step counter that outlive a
    change of the ring's membership. Not thread-safe: one training loop owns it."""

    def __init__(self, client, sync_timeout=120.0, retry_backoff=0.02, **arrays):
        self._client = client
        self._sync_timeout = float(sync_timeout)
        self._retry_backoff = float(retry_backoff)
        self._arrays = {}
        self._committed = None  # (step, {name: copy})
        self.step = 0
        self.sync_restarts = 0
        for name, array in arrays.items():
            self.register(name, array)

    def register(self, name, array):
        """Adds `array` to the state under `name` (before the first commit or sync)."""
        if name in self._arrays:
            raise ValueError(f"ElasticState: {name!r} is registered already")
        self._arrays[name] = array

    @property
    def has_commit(self):
        return self._committed is not None

    def commit(self):
        """Snapshots every array and the step."""
        self._keep()

    def _keep(self):
        self._committed = (self.step, self._snapshot())

    def restore(self):
        """Copies the last commit back into the arrays and the step; without one, nothing."""
        if self._committed is None:
            return
        step, saved = self._committed
        self._load(saved)
        self.step = step

    def _snapshot(self):
        """A copy of the state as it is now (what commit keeps)."""
        return {n: _copy(a) for n, a in self._arrays.items()}

    def _load(self, saved):
        """Puts a _snapshot() back."""
        for name, array in self._arrays.items():
            _assign(array, saved[name])

    def _receive_from(self, source):
        """Collective: every rank's state becomes rank `source`'s (which holds its commit)."""
        for name, array in self._arrays.items():
            self._client.broadcast_(array, source, f"ringsync.elastic/{name}")

    def sync(self):
        """Every rank of the current ring takes the newest committed state and commits it.
        Raises the last error when a membership change keeps interrupting it for
        sync_timeout seconds, or at once for any other error."""
        give_up = time.monotonic() + self._sync_timeout
        backoff = self._retry_backoff
        while True:
            try:
                self._client.await_ring(max(0.0, give_up - time.monotonic()))
                self._sync_once()
                return
            except (_ringsync.MembershipChangedError, _ringsync.PeerLostError,
                    _ringsync.TimeoutError) as error:
                self.restore()
                if time.monotonic() + backoff >= give_up:
                    raise error
                self.sync_restarts += 1
                time.sleep(backoff)
                backoff = min(backoff * 2, _MAX_BACKOFF)

    def _sync_once(self):
        client = self._client
        mine = self._committed[0] if self._committed is not None else _NO_COMMIT
        newest = np.array([mine], dtype=np.int64)
        client.allreduce_(newest, "ringsync.elastic/step", op=_ringsync.MAX)
        newest = int(newest[0])
        source = np.array([client.rank if mine == newest else np.iinfo(np.int64).max],
                          dtype=np.int64)
        client.allreduce_(source, "ringsync.elastic/source", op=_ringsync.MIN)
        source = int(source[0])
        if source == client.rank:
            self.restore()  # the source sends its commit, not work done since
        self._receive_from(source)
        if newest == _NO_COMMIT:
            step = np.array([self.step], dtype=np.int64)
            client.broadcast_(step, source, "ringsync.elastic/initial_step")
            self.step = int(step[0])
        else:
            self.step = newest
        self._keep()
