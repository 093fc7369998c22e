"""Decode + resize throughput of Pillow against OpenCV (opencv-python-headless), one
thread, on JPEG and PNG photographs-like images: the measurement that chose `mx.image`'s
library (docs/images.md).

Each library decodes the same file bytes to an RGB array and resizes it to 224x224
bilinear, as `mx.image.imdecode` + `imresize` do; rounds alternate between the libraries
and the figure is the median images/s over rounds. Either library may be missing (the
result says so); both can be put on the path for one run without installing them:

    pip install --target /tmp/imgsite Pillow opencv-python-headless
    PYTHONPATH=/tmp/imgsite python benchmarks/image_codec_choice.py

Prints ONE JSON line.
"""
import argparse
import io
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import report  # noqa: E402


_NOISE = np.random.default_rng(1234).normal(0, 6, (1024, 1024, 3)).astype(np.float32)


def photo_like(rng, h, w):
    """Smooth colour gradients, a few edges and mild noise: compresses like a photograph
    (pure noise would make JPEG and PNG files unrealistically large and slow). At most
    1024x1024."""
    y, x = np.arange(h, dtype=np.float32)[:, None], np.arange(w, dtype=np.float32)[None, :]
    img = np.empty((h, w, 3), np.float32)
    for c in range(3):
        fy, fx, phase = rng.uniform(0.005, 0.05, 2).tolist() + [rng.uniform(0, 6.3)]
        # sin(a + b) from its 1-D parts: two outer products instead of a 2-D sin
        img[:, :, c] = 128 + 90 * (np.sin(fy * y) * np.cos(fx * x + phase)
                                   + np.cos(fy * y) * np.sin(fx * x + phase))
    for _ in range(4):    # a few flat rectangles give sharp edges
        y0, x0 = rng.integers(0, h - 20), rng.integers(0, w - 20)
        img[y0:y0 + rng.integers(10, h // 2), x0:x0 + rng.integers(10, w // 2)] = \
            rng.uniform(0, 255, 3)
    y0, x0 = rng.integers(0, 1024 - h + 1), rng.integers(0, 1024 - w + 1)
    img += _NOISE[y0:y0 + h, x0:x0 + w]     # a window of one noise field: fast to make
    return np.clip(img, 0, 255).astype(np.uint8)


def encode_all(images, fmt):
    import PIL.Image
    out = []
    for img in images:
        buf = io.BytesIO()
        PIL.Image.fromarray(img).save(buf, fmt, **({"quality": 90} if fmt == "JPEG" else {}))
        out.append(buf.getvalue())
    return out


def pillow_step(size):
    import PIL.Image

    def step(buf):
        with PIL.Image.open(io.BytesIO(buf)) as im:
            return np.asarray(im.convert("RGB").resize(size, PIL.Image.BILINEAR))
    return step


def opencv_step(size):
    import cv2
    cv2.setNumThreads(1)

    def step(buf):
        bgr = cv2.imdecode(np.frombuffer(buf, np.uint8), cv2.IMREAD_COLOR)
        return cv2.resize(cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB), size,
                          interpolation=cv2.INTER_LINEAR)
    return step


def available():
    """name -> step factory for each importable library, and name -> version."""
    steps, versions = {}, {}
    try:
        import PIL
        steps["pillow"], versions["pillow"] = pillow_step, PIL.__version__
    except ImportError:
        pass
    try:
        import cv2
        steps["opencv"], versions["opencv"] = opencv_step, cv2.__version__
    except ImportError:
        pass
    return steps, versions


def rate(step, files):
    start = time.perf_counter()
    for buf in files:
        step(buf)
    return len(files) / (time.perf_counter() - start)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", type=int, default=60)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--width", type=int, default=500)
    ap.add_argument("--height", type=int, default=375)
    ap.add_argument("--size", type=int, default=224)
    args = ap.parse_args()
    factories, versions = available()
    if "pillow" not in factories:
        report({"benchmark": "image_codec_choice", "note": "Pillow is needed to make the files"})
        return
    rng = np.random.default_rng(0)
    images = [photo_like(rng, args.height, args.width) for _ in range(args.images)]
    files = {"jpeg": encode_all(images, "JPEG"), "png": encode_all(images, "PNG")}
    steps = {name: make((args.size, args.size)) for name, make in factories.items()}
    rates = {(lib, fmt): [] for lib in steps for fmt in files}
    for _ in range(args.rounds):
        for fmt, data in files.items():
            for lib, step in steps.items():
                rates[(lib, fmt)].append(rate(step, data))
    fields = {"benchmark": "image_codec_choice", "versions": versions,
              "image": f"{args.width}x{args.height}", "resize_to": args.size,
              "images": args.images, "rounds": args.rounds,
              "jpeg_kb": round(np.mean([len(b) for b in files["jpeg"]]) / 1024, 1),
              "png_kb": round(np.mean([len(b) for b in files["png"]]) / 1024, 1)}
    fields.update({f"{lib}_{fmt}_images_per_s": round(statistics.median(r), 1)
                   for (lib, fmt), r in rates.items()})
    fields["loadavg_1min"] = round(os.getloadavg()[0], 2)
    report(fields)


if __name__ == "__main__":
    main()
