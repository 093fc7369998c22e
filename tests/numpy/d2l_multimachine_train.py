"""The training script of d2l's "Multi-Machine Training" chapter (MXNet edition), run by
test_d2l_multi_machine.py with `import minigluon as mx` in place of mxnet.

Kept as written in the chapter: the imports and npx.set_np(), kv.create('dist'),
SplitBatchSampler, Residual and resnet18 with F.npx.relu, hybridize(), and train() with
its loop body. Replaced, since the d2l package is not available here: d2l.try_gpu() by
mx.cpu(), the CIFAR-10 folders and transforms by random 3x32x32 images, and
d2l.evaluate_accuracy_gpu by the few lines it runs (evaluate_accuracy_gpu below).
Run with MINIGLUON_D2L_SAMPLES=N for N training images (default 8: two steps of 4).
"""
from __future__ import print_function
import collections, math, os, random, shutil, sys, time
import json
import numpy as onp    # real NumPy, for the random stand-in data
import minigluon as mx
from minigluon import autograd, gluon, kv, init, np, npx
from minigluon.gluon.model_zoo import vision
from minigluon.gluon import nn

npx.set_np()

train_data_size = int(os.environ.get("MINIGLUON_D2L_SAMPLES", "8"))
batch_size = 4


def random_image_dataset(n, seed):
    """n random float32 images (3x32x32, already "normalized") with labels in 0..9."""
    rng = onp.random.default_rng(seed)
    images = rng.standard_normal((n, 3, 32, 32)).astype("float32")
    labels = rng.integers(0, 10, n)
    return gluon.data.ArrayDataset(images, labels)


store = kv.create('dist')


## Step 1: Define how to split a batch for multimachine training
class SplitBatchSampler(gluon.data.sampler.Sampler):

    def __init__(self, length, batch_size, num_parts=1, part_index=0, last_batch='keep'):
        self.part_len = length // num_parts
        self._batch_size = batch_size
        self.start = self.part_len * part_index
        self.end = self.start + self.part_len
        self._last_batch = last_batch
        self._prev = []

    def __iter__(self):
        indices = list(range(self.start, self.end))
        random.shuffle(indices)
        batch, self._prev = self._prev, []
        for i in indices:
            batch.append(i)
            if len(batch) == self._batch_size:
                yield batch
                batch = []
        if batch:
            if self._last_batch == 'keep':
                yield batch
            elif self._last_batch == 'discard':
                return
            elif self._last_batch == 'rollover':
                self._prev = batch
            else:
                raise ValueError(
                    "last_batch must be one of 'keep', 'discard', or 'rollover', " \
                    "but got %s"%self._last_batch)

    def __len__(self):
        if self._last_batch == 'keep':
            return (len(self._sampler) + self._batch_size - 1) // self._batch_size
        if self._last_batch == 'discard':
            return len(self._sampler) // self._batch_size
        if self._last_batch == 'rollover':
            return (len(self._prev) + len(self._sampler)) // self._batch_size
        raise ValueError(
            "last_batch must be one of 'keep', 'discard', or 'rollover', " \
            "but got %s"%self._last_batch)


## Step 2: Create and build the training/test dataset
train_ds, test_ds = random_image_dataset(train_data_size, 0), random_image_dataset(4, 1)

train_iter = gluon.data.DataLoader(
    train_ds,
    batch_sampler=SplitBatchSampler(train_data_size, batch_size, store.num_workers, store.rank, last_batch='keep'),
)

test_iter = gluon.data.DataLoader(
    test_ds, batch_size, shuffle=False,
)


## Step 3: Define and initial Resnet
class Residual(nn.HybridBlock):
    def __init__(self, num_channels, use_1x1conv=False, strides=1, **kwargs):
        super(Residual, self).__init__(**kwargs)
        self.conv1 = nn.Conv2D(num_channels, kernel_size=3, padding=1,
                               strides=strides)
        self.conv2 = nn.Conv2D(num_channels, kernel_size=3, padding=1)
        if use_1x1conv:
            self.conv3 = nn.Conv2D(num_channels, kernel_size=1,
                                   strides=strides)
        else:
            self.conv3 = None
        self.bn1 = nn.BatchNorm()
        self.bn2 = nn.BatchNorm()

    def hybrid_forward(self, F, X):
        Y = F.npx.relu(self.bn1(self.conv1(X)))
        Y = self.bn2(self.conv2(Y))
        if self.conv3:
            X = self.conv3(X)
        return F.npx.relu(Y + X)


def resnet18(num_classes):
    net = nn.HybridSequential()
    net.add(nn.Conv2D(64, kernel_size=3, strides=1, padding=1),
            nn.BatchNorm(), nn.Activation('relu'))

    def resnet_block(num_channels, num_residuals, first_block=False):
        blk = nn.HybridSequential()
        for i in range(num_residuals):
            if i == 0 and not first_block:
                blk.add(Residual(num_channels, use_1x1conv=True, strides=2))
            else:
                blk.add(Residual(num_channels))
        return blk

    net.add(resnet_block(64, 2, first_block=True),
            resnet_block(128, 2),
            resnet_block(256, 2),
            resnet_block(512, 2))
    net.add(nn.GlobalAvgPool2D(), nn.Dense(num_classes))
    return net


def evaluate_accuracy_gpu(net, data_iter, device=None):
    """d2l.evaluate_accuracy_gpu and d2l.accuracy, inlined."""
    if not device:
        device = list(net.collect_params().values())[0].list_ctx()[0]
    correct, total = 0.0, 0
    for X, y in data_iter:
        X, y = X.as_in_ctx(device), y.as_in_ctx(device)
        y_hat = net(X)
        if len(y_hat.shape) > 1 and y_hat.shape[1] > 1:
            y_hat = y_hat.argmax(axis=1)
        cmp = y_hat.astype(y.dtype) == y
        correct += float(cmp.astype(y.dtype).sum())
        total += y.size
    return correct / total


## Step 4: Define the training function
def train(net, train_iter, test_iter, num_epochs, lr, wd, ctx, lr_period,
          lr_decay):

    # Use SGD optimizer. Ask trainer to use the distributor kv store.
    trainer = gluon.Trainer(net.collect_params(), 'sgd',
                            {'learning_rate': lr, 'momentum': 0.9, 'wd': wd},
                            kvstore=store)
    loss = gluon.loss.SoftmaxCrossEntropyLoss()

    for epoch in range(num_epochs):
        train_l_sum, train_acc_sum, n, start = 0.0, 0.0, 0, time.time()
        if epoch > 0 and epoch % lr_period == 0:
            trainer.set_learning_rate(trainer.learning_rate * lr_decay)
        for X, y in train_iter:
            y = y.astype('float32').as_in_context(ctx)
            with autograd.record():
                y_hat = net(X.as_in_context(ctx))
                l = loss(y_hat, y).sum()
            l.backward()
            trainer.step(batch_size)
            train_l_sum += float(l)
            train_acc_sum += float((y_hat.argmax(axis=1) == y).sum())
            n += y.size
        time_s = "time %.2f sec" % (time.time() - start)
        test_acc = evaluate_accuracy_gpu(net, test_iter)
        epoch_s = ("epoch %d, loss %f, train acc %f, test acc %f" %
                   (epoch + 1, train_l_sum / n, train_acc_sum / n, test_acc))
        print(epoch_s + time_s + ', lr ' + str(trainer.learning_rate))
        sys.stdout.flush()
    return dict(types=[type(v).__name__ for v in (X, y, y_hat, l)], loss_shape=list(l.shape),
                n=n, loss=train_l_sum / n, train_acc=train_acc_sum / n, test_acc=test_acc)


if __name__ == '__main__':
    ctx = mx.cpu()
    num_epochs, lr, wd = 1, 0.1, 5e-4
    lr_period, lr_decay  = 80, 0.1

    num_classes = 10
    net = resnet18(num_classes)
    net.collect_params().initialize(mx.init.Xavier(), ctx=ctx)
    net.hybridize()
    seen = train(net, train_iter, test_iter, num_epochs, lr, wd, ctx, lr_period, lr_decay)
    seen.update(kids=[p.pid for p in store._node.cluster.procs], kv_type=store.type,
                weight_type=type(net[0].weight.data()).__name__)
    print("RESULT " + json.dumps(seen), flush=True)
