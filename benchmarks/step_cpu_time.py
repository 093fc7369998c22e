"""CPU seconds of one hybridized training step (LeNet batch 32, CIFAR ResNet-18 batch 16),
median over steps: a measure of what a change costs that a shared, loaded machine does not
blur as much as wall-clock time (a process waiting for a core spends no CPU time). Run it
with one BLAS thread so that the figure is the work done, and compare two checkouts side by
side with compare_trees.py:

    OPENBLAS_NUM_THREADS=1 python benchmarks/compare_trees.py OLD NEW step_cpu_time.py 4

Prints ONE JSON line: {"lenet_step_cpu_s": ..., "resnet18_step_cpu_s": ...}.
"""
import json
import time

import numpy as np

import minigluon as mx
from minigluon import autograd, gluon, nd
from minigluon.gluon.model_zoo import vision


def step_cpu_seconds(net, batch_shape, steps):
    rng = np.random.default_rng(0)
    x = nd.array(rng.random(batch_shape, dtype=np.float32))
    y = nd.array(np.arange(batch_shape[0]) % 10)
    net.initialize(mx.init.Xavier())
    net.hybridize()
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.01})
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()

    def step():
        with autograd.record():
            loss = loss_fn(net(x), y)
        loss.backward()
        trainer.step(batch_shape[0])
    step()
    step()                       # the first calls trace and allocate
    times = []
    for _ in range(steps):
        start = time.process_time()
        step()
        times.append(time.process_time() - start)
    return sorted(times)[steps // 2]


if __name__ == "__main__":
    print(json.dumps({
        "lenet_step_cpu_s": step_cpu_seconds(vision.lenet(classes=10), (32, 1, 28, 28), 15),
        "resnet18_step_cpu_s": step_cpu_seconds(vision.get_model("cifar_resnet18", classes=10),
                                                (16, 3, 32, 32), 3)}))
