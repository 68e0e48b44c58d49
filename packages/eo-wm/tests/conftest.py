"""eo-wm test set-up: this folder importable (tests share ``_eowm_helpers``), and ``bench/``."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.append(str(Path(__file__).resolve().parent.parent / "bench"))
