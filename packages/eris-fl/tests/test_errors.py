"""Every documented bad input raises a clear error."""

import pytest
import torch

from _eris_helpers import make_clients, make_mlp
from eris_fl import ERISConfig, FedAvgConfig, LocalTrainer, RandK, TopK, run_simulation
from eris_fl.privacy import exposure_fraction, leakage_bound


def test_num_aggregators_bounds():
    with pytest.raises(ValueError, match="num_aggregators must be an int >= 1"):
        ERISConfig(num_aggregators=0)
    with pytest.raises(ValueError, match="num_aggregators=5 must be <= the 4 participating"):
        run_simulation(make_mlp(), make_clients(4), ERISConfig(num_aggregators=5), 1)
    with pytest.raises(ValueError, match="num_aggregators=3 must be <= the 2 participating"):
        run_simulation(
            make_mlp(), make_clients(4), ERISConfig(num_aggregators=3, clients_per_round=2), 1
        )


@pytest.mark.parametrize("ratio", [0.0, -0.1, 1.5])
def test_compression_ratio_outside_unit_interval(ratio):
    with pytest.raises(ValueError, match=r"compression ratio must be in \(0, 1\]"):
        RandK(ratio)
    with pytest.raises(ValueError, match=r"compression ratio must be in \(0, 1\]"):
        TopK(ratio)


def test_biased_compressor_with_dsc_needs_permission():
    with pytest.raises(ValueError, match="biased; DSC assumes an unbiased"):
        ERISConfig(compressor=TopK(0.1))
    assert ERISConfig(compressor=TopK(0.1), allow_biased=True).uses_dsc


def test_shift_alpha_checks():
    with pytest.raises(ValueError, match="shift_alpha must be > 0"):
        ERISConfig(compressor=RandK(0.5), shift_alpha=0.0)
    cfg = ERISConfig(num_aggregators=2, compressor=RandK(0.5), shift_alpha=0.9)
    with pytest.warns(UserWarning, match=r"exceeds 1/\(1\+omega\)"):
        run_simulation(make_mlp(), make_clients(3), cfg, 1)


def test_update_of_wrong_length_or_non_finite_names_the_client():
    data = make_clients(3)

    def short(model, x_t, dataset, gen):
        return torch.zeros(3, dtype=x_t.dtype)

    with pytest.raises(ValueError, match=r"client 0 update has shape \(3,\)"):
        run_simulation(make_mlp(), data, ERISConfig(num_aggregators=1), 1, short)

    def bad_client_two(model, x_t, dataset, gen):
        u = torch.zeros_like(x_t)
        if dataset is data[2]:
            u[0] = float("nan")
        return u

    with pytest.raises(ValueError, match="client 2 returned a non-finite update"):
        run_simulation(make_mlp(), data, ERISConfig(num_aggregators=1), 1, bad_client_two)


def test_empty_client_dataset():
    data = make_clients(3)
    data[1] = (data[1][0][:0], data[1][1][:0])
    with pytest.raises(ValueError, match="client 1 has an empty dataset"):
        run_simulation(make_mlp(), data, ERISConfig(num_aggregators=1), 1)
    with pytest.raises(ValueError, match="client dataset is empty"):
        LocalTrainer().update(make_mlp(), torch.zeros(53, dtype=torch.float64), data[1], None)


def test_weights_must_sum_to_positive():
    with pytest.raises(ValueError, match="client weights must sum to > 0"):
        run_simulation(
            make_mlp(), make_clients(3), ERISConfig(num_aggregators=1, weights=[0, 0, 0]), 1
        )
    with pytest.raises(ValueError, match="weights must be finite and >= 0"):
        ERISConfig(weights=[1.0, -1.0])
    with pytest.raises(ValueError, match="weights must be one of"):
        FedAvgConfig(weights="size")


def test_dsc_with_partial_participation_not_implemented():
    with pytest.raises(NotImplementedError, match="partial-participation correction"):
        ERISConfig(compressor=RandK(0.1), clients_per_round=3)


def test_other_config_errors():
    with pytest.raises(ValueError, match="partition must be one of"):
        ERISConfig(partition="stripes")
    with pytest.raises(ValueError, match="aggregator_selection"):
        ERISConfig(num_aggregators=2, aggregator_selection="best")
    with pytest.raises(ValueError, match="needs 2 distinct client ids"):
        ERISConfig(num_aggregators=2, aggregator_selection=[1, 1])
    with pytest.raises(ValueError, match="server_lr"):
        ERISConfig(server_lr=0)
    with pytest.raises(TypeError, match="Compressor or None"):
        ERISConfig(compressor="randk")
    with pytest.raises(ValueError, match="noise_multiplier > 0 needs clip"):
        FedAvgConfig(noise_multiplier=1.0)
    with pytest.raises(ValueError, match="rounds must be an int >= 0"):
        run_simulation(make_mlp(), make_clients(2), ERISConfig(num_aggregators=1), -1)


def test_privacy_helpers():
    assert exposure_fraction(4) == 0.25
    assert exposure_fraction(4, 0.1) == pytest.approx(0.025)
    assert leakage_bound(2, 0.5, 1.0) == pytest.approx(0.25)
    with pytest.raises(ValueError, match="num_aggregators must be >= 1"):
        exposure_fraction(0)
    with pytest.raises(ValueError, match=r"compression ratio must be in \(0, 1\]"):
        exposure_fraction(2, 0.0)
