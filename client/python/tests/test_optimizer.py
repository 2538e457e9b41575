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


def test_compression_narrows_only_the_wider_floating_types():
    import torch
    from ringsync.torch import Compression

    wants = {  # gradient dtype: (none, fp16, bf16)
        torch.float64: (torch.float64, torch.float16, torch.bfloat16),
        torch.float32: (torch.float32, torch.float16, torch.bfloat16),
        torch.float16: (torch.float16, torch.float16, torch.float16),
        torch.bfloat16: (torch.bfloat16, torch.bfloat16, torch.bfloat16),
        torch.int64: (torch.int64, torch.int64, torch.int64),
    }
    for dtype, want in wants.items():
        got = tuple(c.wire_dtype(dtype) for c in (Compression.none, Compression.fp16,
                                                  Compression.bf16))
        assert got == want, (dtype, got)
    assert repr(Compression.fp16) == "Compression.fp16"
