"""ElasticSampler (horovod.torch.elastic.ElasticSampler, Horovod 0.28 semantics).

The epoch's order is range(len(dataset)), shuffled with random.Random(seed + epoch) when
shuffle=True (the same order on every rank). Progress within the epoch is one number,
processed_num: the length of the prefix of that order already processed by all ranks together
(record_batch adds batch_size * num_replicas). reset() partitions the rest over the current
size(): rank r takes positions r, r + size, ... of the remainder, padded by repeating its start
to a multiple of size, as torch's DistributedSampler does. So after a reset to another size,
committed progress is neither repeated nor lost (padding aside).

Thread-safety: none; the training thread owns it.
"""

import math
import random

import torch.utils.data

from chorus.basics import rank, size


class ElasticSampler(torch.utils.data.Sampler):
    """Partitions a dataset over the ranks and re-partitions the unprocessed part after a reset.

    Use: put it in the TorchState, call record_batch after each processed batch and set_epoch at
    the end of each epoch (not the beginning: a partially done epoch must not start over).

    dataset: its length must not change. shuffle: shuffle the order (default True). seed: the
    shuffle's seed, the same on every rank (default 0).
    """

    def __init__(self, dataset, shuffle=True, seed=0):
        self.dataset = dataset
        self.shuffle = shuffle
        self.seed = seed

        self.epoch = 0
        self.processed_num = 0

        self.num_replicas = 0
        self.rank = 0
        self.remaining_indices = []
        self.num_samples = 0
        self.total_size = 0

        self.reset()

    def set_epoch(self, epoch):
        """Starts epoch `epoch`: a new order (when shuffling) and nothing processed yet."""
        self.epoch = epoch
        self.processed_num = 0
        self.reset()

    def record_batch(self, batch_idx, batch_size):
        """Records one more batch of batch_size samples as processed on every rank (batch_idx
        is not used, as in Horovod)."""
        self.processed_num += batch_size * self.num_replicas

    def state_dict(self):
        return dict(epoch=self.epoch, processed_num=self.processed_num)

    def load_state_dict(self, state_dict):
        self.epoch = state_dict["epoch"]
        self.processed_num = state_dict["processed_num"]
        self.reset()

    def reset(self):
        """Re-partitions the unprocessed samples of the epoch over the current size() and
        rank()."""
        self.num_replicas = size()
        self.rank = rank()
        order = list(range(len(self.dataset)))
        if self.shuffle:
            random.Random(self.seed + self.epoch).shuffle(order)
        self.remaining_indices = order[self.processed_num:]
        self.num_samples = int(math.ceil(len(self.remaining_indices) / self.num_replicas))
        self.total_size = self.num_samples * self.num_replicas

    def __iter__(self):
        indices = list(self.remaining_indices)
        indices += indices[:self.total_size - len(indices)]
        self.indices = indices[self.rank:self.total_size:self.num_replicas]
        return iter(self.indices)

    def __len__(self):
        return self.num_samples
