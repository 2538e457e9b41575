"""Client.allocate: arrays in memory registered with the worker, reduced in place."""

import numpy
import pytest

import ringsync
from conftest import WORLD_SIZE, registered_mappings, run_ranks


def test_an_allocated_array_is_registered_memory_and_reduces_in_place(clients):
    def step(client):
        values = client.allocate((512, 1024), numpy.float32)
        assert values.shape == (512, 1024) and values.dtype == numpy.float32
        assert not values.any(), "zeroed"
        address = values.__array_interface__["data"][0]
        assert any(start <= address < end for start, end in registered_mappings())
        values[:] = client.rank + 1
        assert client.allreduce_(values, "registered") is values
        # A slice of it is still inside the registered memory.
        client.allreduce_(values[3], "a row", op=ringsync.MAX)
        return values

    results = run_ranks(clients, step)
    total = sum(range(1, WORLD_SIZE + 1))
    for values in results:
        assert (values[:3] == total).all() and (values[4:] == total).all()
        assert (values[3] == total).all()


def test_torch_wraps_an_allocated_array_without_a_copy(clients):
    torch = pytest.importorskip("torch")

    def step(client):
        array = client.allocate(1000, "float64")
        tensor = torch.from_numpy(array)
        tensor.fill_(0.5)
        client.allreduce_(tensor, "torch view")
        return array

    for array in run_ranks(clients, step):
        assert (array == 0.5 * WORLD_SIZE).all()


def test_allgather_into_an_allocated_out_gathers_in_place_also_from_its_own_slice(clients):
    def step(client):
        mine = numpy.arange(300_000, dtype=numpy.float32) + 1000 * client.rank
        plain = client.allgather(mine, "plain")
        out = client.allocate((WORLD_SIZE * 300_000,), numpy.float32)
        assert client.allgather(mine, "into out", out=out) is out
        assert numpy.array_equal(out, plain)
        # The rank's own slice of out as the input (the in-place form).
        again = client.allocate((WORLD_SIZE, 300_000), numpy.float32)
        again[client.rank] = mine
        client.allgather(again[client.rank], "own slice", out=again)
        assert numpy.array_equal(again.reshape(-1), plain)
        with pytest.raises(ValueError, match="out holds float64, the tensor float32"):
            client.allgather(mine, "wrong dtype", out=numpy.empty(WORLD_SIZE * 300_000))
        return plain

    expected = numpy.concatenate(
        [numpy.arange(300_000, dtype=numpy.float32) + 1000 * r for r in range(WORLD_SIZE)])
    for plain in run_ranks(clients, step):
        assert numpy.array_equal(plain, expected)


def test_reduce_scatter_of_an_allocated_array_into_its_own_block_runs_in_place(clients):
    def step(client):
        values = client.allocate((WORLD_SIZE, 200_000), numpy.float32)
        values[:] = numpy.arange(200_000, dtype=numpy.float32) + client.rank
        plain = client.reduce_scatter(values.copy(), "plain")
        mine = values[client.rank]
        assert client.reduce_scatter(values, "in place", out=mine) is mine
        assert numpy.array_equal(mine, plain.reshape(-1))  # plain: a new (1, 200000) array
        return plain

    for r, plain in enumerate(run_ranks(clients, step)):
        expected = WORLD_SIZE * numpy.arange(200_000, dtype=numpy.float32) + sum(range(WORLD_SIZE))
        assert numpy.array_equal(plain.reshape(-1), expected), r


def test_allgather_into_an_out_of_the_wrong_size_fails_on_every_rank(clients):
    def step(client):
        size = 10 * WORLD_SIZE + (1 if client.rank == 0 else 0)  # rank 0's out is too long
        with pytest.raises(ringsync.Error) as failure:
            client.allgather(numpy.ones(10, numpy.float32), "short",
                             out=numpy.empty(size, numpy.float32))
        return str(failure.value)

    messages = run_ranks(clients, step)
    why = f"the output holds {10 * WORLD_SIZE + 1} elements; it needs {10 * WORLD_SIZE}"
    assert why in messages[0], messages[0]
    for message in messages[1:]:
        assert "rank 0 gave up" in message and why in message, message


def test_a_failure_before_any_data_moved_says_the_array_is_untouched(clients):
    def step(client):
        values = client.allocate(4096, numpy.float32)
        values[:] = 1.5
        count = 4096 if client.rank == 0 else 1024
        with pytest.raises(ringsync.Error) as failure:
            client.allreduce_(values[:count], "mismatch")
        assert failure.value.buffer_untouched, str(failure.value)
        assert (values == 1.5).all()

    run_ranks(clients, step)


def test_a_size_of_nothing_is_refused(clients):
    with pytest.raises(ringsync.InvalidArgument):
        clients[0].allocate(0)


def test_idle_staging_memory_is_handed_back_on_request(clients):
    count = 1 << 20  # 4 MiB of float32: a plain array staged in a buffer of its own

    def step(client):
        values = numpy.full(count, client.rank + 1, numpy.float32)
        client.allreduce_(values, "one-off")
        kept = sum(end - start for start, end in registered_mappings())
        released = client.release_idle_memory()
        assert released >= values.nbytes
        assert client.release_idle_memory() == 0, "nothing left idle"
        again = numpy.full(count, 1, numpy.float32)
        client.allreduce_(again, "after")
        return values, again, kept

    total = sum(range(1, WORLD_SIZE + 1))
    for values, again, kept in run_ranks(clients, step):
        assert kept >= values.nbytes, "the staging buffer was kept, mapped"
        assert (values == total).all() and (again == WORLD_SIZE).all()
