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
Compression (Horovod's): with compression=Compression.fp16 (or .bf16) float32 and
float64 gradients travel as float16 (bfloat16) — buckets of that type, half the bytes —
and are written back into .grad in their own type (compression.py).

Gradient accumulation: with backward_passes_per_step=k (Horovod's name) a parameter's
gradient joins its bucket after the k-th backward of a step, so the k backwards'
accumulated gradients are all-reduced once; a step() after fewer backwards all-reduces
what has accumulated. More backwards than k before step() raise. Call synchronize()
yourself to read the averaged gradients before step() (e.g. to clip them), then step()
does not reduce them again.

The buckets lie in one buffer registered with the worker (Client.allocate), which it
reduces in place: a bucket's all-reduce copies nothing between the training process and
its worker. Where no buffer can be registered (a worker reached over TCP, or one that
refuses it) they are plain tensors, copied in and out as any other; registered_buckets=
False asks for that. A failed synchronize() has let every bucket's all-reduce end before
it raises: the gradients of the buckets that failed keep this rank's own values, and the
next backward starts a fresh step.
"""

import logging

import torch

import ringsync
from ringsync.torch import session
from ringsync.torch.compression import Compression

# DDP's bucket_cap_mb. Smaller buckets start during backward sooner, but each all-reduce
# has its cost: a ResNet-50 step (bench/optimizer_step.py, N=4 on 2 cores) took 336-367 ms
# in 32 buckets of 4 MiB and 177 ms in 5 of 25 MiB.
DEFAULT_BUCKET_BYTES = 25 << 20
_BUCKET_ALIGNMENT = 64  # bytes: every bucket starts on a cache line of the shared buffer


def bucket_groups(params, bucket_bytes):
    """The parameters as buckets: in reverse order (roughly the order backward produces
    their gradients), one dtype and at most `bucket_bytes` each (a larger parameter alone)."""
    groups, current, size = [], [], 0
    for p in reversed(params):
        if current and (size + p.numel() * p.element_size() > bucket_bytes
                        or p.dtype != current[0].dtype):
            groups.append(current)
            current, size = [], 0
        current.append(p)
        size += p.numel() * p.element_size()
    if current:
        groups.append(current)
    return groups


def _bucket_tensors(client, groups, registered, compression):
    """One flat, zeroed tensor per group of parameters, of the type its gradients travel
    in: slices of one registered buffer, or plain tensors where none can be had."""
    counts = [sum(p.numel() for p in params) for params in groups]
    dtypes = [compression.wire_dtype(params[0].dtype) for params in groups]
    sizes = [count * torch.empty((), dtype=dtype).element_size()
             for count, dtype in zip(counts, dtypes)]
    offsets, total = [], 0
    for size in sizes:
        offsets.append(total)
        total += -(-size // _BUCKET_ALIGNMENT) * _BUCKET_ALIGNMENT
    if registered and total > 0:
        try:
            memory = torch.from_numpy(client.allocate(total, "uint8"))
        except ringsync.Error as e:
            logging.getLogger("ringsync").info(
                "DistributedOptimizer: gradient buckets are plain tensors (copied in and out "
                "of the worker): %s", e)
        else:
            return [memory[offset:offset + size].view(dtype)
                    for offset, size, dtype in zip(offsets, sizes, dtypes)]
    return [torch.zeros(count, dtype=dtype) for count, dtype in zip(counts, dtypes)]


class _Bucket:
    """Gradients of several parameters, reduced as one flat tensor."""

    def __init__(self, index, params, flat):
        self.index = index
        self.params = params
        self.flat = flat
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

    def _init_distributed(self, named_parameters, op, bucket_bytes, registered_buckets,
                          backward_passes_per_step, compression):
        if not isinstance(backward_passes_per_step, int) or backward_passes_per_step < 1:
            raise ValueError("DistributedOptimizer: backward_passes_per_step must be an int >= 1, "
                             f"not {backward_passes_per_step!r}")
        if compression not in (Compression.none, Compression.fp16, Compression.bf16):
            raise ValueError("DistributedOptimizer: compression must be Compression.none, "
                             f".fp16 or .bf16, not {compression!r}")
        self._rs = session.client()
        self._op = op
        self._passes_per_step = backward_passes_per_step
        self._passes = {}  # parameter -> backwards that reached it since the last step
        named = list(named_parameters) if named_parameters is not None else []
        names = {p: n for n, p in named}
        params = [p for g in self.param_groups for p in g["params"] if p.requires_grad]
        if named and set(params) - set(names):
            raise ValueError("DistributedOptimizer: named_parameters must name every "
                             "parameter the optimizer updates")
        groups = bucket_groups(params, bucket_bytes)
        flats = _bucket_tensors(self._rs, groups, registered_buckets, compression)
        self._buckets = [_Bucket(i, group, flat)
                         for i, (group, flat) in enumerate(zip(groups, flats))]
        self._bucket_of = {p: bucket for bucket in self._buckets for p in bucket.params}
        self._next_to_start = 0
        self._synchronized = False
        self._hooks = []
        for p in params:
            # The gradient accumulator's hook runs once p.grad holds this backward's
            # gradient (torch 1.13 has no post-accumulate-grad hook of its own).
            accumulator = p.expand_as(p).grad_fn.next_functions[0][0]
            accumulator.register_hook(self._make_hook(p))
            self._hooks.append(accumulator)  # keeps the accumulator (and its hook) alive

    def _make_hook(self, p):
        def hook(*_):
            bucket = self._bucket_of[p]
            if p in bucket.ready:
                raise RuntimeError(
                    "DistributedOptimizer: more backwards reached a parameter before step() "
                    f"than backward_passes_per_step={self._passes_per_step}")
            self._passes[p] = self._passes.get(p, 0) + 1
            if self._passes[p] < self._passes_per_step:
                return  # p.grad accumulates; its all-reduce waits for the step's last pass
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
                if p in bucket.ready:
                    continue
                if self._passes.get(p) and p.grad is not None:  # step() before the last pass
                    bucket.slot(p).copy_(p.grad)
                else:  # no gradient this step: contributes zeros
                    bucket.slot(p).zero_()
            bucket.handle = self._rs.allreduce_async(bucket.flat, f"grad/bucket{bucket.index}",
                                                     op=self._op)
            self._next_to_start += 1

    def synchronize(self):
        """Waits for every bucket's all-reduce and writes the results into .grad; raises
        the first failure once every bucket's all-reduce has ended."""
        self._start_ready_buckets(all_of_them=True)
        failure = None
        with torch.no_grad():
            for bucket in self._buckets:
                try:
                    bucket.handle.wait()
                except Exception as e:  # noqa: BLE001  (the others must end before a rerun)
                    failure = failure or e
                else:
                    for p in bucket.params:
                        if p.grad is not None:
                            p.grad.copy_(bucket.slot(p))
        self._forget_step()
        if failure is not None:
            raise failure
        self._synchronized = True

    def abandon_step(self):
        """Ends the step in flight without applying it: waits for the all-reduces of the
        buckets that started (their failures ignored: the step is being given up) and
        forgets the backwards counted so far, so that the next backward starts a fresh step.
        ringsync.torch.elastic calls it before it restores a commit."""
        for bucket in self._buckets:
            if bucket.handle is not None:
                try:
                    bucket.handle.wait()
                except ringsync.Error:
                    pass
        self._forget_step()
        self._synchronized = False

    def _forget_step(self):
        for bucket in self._buckets:
            bucket.handle = None
            bucket.ready.clear()
        self._passes.clear()
        self._next_to_start = 0

    def step(self, closure=None):
        if not self._synchronized:
            self.synchronize()
        self._synchronized = False
        return self._local_step(closure)

    def _local_step(self, closure=None):
        return super(self.__class__, self).step(closure)


def DistributedOptimizer(optimizer, named_parameters=None, op=ringsync.AVG,
                         bucket_bytes=DEFAULT_BUCKET_BYTES, registered_buckets=True,
                         backward_passes_per_step=1, compression=Compression.none):
    """Wraps `optimizer` so that step() applies gradients all-reduced (`op`, default AVG)
    over every rank, in buckets of at most `bucket_bytes` registered with the worker
    (`registered_buckets`), once per `backward_passes_per_step` backwards, travelling as
    `compression` says (ringsync.torch.Compression; see the module's text). Needs
    ringsync.torch.init(worker) first."""
    cls = type(optimizer.__class__.__name__, (optimizer.__class__,),
               {k: v for k, v in _DistributedOptimizer.__dict__.items()
                if k not in ("__dict__", "__weakref__")})
    wrapped = cls.__new__(cls)
    optimizer.__class__.__init__(wrapped, optimizer.param_groups)
    wrapped.load_state_dict(optimizer.state_dict())
    wrapped._init_distributed(named_parameters, op, bucket_bytes, registered_buckets,
                              backward_passes_per_step, compression)
    return wrapped
