"""connect()'s choice of how tensors reach the worker: the call channel, the staging arena
and registered staging are the SDK's ClientOptions of the same names, seen here in this
process's mappings of registered memory, and every choice gives the same results."""

import numpy
import pytest

import ringsync
from conftest import registered_mappings
from ringsync.local_cluster import LocalCluster

SMALL = 1000                  # elements: below the SDK's shared-memory threshold
LARGE = (2 << 20) // 4        # 2 MiB of float32: staged (registered memory or a file)


@pytest.fixture(scope="module")
def worker():
    with LocalCluster(world_size=1) as c:
        yield c.targets[0]


def new_registered_sizes(worker, **choices):
    """Connects with `choices`, all-reduces a small and a large array (exact results
    checked), and returns the sizes of the registered mappings this client made."""
    before = registered_mappings()
    with ringsync.connect(worker, timeout=30, **choices) as client:
        for n in (SMALL, LARGE):
            values = numpy.arange(n, dtype=numpy.float32)
            assert client.allreduce_(values, f"n={n}") is values
            assert numpy.array_equal(values, numpy.arange(n, dtype=numpy.float32))
        return sorted(end - start for start, end in registered_mappings() - before)


def test_every_path_off_registers_no_memory(worker):
    assert new_registered_sizes(worker, call_channel=False, staging_arena_bytes=0,
                                stage_in_registered_memory=False) == []


def test_the_defaults_register_the_channel_the_arena_and_the_staging_buffer(worker):
    sizes = new_registered_sizes(worker)
    assert 16 << 20 in sizes, sizes          # the staging arena, 16 MiB by default
    assert len(sizes) == 3, sizes            # + the call channel + the large array's stage


def test_the_arena_size_is_the_callers(worker):
    assert new_registered_sizes(worker, call_channel=False, staging_arena_bytes=1 << 20,
                                stage_in_registered_memory=False) == [1 << 20]


def test_a_negative_arena_size_is_a_value_error(worker):
    with pytest.raises(ValueError, match="staging_arena_bytes"):
        ringsync.connect(worker, timeout=30, staging_arena_bytes=-2)
