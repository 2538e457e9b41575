"""ringsync.ElasticState and the membership-changed error, over a real local cluster:
commit and restore, and a sync that gives every rank the newest committed state (a rank
without a commit — a newly admitted worker's process — receives it)."""

import numpy as np
import pytest

import ringsync
from conftest import run_ranks
from ringsync.local_cluster import LocalCluster


def test_membership_changed_error_is_a_ringsync_error_under_both_names():
    assert issubclass(ringsync.MembershipChangedError, ringsync.Error)
    assert ringsync.MembershipChanged is ringsync.MembershipChangedError


def test_rank_and_world_size_follow_the_ring(clients):
    assert sorted(c.rank for c in clients) == list(range(len(clients)))
    assert all(c.world_size == len(clients) for c in clients)
    for c in clients:
        c.await_ring(timeout=5)  # formed: returns at once
        assert c.ready


def test_restore_goes_back_to_the_last_commit(clients):
    w = np.arange(4, dtype=np.float64)
    state = ringsync.ElasticState(clients[0], w=w)
    state.restore()  # no commit yet: nothing changes
    assert list(w) == [0, 1, 2, 3]
    state.step = 5
    state.commit()
    w[:] = 9
    state.step = 6
    state.restore()
    assert list(w) == [0, 1, 2, 3] and state.step == 5


def test_sync_gives_every_rank_the_newest_commit_of_the_lowest_rank_holding_it(clients):
    weights = {c.rank: np.full(8, 0.0, dtype=np.float32) for c in clients}
    states = {c.rank: ringsync.ElasticState(c, weights=weights[c.rank]) for c in clients}
    # Rank 0 just joined (no commit); ranks 1.. survived at step 7 and worked past it.
    for rank, state in states.items():
        if rank == 0:
            continue
        weights[rank][:] = rank
        state.step = 7
        state.commit()
        weights[rank][:] = 99

    run_ranks(clients, lambda c: states[c.rank].sync())
    for rank, state in states.items():
        assert state.step == 7, rank
        assert state.has_commit
        np.testing.assert_array_equal(weights[rank], np.full(8, 1.0, dtype=np.float32))


def test_without_any_commit_rank_zeros_arrays_are_the_state(clients):
    arrays = {c.rank: np.full(3, float(c.rank + 1)) for c in clients}
    states = {c.rank: ringsync.ElasticState(c, a=arrays[c.rank]) for c in clients}
    states[0].step = 4
    run_ranks(clients, lambda c: states[c.rank].sync())
    for rank, state in states.items():
        assert state.step == 4
        np.testing.assert_array_equal(arrays[rank], np.full(3, 1.0))


def test_registering_a_name_twice_is_refused(clients):
    state = ringsync.ElasticState(clients[0], w=np.zeros(2))
    with pytest.raises(ValueError):
        state.register("w", np.zeros(2))


def test_a_local_cluster_restarts_workers_only_when_told_to_wait_for_them():
    with pytest.raises(ValueError):
        LocalCluster(on_worker_exit="maybe")
    with pytest.raises(RuntimeError):
        LocalCluster().restart_exited_workers()  # the default stops the cluster instead
