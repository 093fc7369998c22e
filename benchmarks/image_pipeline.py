"""An ImageFolder of JPEG files through RandomResizedCrop(224), a random left-right flip,
ToTensor and Normalize in a DataLoader with 2 worker processes, batch 32: minigluon's
`gluon.data.vision.ImageFolderDataset` + `DataLoader` against torchvision's `ImageFolder`
+ torch's `DataLoader` (Pillow underneath) in the same run, on the same files.

The benchmark writes the folder first (2,000 photograph-like JPEGs, 10 classes, sides of
320-500 px, quality 90) in a temporary directory it removes at the end. The two loaders
take turns in each round; a round starts a fresh shuffled pass, reads one batch untimed
(worker start-up) and times `--batches` more. Rates are medians over rounds, the ratio the
median of the per-round ratios. Prints ONE JSON line:

    python benchmarks/image_pipeline.py --torch-python /tmp/tvenv/bin/python
"""
import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (TorchClient, pass_timer, interleaved_rounds, paired, report,  # noqa: E402
                     torch_python)
from image_codec_choice import photo_like  # noqa: E402

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def make_folder(root, count, classes, seed=0):
    """`count` JPEG files in `classes` class folders; sides drawn from 320-500 px."""
    from minigluon import image
    rng = np.random.default_rng(seed)
    for c in range(classes):
        os.makedirs(os.path.join(root, f"class{c:02d}"), exist_ok=True)
    for i in range(count):
        h, w = (int(s) for s in rng.integers(320, 501, 2))
        path = os.path.join(root, f"class{i % classes:02d}", f"img{i:05d}.jpg")
        with open(path, "wb") as out:
            out.write(image.imencode(photo_like(rng, h, w), ".jpg", quality=90))


def minigluon_runner(root, batch, workers):
    import minigluon as mx
    from minigluon.gluon.data import DataLoader
    from minigluon.gluon.data.vision import ImageFolderDataset, transforms
    mx.random.seed(0)
    pipeline = transforms.Compose([
        transforms.RandomResizedCrop(224), transforms.RandomFlipLeftRight(),
        transforms.ToTensor(), transforms.Normalize(MEAN, STD)])
    dataset = ImageFolderDataset(root).transform_first(pipeline)
    loader = DataLoader(dataset, batch, shuffle=True, last_batch="discard",
                        num_workers=workers)
    return pass_timer(lambda: iter(loader))


def torch_runner(root, batch, workers):
    import torch
    from torchvision import datasets, transforms
    torch.manual_seed(0)
    pipeline = transforms.Compose([
        transforms.RandomResizedCrop(224), transforms.RandomHorizontalFlip(),
        transforms.ToTensor(), transforms.Normalize(MEAN, STD)])
    dataset = datasets.ImageFolder(root, pipeline)
    loader = torch.utils.data.DataLoader(dataset, batch, shuffle=True, drop_last=True,
                                         num_workers=workers)
    return pass_timer(lambda: iter(loader))


def torch_worker(args):
    """The torch half: report versions, then answer each 'n' line with seconds n took."""
    import json

    import torch
    import torchvision
    run = torch_runner(args.root, args.batch, args.workers)
    print(json.dumps({"version": torch.__version__, "torchvision": torchvision.__version__}),
          flush=True)
    for line in sys.stdin:
        print(run(int(line)), flush=True)


def measure(args, root):
    runners = {"minigluon": minigluon_runner(root, args.batch, args.workers)}
    python, note = torch_python(args.torch_python)
    client = None
    if python:
        client = TorchClient(python, __file__, ["--root", root, "--batch", str(args.batch),
                                                "--workers", str(args.workers)])
        runners["torch"] = client.run
    try:
        rounds = interleaved_rounds(runners, args.batch, args.rounds, args.batches, 2)
    finally:
        if client:
            client.close()
    return rounds, (client.info if client else None), note


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", type=int, default=2000)
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--batches", type=int, default=20, help="timed batches per round")
    ap.add_argument("--torch-python", default=None)
    ap.add_argument("--root", default=None, help="(worker only)")
    ap.add_argument("--torch-worker", action="store_true", help="(internal)")
    args = ap.parse_args()
    if args.torch_worker:
        return torch_worker(args)
    root = tempfile.mkdtemp(prefix="image_pipeline_")
    try:
        start = time.perf_counter()
        make_folder(root, args.images, args.classes)
        made_s = time.perf_counter() - start
        rounds, info, note = measure(args, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    rates = {name: statistics.median(r) for name, r in rounds.items()}
    has_torch = "torch" in rates
    report({"benchmark": "image_pipeline", "images": args.images, "batch": args.batch,
            "workers": args.workers, "rounds": args.rounds, "batches_per_round": args.batches,
            "cpus": len(os.sched_getaffinity(0)), "folder_made_s": round(made_s, 1),
            "minigluon_images_per_s": round(rates["minigluon"], 1),
            "torch_images_per_s": round(rates["torch"], 1) if has_torch else None,
            "ratio": round(paired(rounds, "minigluon", "torch")[0], 3) if has_torch else None,
            "faster_in_rounds": (f"{paired(rounds, 'minigluon', 'torch')[1]}/{args.rounds}"
                                 if has_torch else None),
            "rounds_images_per_s": {k: [round(r, 1) for r in v] for k, v in rounds.items()},
            "torch_version": info["version"] if info else None,
            "torchvision_version": info["torchvision"] if info else None,
            "loadavg_1min": round(os.getloadavg()[0], 2), "note": note})


if __name__ == "__main__":
    main()
