"""Crop-and-zoom, with the map from zoomed coordinates back to the original frame."""

from __future__ import annotations

from typing import Any, ClassVar

from PIL import Image

from eva_agent._validation import as_rgb, clip_region
from eva_agent.tools.base import REGION_SCHEMA, bad_args
from eva_agent.types import Observation


def crop_zoom(
    image: Image.Image, region: Any = None, scale: float = 1.0
) -> tuple[Image.Image, tuple[int, int], float] | None:
    """Crop ``region`` and upscale it ``scale`` times (bicubic).

    Returns:
        ``(crop, (x0, y0), scale)``, or None when the region lies fully outside the image.

    Raises:
        ValueError: If ``scale`` is not in [1, 8].
    """
    scale = float(scale)
    if not 1.0 <= scale <= 8.0:
        raise ValueError(f"scale must be in [1, 8], got {scale}")
    box = (0, 0, image.width, image.height) if region is None else clip_region(region, image.size)
    if box is None:
        return None
    crop = image.crop(box)
    if scale != 1.0:
        crop = crop.resize(
            (max(1, round(crop.width * scale)), max(1, round(crop.height * scale))),
            Image.Resampling.BICUBIC,
        )
    return crop, (box[0], box[1]), scale


def to_original(
    box: tuple[float, float, float, float], offset: tuple[int, int], scale: float
) -> tuple[float, float, float, float]:
    """Map a box in the zoomed crop back to the original image's pixels."""
    ox, oy = offset
    x0, y0, x1, y1 = box
    return (ox + x0 / scale, oy + y0 / scale, ox + x1 / scale, oy + y1 / scale)


class CropZoom:
    """Crop a region and zoom it (``region``, ``scale`` in [1, 8]); the item carries the crop.

    Example:
        >>> from PIL import Image
        >>> obs = CropZoom()(Image.new("RGB", (40, 30)), region=[0, 0, 20, 10], scale=2)
        >>> obs.items[0]["size"]
        [40, 20]
    """

    name = "zoom"
    kind = "zoom"
    schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {"region": REGION_SCHEMA, "scale": {"type": "number", "minimum": 1}},
    }

    def __call__(self, image: Any, **args: Any) -> Observation:
        """Return one item ``{"offset", "scale", "size", "image"}`` or an ``error``."""
        err = bad_args(self.name, args, {"region", "scale"})
        if err:
            return err
        try:
            out = crop_zoom(as_rgb(image), args.get("region"), args.get("scale", 2.0))
        except (TypeError, ValueError) as e:
            return Observation("error", [], str(e))
        if out is None:
            return Observation("error", [], f"region {args.get('region')} is outside the image")
        crop, offset, scale = out
        item = {"offset": list(offset), "scale": scale, "size": [crop.width, crop.height]}
        return Observation("ok", [{**item, "image": crop, "conf": 1.0}])
