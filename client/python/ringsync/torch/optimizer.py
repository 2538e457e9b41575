"""DistributedOptimizer: Horovod's optimizer wrapper over ringsync.

    optimizer = ringsync.torch.DistributedOptimizer(optimizer, model.named_parameters())
    loss.backward()     # each gradient, once computed, joins a bucket; a full bucket's
                        # all-reduce starts at once, overlapping the rest of backward
    optimizer.step()    # waits for every bucket, writes the averaged gradients back, steps

Gradients are fused into buckets of at most `bucket_bytes` (one dtype each), filled in
the reverse order of the parameters (roughly the order backward produces them). Buckets
start strictly in index order, so every rank issues the same collectives in the same
order even if its backward finishes them in another. Parameters without a gradient in a
step contribute zeros (their .grad stays None).

The returned object is an instance of a subclass of the optimizer's own class over the
same parameter groups and state (learning-rate schedulers and checkpoints work as before).
One backward per step(); call synchronize() yourself to read the averaged gradients
before step() (e.g. to clip them), then step() does not reduce them again.
"""

import torch

import ringsync
from ringsync.torch import session

DEFAULT_BUCKET_BYTES = 4 << 20


class _Bucket:
    """Gradients of several parameters, reduced as one flat tensor."""

    def __init__(self, index, params, dtype):
        self.index = index
        self.params = params
        self.flat = torch.zeros(sum(p.numel() for p in params), dtype=dtype)
        self.offsets = {}
        offset = 0
        for p in params:
            self.offsets[p] = (offset, p.numel())
            offset += p.numel()
        self.ready = set()
        self.handle = None

    def slot(self, p):
        offset, n = self.offsets[p]
        return self.flat[offset:offset + n].view_as(p)

    def complete(self):
        return len(self.ready) == len(self.params)


class _DistributedOptimizer:
    """The methods mixed into the optimizer's class (see DistributedOptimizer)."""

    def _init_distributed(self, named_parameters, op, bucket_bytes):
        self._rs = session.client()
        self._op = op
        named = list(named_parameters) if named_parameters is not None else []
        names = {p: n for n, p in named}
        params = [p for g in self.param_groups for p in g["params"] if p.requires_grad]
        if named and set(params) - set(names):
            raise ValueError("DistributedOptimizer: named_parameters must name every "
                             "parameter the optimizer updates")
        self._buckets = []
        self._bucket_of = {}
        current, size = [], 0
        for p in reversed(params):
            if current and (size + p.numel() * p.element_size() > bucket_bytes
                            or p.dtype != current[0].dtype):
                self._add_bucket(current)
                current, size = [], 0
            current.append(p)
            size += p.numel() * p.element_size()
        if current:
            self._add_bucket(current)
        self._next_to_start = 0
        self._synchronized = False
        self._hooks = []
        for p in params:
            # The gradient accumulator's hook runs once p.grad holds this backward's
            # gradient (torch 1.13 has no post-accumulate-grad hook of its own).
            accumulator = p.expand_as(p).grad_fn.next_functions[0][0]
            accumulator.register_hook(self._make_hook(p))
            self._hooks.append(accumulator)  # keeps the accumulator (and its hook) alive

    def _add_bucket(self, params):
        bucket = _Bucket(len(self._buckets), params, params[0].dtype)
        self._buckets.append(bucket)
        for p in params:
            self._bucket_of[p] = bucket

    def _make_hook(self, p):
        def hook(*_):
            bucket = self._bucket_of[p]
            if p in bucket.ready:
                raise RuntimeError(
                    "DistributedOptimizer: a second backward reached a parameter before "
                    "step(); accumulating gradients over several backwards is not supported")
            with torch.no_grad():
                bucket.slot(p).copy_(p.grad)
            bucket.ready.add(p)
            self._start_ready_buckets()
        return hook

    def _start_ready_buckets(self, all_of_them=False):
        while self._next_to_start < len(self._buckets):
            bucket = self._buckets[self._next_to_start]
            if not (all_of_them or bucket.complete()):
                return
            for p in bucket.params:
                if p not in bucket.ready:  # no gradient this step: contributes zeros
                    bucket.slot(p).zero_()
            bucket.handle = self._rs.allreduce_async(bucket.flat, f"grad/bucket{bucket.index}",
                                                     op=self._op)
            self._next_to_start += 1

    def synchronize(self):
        """Waits for every bucket's all-reduce and writes the results into .grad."""
        self._start_ready_buckets(all_of_them=True)
        with torch.no_grad():
            for bucket in self._buckets:
                bucket.handle.wait()
                for p in bucket.params:
                    if p.grad is not None:
                        p.grad.copy_(bucket.slot(p))
                bucket.handle = None
                bucket.ready.clear()
        self._next_to_start = 0
        self._synchronized = True

    def step(self, closure=None):
        if not self._synchronized:
            self.synchronize()
        self._synchronized = False
        return self._local_step(closure)

    def _local_step(self, closure=None):
        return super(self.__class__, self).step(closure)


def DistributedOptimizer(optimizer, named_parameters=None, op=ringsync.AVG,
                         bucket_bytes=DEFAULT_BUCKET_BYTES):
    """Wraps `optimizer` so that step() applies gradients all-reduced (`op`, default AVG)
    over every rank. Needs ringsync.torch.init(worker) first."""
    cls = type(optimizer.__class__.__name__, (optimizer.__class__,),
               {k: v for k, v in _DistributedOptimizer.__dict__.items()
                if k not in ("__dict__", "__weakref__")})
    wrapped = cls.__new__(cls)
    optimizer.__class__.__init__(wrapped, optimizer.param_groups)
    wrapped.load_state_dict(optimizer.state_dict())
    wrapped._init_distributed(named_parameters, op, bucket_bytes)
    return wrapped
