"""Print NoAdapt accuracy per corruption and severity (how the severity table was set).

python bench/calibrate.py      # from packages/eva0; trains the 30-epoch source timm ViT first
"""

from __future__ import annotations

import torch
import zoo
from tasks import accuracy, digits16, stream

import methodkit
from eva0.corruptions import NAMES


def main() -> None:
    torch.set_num_threads(1)
    methodkit.seed_everything(0)
    Xtr, ytr, Xte, yte = digits16()
    model = zoo.trained("vit", Xtr, ytr, zoo.EPOCHS["vit"])
    print(f"clean {accuracy(model, Xte, yte):.3f}")
    for c in NAMES:
        accs = []
        for s in range(1, 6):
            batches = stream(Xte, yte, c, s)
            X = torch.cat([b[0] for b in batches])
            Y = torch.cat([b[1] for b in batches])
            accs.append(accuracy(model, X, Y))
        print(c, " ".join(f"{a:.3f}" for a in accs))


if __name__ == "__main__":
    main()
