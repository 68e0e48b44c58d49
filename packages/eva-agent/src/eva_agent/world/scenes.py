"""ShapeTextVQA scenes: flat-colour shapes on a 4x3 grid, a code label under each, distractor text.

A scene is a JSON-able dict (the *spec*); :func:`render_scene` draws it and stores it in the
image's ``info["eva_scene"]``, which is what the labelled simulator reads (the tools see pixels
only).
"""

from __future__ import annotations

import io
from typing import Any

import numpy as np
from PIL import Image, ImageDraw, ImageFilter, ImageFont

from eva_agent._vocab import COLOURS, SHAPES

WIDTH, HEIGHT = 480, 320
COLS, ROWS = 4, 3
CELL_W, CELL_H = WIDTH // COLS, HEIGHT // ROWS
LETTERS = "ABCDEGHKMNPRSZ"
_DISTRACTORS = ("TOTAL {a},{b:03d} kg", "ref {c}", "No. {d}")


def _font(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    return ImageFont.load_default(size=size)


def label_box(shape: dict[str, Any]) -> tuple[int, int, int, int]:
    """Pixel box of a shape's code label (from the spec, as drawn)."""
    cx, cy, s = shape["cx"], shape["cy"], shape["size"]
    x0, y0, x1, y1 = ImageDraw.Draw(Image.new("RGB", (1, 1))).textbbox(
        (0, 0), shape["label"], font=_font(shape["font"])
    )
    left = cx - (x1 - x0) // 2 - x0
    top = cy + s // 2 + 4 - y0
    return left + x0, top + y0, left + x1, top + y1


def shape_box(shape: dict[str, Any]) -> tuple[int, int, int, int]:
    """Pixel box of a shape (from the spec)."""
    h = shape["size"] // 2
    return shape["cx"] - h, shape["cy"] - h, shape["cx"] + h, shape["cy"] + h


def sample_scene(rng: np.random.Generator, difficulty: float = 0.5, scene_id: str = "") -> dict:
    """A random scene spec: 3-9 shapes with distinct (colour, shape) pairs and codes.

    Args:
        rng: NumPy generator.
        difficulty: In [0, 1]; 0 = clean (no blur, no JPEG, black text). Higher values make
            small and grey text, blur and JPEG noise more likely.
        scene_id: Stored in the spec.
    """
    if not 0.0 <= difficulty <= 1.0:
        raise ValueError(f"difficulty must be in [0, 1], got {difficulty}")
    n = int(rng.integers(3, 10))
    cells = rng.choice(COLS * ROWS, size=n, replace=False)
    combos = rng.choice(len(COLOURS) * len(SHAPES), size=n, replace=False)
    colours = list(COLOURS)
    labels: set[str] = set()
    shapes = []
    for cell, combo in zip(cells.tolist(), combos.tolist(), strict=True):
        while True:
            label = f"{LETTERS[int(rng.integers(len(LETTERS)))]}{int(rng.integers(10, 100))}"
            if label not in labels:
                labels.add(label)
                break
        col, row = cell % COLS, cell // COLS
        small = rng.random() < 0.6 * difficulty
        font = int(rng.integers(10, 15)) if small else int(rng.integers(10, 33))
        shapes.append(
            {
                "color": colours[combo // len(SHAPES)],
                "shape": SHAPES[combo % len(SHAPES)],
                "cell": cell,
                "row": row,
                "col": col,
                "cx": col * CELL_W + CELL_W // 2 + int(rng.integers(-6, 7)),
                "cy": row * CELL_H + 28 + int(rng.integers(-3, 4)),
                "size": int(rng.integers(28, 44)),
                "label": label,
                "font": font,
                "grey": bool(rng.random() < 0.5 * difficulty),
            }
        )
    free = [c for c in range(COLS * ROWS) if c not in set(cells.tolist())]
    distractors = []
    for cell in rng.permutation(free)[: int(rng.integers(1, 3))].tolist():
        tpl = _DISTRACTORS[int(rng.integers(len(_DISTRACTORS)))]
        text = tpl.format(
            a=int(rng.integers(1, 10)),
            b=int(rng.integers(0, 1000)),
            c=int(rng.integers(1000, 10000)),
            d=int(rng.integers(10, 100)),
        )
        x, y = (cell % COLS) * CELL_W + 6, (cell // COLS) * CELL_H + 40
        distractors.append({"text": text, "x": x, "y": y, "font": 12})
    return {
        "id": scene_id,
        "width": WIDTH,
        "height": HEIGHT,
        "shapes": sorted(shapes, key=lambda s: s["cell"]),
        "distractors": distractors,
        "blur": round(float(0.8 * difficulty * rng.random()), 3),
        "jpeg": int(95 - 55 * difficulty * rng.random()) if difficulty > 0 else 0,
    }


def _polygon(kind: str, cx: float, cy: float, size: float) -> list[tuple[float, float]]:
    h = size / 2
    if kind == "triangle":
        return [(cx, cy - h), (cx + h, cy + h), (cx - h, cy + h)]
    # star: 5 outer points on radius h, 5 inner on 0.42 h
    pts = []
    for k in range(10):
        r = h if k % 2 == 0 else 0.42 * h
        a = -np.pi / 2 + k * np.pi / 5
        pts.append((cx + r * np.cos(a), cy + r * np.sin(a)))
    return pts


def render_scene(spec: dict[str, Any]) -> Image.Image:
    """Draw a scene spec; the spec is attached as ``image.info["eva_scene"]``."""
    img = Image.new("RGB", (spec["width"], spec["height"]), (248, 248, 246))
    draw = ImageDraw.Draw(img)
    for s in spec["shapes"]:
        fill = COLOURS[s["color"]]
        x0, y0, x1, y1 = shape_box(s)
        if s["shape"] == "square":
            draw.rectangle([x0, y0, x1, y1], fill=fill)
        elif s["shape"] == "circle":
            draw.ellipse([x0, y0, x1, y1], fill=fill)
        else:
            draw.polygon(_polygon(s["shape"], s["cx"], s["cy"], s["size"]), fill=fill)
        lx0, ly0, _, _ = label_box(s)
        bx0, by0, _, _ = draw.textbbox((0, 0), s["label"], font=_font(s["font"]))
        ink = (150, 150, 150) if s["grey"] else (20, 20, 20)
        draw.text((lx0 - bx0, ly0 - by0), s["label"], fill=ink, font=_font(s["font"]))
    for d in spec["distractors"]:
        draw.text((d["x"], d["y"]), d["text"], fill=(60, 60, 60), font=_font(d["font"]))
    if spec.get("blur", 0) > 0:
        img = img.filter(ImageFilter.GaussianBlur(spec["blur"]))
    if spec.get("jpeg", 0):
        buf = io.BytesIO()
        img.save(buf, "JPEG", quality=int(spec["jpeg"]))
        img = Image.open(buf).convert("RGB")
    img.info["eva_scene"] = spec
    return img


def scene_of(image: Any) -> dict[str, Any] | None:
    """The scene spec attached to a rendered image (None for any other image)."""
    info = getattr(image, "info", None) or {}
    spec = info.get("eva_scene")
    return spec if isinstance(spec, dict) else None
