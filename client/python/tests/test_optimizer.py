"""ringsync.torch's Horovod-style API (DistributedOptimizer, broadcast_parameters,
broadcast_optimizer_state) in real training processes (optimizer_rank.py per rank)."""

from conftest import run_rank_processes
from ringsync.local_cluster import LocalCluster


def test_distributed_optimizer_averages_gradients_and_broadcasts_state():
    with LocalCluster(world_size=3) as cluster:
        results = run_rank_processes("optimizer_rank.py", cluster.targets)
    for rank, (code, output) in enumerate(results):
        assert code == 0, f"rank {rank} failed:\n{output}"
        assert f"rank {rank}: OK" in output
