"""Small builders shared by the tests (a uniquely named module: tests share one run)."""

import torch

from eris_fl import assign


def make_mlp(seed=0, dtype=torch.float64, d_in=6, hidden=5, d_out=3):
    gen = torch.Generator().manual_seed(seed)
    model = torch.nn.Sequential(
        torch.nn.Linear(d_in, hidden), torch.nn.Tanh(), torch.nn.Linear(hidden, d_out)
    ).to(dtype)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=gen, dtype=dtype) * 0.5)
    return model


def make_clients(num_clients=7, seed=0, dtype=torch.float64, d_in=6, d_out=3):
    gen = torch.Generator().manual_seed(seed)
    out = []
    for k in range(num_clients):
        n = 5 + 3 * k
        X = torch.randn(n, d_in, generator=gen, dtype=dtype)
        y = torch.randint(0, d_out, (n,), generator=gen)
        out.append((X, y))
    return out


def dist_model():
    """Deliberately unseeded: launch_local must broadcast rank 0's initial state."""
    return torch.nn.Sequential(torch.nn.Linear(6, 4), torch.nn.Tanh(), torch.nn.Linear(4, 3))


class FixedInit:
    """Model builder whose rank-0 state we know, to run the simulator from the same x_0."""

    def __init__(self, x0):
        self.x0 = x0

    def __call__(self):
        model = dist_model()
        assign(model, self.x0)
        return model


def dist_data(rank):
    return make_clients(3, seed=11, dtype=torch.float32)[rank]


def dist_data_crash(rank):
    if rank == 1:
        raise RuntimeError("rank 1 crashed on purpose")
    return dist_data(rank)


def dist_data_empty_on_rank1(rank):
    X, y = dist_data(rank)
    return (X[:0], y[:0]) if rank == 1 else (X, y)


class DropOut:
    """Trainer that kills its own process (no error raised) on rank ``rank`` in ``round``."""

    def __init__(self, rank=2, round=1, hang=False):
        self.rank, self.round, self.hang, self.calls = rank, round, hang, 0

    def __call__(self, model, x_t, data, gen):
        import os
        import time

        import torch.distributed as dist

        from eris_fl import LocalTrainer

        if dist.get_rank() == self.rank and self.calls == self.round:
            if self.hang:
                time.sleep(60)
            os._exit(7)
        self.calls += 1
        return LocalTrainer(batch_size=4).update(model, x_t, data, gen)


def dist_loader(rank):
    import torch.utils.data as tud

    X, y = dist_data(rank)
    return tud.DataLoader(tud.TensorDataset(X, y), batch_size=3)


def mean_loss(model):
    X = torch.cat([dist_data(r)[0] for r in range(3)])
    y = torch.cat([dist_data(r)[1] for r in range(3)])
    return {"loss": float(torch.nn.functional.cross_entropy(model(X), y))}
