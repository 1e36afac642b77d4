"""The key-value retrieval task and the linear baseline, against plain loops."""

import pytest
import torch

from rankcollapse import data, retrieval
from rankcollapse.baselines import linear_baseline


def test_every_label_is_the_queried_keys_value_by_a_plain_loop():
    train = data.load("retrieval", "train")
    assert train.x.shape == (retrieval.SIZES["train"], 1 + retrieval.KEYS)
    assert train.mask.all() and int(train.x.max()) < len(train.vocab)
    for i in range(300):
        words = [train.vocab.itos[int(t)] for t in train.x[i]]
        query = words[0]
        assert query.startswith("q")
        keys = [w[1:w.index("v")] for w in words[1:]]
        assert sorted(map(int, keys)) == list(range(retrieval.KEYS))  # every key once
        (value,) = [w[w.index("v") + 1:] for w in words[1:] if w[1:w.index("v")] == query[1:]]
        assert int(value) == int(train.y[i])


def test_the_splits_are_fixed_distinct_and_cut_by_limit():
    first, again = data.load("retrieval", "test"), data.load("retrieval", "test")
    assert torch.equal(first.x, again.x) and torch.equal(first.y, again.y)
    train = data.load("retrieval", "train", limit=2000)
    assert not torch.equal(train.x[:100], first.x[:100])
    assert torch.equal(train.x, data.load("retrieval", "train").x[:2000])
    counts = torch.bincount(first.y, minlength=retrieval.VALUES)
    assert counts.min() > 0.7 * len(first) / retrieval.VALUES  # classes about balanced
    with pytest.raises(ValueError, match="cannot hold them"):
        data.load("retrieval", "train", max_len=8)


def test_a_bag_of_tokens_cannot_do_retrieval_but_a_linear_model_reads_pixels():
    train, test = data.load("retrieval", "train", limit=4000), data.load("retrieval", "test")
    # which token is present says only how often each value occurs among the items: the
    # most frequent value is right about a quarter of the time (measured: 0.25)
    assert linear_baseline(train, test, epochs=10) < 0.35
    g = torch.Generator().manual_seed(0)
    y = torch.randint(0, 2, (400,), generator=g)
    x = torch.rand(400, 1, 4, 4, generator=g) + y[:, None, None, None]  # separable by a sum
    images = data.Dataset("toy", "train", x, y, None, ["a", "b"], "image", "toy")
    assert linear_baseline(images, images, epochs=300) > 0.95
    empty = data.Dataset("toy", "test", x[:0], y[:0], None, ["a", "b"], "image", "toy")
    with pytest.raises(ValueError, match="needs training and test examples"):
        linear_baseline(images, empty)
