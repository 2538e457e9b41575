"""What the SDK refuses, and how failures reach Python: as exceptions typed by cause,
with the daemon's message, leaving the caller's array as it was."""

import os
import signal
import time

import numpy as np
import pytest
import torch

import ringsync
from conftest import WORLD_SIZE, run_ranks
from ringsync.local_cluster import LocalCluster


@pytest.mark.parametrize("bad, error, says", [
    ([1.0, 2.0], TypeError, "expected a numpy.ndarray or a torch.Tensor, got list"),
    (np.zeros(4, np.complex64), TypeError, "numpy dtype complex64 is not one ringsync reduces"),
    (np.zeros(4, np.uint16), TypeError, "uint16"),
    (np.zeros(4, ">f4"), TypeError, "native byte order"),
    (torch.zeros(4, dtype=torch.bool), TypeError, "torch dtype torch.bool"),
    (np.zeros((4, 4), np.float32)[:, 0], ValueError, "not C-contiguous"),
    (torch.zeros(4, 4).t(), ValueError, "t.contiguous()"),
    (torch.zeros(4, requires_grad=True), ValueError, "torch.no_grad()"),
    (torch.zeros(4, device="meta"), ValueError, "is on meta; ringsync reduces host memory"),
], ids=["list", "complex", "uint16", "big-endian", "bool", "strided-numpy", "transposed-torch",
        "requires-grad", "not-on-cpu"])
def test_a_bad_input_on_one_rank_fails_every_rank_at_once_and_the_ranks_stay_in_step(
        clients, bad, error, says):
    pattern = says.replace("(", r"\(").replace(")", r"\)")
    started = time.monotonic()

    def rank(client):
        if client.rank == 0:
            with pytest.raises(error, match=pattern):
                client.allreduce_(bad, "bad")
            return None
        # The refusal took rank 0's turn: the others learn why now, not at the timeout (60 s).
        with pytest.raises(ringsync.Error, match="training process refused its own call") as e:
            client.allreduce_(np.ones(4, np.float32), "bad")
        return str(e.value)

    for message in run_ranks(clients, rank)[1:]:
        assert "rank 0 gave up" in message and says in message, message
    assert time.monotonic() - started < 20
    run_ranks(clients, lambda c: c.allreduce_(np.ones(1, np.float32), "after"))


ONES = np.ones(4, np.float32)


def test_a_name_that_is_not_utf8_text_is_refused_and_the_ranks_stay_in_step(clients):
    # Names travel as protobuf strings: bytes that are not UTF-8 could not reach the
    # worker. The SDK refuses them (quoting the name escaped), and the ring hears of it.
    started = time.monotonic()

    def every_rank(client):
        with pytest.raises(ringsync.InvalidArgument, match="name is not UTF-8 text") as e:
            client.allreduce_(ONES.copy(), b"gr\xffad")
        return str(e.value)

    for message in run_ranks(clients, every_rank):
        assert r"'gr\xff\x61\x64'" in message, message

    def one_rank(client):
        if client.rank == 0:
            with pytest.raises(ringsync.InvalidArgument, match="name is not UTF-8 text"):
                client.allreduce_(ONES.copy(), b"gr\xffad")
            return None
        with pytest.raises(ringsync.Error, match="training process refused its own call") as e:
            client.allreduce_(ONES.copy(), "grad")
        return str(e.value)

    for message in run_ranks(clients, one_rank)[1:]:
        assert "rank 0 gave up" in message and "not UTF-8 text" in message, message
    assert time.monotonic() - started < 20
    run_ranks(clients, lambda c: c.allreduce_(np.ones(1, np.float32), "gr\u00e4d/\u6a29"))


@pytest.mark.parametrize("bad, good, says", [
    (lambda c: c.allreduce_(ONES.copy(), 5), lambda c: c.allreduce_(ONES.copy(), "5"),
     "name must be a str, not int"),
    (lambda c: c.allreduce_(ONES.copy(), "x", op="sum"), lambda c: c.allreduce_(ONES.copy(), "x"),
     "op must be a ringsync op"),
    (lambda c: c.allreduce_(ONES.copy(), "x", prescale="2"),
     lambda c: c.allreduce_(ONES.copy(), "x"), "prescale and postscale must be numbers"),
    (lambda c: c.broadcast_(ONES.copy(), "0", "x"), lambda c: c.broadcast_(ONES.copy(), 0, "x"),
     "root must be an int"),
    (lambda c: c.gather(ONES, 0, "x", timeout="5"), lambda c: c.gather(ONES, 0, "x"),
     "timeout must be a number of seconds or None"),
], ids=["name", "op", "scale", "root", "timeout"])
def test_an_argument_of_the_wrong_type_on_one_rank_fails_every_rank_at_once(clients, bad, good,
                                                                            says):
    # The bindings would raise before the call took its turn; the client refuses it first.
    started = time.monotonic()

    def rank(client):
        if client.rank == 0:
            with pytest.raises(TypeError, match=says):
                bad(client)
            return None
        with pytest.raises(ringsync.Error, match="training process refused its own call") as e:
            good(client)
        return str(e.value)

    for message in run_ranks(clients, rank)[1:]:
        assert "rank 0 gave up" in message and says in message, message
    assert time.monotonic() - started < 20
    run_ranks(clients, lambda c: c.allreduce_(np.ones(1, np.float32), "after"))


def test_read_only_array_is_refused_for_in_place_but_fine_as_allgather_input(clients):
    def refused(client):  # every rank makes the same bad call: each refuses its own turn
        a = np.ones(4, np.float32)
        a.setflags(write=False)
        with pytest.raises(ValueError, match="read-only"):
            client.allreduce_(a, "ro")

    run_ranks(clients, refused)

    def rank(client):
        mine = np.full(4, client.rank, np.float32)
        mine.setflags(write=False)
        return client.allgather(mine)
    for got in run_ranks(clients, rank):
        np.testing.assert_array_equal(got, np.repeat(np.arange(WORLD_SIZE), 4))


def test_an_out_of_another_dtype_on_one_rank_fails_every_rank_at_once(clients):
    started = time.monotonic()

    def rank(client):
        mine = np.full(4, client.rank, np.float32)
        if client.rank == 1:
            with pytest.raises(ValueError, match="out holds float64, the tensor float32"):
                client.allgather(mine, "gathered", out=np.empty(4 * WORLD_SIZE))
            return None
        with pytest.raises(ringsync.Error, match="rank 1 gave up") as e:
            client.allgather(mine, "gathered", out=np.empty(4 * WORLD_SIZE, np.float32))
        return str(e.value)

    for r, message in enumerate(run_ranks(clients, rank)):
        assert r == 1 or "out holds float64, the tensor float32" in message, message
    assert time.monotonic() - started < 20
    for got in run_ranks(clients, lambda c: c.allgather(np.full(4, c.rank, np.float32))):
        np.testing.assert_array_equal(got, np.repeat(np.arange(WORLD_SIZE), 4))


def test_requires_grad_tensor_is_accepted_under_no_grad(clients):
    def rank(client):
        w = torch.ones(3, requires_grad=True)
        with torch.no_grad():
            client.allreduce_(w, "w")
        return w.detach()
    for got in run_ranks(clients, rank):
        assert torch.equal(got, torch.full((3,), float(WORLD_SIZE)))


def test_mismatched_counts_raise_mismatch_error_on_every_rank_and_leave_arrays_alone(clients):
    def rank(client):
        a = np.full(10 + (client.rank == 1), 7.0, np.float32)
        with pytest.raises(ringsync.MismatchError) as caught:
            client.allreduce_(a, "grad/fc1")
        assert (a == 7.0).all()
        return caught.value
    for error in run_ranks(clients, rank):
        assert "every rank must pass the same count" in str(error)
        assert "grad/fc1" in str(error) and error.code == "FAILED_PRECONDITION"
        assert isinstance(error, ringsync.Error) and isinstance(error, RuntimeError)
    # The ring goes on.
    for got in run_ranks(clients, lambda c: c.allreduce_(np.ones(2, np.int64), "next")):
        np.testing.assert_array_equal(got, [WORLD_SIZE, WORLD_SIZE])


def test_root_outside_the_ring_is_invalid_argument(clients):
    def rank(client):
        with pytest.raises(ringsync.InvalidArgument, match="root 9 is not a rank") as caught:
            client.broadcast_(np.ones(3), root=9)
        assert isinstance(caught.value, ValueError)
    run_ranks(clients, rank)


def test_integer_prescale_is_invalid_argument(clients):
    def rank(client):
        with pytest.raises(ringsync.InvalidArgument):
            client.allreduce_(np.ones(3, np.int32), "scaled-int", prescale=2.0)
    run_ranks(clients, rank)


def test_unreachable_worker_is_worker_unavailable(tmp_path):
    with pytest.raises(ringsync.WorkerUnavailable, match="could not reach") as caught:
        ringsync.connect(f"unix:{tmp_path}/no-worker.sock", timeout=1)
    assert isinstance(caught.value, ConnectionError) and caught.value.code == "UNAVAILABLE"


def test_second_process_on_a_worker_is_refused(clients, cluster):
    with pytest.raises(ringsync.WorkerUnavailable, match="another training process"):
        ringsync.connect(cluster.targets[0], timeout=5)


def test_closed_client_raises_value_error():
    with LocalCluster(world_size=1) as one:
        with ringsync.connect(one.targets[0], timeout=30) as client:
            client.allreduce_(np.ones(1), "alone")
        assert client.closed
        with pytest.raises(ValueError, match="closed"):
            client.allreduce_(np.ones(1), "after close")


def test_rank_that_never_comes_gives_timeout_error_to_the_others():
    with LocalCluster(world_size=2) as two:
        clients = [ringsync.connect(t, timeout=30) for t in two.targets]
        a = np.ones(4, np.float32)
        with pytest.raises(ringsync.TimeoutError) as caught:
            clients[0].allreduce_(a, "lonely", timeout=1.0)
        assert isinstance(caught.value, TimeoutError)
        assert "lonely" in str(caught.value) and (a == 1).all()
        for c in clients:
            c.close()


def test_dead_worker_gives_peer_lost_error():
    with LocalCluster(world_size=2, coordinator_flags=["--heartbeat_timeout=2s"]) as two:
        clients = [ringsync.connect(t, timeout=30) for t in two.targets]
        run_ranks(clients, lambda c: c.barrier())
        os.kill(two.worker_pids[1], signal.SIGKILL)
        with pytest.raises((ringsync.PeerLostError, ringsync.MembershipChanged)) as caught:
            clients[0].allreduce_(np.ones(4, np.float32), "after kill", timeout=20)
        assert "rank 1" in str(caught.value) or "w1" in str(caught.value)
        for c in clients:
            c.close()


def test_losing_the_own_worker_mid_call_is_in_doubt():
    # The worker may have completed the collective with the ring before it died, so this
    # rank cannot know whether the others returned OK: InDoubtError, array unchanged.
    assert issubclass(ringsync.InDoubtError, ringsync.Error)
    with LocalCluster(world_size=2, coordinator_flags=["--heartbeat_timeout=2s"]) as two:
        clients = [ringsync.connect(t, timeout=30) for t in two.targets]
        a = np.ones(4, np.float32)
        handle = clients[0].allreduce_async(a, "in flight", timeout=20)  # rank 1 never comes
        time.sleep(0.3)
        os.kill(two.worker_pids[0], signal.SIGKILL)
        with pytest.raises(ringsync.InDoubtError) as caught:
            handle.wait()
        assert "in flight" in str(caught.value) and (a == 1).all()
        for c in clients:
            c.close()
