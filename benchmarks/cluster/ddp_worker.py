"""One worker of the links benchmark's PyTorch jobs: the same models as the Gluon jobs
(benchmarks/zoo_models.py's twins: LeNet, d2l's CIFAR ResNet-18), the same synthetic
batch and SGD step, alone (compute only) or wrapped in DistributedDataParallel over gloo.

    MASTER_ADDR=10.77.0.14 MASTER_PORT=29500 RANK=0 WORLD_SIZE=2 \\
        python ddp_worker.py --model resnet18 --ddp --warmup 3 --steps 10 --marks
"""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))         # benchmarks/: zoo_models
from window import measure, say  # noqa: E402

SPECS = {"lenet": ("lenet", (1, 28, 28)), "resnet18": ("cifar_resnet18", (3, 32, 32))}
CONNECT_WITHIN = 120        # seconds for the gloo group to form


def parse():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", choices=sorted(SPECS), required=True)
    parser.add_argument("--ddp", action="store_true", help="DDP over gloo (env:// init)")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--marks", action="store_true")
    return parser.parse_args()


def main():
    import datetime
    import torch
    from zoo_models import torch_net
    args = parse()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    name, shape = SPECS[args.model]
    net = torch_net(name, {"classes": 10})
    rank = 0
    if args.ddp:
        torch.distributed.init_process_group(
            "gloo", timeout=datetime.timedelta(seconds=CONNECT_WITHIN))
        rank = torch.distributed.get_rank()
        net = torch.nn.parallel.DistributedDataParallel(net)
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    gen = torch.Generator().manual_seed(rank)
    data = torch.randn(args.batch, *shape, generator=gen)
    label = torch.randint(0, 10, (args.batch,), generator=gen)

    def step():
        opt.zero_grad()
        loss_fn(net(data), label).backward()
        opt.step()
    seconds = measure(step, args.warmup, args.steps, args.marks)
    params = sum(p.numel() for p in net.parameters())
    if args.ddp:
        torch.distributed.destroy_process_group()
    say(rank=rank, step_s=seconds, params=params, framework="pytorch-ddp",
        version=torch.__version__)


if __name__ == "__main__":
    main()
