"""eo-wm test set-up: this folder importable, so tests share ``_eowm_helpers``."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
