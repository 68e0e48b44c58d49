"""Per-model-kind defaults (eva0.defaults): detection from the adapted layers, explicit wins."""

import pytest
import torch
from torch import nn

from eva0 import EVA0
from eva0.defaults import PROFILES, profile_of, resolve


def _cnn(norm):
    layer = nn.BatchNorm2d(4) if norm == "bn" else nn.GroupNorm(2, 4)
    return nn.Sequential(
        nn.Conv2d(1, 4, 3, padding=1), layer, nn.ReLU(), nn.Flatten(), nn.Linear(64, 3)
    ).eval()


@pytest.mark.parametrize(
    ("model", "profile"),
    [
        (lambda mlp: mlp(), "layer_norm"),
        (lambda mlp: mlp(norm="bn"), "batch_norm"),
        (lambda mlp: _cnn("bn"), "batch_norm"),
        (lambda mlp: _cnn("gn"), "group_norm"),
    ],
)
def test_auto_defaults_follow_the_adapted_norm_layers(make_mlp, model, profile):
    a = EVA0(model(make_mlp))
    assert a.profile == profile
    assert (a.eps, a.lr, a.max_step) == tuple(
        PROFILES[profile][k] for k in ("eps", "lr", "max_step")
    )


def test_batch_norm_wins_over_group_norm_and_names_outside_norms_are_layer_norm():
    net = nn.Sequential(nn.Conv2d(1, 4, 3), nn.GroupNorm(2, 4), nn.BatchNorm2d(4))
    assert profile_of(net, ["1.weight", "2.weight"]) == "batch_norm"
    assert profile_of(net, ["1.weight"]) == "group_norm"
    assert profile_of(net, ["0.weight"]) == "layer_norm"
    a = EVA0(_cnn("bn"), params=["0.weight"])
    assert a.profile == "layer_norm"
    assert a(torch.rand(4, 1, 4, 4)).shape == (4, 3)


def test_explicit_values_win_and_none_disables_clipping():
    a = EVA0(_cnn("bn"), eps=0.05, lr=0.2, max_step=None)
    assert (a.eps, a.lr, a.max_step) == (0.05, 0.2, None)
    assert resolve("group_norm", eps="auto", max_step=0.5) == {
        "eps": PROFILES["group_norm"]["eps"],
        "max_step": 0.5,
    }


def test_unknown_strings_are_rejected():
    with pytest.raises(ValueError, match="eps must be a number or 'auto'"):
        EVA0(_cnn("gn"), eps="big")
    with pytest.raises(ValueError, match="max_step must be a number or 'auto'"):
        EVA0(_cnn("gn"), max_step="none")
