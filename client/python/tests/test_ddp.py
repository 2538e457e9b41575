"""torch.distributed with backend="ringsync" and DistributedDataParallel, 2 and 4 training
processes on a real local cluster (ddp_rank.py is the per-rank program)."""

import pytest

from conftest import run_rank_processes
from ringsync.local_cluster import LocalCluster


@pytest.mark.parametrize("world_size", [2, 4])
def test_ddp_on_ringsync_backend(world_size, tmp_path):
    with LocalCluster(world_size=world_size) as cluster:
        results = run_rank_processes("ddp_rank.py", cluster.targets,
                                     [f"--store={tmp_path}/store"])
    for rank, (code, output) in enumerate(results):
        assert code == 0, f"rank {rank} failed:\n{output}"
        assert f"rank {rank}: OK" in output


def test_torch_rank_must_match_the_workers_rank(tmp_path):
    import os
    import subprocess
    import sys

    with LocalCluster(world_size=2) as cluster:
        # Rank 0 given rank 1's worker, and the other way round.
        script = (
            "import sys, torch.distributed as dist, ringsync.torch\n"
            f"dist.init_process_group('ringsync', init_method='file://{tmp_path}/store', "
            "rank=int(sys.argv[1]), world_size=2)\n")
        procs = [subprocess.Popen([sys.executable, "-c", script, str(r)],
                                  env=dict(os.environ, RINGSYNC_WORKER=cluster.targets[1 - r]),
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                 for r in range(2)]
        outputs = [p.communicate(timeout=120)[0] for p in procs]
    for p, out in zip(procs, outputs):
        assert p.returncode != 0
        assert "ringsync ranks follow the sorted worker ids" in out, out


def test_destroying_the_group_with_a_collective_in_flight_returns(tmp_path):
    # Rank 0 destroys its group while its all-reduce waits for rank 1 (which starts its
    # own a second later): the group cancels it, and the future's Python callback runs on
    # the group's completion thread, which needs the GIL the destroying thread held.
    script = tmp_path / "destroy_rank.py"
    script.write_text(
        "import sys, time, torch, torch.distributed as dist, datetime, ringsync.torch\n"
        "rank = int(sys.argv[1].removeprefix('--rank='))\n"
        f"dist.init_process_group('ringsync', init_method='file://{tmp_path}/store', "
        "rank=rank, world_size=2, timeout=datetime.timedelta(seconds=10))\n"
        "if rank == 1:\n"
        "    time.sleep(1)\n"
        "work = dist.all_reduce(torch.ones(1 << 20), async_op=True)\n"
        "seen = work.get_future().then(lambda f: 'callback ran')\n"
        "if rank == 1:\n"
        "    try:\n"
        "        work.wait()\n"
        "    except RuntimeError as e:\n"
        "        print('rank 1 failed as it should:', e)\n"
        "dist.destroy_process_group()\n"
        "print(f'rank {rank} destroyed its group:', seen.wait() if rank == 1 else 'yes')\n")
    with LocalCluster(world_size=2) as cluster:
        results = run_rank_processes(str(script), cluster.targets, timeout=60)
    for rank, (code, output) in enumerate(results):
        assert code == 0, output
        assert f"rank {rank} destroyed its group" in output, output
