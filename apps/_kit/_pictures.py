"""The pictures the sample apps feed their models: generated, deterministic, no camera needed.

A face detector finds nothing in noise, and a segmentation of noise saturates, so the
samples draw what their models are made for: a head and shoulders (skin-toned face with
hair, eyes, brows, nose and mouth, a torso below) over a soft background. MediaPipe's
short-range face detector scores such a face above 0.8 and a picture without one below
0.3; its face landmark model is sure of a face in each gallery photo (``tests/test_apps_kit.py``
holds both to that).

- :func:`camera_frame`: the camera's preview. The person sways in a one-second loop, so
  frame ``i`` and frame ``i + FRAME_LOOP`` are the same picture (the app computes each
  frame's CPU reference once).
- :func:`gallery_photo`: photo ``i`` of the gallery, cropped around the face: a person of
  that photo's size, place, skin tone and clothes over that photo's background.

Every picture is NHWC float32 in [-1, 1], as MediaPipe's float models take it.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["FRAME_LOOP", "camera_frame", "gallery_photo", "portrait"]

#: The camera's frames repeat after this many (one second at 30 fps).
FRAME_LOOP = 30


def _ellipse(y: np.ndarray, x: np.ndarray, cy: float, cx: float, ry: float, rx: float) -> np.ndarray:
    return ((y - cy) / ry) ** 2 + ((x - cx) / rx) ** 2 < 1


def portrait(height: int, width: int, *, cx: float, cy: float, scale: float, seed: int) -> np.ndarray:
    """A person whose face (of height ``2 * scale``, in units of the picture's height) is
    centred at (``cx``, ``cy``), as a [1, height, width, 3] float32 picture in [-1, 1].
    ``seed`` picks the background, the skin tone, the hair, the clothes and the noise."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width] / height
    sky, ground = rng.uniform(0.25, 0.75, 3), rng.uniform(0.1, 0.5, 3)
    image = sky + (ground - sky) * y[..., None]
    for _ in range(3):  # soft shapes behind the person
        by, bx, r = rng.uniform(0, 1), rng.uniform(0, width / height), rng.uniform(0.05, 0.2)
        image += 0.25 * rng.uniform(-1, 1, 3) * np.exp(-((y - by) ** 2 + (x - bx) ** 2) / (2 * r * r))[..., None]
    s = scale
    skin = np.array([0.87, 0.68, 0.55]) * rng.uniform(0.55, 1.1)
    hair = rng.uniform(0.05, 0.35, 3)
    image[_ellipse(y, x, cy + 2.6 * s, cx, 1.6 * s, 1.9 * s)] = rng.uniform(0.1, 0.9, 3)  # shoulders
    image[(np.abs(x - cx) < 0.3 * s) & (y > cy) & (y < cy + 1.3 * s)] = skin * 0.9  # neck
    image[_ellipse(y, x, cy - 0.05 * s, cx, 1.02 * s, 0.82 * s) & (y < cy - 0.55 * s)] = hair
    image[_ellipse(y, x, cy, cx, s, 0.78 * s) & ~(_ellipse(y, x, cy - 0.05 * s, cx, 1.02 * s, 0.82 * s)
                                                  & (y < cy - 0.55 * s))] = skin
    for side in (-1, 1):
        ex = cx + side * 0.33 * s
        image[_ellipse(y, x, cy - 0.15 * s, ex, 0.07 * s, 0.12 * s)] = (0.1, 0.08, 0.08)
        image[(np.abs(x - ex) < 0.16 * s) & (np.abs(y - cy + 0.32 * s) < 0.03 * s)] = hair
    image[_ellipse(y, x, cy + 0.12 * s, cx, 0.15 * s, 0.07 * s)] = skin * 0.92
    image[_ellipse(y, x, cy + 0.45 * s, cx, 0.07 * s, 0.3 * s)] = (0.6, 0.25, 0.25)
    image += 0.02 * rng.standard_normal(image.shape)
    return (np.clip(image, 0, 1) * 2 - 1)[None].astype(np.float32)


def camera_frame(index: int, shape: tuple[int, ...]) -> np.ndarray:
    """Frame ``index`` of the camera's preview, for a model input of ``shape`` (NHWC)."""
    _, h, w, _ = shape
    phase = 2 * math.pi * (index % FRAME_LOOP) / FRAME_LOOP
    return portrait(h, w, cx=w / h * (0.5 + 0.15 * math.sin(phase)), cy=0.5 + 0.05 * math.cos(phase),
                    scale=0.22, seed=index % FRAME_LOOP)


def gallery_photo(index: int, shape: tuple[int, ...]) -> np.ndarray:
    """Photo ``index`` of the gallery, cropped around its face (as a face landmark model
    takes it), for a model input of ``shape`` (NHWC)."""
    _, h, w, _ = shape
    rng = np.random.default_rng(1000 + index)
    return portrait(h, w, cx=w / h * rng.uniform(0.42, 0.58), cy=rng.uniform(0.42, 0.55), scale=rng.uniform(0.3, 0.4),
                    seed=1000 + index)
