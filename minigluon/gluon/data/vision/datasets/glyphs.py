"""A tiny renderer of handwriting-like digits: each digit is a few strokes (polylines) in a
unit box, drawn on a 28x28 grid under a random affine map with random stroke width,
end-point jitter, brightness and noise. `SyntheticDigits` draws its images with it."""
import numpy as np

__all__ = ["render_digits"]


def _arc(cx, cy, rx, ry, start, stop, n):
    """Points along an elliptic arc; angles in degrees, 0 = right, 90 = down."""
    t = np.radians(np.linspace(start, stop, n + 1))
    return list(zip(cx + rx * np.cos(t), cy + ry * np.sin(t)))


# Each digit: strokes (polylines) in a unit box, x to the right and y downwards.
_GLYPHS = {
    0: [_arc(0.5, 0.5, 0.42, 0.5, 0, 360, 12)],
    1: [[(0.3, 0.2), (0.55, 0.0), (0.55, 1.0)]],
    2: [_arc(0.5, 0.3, 0.42, 0.3, 180, 380, 6) + [(0.0, 1.0), (1.0, 1.0)]],
    3: [_arc(0.5, 0.27, 0.38, 0.27, 200, 450, 6), _arc(0.5, 0.73, 0.45, 0.27, 270, 520, 6)],
    4: [[(0.7, 1.0), (0.7, 0.0), (0.0, 0.68), (1.0, 0.68)]],
    5: [[(0.9, 0.0), (0.15, 0.0), (0.13, 0.5)] + _arc(0.5, 0.68, 0.45, 0.32, 215, 530, 7)],
    6: [_arc(0.58, 0.62, 0.45, 0.62, 290, 160, 6), _arc(0.5, 0.72, 0.42, 0.28, 0, 360, 10)],
    7: [[(0.0, 0.0), (1.0, 0.0), (0.35, 1.0)]],
    8: [_arc(0.5, 0.26, 0.36, 0.26, 0, 360, 10), _arc(0.5, 0.73, 0.44, 0.27, 0, 360, 10)],
    9: [_arc(0.5, 0.3, 0.42, 0.3, 0, 360, 10), [(0.92, 0.3), (0.85, 0.7), (0.6, 1.0)]],
}


def _glyph_segments():
    """(10, S, 2, 2) segment end points per digit, padded by repeating the first segment."""
    per_digit = []
    for digit in range(10):
        segs = [(a, b) for stroke in _GLYPHS[digit] for a, b in zip(stroke[:-1], stroke[1:])]
        per_digit.append(segs)
    longest = max(len(s) for s in per_digit)
    return np.array([s + [s[0]] * (longest - len(s)) for s in per_digit], np.float32)


def render_digits(labels, rng):
    """Draw (N, 28, 28) uint8 digits: glyph strokes under a random affine map, with random
    stroke width, end-point jitter, brightness and noise."""
    n = len(labels)
    segs = _glyph_segments()[labels] + rng.normal(0, 0.025, (n, 1, 2, 2)).astype(np.float32)
    segs = segs + rng.normal(0, 0.015, segs.shape).astype(np.float32)
    angle = rng.uniform(-0.25, 0.25, n)
    shear = rng.uniform(-0.3, 0.3, n)
    scale = rng.uniform(0.8, 1.1, n)
    aspect = rng.uniform(0.75, 1.25, n)
    mats = np.empty((n, 2, 2))
    cos, sin = np.cos(angle), np.sin(angle)
    mats[:, 0, 0], mats[:, 0, 1] = cos * scale * aspect * 12, (-sin + shear * cos) * scale * 19
    mats[:, 1, 0], mats[:, 1, 1] = sin * scale * aspect * 12, (cos + shear * sin) * scale * 19
    shift = 13.5 + rng.uniform(-2, 2, (n, 1, 1, 2))
    pts = np.einsum("nij,nsej->nsei", mats, segs - 0.5).astype(np.float32) + shift
    half_width = rng.uniform(0.9, 1.9, (n, 1)).astype(np.float32)
    peak = rng.uniform(0.7, 1.0, (n, 1)).astype(np.float32)
    yy, xx = np.mgrid[0:28, 0:28].astype(np.float32)
    grid = np.stack([xx.ravel(), yy.ravel()], axis=1)               # (784, 2) as (x, y)
    out = np.empty((n, 784), np.uint8)
    for lo in range(0, n, 128):
        dist = _segment_distance(grid, pts[lo:lo + 128])
        ink = np.clip(half_width[lo:lo + 128] + 0.5 - dist, 0, 1) * peak[lo:lo + 128]
        noisy = ink * 255 + rng.normal(0, 6, ink.shape)
        out[lo:lo + 128] = np.clip(noisy, 0, 255).astype(np.uint8)
    return out.reshape(n, 28, 28)


def _segment_distance(grid, pts):
    """Distance (n, P) from each grid point to the nearest of the n x S segments."""
    a, b = pts[:, :, 0, None, :], pts[:, :, 1, None, :]              # (n, S, 1, 2)
    ab = b - a
    px, py = grid[:, 0] - a[..., 0], grid[:, 1] - a[..., 1]          # (n, S, P)
    inv = 1.0 / np.maximum((ab ** 2).sum(-1), 1e-6)
    t = np.clip((px * ab[..., 0] + py * ab[..., 1]) * inv, 0, 1)
    dx, dy = px - t * ab[..., 0], py - t * ab[..., 1]
    return np.sqrt((dx * dx + dy * dy).min(axis=1))
