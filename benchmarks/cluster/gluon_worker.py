"""One process of the links benchmark's Gluon jobs, in minigluon or in MXNet 1.x: the
same training step (synthetic batch, softmax cross-entropy, SGD with momentum), run
without a kvstore (compute only) or with dist_sync, optionally 2-bit compressed.

    DMLC_ROLE=worker ... python gluon_worker.py --framework mxnet --model resnet18 \\
        --kvstore dist_sync --compression 2bit --warmup 3 --steps 10 --marks

With DMLC_ROLE=scheduler or server, importing the framework runs that role and exits
(both frameworks do this). A worker prints one JSON line at its end: its step time.
"""
import argparse
import cProfile
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from harness import top  # noqa: E402  (the profile's warm-up steps are in it too)
from window import measure, say  # noqa: E402

SHAPES = {"lenet": (1, 28, 28), "resnet18": (3, 32, 32)}


def parse():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--framework", choices=("minigluon", "mxnet"), required=True)
    parser.add_argument("--model", choices=sorted(SHAPES), required=True)
    parser.add_argument("--kvstore", choices=("none", "dist_sync"), default="none")
    parser.add_argument("--compression", choices=("none", "2bit"), default="none")
    parser.add_argument("--updates", choices=("servers", "workers"), default="servers",
                        help="where the optimizer runs (workers: update_on_kvstore=False)")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--marks", action="store_true",
                        help="print marks around the timed steps and wait for 'go'")
    parser.add_argument("--profile", type=int, default=0, metavar="N",
                        help="cProfile the steps, timed by this thread's CPU clock; report "
                             "the N functions of most own CPU time")
    parser.add_argument("--profile-out", metavar="PATH",
                        help="as a minigluon server or scheduler: profile the whole run "
                             "and write those lines to PATH (JSON)")
    return parser.parse_args()


def framework(name):
    """(mx, the model builders {name: f(classes)})."""
    if name == "mxnet":
        import mxnet as mx
        import mxnet_models
        return mx, {"lenet": mxnet_models.lenet, "resnet18": mxnet_models.cifar_resnet18}
    import minigluon as mx
    from minigluon.gluon.model_zoo import vision
    return mx, {"lenet": vision.lenet, "resnet18": vision.cifar_resnet18}


def make_kvstore(mx, args):
    if args.kvstore == "none":
        return None, 0
    kv = mx.kv.create(args.kvstore)
    if args.compression != "none":
        kv.set_gradient_compression({"type": args.compression, "threshold": 0.5})
    return kv, kv.rank


def serve_profiled(args):
    """Serve the role of DMLC_ROLE (importing the framework does) under cProfile; write
    its top functions to --profile-out, then exit with the role's status."""
    profiler, status = cProfile.Profile(time.thread_time), 0
    profiler.enable()
    try:
        framework(args.framework)
    except SystemExit as done:
        status = done.code
    finally:
        profiler.disable()
        with open(args.profile_out, "w") as out:
            json.dump(top(profiler, args.profile), out)
    sys.exit(status)


def main():
    args = parse()
    if args.profile_out and os.environ.get("DMLC_ROLE") in ("server", "scheduler"):
        serve_profiled(args)
    mx, models = framework(args.framework)
    kv, rank = make_kvstore(mx, args)
    mx.random.seed(0)
    net = models[args.model](classes=10)
    net.initialize(mx.init.Xavier())
    net.hybridize()
    trainer = mx.gluon.Trainer(net.collect_params(), "sgd",
                               {"learning_rate": 0.01, "momentum": 0.9}, kvstore=kv,
                               update_on_kvstore=False if args.updates == "workers" else None)
    loss_fn = mx.gluon.loss.SoftmaxCrossEntropyLoss()
    rng = np.random.default_rng(rank)
    data = mx.nd.array(rng.standard_normal((args.batch, *SHAPES[args.model])))
    label = mx.nd.array(rng.integers(0, 10, args.batch))

    def step():
        with mx.autograd.record():
            loss = loss_fn(net(data), label)
        loss.backward()
        trainer.step(args.batch)
    profiler = cProfile.Profile(time.thread_time) if args.profile else None
    timed = step if profiler is None else lambda: profiler.runcall(step)
    seconds = measure(timed, args.warmup, args.steps, args.marks, sync=mx.nd.waitall)
    params = sum(int(np.prod(p.shape)) for p in net.collect_params().values()
                 if p.grad_req != "null")       # trained ones: BatchNorm's statistics aside
    say(rank=rank, step_s=seconds, params=params, framework=args.framework,
        version=mx.__version__, **({"profile": top(profiler, args.profile)} if profiler
                                   else {}))


if __name__ == "__main__":
    main()
