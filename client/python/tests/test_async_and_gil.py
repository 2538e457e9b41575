"""*_async handles, and the GIL: released while the SDK waits, so other Python threads run."""

import threading
import time

import numpy as np
import pytest
import torch

import ringsync
from conftest import WORLD_SIZE, run_ranks


def test_several_async_collectives_in_flight_complete_in_place(clients):
    def rank(client):
        tensors = [torch.full((1000,), float(i + client.rank)) for i in range(8)]
        handles = [client.allreduce_async(t, f"grad/{i}", op=ringsync.AVG)
                   for i, t in enumerate(tensors)]
        gathered = client.allgather_async(np.array([client.rank], np.int64))
        barrier = client.barrier_async()
        results = [h.wait() for h in handles]
        assert all(r is t for r, t in zip(results, tensors))
        assert barrier.wait() is None and barrier.done()
        return tensors, gathered.wait()
    for tensors, gathered in run_ranks(clients, rank):
        for i, t in enumerate(tensors):
            assert torch.equal(t, torch.full((1000,), i + 1.5))
        np.testing.assert_array_equal(gathered, np.arange(WORLD_SIZE))


def test_wait_with_timeout_raises_timeout_error_and_the_collective_goes_on(clients):
    start_others = threading.Event()

    def rank(client):
        t = np.full(4, 1.0)
        if client.rank != 0:
            start_others.wait()
            return client.allreduce_(t, "late")
        h = client.allreduce_async(t, "late")
        with pytest.raises(ringsync.TimeoutError, match="still in flight"):
            h.wait(timeout=0.2)
        assert not h.done()
        start_others.set()
        return h.wait()
    for got in run_ranks(clients, rank):
        np.testing.assert_array_equal(got, np.full(4, float(WORLD_SIZE)))


def test_dropping_an_unfinished_handle_waits_for_it_and_keeps_the_array_alive(clients):
    def rank(client):
        if client.rank == 0:
            client.allreduce_async(np.ones(100), "dropped")  # handle and array dropped at once
        else:
            time.sleep(0.2)
            client.allreduce_(np.ones(100), "dropped")
        return client.allreduce_(np.ones(1), "after")
    for got in run_ranks(clients, rank):
        assert got[0] == WORLD_SIZE


def test_gil_is_released_while_waiting(clients):
    """Rank 0 waits 0.5 s for the others; meanwhile a pure-Python thread must keep counting
    (with the GIL held by the waiter it would not move at all)."""
    others_may_start = threading.Event()
    counted = []

    def rank(client):
        if client.rank != 0:
            others_may_start.wait()
            time.sleep(0.5)
            return client.allreduce_(np.ones(4), "gil")
        stop = threading.Event()

        def count():
            n = 0
            while not stop.is_set():
                n += 1
            counted.append(n)
        counter = threading.Thread(target=count)
        h = client.allreduce_async(np.ones(4), "gil")
        counter.start()
        others_may_start.set()
        result = h.wait()
        stop.set()
        counter.join()
        return result
    for got in run_ranks(clients, rank):
        np.testing.assert_array_equal(got, np.full(4, float(WORLD_SIZE)))
    assert counted[0] > 10000, f"the counting thread made {counted[0]} steps during the wait"
