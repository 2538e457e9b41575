"""Every collective on numpy arrays and CPU torch tensors, every dtype x op, against the
same reduction computed here. The inputs are small integers, so that every dtype holds
every partial result exactly and the expected values are exact (the numerics of rounding
are the reducers' tests' business)."""

import numpy as np
import pytest
import torch

import ringsync
from conftest import WORLD_SIZE, run_ranks

TORCH_DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32,
                torch.int64, torch.int8, torch.uint8]
NUMPY_DTYPES = [np.float32, np.float64, np.float16, np.int32, np.int64, np.int8, np.uint8]
OPS = [ringsync.SUM, ringsync.AVG, ringsync.MIN, ringsync.MAX, ringsync.PROD]
COUNT = 1000


def rank_values(rank, op, unsigned):
    """Rank `rank`'s input as int64: values in [-3, 4] ([0, 7] unsigned); for PROD only
    -1, 1, 2 (1, 2 unsigned) so that products of four ranks stay small powers of two."""
    i = np.arange(COUNT)
    if op == ringsync.PROD:
        choices = np.array([1, 2]) if unsigned else np.array([-1, 1, 2])
        return choices[(i + rank) % len(choices)]
    return (i * 3 + rank * 5) % 8 - (0 if unsigned else 3)


def expected(op, is_float, unsigned):
    inputs = np.stack([rank_values(r, op, unsigned) for r in range(WORLD_SIZE)])
    if op == ringsync.SUM:
        return inputs.sum(0)
    if op == ringsync.AVG:
        total = inputs.sum(0)
        return total / WORLD_SIZE if is_float else np.fix(total / WORLD_SIZE)  # truncates
    if op == ringsync.MIN:
        return inputs.min(0)
    if op == ringsync.MAX:
        return inputs.max(0)
    return inputs.prod(0)


def check_allreduce(clients, make, to_numpy, is_float, unsigned, op):
    def rank(client):
        t = make(rank_values(client.rank, op, unsigned))
        returned = client.allreduce_(t, "test", op=op)
        assert returned is t  # in place
        return to_numpy(t)

    want = expected(op, is_float, unsigned)
    for got in run_ranks(clients, rank):
        np.testing.assert_array_equal(got.astype(np.float64), want.astype(np.float64))


@pytest.mark.parametrize("op", OPS, ids=lambda o: o.name)
@pytest.mark.parametrize("dtype", TORCH_DTYPES, ids=str)
def test_allreduce_torch_every_dtype_and_op(clients, dtype, op):
    check_allreduce(clients, lambda v: torch.tensor(v).to(dtype), lambda t: t.double().numpy(),
                    dtype.is_floating_point, dtype == torch.uint8, op)


@pytest.mark.parametrize("op", OPS, ids=lambda o: o.name)
@pytest.mark.parametrize("dtype", NUMPY_DTYPES, ids=lambda d: np.dtype(d).name)
def test_allreduce_numpy_every_dtype_and_op(clients, dtype, op):
    check_allreduce(clients, lambda v: v.astype(dtype), lambda a: a,
                    np.dtype(dtype).kind == "f", np.dtype(dtype).kind == "u", op)


def test_allreduce_scales_inputs_and_result(clients):
    def rank(client):
        t = torch.full((8,), float(client.rank + 1))
        return client.allreduce_(t, "scaled", prescale=0.5, postscale=4.0)
    for got in run_ranks(clients, rank):
        assert torch.equal(got, torch.full((8,), 0.5 * (1 + 2 + 3 + 4) * 4.0))


def test_allreduce_large_tensor_through_shared_memory(clients):
    n = 3 << 20  # 12 MiB of float32: above the SDK's 1 MiB shared-memory threshold
    def rank(client):
        return client.allreduce_(np.full(n, client.rank, np.float32), "large")
    for got in run_ranks(clients, rank):
        assert got.shape == (n,) and (got == sum(range(WORLD_SIZE))).all()


def test_allreduce_keeps_shape_of_multidimensional_tensor(clients):
    def rank(client):
        return client.allreduce_(torch.ones(3, 4, 5), "3d")
    for got in run_ranks(clients, rank):
        assert got.shape == (3, 4, 5) and (got == WORLD_SIZE).all()


@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_broadcast_copies_root_into_every_rank(clients, kind):
    def rank(client):
        values = np.arange(100, dtype=np.float64) * (client.rank + 1)
        t = values if kind == "numpy" else torch.from_numpy(values)
        assert client.broadcast_(t, root=2) is t
        return np.asarray(t)
    for got in run_ranks(clients, rank):
        np.testing.assert_array_equal(got, np.arange(100) * 3.0)


def test_allgather_concatenates_every_rank_in_rank_order(clients):
    def rank(client):
        mine = torch.full((2, 3), client.rank, dtype=torch.bfloat16)
        return client.allgather(mine), client.allgather(np.array(client.rank, np.int32))
    for gathered, scalars in run_ranks(clients, rank):
        assert gathered.dtype == torch.bfloat16 and gathered.shape == (2 * WORLD_SIZE, 3)
        assert torch.equal(gathered, torch.arange(WORLD_SIZE).repeat_interleave(2)[:, None]
                           .expand(-1, 3).to(torch.bfloat16))
        assert isinstance(scalars, np.ndarray) and scalars.shape == (WORLD_SIZE,)
        np.testing.assert_array_equal(scalars, np.arange(WORLD_SIZE))


def test_reduce_scatter_gives_each_rank_its_block_of_the_all_reduce(clients):
    def rank(client):
        rows = torch.arange(2 * WORLD_SIZE * 3, dtype=torch.float32).view(2 * WORLD_SIZE, 3)
        mine = rows + client.rank
        everything = client.allreduce_(mine.clone(), "whole", op=ringsync.AVG)
        block = client.reduce_scatter(mine, "shard", op=ringsync.AVG)
        ints = client.reduce_scatter(np.full(WORLD_SIZE * 5, client.rank + 1, np.int64))
        return client.rank, mine, everything, block, ints
    for r, mine, everything, block, ints in run_ranks(clients, rank):
        assert block.dtype == torch.float32 and block.shape == (2, 3)
        assert torch.equal(block, everything[2 * r:2 * r + 2]), "bitwise the all-reduce's"
        assert torch.equal(mine, torch.arange(2 * WORLD_SIZE * 3.0).view(-1, 3) + r), \
            "the input is left as it was"
        assert isinstance(ints, np.ndarray) and ints.shape == (5,)
        np.testing.assert_array_equal(ints, np.full(5, WORLD_SIZE * (WORLD_SIZE + 1) // 2))


def test_reduce_scatter_of_rows_the_ranks_do_not_divide_fails_on_every_rank(clients):
    def rank(client):
        rows = WORLD_SIZE + 1 if client.rank == 0 else WORLD_SIZE
        try:
            client.reduce_scatter(np.ones(rows, np.float32), "uneven")
        except ringsync.Error as e:
            return str(e)
        return None
    errors = run_ranks(clients, rank)
    assert all(errors), errors
    assert f"the input holds {WORLD_SIZE + 1} elements, which is not one block" in errors[0]
    assert "rank 0" in errors[1], "the other ranks hear which rank refused"


def test_scatter_deals_the_roots_blocks_out_and_the_others_pass_no_tensor(clients):
    root = WORLD_SIZE - 1

    def rank(client):
        rows = torch.arange(2 * WORLD_SIZE * 3, dtype=torch.float64).view(2 * WORLD_SIZE, 3)
        if client.rank == root:
            mine = client.scatter(rows, root, "shards")
        else:
            mine = client.scatter(None, root, "shards", out=torch.empty(2, 3, dtype=torch.float64))
        # numpy, a new array on the root; the others' tensor of the root's shape is not read.
        ints = np.arange(WORLD_SIZE * 4, dtype=np.int8).reshape(WORLD_SIZE, 4)
        block = client.scatter(ints if client.rank == root else np.zeros_like(ints), root)
        return client.rank, mine, block

    for r, mine, block in run_ranks(clients, rank):
        assert mine.dtype == torch.float64 and mine.shape == (2, 3)
        assert torch.equal(mine, torch.arange(6 * r, 6 * r + 6, dtype=torch.float64).view(2, 3))
        assert isinstance(block, np.ndarray) and block.shape == (1, 4)
        np.testing.assert_array_equal(block[0], np.arange(4 * r, 4 * r + 4, dtype=np.int8))


def test_a_scatter_without_tensor_or_out_is_refused_on_every_rank(clients):
    def rank(client):
        if client.rank == 0:
            with pytest.raises(ValueError, match="pass the root's tensor, or on the other ranks"):
                client.scatter(None, 1, "no out")
            return None
        with pytest.raises(ringsync.Error, match="rank 0 gave up") as e:
            client.scatter(np.ones(WORLD_SIZE, np.float32), 1, "no out")
        return str(e.value)

    assert all("pass the root's tensor" in m for m in run_ranks(clients, rank)[1:])
    run_ranks(clients, lambda c: c.barrier("after"))


def test_gather_collects_every_ranks_tensor_at_the_root_only(clients):
    root = 1

    def rank(client):
        rows = torch.full((2, 3), float(client.rank), dtype=torch.float64)
        gathered = client.gather(rows, root, "ids")
        # numpy into an out= at the root; the others' out= is not written.
        ints = np.full(4, client.rank, dtype=np.int8)
        out = np.full((WORLD_SIZE, 4), -1, dtype=np.int8)
        into = client.gather(ints, root, out=out[:].reshape(WORLD_SIZE * 4))
        return client.rank, gathered, into, out

    for r, gathered, into, out in run_ranks(clients, rank):
        if r != root:
            assert gathered is None and into is None
            np.testing.assert_array_equal(out, np.full((WORLD_SIZE, 4), -1, dtype=np.int8))
            continue
        assert gathered.dtype == torch.float64 and gathered.shape == (2 * WORLD_SIZE, 3)
        for q in range(WORLD_SIZE):
            assert torch.equal(gathered[2 * q:2 * q + 2], torch.full((2, 3), float(q),
                                                                    dtype=torch.float64))
        for q in range(WORLD_SIZE):
            np.testing.assert_array_equal(out[q], np.full(4, q, dtype=np.int8))


def test_alltoall_gives_each_rank_its_block_of_every_rank(clients):
    def rank(client):
        r = client.rank
        # Block q of rank r holds 10 * r + q, two rows of it: rank q gets it as block r.
        rows = torch.tensor([[10.0 * r + q] * 3 for q in range(WORLD_SIZE) for _ in range(2)],
                            dtype=torch.bfloat16)
        exchanged = client.alltoall(rows, "tokens")
        # numpy, in place, and large enough to go straight from rank to rank.
        big = np.repeat(np.arange(WORLD_SIZE, dtype=np.int32) + 100 * r, 100_000)
        same = client.alltoall(big, out=big)
        return r, rows, exchanged, big, same

    for r, rows, exchanged, big, same in run_ranks(clients, rank):
        assert exchanged.dtype == torch.bfloat16 and exchanged.shape == rows.shape
        assert torch.equal(rows[0:2], torch.full((2, 3), 10.0 * r, dtype=torch.bfloat16)), \
            "the input is the caller's"
        for q in range(WORLD_SIZE):
            assert torch.equal(exchanged[2 * q:2 * q + 2],
                               torch.full((2, 3), 10.0 * q + r, dtype=torch.bfloat16))
        assert same is big
        np.testing.assert_array_equal(
            big, np.repeat(np.arange(WORLD_SIZE, dtype=np.int32) * 100 + r, 100_000))


def test_an_alltoall_of_rows_the_ranks_do_not_divide_fails_on_every_rank(clients):
    def rank(client):
        try:
            client.alltoall(np.ones(WORLD_SIZE + 1, np.float32), "uneven")
        except ringsync.Error as e:
            return str(e)
        return None
    errors = run_ranks(clients, rank)
    assert all(errors), errors
    assert f"the input holds {WORLD_SIZE + 1} elements, which is not one block" in errors[0]
    run_ranks(clients, lambda c: c.barrier("after"))


def test_alltoall_with_split_sizes_exchanges_uneven_blocks_of_rows(clients):
    def rows_from(q, r):  # rank q sends rank r this many rows
        return (q + 2 * r) % 3

    def rank(client):
        r = client.rank
        splits = [rows_from(r, q) for q in range(WORLD_SIZE)]
        received = [rows_from(q, r) for q in range(WORLD_SIZE)]
        # Row i of block q holds 100 * r + 10 * q + i (two columns).
        tensor = torch.tensor([[100.0 * r + 10 * q + i] * 2
                               for q in range(WORLD_SIZE) for i in range(splits[q])])
        tensor = tensor.reshape(-1, 2)
        got = client.alltoall(tensor, "experts", input_splits=splits, output_splits=received)
        # numpy into an out= whose rows split evenly (one row from each rank).
        out = np.full((WORLD_SIZE, 2), -1, np.int64)
        even = client.alltoall(np.arange(2 * WORLD_SIZE, dtype=np.int64).reshape(-1, 2) + 10 * r,
                               out=out, input_splits=[1] * WORLD_SIZE)
        return r, received, got, out, even

    for r, received, got, out, even in run_ranks(clients, rank):
        assert got.shape == (sum(received), 2) and got.dtype == torch.float32
        at = 0
        for q in range(WORLD_SIZE):
            for i in range(received[q]):
                assert torch.equal(got[at], torch.full((2,), 100.0 * q + 10 * r + i)), (r, q, i)
                at += 1
        assert even is out
        np.testing.assert_array_equal(
            out, np.array([[2 * r + 10 * q, 2 * r + 1 + 10 * q] for q in range(WORLD_SIZE)]))


def test_alltoall_splits_that_do_not_match_fail_every_rank_naming_the_pair(clients):
    def rank(client):
        r = client.rank
        received = [1] * WORLD_SIZE
        if r == 1:
            received[0] = 2  # rank 0 sends it 1
        try:
            client.alltoall(np.ones(WORLD_SIZE, np.float32), "mismatch",
                            input_splits=[1] * WORLD_SIZE, output_splits=received)
        except ringsync.Error as e:
            return str(e)
        return None
    errors = run_ranks(clients, rank)
    assert all("rank 0 sends 1 elements to rank 1, which expects 2 from it" in e
               for e in errors), errors

    def bad(client):
        try:
            client.alltoall(np.ones(3, np.float32), "bad", input_splits=[1, 2])
        except (ValueError, ringsync.Error) as e:
            return type(e), str(e)
        return None
    raised = run_ranks(clients, bad)
    assert all(kind is ValueError for kind, _ in raised), raised
    assert "input_splits lists 2 sizes; this ring has" in raised[0][1]
    run_ranks(clients, lambda c: c.barrier("after"))


def test_barrier_and_empty_tensor(clients):
    def rank(client):
        client.barrier()
        return client.allreduce_(np.zeros(0, np.float32), "empty")
    for got in run_ranks(clients, rank):
        assert got.shape == (0,)


def test_client_reports_its_ring(clients):
    assert [c.rank for c in clients] == list(range(WORLD_SIZE))
    assert {c.world_size for c in clients} == {WORLD_SIZE}
    assert len({c.generation for c in clients}) == 1
    assert "rank 0 of 4" in repr(clients[0])
