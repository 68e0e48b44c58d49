"""Real offline OCR: rapidocr (ONNX models inside its wheel) and Tesseract (pytesseract).

Both read a region of the image, optionally upscaled (crop-and-zoom), and report boxes in the
original image's pixels, so evidence from different engines and zooms can be compared.
"""

from __future__ import annotations

import shutil
import warnings
from typing import Any

import numpy as np

from eva_agent._validation import as_rgb
from eva_agent.tools.base import REGION_SCHEMA, bad_args
from eva_agent.tools.image_ops import crop_zoom, to_original
from eva_agent.types import Observation
from methodkit.checks import check_int, check_real

OCR_SCHEMA = {
    "type": "object",
    "properties": {
        "region": REGION_SCHEMA,
        "scale": {"type": "number", "minimum": 1, "maximum": 8, "description": "zoom factor"},
    },
}


def _prepare(tool: str, image: Any, args: dict[str, Any]) -> Any:
    """(crop, offset, scale) or an error Observation."""
    err = bad_args(tool, args, {"region", "scale"})
    if err:
        return err
    try:
        out = crop_zoom(as_rgb(image), args.get("region"), args.get("scale", 1.0))
    except (TypeError, ValueError) as e:
        return Observation("error", [], f"{tool}: {e}")
    if out is None:
        return Observation("error", [], f"{tool}: region {args.get('region')} is outside the image")
    return out


class RapidOCRTool:
    """OCR with rapidocr-onnxruntime (PP-OCR detection + recognition, ONNX, CPU).

    The detector keeps the crop's own resolution (``det_limit_type="max"``), so zooming is
    what makes small text legible, as with a VLM's fixed input resolution.

    Args:
        threads: ONNX Runtime intra-op threads.
        min_conf: Recognitions below this confidence are dropped.

    Example:
        >>> from PIL import Image, ImageDraw, ImageFont
        >>> img = Image.new("RGB", (160, 60), "white")
        >>> ImageDraw.Draw(img).text((10, 10), "B42", fill=0, font=ImageFont.load_default(size=28))
        >>> RapidOCRTool()(img).items[0]["text"]  # doctest: +SKIP
        'B42'
    """

    name = "rapidocr"
    kind = "ocr"
    schema = OCR_SCHEMA

    def __init__(self, threads: int = 1, min_conf: float = 0.3) -> None:
        self.threads = check_int("threads", threads, low=1)
        self.min_conf = check_real("min_conf", min_conf, 0.0, 1.0)
        self._engine: Any = None

    def _get(self) -> Any:
        if self._engine is None:
            from rapidocr_onnxruntime import RapidOCR

            self._engine = RapidOCR(
                intra_op_num_threads=self.threads,
                inter_op_num_threads=1,
                det_limit_side_len=4000,
                det_limit_type="max",
            )
        return self._engine

    def __call__(self, image: Any, **args: Any) -> Observation:
        """Read text in ``region`` (default: whole image) zoomed ``scale`` times."""
        out = _prepare(self.name, image, args)
        if isinstance(out, Observation):
            return out
        crop, offset, scale = out
        result, _ = self._get()(np.asarray(crop))
        items = []
        for quad, text, conf in result or []:
            if float(conf) < self.min_conf or not str(text).strip():
                continue
            xs, ys = [p[0] for p in quad], [p[1] for p in quad]
            box = to_original((min(xs), min(ys), max(xs), max(ys)), offset, scale)
            items.append(
                {"text": str(text), "conf": float(conf), "box": [round(v, 1) for v in box]}
            )
        return Observation("ok", items)


class TesseractTool:
    """OCR with Tesseract through pytesseract (needs the Debian package ``tesseract-ocr``).

    When the binary is missing the tool still constructs, warns once, and every call returns an
    ``error`` observation saying so, so an agent holding it degrades instead of crashing.

    Args:
        psm: Tesseract page-segmentation mode (6: one block of text).
        min_conf: Words below this confidence (0-1) are dropped.
    """

    name = "tesseract"
    kind = "ocr"
    schema = OCR_SCHEMA

    def __init__(self, psm: int = 6, min_conf: float = 0.3) -> None:
        self.psm = check_int("psm", psm, low=0)
        if self.psm > 13:
            raise ValueError(f"psm must be a Tesseract page-segmentation mode in 0..13, got {psm}")
        self.min_conf = check_real("min_conf", min_conf, 0.0, 1.0)
        self.available = self.is_available()
        if not self.available:
            warnings.warn(
                "TesseractTool: the tesseract binary or pytesseract is missing "
                "(apt-get install tesseract-ocr; pip install 'eva-agent[tesseract]'); "
                "its calls return error observations",
                stacklevel=2,
            )

    @staticmethod
    def is_available() -> bool:
        """True when pytesseract imports and the ``tesseract`` binary is on PATH."""
        try:
            import pytesseract  # noqa: F401
        except ImportError:
            return False
        return shutil.which("tesseract") is not None

    def __call__(self, image: Any, **args: Any) -> Observation:
        """Read text in ``region`` zoomed ``scale`` times; one item per text line."""
        if not self.available:
            return Observation("error", [], "tesseract is not installed")
        out = _prepare(self.name, image, args)
        if isinstance(out, Observation):
            return out
        import pytesseract

        crop, offset, scale = out
        d = pytesseract.image_to_data(
            crop, config=f"--psm {self.psm}", output_type=pytesseract.Output.DICT
        )
        lines: dict[tuple[int, int, int], list[int]] = {}
        for i, word in enumerate(d["text"]):
            if str(word).strip() and float(d["conf"][i]) >= 100 * self.min_conf:
                lines.setdefault((d["block_num"][i], d["par_num"][i], d["line_num"][i]), []).append(
                    i
                )
        items = []
        for idx in lines.values():
            x0 = min(d["left"][i] for i in idx)
            y0 = min(d["top"][i] for i in idx)
            x1 = max(d["left"][i] + d["width"][i] for i in idx)
            y1 = max(d["top"][i] + d["height"][i] for i in idx)
            text = " ".join(str(d["text"][i]) for i in idx)
            conf = float(np.mean([float(d["conf"][i]) for i in idx])) / 100.0
            box = to_original((x0, y0, x1, y1), offset, scale)
            items.append({"text": text, "conf": conf, "box": [round(v, 1) for v in box]})
        return Observation("ok", items)
