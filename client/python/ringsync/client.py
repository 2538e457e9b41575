"""ringsync.Client: the collectives, blocking and *_async, over the C++ SDK."""

import numbers
import operator
import os

from ringsync import _ringsync


def connect(worker="unix:/run/ringsync/worker.sock", timeout=60.0, name=None,
            tls_ca=None, tls_cert=None, tls_key=None, token_file=None,
            fusion_threshold_bytes=0, fusion_cycle_time=0.005, call_channel=True,
            staging_arena_bytes=None, stage_in_registered_memory=True):
    """Connects to the ringsync worker at `worker` ("unix:/path" or "host:port") and returns
    a Client once the worker reports a formed ring (so rank and world_size are known).

    `timeout` (seconds) bounds the wait for the worker and the ring. Raises
    WorkerUnavailable when the worker cannot be reached or already serves another
    process, TimeoutError when no ring formed in time.

    On a "host:port" worker (its --client_listen) authenticate as the worker requires:
    `tls_ca`, `tls_cert`, `tls_key` (PEM files: mutual TLS) and/or `token_file` (the
    cluster token). A unix socket needs none of them.

    Tensor fusion (as Horovod's; off when `fusion_threshold_bytes` is 0): consecutive
    all_reduce_async calls of one dtype and op are sent as one collective of at most
    `fusion_threshold_bytes` (64 << 20 is Horovod's default), each handle getting its own
    tensor's result. A batch ends where the program ends it (a full batch, another kind of
    call, or wait()/ready() on a queued handle), or speculatively after
    `fusion_cycle_time` seconds; the C++ header ringsync/client.h (FusionOptions) says how
    ranks that cut differently recover.

    How tensors reach a worker on a unix socket (the C++ ClientOptions of the same names;
    the defaults are the fastest): `call_channel` sends collectives through shared memory
    registered with the worker instead of one RPC each; `staging_arena_bytes` (None: 16 MiB,
    0: off) is the registered buffer small all-reduces and broadcasts are staged in;
    `stage_in_registered_memory` stages large ones in registered memory rather than a file.
    Each falls back by itself where the worker refuses it; results are the same bits.
    """
    return Client(_ringsync._connect(worker, float(timeout), name or f"python pid {os.getpid()}",
                                     tls_ca or "", tls_cert or "", tls_key or "",
                                     token_file or "", int(fusion_threshold_bytes),
                                     float(fusion_cycle_time), call_channel=bool(call_channel),
                                     staging_arena_bytes=-1 if staging_arena_bytes is None
                                     else int(staging_arena_bytes),
                                     stage_in_registered_memory=bool(stage_in_registered_memory)))


class Client:
    """A training process's connection to its worker; a context manager that closes it.

    Collectives take a numpy.ndarray or a CPU torch.Tensor, C-contiguous, of dtype
    float32, float64, float16, bfloat16 (torch), int32, int64, int8 or uint8, and work in
    place on its memory (no copy into Python objects). `name` labels the collective in
    error messages and must be the same on every rank. `timeout` (seconds, None: the
    worker's --collective_timeout) bounds the whole ring. The GIL is released while the
    SDK works, so other Python threads run meanwhile.

    Wrong inputs raise TypeError (not an array; a dtype ringsync has not got; a `name`
    that is not a str, an `op` that is not a ringsync op, a `root` that is not an int, a
    `timeout` or scale that is not a number) or ValueError (not contiguous, read-only, on
    a GPU, requires grad, an `out` of another dtype) before any data moves. The call still
    takes its turn on the ring as a refusal: the other ranks' same collective fails at
    once, naming this rank and the error, instead of waiting for it until the timeout, and
    the ranks stay in step.
    """

    def __init__(self, impl):
        self._impl = impl

    def _check(self, kind, name, op=_ringsync.SUM, root=0, timeout=None, scales=()):
        """Raises TypeError for an argument the bindings could not take, after refusing
        the collective's turn (the bindings would raise before any turn was taken)."""
        why = None
        if not isinstance(name, (str, bytes)):
            why = f"name must be a str, not {type(name).__name__}"
        elif not isinstance(op, _ringsync.ReduceOp):
            why = f"op must be a ringsync op (SUM, AVG, MIN, MAX, PROD), not {op!r}"
        elif timeout is not None and (isinstance(timeout, bool) or
                                      not isinstance(timeout, numbers.Real)):
            why = f"timeout must be a number of seconds or None, not {timeout!r}"
        elif any(isinstance(s, bool) or not isinstance(s, numbers.Real) for s in scales):
            why = f"prescale and postscale must be numbers, not {scales!r}"
        else:
            try:
                operator.index(root)
            except TypeError:
                why = f"root must be an int (a rank), not {root!r}"
        if why is None:
            return
        shown = name if isinstance(name, str) else repr(name)
        self._impl.refuse(kind, shown, f"{kind} '{shown}': {why}")
        raise TypeError(f"{kind} '{shown}': {why}")

    @property
    def rank(self):
        """This process's rank in the ring as it is now (-1 while none is formed); it may
        change when the ring's membership changes (MembershipChangedError)."""
        return self._impl.rank

    @property
    def world_size(self):
        return self._impl.world_size

    @property
    def generation(self):
        return self._impl.generation

    @property
    def ready(self):
        """True while the worker reports a formed ring."""
        return self._impl.ready

    def await_ring(self, timeout=60.0):
        """Waits up to `timeout` seconds for a formed ring (after a membership change the
        ring re-forms). Raises TimeoutError when none formed, WorkerUnavailable or
        ringsync.Error when this client can no longer have one."""
        self._impl.await_ring(float(timeout))

    def allreduce_(self, tensor, name="allreduce", op=_ringsync.SUM, prescale=1.0,
                   postscale=1.0, timeout=None):
        """Reduces `tensor` across all ranks in place and returns it. `op`: SUM, AVG, MIN,
        MAX, PROD; `prescale` multiplies every input and `postscale` the result (floating
        dtypes only)."""
        return self.allreduce_async(tensor, name, op, prescale, postscale, timeout).wait()

    def allreduce_async(self, tensor, name="allreduce", op=_ringsync.SUM, prescale=1.0,
                        postscale=1.0, timeout=None):
        """As allreduce_, but returns a Handle at once; leave `tensor` alone until
        handle.wait() has returned it."""
        self._check("allreduce", name, op=op, timeout=timeout, scales=(prescale, postscale))
        return self._impl.allreduce_async(tensor, name, op, prescale, postscale, timeout)

    def allocate(self, shape, dtype="float32"):
        """A zeroed numpy array of `shape` and `dtype` in memory registered with the worker
        (Client::Allocate): an allreduce_ or broadcast_ on it, or on a contiguous slice of
        it, is reduced in place by the worker with no copy in or out. torch users wrap it
        without a copy: torch.from_numpy(client.allocate(n)). Unlike a plain array, after a
        failed collective its contents are unspecified unless the ringsync.Error's
        .buffer_untouched is True (the ranks failed to agree before any data moved). Needs the worker's unix socket and the same pid namespace; the memory
        goes when the array and every view of it are gone."""
        import numpy
        dtype = numpy.dtype(dtype)
        shape = (int(shape),) if numpy.isscalar(shape) else tuple(int(d) for d in shape)
        count = int(numpy.prod(shape, dtype=numpy.int64)) if shape else 1
        raw = self._impl.allocate_bytes(count * dtype.itemsize)
        return raw.view(dtype).reshape(shape)

    def broadcast_(self, tensor, root, name="broadcast", timeout=None):
        """Copies rank `root`'s `tensor` into every other rank's, in place; returns it."""
        return self.broadcast_async(tensor, root, name, timeout).wait()

    def broadcast_async(self, tensor, root, name="broadcast", timeout=None):
        self._check("broadcast", name, root=root, timeout=timeout)
        return self._impl.broadcast_async(tensor, root, name, timeout)

    def allgather(self, tensor, name="allgather", timeout=None, out=None):
        """Returns a new array of tensor's kind and dtype holding every rank's `tensor` in
        rank order, concatenated along the first dimension (shape (world_size * n, ...);
        a 0-d input gives (world_size,)). With `out` (contiguous and writable; of tensor's
        dtype, else ValueError; world_size times its elements, else every rank fails) the
        result goes there and `out` is returned; an `out` from allocate() is gathered into
        in place, and `tensor` may be its own rank's slice of it."""
        return self.allgather_async(tensor, name, timeout, out).wait()

    def allgather_async(self, tensor, name="allgather", timeout=None, out=None):
        self._check("allgather", name, timeout=timeout)
        return self._impl.allgather_async(tensor, name, timeout, out)

    def reduce_scatter(self, tensor, name="reduce_scatter", op=_ringsync.SUM, prescale=1.0,
                       postscale=1.0, timeout=None, out=None):
        """Returns a new array of tensor's kind and dtype holding this rank's block of
        `tensor` reduced across all ranks: `tensor` is world_size blocks along its first
        dimension, and rank r gets block r (shape (n / world_size, ...)), bitwise what
        allreduce_ gives there, moving (N-1)/N x S bytes per rank, half of allreduce_'s.
        `op`, `prescale` and `postscale` as allreduce_'s. A first dimension that world_size
        does not divide fails on every rank. `out` as allgather's; a `tensor` from allocate()
        whose `out` is its own rank's block is reduce-scattered in place (its other blocks
        then hold partial sums, or a small one's the whole all-reduce's)."""
        return self.reduce_scatter_async(tensor, name, op, prescale, postscale, timeout,
                                         out).wait()

    def reduce_scatter_async(self, tensor, name="reduce_scatter", op=_ringsync.SUM,
                             prescale=1.0, postscale=1.0, timeout=None, out=None):
        self._check("reducescatter", name, op=op, timeout=timeout, scales=(prescale, postscale))
        return self._impl.reduce_scatter_async(tensor, name, op, prescale, postscale, timeout,
                                               out)

    def scatter(self, tensor, root, name="scatter", timeout=None, out=None):
        """Deals out rank `root`'s `tensor`, world_size blocks along its first dimension:
        returns a new array of its kind and dtype holding block r on rank r (shape
        (n / world_size, ...)). The root sends each other rank its block once. The other
        ranks pass None and an `out` for their block (or an array of the root's shape,
        whose values are unused). `out` as allgather's; a root's `tensor` from allocate()
        whose `out` is its own block is scattered in place."""
        return self.scatter_async(tensor, root, name, timeout, out).wait()

    def scatter_async(self, tensor, root, name="scatter", timeout=None, out=None):
        self._check("scatter", name, root=root, timeout=timeout)
        return self._impl.scatter_async(tensor, root, name, timeout, out)

    def gather(self, tensor, root, name="gather", timeout=None, out=None):
        """Collects every rank's `tensor` at rank `root`: returns there a new array of its
        kind and dtype holding the world_size tensors along the first dimension (shape
        (world_size * n, ...)), in rank order; returns None on the other ranks, whose
        `out` is not used. Each rank sends only toward the root (the root receives
        (world_size - 1) tensors, where allgather delivers them to every rank). `out` as
        allgather's; a root's `out` from allocate() whose own slot is `tensor` is gathered
        in place."""
        return self.gather_async(tensor, root, name, timeout, out).wait()

    def gather_async(self, tensor, root, name="gather", timeout=None, out=None):
        self._check("gather", name, root=root, timeout=timeout)
        return self._impl.gather_async(tensor, root, name, timeout, out)

    def alltoall(self, tensor, name="alltoall", timeout=None, out=None, input_splits=None,
                 output_splits=None):
        """Exchanges blocks with every rank: `tensor` is world_size blocks along its first
        dimension, block r for rank r; returns a new array of its kind, dtype and shape
        holding, as block q, rank q's block for this rank (MPI_Alltoall). Each block goes
        straight to its rank. `out` as allgather's, of tensor's shape; it may be `tensor`
        itself (in place; an array from allocate() is then exchanged where it lies). On
        rings of more than 16 ranks the blocks hop the links of strides 1, 2, 4, ...
        (log2 N rounds of about half the data).

        Uneven blocks (MPI_Alltoallv, torch's all_to_all_single with split sizes):
        `input_splits` lists the rows of `tensor` for each rank, `output_splits` the rows
        each rank sends this one; the result has sum(output_splits) rows (in `out` when
        given; None of either splits its tensor evenly). Rank q's input_splits[r] must be
        rank r's output_splits[q]: a pair that does not match fails every rank, naming it."""
        return self.alltoall_async(tensor, name, timeout, out, input_splits,
                                   output_splits).wait()

    def alltoall_async(self, tensor, name="alltoall", timeout=None, out=None, input_splits=None,
                       output_splits=None):
        self._check("alltoall", name, timeout=timeout)
        return self._impl.alltoall_async(tensor, name, timeout, out, input_splits, output_splits)

    def barrier(self, name="barrier", timeout=None):
        """Returns once every rank has entered the barrier."""
        self.barrier_async(name, timeout).wait()

    def barrier_async(self, name="barrier", timeout=None):
        self._check("barrier", name, timeout=timeout)
        return self._impl.barrier_async(name, timeout)

    def release_idle_memory(self):
        """Hands back the shared memory kept between collectives to stage plain tensors
        (as much as was in use at once, so that each step finds it again) that no
        collective is using now; returns its bytes. For after a one-off large collective,
        like torch.cuda.empty_cache(); the next collective of such a size stages anew."""
        return self._impl.release_idle_memory()

    def close(self):
        """Detaches from the worker (collectives still in flight are cancelled). Later
        calls raise ValueError."""
        self._impl.close()

    @property
    def closed(self):
        return self._impl.closed

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()

    def __repr__(self):
        if self.closed:
            return "<ringsync.Client closed>"
        return f"<ringsync.Client rank {self.rank} of {self.world_size}, generation {self.generation}>"
