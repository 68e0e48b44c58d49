"""DLG/iDLG and membership inference behave as the literature reports on digits."""

import numpy as np
import pytest
import torch

from eris_fl import LocalTrainer, flatten
from eris_fl.attacks import (
    auc,
    dlg,
    infer_label,
    loss_threshold_mia,
    observer_model_estimate,
    psnr,
)
from methodkit.data import load_digits_arrays


def _sigmoid_mlp(seed=0):
    torch.manual_seed(seed)
    return torch.nn.Sequential(
        torch.nn.Linear(64, 64), torch.nn.Sigmoid(), torch.nn.Linear(64, 10)
    ).double()


def _gradient(model, x, y):
    loss = torch.nn.functional.cross_entropy(model(x), torch.tensor([y]))
    grads = torch.autograd.grad(loss, list(model.parameters()))
    return torch.cat([g.reshape(-1) for g in grads])


@pytest.fixture(scope="module")
def digits():
    X, y = load_digits_arrays(dtype=np.float64)
    return torch.as_tensor(X), torch.as_tensor(y)


@pytest.mark.slow  # loads scikit-learn's digits (~7 s on a busy core) or trains
def test_idlg_recovers_the_label_exactly(digits):
    X, y = digits
    model = _sigmoid_mlp()
    for i in range(10):
        g = _gradient(model, X[i : i + 1], int(y[i]))
        assert infer_label(model, g) == int(y[i])


@pytest.mark.slow  # loads scikit-learn's digits (~7 s on a busy core) or trains
def test_dlg_on_a_full_single_example_gradient_reconstructs_the_digit(digits):
    X, y = digits
    model = _sigmoid_mlp()
    g = _gradient(model, X[3:4], int(y[3]))
    res = dlg(model, g, iters=300, lr=0.05, generator=torch.Generator().manual_seed(0))
    assert res.label == int(y[3])
    assert res.losses[-1] < res.losses[0]
    assert psnr(res.x, X[3:4]) > 20.0


def test_dlg_rejects_a_mask_of_the_wrong_length(digits):
    model = _sigmoid_mlp()
    g = torch.zeros(flatten(model).numel(), dtype=torch.float64)
    with pytest.raises(ValueError, match="mask must be 1-D of length 4810"):
        dlg(model, g, mask=torch.ones(10, dtype=torch.bool), iters=1)
    with pytest.raises(ValueError, match="observed must be 1-D of length 4810"):
        dlg(model, g[:5], iters=1)
    with pytest.raises(ValueError, match="mask must be 1-D of length"):
        observer_model_estimate(g, g, torch.ones(3, dtype=torch.bool))


@pytest.mark.slow  # loads scikit-learn's digits (~7 s on a busy core) or trains
def test_mia_on_an_overfit_local_model(digits):
    X, y = digits
    X = X.float()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
    x0 = flatten(model)
    members, nonmembers = (X[:60], y[:60]), (X[1000:1060], y[1000:1060])
    trainer = LocalTrainer(local_epochs=30, batch_size=8)
    u = trainer.update(model, x0, members, torch.Generator().manual_seed(0))
    est = observer_model_estimate(x0, u)
    assert loss_threshold_mia(model, est, members, nonmembers) > 0.65
    # only the public global model: close to chance
    assert loss_threshold_mia(model, x0, members, nonmembers) < 0.65


def test_auc_edge_cases():
    assert auc([1, 2], [0, 0]) == 1.0
    assert auc([0], [0]) == 0.5
    with pytest.raises(ValueError, match="at least one positive"):
        auc([], [1])
