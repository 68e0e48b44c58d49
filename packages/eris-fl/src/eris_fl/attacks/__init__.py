"""Leakage attacks: gradient inversion (DLG/iDLG) and membership inference."""

from eris_fl.attacks.dlg import DLGResult, dlg, infer_label, psnr
from eris_fl.attacks.mia import auc, loss_threshold_mia, observer_model_estimate

__all__ = [
    "DLGResult",
    "auc",
    "dlg",
    "infer_label",
    "loss_threshold_mia",
    "observer_model_estimate",
    "psnr",
]
