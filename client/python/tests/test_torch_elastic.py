"""ringsync.torch.elastic (Horovod Elastic's TorchState, run and ElasticSampler) over a
real local cluster: the sampler's shares; every rank's threads (a sync that gives a new
rank the model, the optimizer's state and the values; run's resets); then jobs of real
training processes that lose a worker and its process mid-run, go on with three ranks,
and take a new process in when the worker is back (elastic_rank.py per rank)."""

import os
import re
import subprocess
import sys
import time
import types

import pytest

torch = pytest.importorskip("torch")

import ringsync  # noqa: E402
from conftest import HERE, run_ranks  # noqa: E402
from ringsync.local_cluster import LocalCluster  # noqa: E402
from ringsync.torch import elastic  # noqa: E402


def _model(seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(5, 3), torch.nn.BatchNorm1d(3))


def _local_step(model, optimizer, seed):
    torch.manual_seed(100 + seed)
    optimizer.zero_grad()
    model(torch.randn(8, 5)).square().sum().backward()
    optimizer.step()


@pytest.mark.parametrize("make_optimizer", [
    lambda params: torch.optim.SGD(params, lr=0.1, momentum=0.9),
    lambda params: torch.optim.Adam(params, lr=0.01),  # a 0-d "step" tensor per parameter
], ids=["sgd-momentum", "adam"])
def test_sync_gives_a_new_rank_the_model_the_optimizer_state_and_the_values(clients,
                                                                            make_optimizer):
    models = {c.rank: _model(c.rank) for c in clients}
    optimizers = {r: make_optimizer(m.parameters()) for r, m in models.items()}
    states = {c.rank: elastic.TorchState(models[c.rank], optimizers[c.rank], client=c,
                                         batch=0, epoch="first")
              for c in clients}
    # Rank 0 is a new process: no step, no commit. Ranks 1.. stepped and committed twice
    # (rank 1's models then differ from rank 2's), then worked past the commit.
    for rank in range(1, len(clients)):
        for _ in range(2):
            _local_step(models[rank], optimizers[rank], rank)
            states[rank].batch += 1
            states[rank].commit()
        optimizers[rank].param_groups[0]["lr"] = 5.0
        _local_step(models[rank], optimizers[rank], rank)
        states[rank].batch = 99
    states[1].epoch = "second"  # after its last commit: the sync gives the committed one
    run_ranks(clients, lambda c: states[c.rank].sync())

    want_model = models[1].state_dict()
    want_optimizer = optimizers[1].state_dict()
    for rank, state in states.items():
        assert (state.step, state.batch, state.epoch) == (2, 2, "first"), rank
        got_model = models[rank].state_dict()
        for name, tensor in want_model.items():
            assert torch.equal(got_model[name], tensor), (rank, name)
        got = optimizers[rank].state_dict()
        assert got["param_groups"] == want_optimizer["param_groups"], rank
        assert got["param_groups"][0]["lr"] != 5.0, "the commit's lr, not the later one"
        assert got["state"].keys() == want_optimizer["state"].keys(), rank
        for i, entries in want_optimizer["state"].items():
            for key, value in entries.items():
                assert torch.equal(got["state"][i][key], value), (rank, i, key)
    # Rank 0 steps from the received state exactly as rank 1 would.
    _local_step(models[0], optimizers[0], 7)
    _local_step(models[1], optimizers[1], 7)
    for name, tensor in models[1].state_dict().items():
        assert torch.equal(models[0].state_dict()[name], tensor), name


def test_sync_gives_a_new_rank_the_state_of_a_scheduler_and_a_sampler(clients):
    models = {c.rank: _model(0) for c in clients}
    optimizers = {r: torch.optim.SGD(m.parameters(), lr=1.0) for r, m in models.items()}
    schedulers = {r: torch.optim.lr_scheduler.StepLR(o, step_size=1, gamma=0.5)
                  for r, o in optimizers.items()}
    samplers = {c.rank: elastic.ElasticSampler(range(40), client=c) for c in clients}
    states = {c.rank: elastic.TorchState(models[c.rank], optimizers[c.rank], client=c,
                                         scheduler=schedulers[c.rank], sampler=samplers[c.rank])
              for c in clients}
    for rank in range(1, len(clients)):
        for _ in range(3):
            optimizers[rank].step()
            schedulers[rank].step()
        samplers[rank].set_epoch(2)
        samplers[rank].record_batch(3)
        states[rank].commit()
    run_ranks(clients, lambda c: states[c.rank].sync())
    for rank, state in states.items():
        assert state.scheduler is schedulers[rank] and state.sampler is samplers[rank]
        assert schedulers[rank].last_epoch == 3, rank
        assert optimizers[rank].param_groups[0]["lr"] == 0.125, rank
        assert samplers[rank].state_dict() == {"epoch": 2, "processed": 12}, rank


def _place(rank, world_size):
    """What an ElasticSampler reads of its client."""
    return types.SimpleNamespace(rank=rank, world_size=world_size)


def test_the_sampler_shares_an_epoch_and_shares_what_is_left_when_the_world_changes():
    four = [elastic.ElasticSampler(range(50), seed=3, client=_place(r, 4)) for r in range(4)]
    shares = [list(s) for s in four]
    assert [len(s) for s in shares] == [13] * 4 == [len(s) for s in four]
    assert set().union(*shares) == set(range(50)), "every sample in the epoch"
    assert sum(map(len, shares)) - 50 == 2, "two padded to give every rank 13"
    # Two steps of 5 a rank: the four ranks took the first 40 of the epoch's order.
    for sampler in four:
        sampler.record_batch(5)
        sampler.record_batch(5)
    taken = set().union(*(share[:10] for share in shares))
    assert four[0].state_dict() == {"epoch": 0, "processed": 40}
    # The ring shrinks to three: what is left is shared among them.
    three = [elastic.ElasticSampler(range(50), seed=3, client=_place(r, 3)) for r in range(3)]
    for sampler in three:
        sampler.load_state_dict(four[0].state_dict())
    left = [list(s) for s in three]
    assert [len(s) for s in left] == [4] * 3
    assert set().union(*left) == set(range(50)) - taken, "the rest, none taken again"


def test_the_sampler_starts_each_epoch_once_and_orders_it_by_seed_and_epoch():
    sampler = elastic.ElasticSampler(range(20), seed=1, client=_place(0, 1))
    first = list(sampler)
    assert sorted(first) == list(range(20)) and first != list(range(20))
    sampler.record_batch(4)
    sampler.set_epoch(0)  # the epoch under way: resumes
    assert list(sampler) == first[4:]
    sampler.set_epoch(1)
    second = list(sampler)
    assert sorted(second) == list(range(20)) and second != first
    unshuffled = elastic.ElasticSampler(range(6), shuffle=False, client=_place(1, 2))
    assert list(unshuffled) == [1, 3, 5]
    with pytest.raises(ValueError):
        sampler.record_batch(-1)
    sampler.record_batch(100)
    assert list(sampler) == [] and len(sampler) == 0, "an epoch ends at its size"


def test_restore_goes_back_to_the_last_commit_model_optimizer_and_values(clients):
    model = _model(0)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    state = elastic.TorchState(model, optimizer, client=clients[0], batch=0)
    _local_step(model, optimizer, 0)
    state.batch = 1
    state.commit()
    saved_model = {k: v.clone() for k, v in model.state_dict().items()}
    saved_momentum = [optimizer.state[p]["momentum_buffer"].clone() for p in model.parameters()]
    _local_step(model, optimizer, 0)
    state.batch = 2
    state.restore()
    assert (state.batch, state.step) == (1, 1)
    for name, tensor in saved_model.items():
        assert torch.equal(model.state_dict()[name], tensor), name
    for p, momentum in zip(model.parameters(), saved_momentum):
        assert torch.equal(optimizer.state[p]["momentum_buffer"], momentum)


def test_a_new_rank_drops_optimizer_state_the_source_has_not(clients):
    models = {c.rank: _model(0) for c in clients}
    optimizers = {r: torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
                  for r, m in models.items()}
    states = {c.rank: elastic.TorchState(models[c.rank], optimizers[c.rank], client=c)
              for c in clients}
    for rank in range(1, len(clients)):
        states[rank].commit()  # committed before any step: no optimizer state
    _local_step(models[0], optimizers[0], 0)  # rank 0 has momentum the source has not
    run_ranks(clients, lambda c: states[c.rank].sync())
    for rank, optimizer in optimizers.items():
        assert not optimizer.state_dict()["state"], rank


def test_values_must_not_shadow_the_state_and_arrays_are_for_elastic_state(clients):
    with pytest.raises(ValueError):
        elastic.TorchState(None, None, client=clients[0], step=3)
    state = elastic.TorchState(None, None, client=clients[0])
    with pytest.raises(TypeError):
        state.register("w", torch.zeros(2))


def test_run_resets_every_rank_after_a_membership_change_and_calls_again(clients):
    calls = {c.rank: 0 for c in clients}
    reset_seen = {c.rank: 0 for c in clients}
    weights = {c.rank: torch.nn.Linear(2, 1) for c in clients}
    states = {c.rank: elastic.TorchState(weights[c.rank], None, client=c, batch=0)
              for c in clients}
    for c in clients:
        states[c.rank].register_reset_callbacks(
            [lambda r=c.rank: reset_seen.__setitem__(r, reset_seen[r] + 1)])

    def train(state, rank):
        calls[rank] += 1
        while state.batch < 4:
            state.batch += 1
            if state.batch == 3 and calls[rank] == 1:
                raise ringsync.MembershipChangedError("simulated: the ring changed")
            state.commit()
        return state.batch

    results = run_ranks(clients, lambda c: elastic.run(train)(states[c.rank], c.rank))
    assert results == [4] * len(clients)
    assert all(n == 2 for n in calls.values()), calls
    assert all(n == 1 for n in reset_seen.values()), reset_seen
    assert all(s.resets == 1 for s in states.values())


def test_run_raises_other_errors_and_gives_up_after_the_reset_limit(clients):
    states = {c.rank: elastic.TorchState(None, None, client=c) for c in clients}

    def failing(error):
        def train(state):
            raise error
        return train

    with pytest.raises(ValueError):
        run_ranks(clients, lambda c: elastic.run(failing(ValueError("a bug")))(states[c.rank]))
    with pytest.raises(ringsync.PeerLostError):
        run_ranks(clients, lambda c: elastic.run(reset_limit=2)(
            failing(ringsync.PeerLostError("simulated")))(states[c.rank]))
    assert all(s.resets == 2 for s in states.values())


def _last_step(path):
    """(step, world size) of the last 'step S world N' line in a rank's output."""
    found = (0, 0)
    try:
        with open(path) as f:
            for line in f:
                m = re.match(r"step (\d+) world (\d+)", line)
                if m:
                    found = (int(m.group(1)), int(m.group(2)))
    except FileNotFoundError:
        pass
    return found


def _wait_for(what, condition, procs, timeout=180):
    deadline = time.monotonic() + timeout
    while not condition():
        for p in procs:
            assert p.poll() is None or p.returncode == 0, f"a trainer failed while {what}"
        assert time.monotonic() < deadline, f"timed out: {what}"
        time.sleep(0.05)


@pytest.mark.parametrize("mode", ["full-batch", "sampler"])
def test_a_job_loses_a_worker_goes_on_with_three_and_takes_a_new_process_in(tmp_path, mode):
    victim = 2
    # full-batch: 60 steps; sampler: 5 epochs of 240 samples in batches of 5 a rank (12
    # steps an epoch on 4 ranks, 16 on 3).
    job = ["--steps=60"] if mode == "full-batch" else ["--epochs=5"]
    flags = ["--heartbeat_interval=100ms", "--heartbeat_timeout=1s"]  # a loss noticed in ~1 s
    with LocalCluster(world_size=4, min_world_size=3, coordinator_flags=flags,
                      on_worker_exit="wait") as cluster:
        outputs = [tmp_path / f"rank{r}.out" for r in range(4)]
        procs = []

        def spawn(rank, out):
            env = dict(os.environ, RINGSYNC_WORKER=cluster.targets[rank])
            with open(out, "w") as f:
                return subprocess.Popen(
                    [sys.executable, os.path.join(HERE, "elastic_rank.py"), *job,
                     "--step-pause=0.05"],
                    env=env, stdout=f, stderr=subprocess.STDOUT)

        try:
            procs = [spawn(r, outputs[r]) for r in range(4)]
            _wait_for("training on 4", lambda: _last_step(outputs[0])[0] >= 10, procs)
            procs[victim].kill()
            procs[victim].wait()
            cluster.kill_worker(victim)
            killed_at = _last_step(outputs[0])[0]
            survivors = [p for r, p in enumerate(procs) if r != victim]
            _wait_for("training on 3",
                      lambda: _last_step(outputs[0])[1] == 3
                      and _last_step(outputs[0])[0] >= killed_at + 5, survivors)
            cluster.restart_exited_workers()
            outputs.append(tmp_path / "rank2-new.out")
            procs[victim] = spawn(victim, outputs[-1])
            for r, p in enumerate(procs):
                p.wait(timeout=240)
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
        texts = {str(out): out.read_text() for out in outputs}
    finals = {}
    for r, p in enumerate(procs):
        out = outputs[-1] if r == victim else outputs[r]
        assert p.returncode == 0, f"rank {r} failed:\n{texts[str(out)]}"
        final = re.search(r"^FINAL (.*)$", texts[str(out)], re.M)
        assert final, texts[str(out)]
        finals[r] = final.group(1)
    assert len(set(finals.values())) == 1, f"ranks ended with different parameters: {finals}"
    rank0 = texts[str(outputs[0])]
    assert re.search(r"world 3", rank0), "no step ran on 3 ranks"
    assert re.findall(r"^step \d+ world (\d+)$", rank0, re.M)[-1] == "4", \
        "the job did not end on 4 ranks"
    if mode == "full-batch":
        assert re.search(r"^step 60 world 4$", rank0, re.M)
        assert "MATCHES the single-process run" in texts[str(outputs[-1])]
    else:
        assert "SEEN ok" in texts[str(outputs[-1])], texts[str(outputs[-1])]
