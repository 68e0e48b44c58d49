import math

import pytest
import torch

from eris_fl import ShardPartitioner


@pytest.mark.parametrize("scheme", ["random", "contiguous", "balanced"])
@pytest.mark.parametrize("A", [1, 2, 3, 7, 16])
def test_masks_disjoint_and_complete(scheme, A):
    part = ShardPartitioner(A, scheme, seed=3)
    for rnd in range(4):
        for d in (1, 5, 97):
            masks = part.masks(rnd, d)
            assert masks.shape == (A, d)
            assert masks.dtype == torch.bool
            assert torch.equal(masks.sum(0), torch.ones(d, dtype=torch.long))


def test_single_aggregator_owns_everything():
    for scheme in ("random", "contiguous", "balanced"):
        assert ShardPartitioner(1, scheme).masks(5, 11).all()


def test_same_seed_and_round_give_same_partition_independent_of_global_rng():
    a = ShardPartitioner(4, "random", seed=9)
    torch.manual_seed(0)
    first = a.owner(2, 1000)
    torch.manual_seed(123)
    torch.rand(10)
    second = ShardPartitioner(4, "random", seed=9).owner(2, 1000)
    assert torch.equal(first, second)
    assert not torch.equal(first, a.owner(3, 1000))  # a new partition each round
    assert not torch.equal(first, ShardPartitioner(4, "random", seed=10).owner(2, 1000))


@pytest.mark.parametrize("d", [10, 4810, 4811])
def test_balanced_and_contiguous_shard_sizes(d):
    A = 4
    for scheme in ("balanced", "contiguous"):
        sizes = ShardPartitioner(A, scheme, seed=0).masks(0, d).sum(1)
        assert int(sizes.max()) == math.ceil(d / A)
        assert int(sizes.min()) == d // A


def test_random_shards_are_roughly_equal():
    d, A = 40_000, 4
    sizes = ShardPartitioner(A, "random", seed=0).masks(0, d).sum(1).double()
    sd = math.sqrt(d * (1 / A) * (1 - 1 / A))
    assert (sizes - d / A).abs().max() < 4 * sd


def test_partitioner_rejects_bad_input():
    with pytest.raises(ValueError, match="num_aggregators must be >= 1"):
        ShardPartitioner(0)
    with pytest.raises(ValueError, match="scheme"):
        ShardPartitioner(2, "stripes")
    with pytest.raises(ValueError, match="d must be >= 1"):
        ShardPartitioner(2).owner(0, 0)
