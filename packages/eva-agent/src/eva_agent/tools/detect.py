"""Detectors: a classical OpenCV shape/colour detector and a wrapper for zero-shot HF models."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from eva_agent._validation import as_rgb, clip_region
from eva_agent._vocab import COLOURS, SHAPES
from eva_agent.tools.base import REGION_SCHEMA, bad_args
from eva_agent.types import Observation
from methodkit.checks import check_int, check_real


def _hue_centres() -> dict[str, float]:
    import cv2

    out = {}
    for name, rgb in COLOURS.items():
        hsv = cv2.cvtColor(np.array([[rgb]], dtype=np.uint8), cv2.COLOR_RGB2HSV)[0, 0]
        out[name] = float(hsv[0])
    return out


class ShapeColorDetector:
    """Flat-colour shapes by HSV hue clustering and contour polygon fitting (OpenCV).

    Pixels with saturation >= ``min_sat`` and value >= ``min_val`` are assigned to the nearest
    named hue (circular distance on OpenCV's 0-180 scale); each colour mask is opened, its outer
    contours above ``min_area`` are classified by ``approxPolyDP`` vertices and solidity:
    3 -> triangle, 4 -> square, solidity < 0.75 -> star, else circle. Returns every detection
    matching the optional ``color`` / ``shape`` filters inside the optional ``region``.

    Example:
        >>> from PIL import Image, ImageDraw
        >>> img = Image.new("RGB", (100, 100), "white")
        >>> ImageDraw.Draw(img).rectangle([20, 20, 60, 60], fill=(220, 40, 40))
        >>> [d["label"] for d in ShapeColorDetector()(img).items]
        ['red square']
    """

    name = "detect"
    kind = "detect"
    schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "color": {"enum": list(COLOURS)},
            "shape": {"enum": list(SHAPES)},
            "region": REGION_SCHEMA,
        },
    }

    def __init__(self, min_area: int = 120, min_sat: int = 90, min_val: int = 70) -> None:
        self.min_area = check_int("min_area", min_area, low=0)
        for name, v in (("min_sat", min_sat), ("min_val", min_val)):
            if check_int(name, v, low=0) > 255:
                raise ValueError(f"{name} is on OpenCV's 0-255 HSV scale, got {v}")
        self.min_sat, self.min_val = min_sat, min_val
        self._hues: dict[str, float] | None = None

    def detect(self, image: Any) -> list[dict[str, Any]]:
        """All detections in the image, top-to-bottom then left-to-right."""
        import cv2

        self._hues = self._hues or _hue_centres()
        hsv = cv2.cvtColor(np.asarray(as_rgb(image)), cv2.COLOR_RGB2HSV)
        h = hsv[..., 0].astype(float)
        sat = (hsv[..., 1] >= self.min_sat) & (hsv[..., 2] >= self.min_val)
        names = list(self._hues)
        dist = np.stack([np.minimum(abs(h - c), 180 - abs(h - c)) for c in self._hues.values()])
        nearest = np.argmin(dist, axis=0)
        kernel = np.ones((3, 3), np.uint8)
        out = []
        for k, colour in enumerate(names):
            mask = ((nearest == k) & sat).astype(np.uint8) * 255
            mask = cv2.morphologyEx(mask, cv2.MORPH_OPEN, kernel)
            contours, _ = cv2.findContours(mask, cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_SIMPLE)
            for c in contours:
                area = cv2.contourArea(c)
                if area < self.min_area:
                    continue
                shape = self._classify(c, area)
                x, y, w, hh = cv2.boundingRect(c)
                out.append(
                    {
                        "label": f"{colour} {shape}",
                        "color": colour,
                        "shape": shape,
                        "conf": 1.0,
                        "box": [x, y, x + w, y + hh],
                    }
                )
        return sorted(out, key=lambda d: (d["box"][1] // 40, d["box"][0]))

    @staticmethod
    def _classify(contour: Any, area: float) -> str:
        import cv2

        hull = cv2.convexHull(contour)
        solidity = area / max(cv2.contourArea(hull), 1e-9)
        if solidity < 0.75:
            return "star"
        approx = cv2.approxPolyDP(contour, 0.04 * cv2.arcLength(contour, True), True)
        if len(approx) == 3:
            return "triangle"
        if len(approx) == 4:
            return "square"
        return "circle"

    def __call__(self, image: Any, **args: Any) -> Observation:
        """Detections filtered by ``color``, ``shape`` and ``region`` (centre inside)."""
        err = bad_args(self.name, args, {"color", "shape", "region"})
        if err:
            return err
        img = as_rgb(image)
        region = None
        if args.get("region") is not None:
            region = clip_region(args["region"], img.size)
            if region is None:
                return Observation("error", [], f"region {args['region']} is outside the image")
        items = self.detect(img)
        if args.get("color"):
            items = [d for d in items if d["color"] == args["color"]]
        if args.get("shape"):
            items = [d for d in items if d["shape"] == args["shape"]]
        if region is not None:
            x0, y0, x1, y1 = region
            items = [
                d
                for d in items
                if x0 <= (d["box"][0] + d["box"][2]) / 2 <= x1
                and y0 <= (d["box"][1] + d["box"][3]) / 2 <= y1
            ]
        return Observation("ok", items)


class HFZeroShotDetector:
    """Open-vocabulary detection (OWLv2, Grounding DINO) through ``transformers``, user weights.

    Args:
        model: A ``transformers`` zero-shot object-detection model.
        processor: Its processor (``post_process_object_detection`` or
            ``post_process_grounded_object_detection``).
        threshold: Score threshold.
    """

    name = "grounding"
    kind = "detect"
    schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {"phrase": {"type": "string"}, "region": REGION_SCHEMA},
        "required": ["phrase"],
    }

    def __init__(self, model: Any, processor: Any, threshold: float = 0.3) -> None:
        self.model, self.processor = model, processor
        self.threshold = check_real("threshold", threshold, 0.0, 1.0)

    @classmethod
    def from_pretrained(cls, path: str, threshold: float = 0.3) -> HFZeroShotDetector:
        """Load a local checkpoint (``pip install "eva-agent[hf]"``)."""
        try:
            from transformers import AutoModelForZeroShotObjectDetection, AutoProcessor
        except ImportError as e:
            raise ImportError('HFZeroShotDetector needs: pip install "eva-agent[hf]"') from e
        model = AutoModelForZeroShotObjectDetection.from_pretrained(path)
        return cls(model, AutoProcessor.from_pretrained(path), threshold)

    def __call__(self, image: Any, **args: Any) -> Observation:
        """Boxes for ``phrase``; items ``{"label", "conf", "box"}``."""
        err = bad_args(self.name, args, {"phrase", "region"})
        if err:
            return err
        phrase = str(args.get("phrase", "")).strip()
        if not phrase:
            return Observation("error", [], "grounding needs a non-empty phrase")
        import torch

        img = as_rgb(image)
        inputs = self.processor(text=[[phrase]], images=img, return_tensors="pt")
        with torch.no_grad():
            outputs = self.model(**inputs)
        target = torch.tensor([[img.height, img.width]])
        post = getattr(self.processor, "post_process_grounded_object_detection", None) or (
            self.processor.post_process_object_detection
        )
        res = post(outputs, threshold=self.threshold, target_sizes=target)[0]
        items = []
        for score, box in zip(res["scores"].tolist(), res["boxes"].tolist(), strict=False):
            x0, y0, x1, y1 = (round(float(v), 1) for v in box)
            c, s = phrase.split()[0], phrase.split()[-1]
            items.append(
                {
                    "label": phrase,
                    "color": c if c in COLOURS else None,
                    "shape": s if s in SHAPES else None,
                    "conf": float(score),
                    "box": [x0, y0, x1, y1],
                }
            )
        return Observation("ok", items)
