"""Diagnostic behind the README's GunPoint note: gradient agreement during HEL training.

Trains the benchmark's GunPoint model (full batch; seed 0 and the benchmark's lr unless given)
with one estimator and, every 4th epoch, prints the cosine to BPTT of centred HEL in float32
and float64, the linearized echo in float64, and the test accuracy.

Usage: python bench/gunpoint_probe.py [--epochs 40] [--lr 1e-2] [--estimator hel] [--seed 0]
"""

import argparse

import tasks
import torch

import methodkit
from hel import HamiltonianEcho, compare_estimators


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--epochs", type=int, default=40)
    parser.add_argument("--estimator", default="hel")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--lr", type=float, default=tasks.CONFIG["gunpoint"]["lr"])
    args = parser.parse_args()
    torch.set_num_threads(1)
    Xtr, ytr, Xte, yte, _ = tasks.load_task("gunpoint", False)
    cfg = tasks.CONFIG["gunpoint"]
    methodkit.seed_everything(args.seed)
    model = tasks.build_model(args.seed, 1, 2, cfg["n"], cfg["dt"], "mean")
    loss = torch.nn.CrossEntropyLoss()
    est = tasks.make_estimator(args.estimator, model, loss, Xtr.shape[1])
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    for ep in range(args.epochs):
        opt.zero_grad()
        est.backward(Xtr, ytr)
        opt.step()
        if ep % 4 == 3 or ep == args.epochs - 1:
            probes = {
                "centered_f32": HamiltonianEcho(
                    model, loss, mode="centered", checkpoint_every=None
                ),
                "centered_f64": HamiltonianEcho(
                    model, loss, mode="centered", checkpoint_every=None, dtype=torch.float64
                ),
                "linearized_f64": HamiltonianEcho(
                    model, loss, mode="linearized", checkpoint_every=None, dtype=torch.float64
                ),
            }
            res = compare_estimators(model, (Xtr, ytr), loss, probes)
            with torch.no_grad():
                acc = float((model(Xte).argmax(1) == yte).float().mean())
            cos = {k: round(v["cosine"], 6) for k, v in res.items()}
            print(f"epoch {ep + 1}: cosine {cos} test accuracy {acc:.3f}", flush=True)


if __name__ == "__main__":
    main()
