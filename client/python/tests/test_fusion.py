"""Tensor fusion from Python: allreduce_async calls on a client connected with
fusion_threshold_bytes travel as one collective, each handle with its own result."""

import concurrent.futures

import torch

import ringsync
from conftest import WORLD_SIZE, run_ranks


def test_fused_async_allreduces_each_get_their_own_sum(cluster):
    with concurrent.futures.ThreadPoolExecutor(WORLD_SIZE) as pool:
        clients = list(pool.map(lambda t: ringsync.connect(
            t, timeout=30, fusion_threshold_bytes=1 << 20, fusion_cycle_time=0.002),
            cluster.targets))
    try:
        def rank(client):
            tensors = [torch.full((10 + 1000 * i,), float(i + client.rank)) for i in range(20)]
            handles = [client.allreduce_async(t, f"grad/{i}") for i, t in enumerate(tensors)]
            assert all(h.wait() is t for h, t in zip(handles, tensors))
            return tensors
        for tensors in run_ranks(clients, rank):
            for i, t in enumerate(tensors):
                assert torch.equal(t, torch.full_like(t, WORLD_SIZE * i + sum(range(WORLD_SIZE))))
    finally:
        for c in clients:
            c.close()
