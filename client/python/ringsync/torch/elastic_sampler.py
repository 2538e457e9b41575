"""ElasticSampler: a torch DataLoader sampler that shares each epoch among the ring's
current ranks, resumes an epoch where the last commit left it, and re-shares what is left
when the world changes (Horovod Elastic's ElasticSampler).

    sampler = rst.elastic.ElasticSampler(dataset, shuffle=True, seed=0)
    loader = torch.utils.data.DataLoader(dataset, batch_size=32, sampler=sampler)
    state = rst.elastic.TorchState(model, optimizer, sampler=sampler, epoch=0)

    @rst.elastic.run
    def train(state):
        for state.epoch in range(state.epoch, epochs):
            sampler.set_epoch(state.epoch)        # a new epoch starts from its first sample
            for x, y in loader:
                ...                               # one step on this rank's batch
                sampler.record_batch(len(x))      # every rank took a batch of this size
                state.commit()

An epoch's order is a permutation of the dataset's indices made from (seed, epoch), the
same on every rank (or 0, 1, 2, ... without shuffle). Of what is left of it, rank r takes
every world_size-th index from r on, so after k steps of b samples a rank the ranks
together have taken exactly the first k x b x world_size indices of what was left: that
count is the sampler's state (state_dict: epoch, processed), which TorchState commits and
syncs like the model. When the world changes, the indices after it are shared anew among
the ranks the ring has then. Each rank's share is padded to the same length with indices
from the start of what is left (as DistributedSampler does), so every rank takes the same
number of batches; a padded index is seen twice in its epoch.
"""

import math

import torch

from ringsync.torch import session


class ElasticSampler(torch.utils.data.Sampler):
    def __init__(self, dataset, shuffle=True, seed=0, client=None):
        """`dataset`: anything with a len(); `client`: what tells this rank's place (its
        .rank and .world_size, read at each iter(): default ringsync.torch.init's)."""
        self._size = len(dataset)
        self.shuffle = bool(shuffle)
        self.seed = int(seed)
        self._client = client
        self.epoch = 0
        self.processed = 0
        self.shared_among = None  # the world size the last iter() shared the epoch among

    def set_epoch(self, epoch):
        """Starts epoch `epoch` from its first sample, unless it is the epoch under way
        (then nothing changes: calling it at the top of every epoch resumes correctly)."""
        if epoch != self.epoch:
            self.epoch = int(epoch)
            self.processed = 0

    def record_batch(self, batch_size):
        """After a step in which every rank took `batch_size` samples of its share (of the
        last iter(): the ring may have changed since, but that step ran on the ranks it
        was shared among)."""
        if batch_size < 0:
            raise ValueError(f"ElasticSampler.record_batch: batch_size {batch_size} < 0")
        world = self.shared_among or self._place()[1]
        self.processed = min(self._size, self.processed + batch_size * world)

    def state_dict(self):
        return {"epoch": self.epoch, "processed": self.processed}

    def load_state_dict(self, state):
        self.epoch = int(state["epoch"])
        self.processed = int(state["processed"])

    def _place(self):
        client = self._client if self._client is not None else session.client()
        return client.rank, client.world_size

    def _left(self):
        if self.shuffle:
            order = torch.randperm(self._size, generator=torch.Generator().manual_seed(
                self.seed * 1_000_003 + self.epoch)).tolist()
        else:
            order = list(range(self._size))
        return order[self.processed:]

    def __iter__(self):
        rank, world = self._place()
        self.shared_among = world
        left = self._left()
        share = math.ceil(len(left) / world)
        padded = left + (left * world)[:share * world - len(left)] if left else []
        return iter(padded[rank::world])

    def __len__(self):
        return math.ceil((self._size - self.processed) / self._place()[1])
