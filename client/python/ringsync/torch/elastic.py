"""Elastic training with the Horovod-style API, as Horovod Elastic's hvd.elastic: the ring
may lose workers and take new ones in while the job runs, and the training loop goes on.

    import ringsync, ringsync.torch as rst
    rst.init()                                   # $RINGSYNC_WORKER
    optimizer = rst.DistributedOptimizer(optimizer, model.named_parameters())
    state = rst.elastic.TorchState(model, optimizer, batch=0)

    @rst.elastic.run
    def train(state):
        while state.batch < batches:
            rank, size = rst.client().rank, rst.client().world_size   # they follow the ring
            optimizer.zero_grad()
            loss_of(model, shard(state.batch, rank, size)).backward()
            optimizer.step()
            state.batch += 1
            state.commit()

    train(state)

run(train) first syncs the state (a process that joins a running job receives it), then
calls train(state). When a collective fails because the ring changed under it
(MembershipChangedError, PeerLostError, TimeoutError, InDoubtError), every rank restores
its last commit, the ranks of the new ring sync (the newest commit, from the lowest rank
holding it, reaches every rank), the reset callbacks run, and train(state) is called
again; it resumes from the state's attributes. Any other error is raised. A process whose
own worker went away (WorkerUnavailable) cannot go on: it raises, and a new process
takes its place when the worker is back.

TorchState keeps the model's state_dict (parameters and buffers), the optimizer's state
(momentum buffers and the like, and every parameter group's hyper-parameters) and the
keyword attributes given to it (state.batch above): picklable values, and objects with a
state_dict() and load_state_dict() — a learning-rate scheduler, an ElasticSampler (which
shares each epoch among the ranks the ring has, elastic_sampler.py) — by their state. commit() copies
them all (host memory for every tensor: commit as often as a step can afford to be
redone). Tensors travel by ringsync broadcasts, in place where a rank has them; what only
the source knows (the values, the optimizer's hyper-parameters, which state tensors exist
and their shapes: a new process has none before its first step) as one pickled blob
first.

Only the Horovod-style API is elastic: a torch.distributed process group keeps the world
size it was made with.
"""

import functools
import pickle

import numpy as np
import torch

import ringsync
from ringsync.torch import session
from ringsync.torch.elastic_sampler import ElasticSampler  # noqa: F401  (part of this API)

# Failures after which the ring's current members can agree on a state and go on.
RESETTING_ERRORS = (ringsync.MembershipChangedError, ringsync.PeerLostError,
                    ringsync.TimeoutError, ringsync.InDoubtError)


class TorchState(ringsync.ElasticState):
    """A model, its optimizer and named values (attributes of the state) that outlive a
    change of the ring's membership. state.step counts commits; sync() gives every rank
    the state of the most commits. Not thread-safe: one training loop owns it."""

    def __init__(self, model=None, optimizer=None, client=None, sync_timeout=120.0,
                 retry_backoff=0.02, **values):
        """`client`: the ringsync.Client its collectives use (default: ringsync.torch.init's)."""
        super().__init__(client or session.client(), sync_timeout=sync_timeout,
                         retry_backoff=retry_backoff)
        self.model = model
        self.optimizer = optimizer
        self._value_names = sorted(values)
        for name, value in values.items():
            if hasattr(self, name):
                raise ValueError(f"TorchState: {name!r} is a name of the state itself")
            setattr(self, name, value)
        self._reset_callbacks = []
        self.resets = 0

    def register(self, name, array):
        raise TypeError("TorchState keeps a model, an optimizer and named values; "
                        "use ringsync.ElasticState for arrays")

    def register_reset_callbacks(self, callbacks):
        """Functions called with no arguments after every reset (after the new ring's sync),
        e.g. to scale the learning rate by the new world size or re-shard the data."""
        self._reset_callbacks.extend(callbacks)

    def commit(self):
        """Counts the commit and copies the model, the optimizer and the values."""
        self.step += 1
        self._keep()

    def restore(self):
        """Back to the last commit; an optimizer step in flight is abandoned first."""
        abandon = getattr(self.optimizer, "abandon_step", None)
        if abandon is not None:
            abandon()
        super().restore()

    def reset(self):
        """After a failure: restore, sync with the ring's current members, run the reset
        callbacks. run() calls it; a loop of its own may too."""
        self.restore()
        self.sync()
        self.resets += 1
        for callback in self._reset_callbacks:
            callback()

    def _values(self):
        """The named values as they travel: plain ones as they are, the others' state_dict."""
        values = {}
        for name in self._value_names:
            value = getattr(self, name)
            values[name] = value.state_dict() if _has_state(value) else value
        return values

    def _set_values(self, values):
        for name, value in values.items():
            current = getattr(self, name)
            if _has_state(current):
                current.load_state_dict(value)
            else:
                setattr(self, name, value)

    def _snapshot(self):
        model = None
        if self.model is not None:
            model = {k: v.detach().clone() for k, v in self.model.state_dict().items()}
        optimizer = None
        if self.optimizer is not None:
            # Optimizer.load_state_dict copies what it is given: the snapshot stays intact.
            optimizer = _clone(self.optimizer.state_dict())
        return model, optimizer, pickle.dumps(self._values())

    def _load(self, saved):
        model, optimizer, values = saved
        if model is not None:
            self.model.load_state_dict(model)
        if optimizer is not None:
            self.optimizer.load_state_dict(optimizer)
        self._set_values(pickle.loads(values))

    def _receive_from(self, source):
        client = self._client
        mine = client.rank == source
        # What only the source knows, first: its values, its optimizer's hyper-parameters
        # and non-tensor state, and which state tensors it holds, of what shape and dtype.
        blob = _broadcast_bytes(client, source, pickle.dumps(self._manifest()) if mine else b"")
        manifest = pickle.loads(blob)
        if self.model is not None:
            for name, tensor in sorted(self.model.state_dict().items()):
                client.broadcast_(tensor, source, f"ringsync.elastic/model/{name}")
        if self.optimizer is not None:
            self._receive_optimizer(source, manifest)
        self._set_values(manifest["values"])

    def _manifest(self):
        manifest = {"values": self._values(), "optimizer": None}
        if self.optimizer is not None:
            tensors, other = [], {}
            for i, p in enumerate(_params(self.optimizer)):
                for key, value in sorted(self.optimizer.state.get(p, {}).items()):
                    if torch.is_tensor(value):
                        tensors.append((i, key, tuple(value.shape), value.dtype))
                    else:
                        other[(i, key)] = value
            manifest["optimizer"] = {
                "groups": [{k: v for k, v in g.items() if k != "params"}
                           for g in self.optimizer.param_groups],
                "tensors": tensors, "other": other}
        return manifest

    def _receive_optimizer(self, source, manifest):
        optimizer, theirs = self.optimizer, manifest["optimizer"]
        params = _params(optimizer)
        # The source's state entries, no more: a rank's own that it lacks are dropped, and
        # a tensor this rank lacks (or holds in another shape) is made to receive into.
        kept = {(i, key) for i, key, _, _ in theirs["tensors"]} | set(theirs["other"])
        for i, p in enumerate(params):
            if p in optimizer.state:
                for key in [k for k in optimizer.state[p] if (i, k) not in kept]:
                    del optimizer.state[p][key]
        for i, key, shape, dtype in theirs["tensors"]:
            slot = optimizer.state[params[i]]
            tensor = slot.get(key)
            if not (torch.is_tensor(tensor) and tuple(tensor.shape) == shape
                    and tensor.dtype == dtype and tensor.is_contiguous()):
                tensor = slot[key] = torch.empty(shape, dtype=dtype)
            self._client.broadcast_(tensor, source, f"ringsync.elastic/optimizer/{i}/{key}")
        for (i, key), value in theirs["other"].items():
            optimizer.state[params[i]][key] = value
        for p in params:
            if p in optimizer.state and not optimizer.state[p]:
                del optimizer.state[p]
        for group, values in zip(optimizer.param_groups, theirs["groups"]):
            group.update(values)


def _has_state(value):
    return callable(getattr(value, "state_dict", None)) and \
        callable(getattr(value, "load_state_dict", None))


def _params(optimizer):
    """The optimizer's parameters in state_dict order (its groups', one after another)."""
    return [p for group in optimizer.param_groups for p in group["params"]]


def _clone(value):
    """A deep copy of a state_dict whose tensors are cloned (not shared)."""
    if torch.is_tensor(value):
        return value.detach().clone()
    if isinstance(value, dict):
        return {k: _clone(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clone(v) for v in value]
    return value


def _broadcast_bytes(client, source, data):
    """Collective: rank `source`'s bytes on every rank (the others pass anything)."""
    size = np.array([len(data)], dtype=np.int64)
    client.broadcast_(size, source, "ringsync.elastic/blob_size")
    buffer = np.frombuffer(data, dtype=np.uint8).copy() if client.rank == source else \
        np.zeros(int(size[0]), dtype=np.uint8)
    if buffer.size:
        client.broadcast_(buffer, source, "ringsync.elastic/blob")
    return buffer.tobytes()


def run(func=None, *, reset_limit=None):
    """Decorates train(state, ...): syncs the state, calls train, and after every failure
    in RESETTING_ERRORS resets the state (TorchState.reset) and calls it again; at most
    `reset_limit` times (None: no limit), then the failure is raised."""
    if func is None:
        return lambda f: run(f, reset_limit=reset_limit)

    @functools.wraps(func)
    def wrapper(state, *args, **kwargs):
        state.sync()
        resets = 0
        while True:
            try:
                return func(state, *args, **kwargs)
            except RESETTING_ERRORS:
                if reset_limit is not None and resets >= reset_limit:
                    raise
                resets += 1
                state.reset()
    return wrapper
