"""Shared test fixtures for eo-wm: the tiny model configuration the unit tests build on."""

from eo_wm import EOWMConfig

TC, TF, HW = 2, 3, 8


def tiny_config(depth: int = 2, **overrides) -> EOWMConfig:
    """A 16-wide EO-WM on 8x8 frames, 2 context and 3 future steps, 4 bands, 4 stresses."""
    base = dict(
        in_channels=4,
        static_channels=3,
        n_weather=3,
        t_context=TC,
        t_future=TF,
        image_size=HW,
        patch_size=4,
        hidden=16,
        depth=depth,
        heads=2,
        n_stress=4,
    )
    return EOWMConfig(**{**base, **overrides})
