"""chorus.torch.elastic.ElasticSampler: the partition over the ranks, progress that survives a
reset to another size (every sample processed exactly once, padding aside), and the seeded
shuffle."""

import collections
import random

import torch

import chorus.torch as hvd
from chorus.torch.elastic import sampler as sampler_module


class ListDataset(torch.utils.data.Dataset):
    def __init__(self, n):
        self.data = list(range(n))

    def __getitem__(self, idx):
        return self.data[idx]

    def __len__(self):
        return len(self.data)


def as_rank(monkeypatch, rank, size):
    """Makes the samplers built or reset next see (rank, size): one process plays the ranks
    of a job of another size."""
    monkeypatch.setattr(sampler_module, "rank", lambda: rank)
    monkeypatch.setattr(sampler_module, "size", lambda: size)


def test_partitions_the_dataset_over_the_ranks(world):
    rank, size = world
    n = 10 * size + 1  # not a multiple of size: the last rank's share is padded
    sampler = hvd.elastic.ElasticSampler(ListDataset(n), shuffle=True, seed=3)
    mine = list(sampler)
    assert len(mine) == len(sampler) == -(-n // size)
    everyone = hvd.allgather_object(mine, name="sampler.partition")
    counts = collections.Counter(i for part in everyone for i in part)
    assert set(counts) == set(range(n))
    padding = len(sampler) * size - n
    assert sum(c - 1 for c in counts.values()) == padding


def run_phase(monkeypatch, dataset, size, state_dict, batches, batch_size):
    """Every rank of a job of `size` ranks loads state_dict, processes up to `batches` batches
    (all of its share when None) and records them; returns (samples processed, per rank, and
    the state_dict after the phase, the same on every rank)."""
    processed, states = [], []
    for r in range(size):
        as_rank(monkeypatch, r, size)
        sampler = hvd.elastic.ElasticSampler(dataset, shuffle=True, seed=11)
        sampler.load_state_dict(state_dict)
        loader = torch.utils.data.DataLoader(dataset, batch_size=batch_size, sampler=sampler)
        mine = []
        for batch_idx, batch in enumerate(loader):
            if batches is not None and batch_idx == batches:
                break
            mine.extend(batch.tolist())
            sampler.record_batch(batch_idx, batch_size)
        processed.append(mine)
        states.append(sampler.state_dict())
    assert all(s == states[0] for s in states)
    return processed, states[0]


def test_committed_progress_is_kept_across_a_reset_to_another_size(monkeypatch):
    # 3 ranks process 2 batches of 4 each, then the job goes on with 2 ranks to the epoch's end.
    dataset = ListDataset(60)
    before, state = run_phase(monkeypatch, dataset, 3, dict(epoch=5, processed_num=0), 2, 4)
    assert state == dict(epoch=5, processed_num=24)
    assert [len(p) for p in before] == [8, 8, 8]
    after, state = run_phase(monkeypatch, dataset, 2, state, None, 4)
    assert [len(p) for p in after] == [18, 18]
    counts = collections.Counter(i for part in before + after for i in part)
    assert sorted(counts) == list(range(60))
    assert set(counts.values()) == {1}  # nothing repeated, nothing lost

    # Growing instead (2 ranks -> 3), with a remainder that needs padding.
    dataset = ListDataset(61)
    before, state = run_phase(monkeypatch, dataset, 2, dict(epoch=0, processed_num=0), 3, 5)
    assert state["processed_num"] == 30
    after, _ = run_phase(monkeypatch, dataset, 3, state, None, 5)
    counts = collections.Counter(i for part in before + after for i in part)
    assert sorted(counts) == list(range(61))
    assert sum(counts.values()) - 61 == 3 * 11 - 31  # only the padding repeats


def test_reset_repartitions_the_unprocessed_samples(monkeypatch):
    as_rank(monkeypatch, 1, 4)
    sampler = hvd.elastic.ElasticSampler(ListDataset(40), shuffle=False)
    sampler.record_batch(0, 2)
    assert (sampler.num_replicas, sampler.rank, len(sampler)) == (4, 1, 10)
    as_rank(monkeypatch, 0, 2)
    sampler.reset()
    assert (sampler.num_replicas, sampler.rank, len(sampler)) == (2, 0, 16)
    assert list(sampler) == list(range(8, 40, 2))


def test_set_epoch_reshuffles_deterministically_with_the_seed(monkeypatch):
    as_rank(monkeypatch, 0, 1)
    dataset = ListDataset(50)
    a = hvd.elastic.ElasticSampler(dataset, seed=7)
    b = hvd.elastic.ElasticSampler(dataset, seed=7)
    orders = []
    for epoch in range(3):
        a.set_epoch(epoch)
        b.set_epoch(epoch)
        assert list(a) == list(b)
        expected = list(range(50))
        random.Random(7 + epoch).shuffle(expected)
        assert list(a) == expected
        orders.append(list(a))
    assert orders[0] != orders[1] != orders[2]
    assert list(hvd.elastic.ElasticSampler(dataset, seed=8)) != orders[0]
    assert list(hvd.elastic.ElasticSampler(dataset, shuffle=False)) == list(range(50))
    # set_epoch starts the epoch over.
    a.record_batch(0, 10)
    assert len(a) == 50  # record_batch counts; the partition changes at the next reset
    a.reset()
    assert len(a) == 40 and list(a) == orders[2][10:]
    a.set_epoch(3)
    assert (a.processed_num, len(a)) == (0, 50)


def test_torch_state_commits_restores_and_syncs_the_sampler(world):
    rank, size = world
    sampler = hvd.elastic.ElasticSampler(ListDataset(12 * size))
    state = hvd.elastic.TorchState(sampler=sampler)
    sampler.record_batch(0, 2)
    state.commit()
    sampler.record_batch(1, 2)
    sampler.record_batch(2, 2)
    assert sampler.processed_num == 6 * size
    state.restore()
    assert sampler.processed_num == 2 * size
    assert len(sampler) == 12 - 2

    # Ranks that disagree (rank r recorded r more batches) take rank 0's progress at sync.
    sampler.set_epoch(1 + rank)
    for i in range(rank):
        sampler.record_batch(i, 3)
    state.commit()
    state.sync()
    assert sampler.state_dict() == dict(epoch=1, processed_num=0)
    assert len(sampler) == 12
    everyone = hvd.allgather_object(list(sampler), name="sampler.after_sync")
    counts = collections.Counter(i for part in everyone for i in part)
    assert sorted(counts) == list(range(12 * size)) and set(counts.values()) == {1}
