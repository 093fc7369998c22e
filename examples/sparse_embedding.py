"""Click prediction with a row_sparse embedding table, as a parameter server trains it.

Synthetic click data (generated here from --seed): every sample names --fields feature ids
out of --rows, drawn from a power law (a few ids are very common, most are rare, as in
real click logs), and is clicked (label 1) with a probability set by a hidden weight per
id. The model sums the embeddings of a sample's ids and a Dense layer turns the sum into
a click logit (sigmoid cross-entropy loss).

The table is a row_sparse parameter (`stype='row_sparse'`, `grad_stype='row_sparse'`): it
lives in the kvstore; each step pulls only the rows of the batch (`row_sparse_data`),
pushes only their gradient, and the store's SGD updates only those rows. With --dense the
same model trains with a dense table and dense gradients: plain SGD (no momentum, no weight
decay) changes only the looked-up rows either way, so both end at the same loss, to float
rounding.

Each step takes one global batch of --batch-size samples; with W workers (a dist kvstore
under minigluon-launch) worker r trains on its W-th part of it, and the step is scaled by
the global batch, so a run on 1 or on W workers follows the same path. Every worker prints
one line per epoch with the loss over the whole data set, and the final one:

    python examples/sparse_embedding.py
    python examples/sparse_embedding.py --dense
    minigluon-launch -n 2 -s 2 python examples/sparse_embedding.py --kvstore dist_sync
"""
import argparse
import sys
import time

import numpy as np

import minigluon as mx
from minigluon import autograd, gluon, kv
from minigluon import telemetry


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kvstore", default="local", metavar="KVSTORE",
                    choices=("local", "device", "dist_sync", "dist_async", "dist_sync_device",
                             "dist_async_device", "dist"),
                    help="local, device, dist_sync, dist_async (default local; under "
                         "minigluon-launch use a dist one)")
    ap.add_argument("--rows", type=int, default=20000, help="rows of the embedding table")
    ap.add_argument("--dim", type=int, default=16, help="embedding width")
    ap.add_argument("--fields", type=int, default=8, help="feature ids per sample")
    ap.add_argument("--samples", type=int, default=8192, help="samples in the data set")
    ap.add_argument("--power", type=float, default=1.1,
                    help="power-law exponent of the id distribution (id popularity ~ "
                         "1/rank^power)")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=256,
                    help="global batch: samples per step over all workers")
    ap.add_argument("--lr", type=float, default=1.0, help="SGD learning rate")
    ap.add_argument("--max-batches", type=int, default=None,
                    help="at most N steps per epoch (smoke tests)")
    ap.add_argument("--dense", action="store_true",
                    help="train the dense twin: a dense table with dense gradients")
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    for name in ("rows", "dim", "fields", "samples", "epochs", "batch_size", "max_batches"):
        value = getattr(args, name)
        if value is not None and value < 1:
            ap.error(f"--{name.replace('_', '-')} must be at least 1, got {value}")
    if args.power <= 0 or args.lr <= 0:
        ap.error(f"--power and --lr must be positive, got --power {args.power} --lr "
                 f"{args.lr}")
    return args


# ---- data ------------------------------------------------------------------------------
def click_data(args):
    """(ids (samples, fields) int64, labels (samples,) float32): power-law ids, labels
    drawn from a hidden logistic model. Same seed, same data."""
    rng = np.random.default_rng(args.seed)
    popularity = 1.0 / np.arange(1, args.rows + 1) ** args.power
    # popular ids are scattered over the table, so every server's row range gets some
    order = rng.permutation(args.rows)
    ids = order[rng.choice(args.rows, size=(args.samples, args.fields),
                           p=popularity / popularity.sum())]
    hidden = rng.normal(0, 1.0, args.rows)
    logit = hidden[ids].sum(axis=1) / np.sqrt(args.fields) - 0.5
    labels = (rng.random(args.samples) < 1 / (1 + np.exp(-logit))).astype(np.float32)
    return ids.astype(np.int64), labels


def batches(num, batch_size, seed, epoch):
    """The sample indices of each global batch of an epoch (the same on every worker)."""
    order = np.random.default_rng([seed, epoch]).permutation(num)
    return [order[i:i + batch_size] for i in range(0, num - batch_size + 1, batch_size)]


# ---- model -----------------------------------------------------------------------------
class ClickModel(gluon.Block):
    """Sum of the ids' embeddings, then a Dense layer to one click logit. With `sparse`,
    the table is a row_sparse parameter read row by row from the kvstore."""

    def __init__(self, rows, dim, sparse, **kwargs):
        super().__init__(**kwargs)
        self.rows, self.dim, self.sparse = rows, dim, sparse
        stypes = {"stype": "row_sparse", "grad_stype": "row_sparse"} if sparse else {}
        with self.name_scope():
            self.table = self.params.get("table", shape=(rows, dim), **stypes)
            self.out = gluon.nn.Dense(1, in_units=dim)

    def forward(self, x):
        table = self.table.row_sparse_data(x) if self.sparse else self.table.data()
        emb = mx.nd.Embedding(x, table, input_dim=self.rows, output_dim=self.dim,
                              sparse_grad=self.sparse)
        return self.out(emb.sum(axis=1)).reshape((-1,))


def build(args, store):
    mx.random.seed(args.seed)          # the same initial weights on every worker and twin
    net = ClickModel(args.rows, args.dim, sparse=not args.dense)
    net.initialize(mx.init.Normal(0.1))
    # the gradient's scale is fixed here (1 / the global batch; steps then pass 1): reading
    # the table before the first step sets up the store, and a dist store's servers keep
    # the optimizer's scale from then on
    trainer = gluon.Trainer(net.collect_params(), "sgd",
                            {"learning_rate": args.lr, "rescale_grad": 1 / args.batch_size},
                            kvstore=store)
    return net, trainer


# ---- training --------------------------------------------------------------------------
def full_loss(net, loss_fn, ids, labels, chunk=4096):
    """The mean loss over the whole data set (the same number on every worker)."""
    total = 0.0
    for i in range(0, len(ids), chunk):
        x, y = mx.nd.array(ids[i:i + chunk]), mx.nd.array(labels[i:i + chunk])
        total += float(loss_fn(net(x), y).sum().asscalar())
    return total / len(ids)


def train_epoch(args, net, trainer, loss_fn, data, epoch, store):
    """One epoch; (steps, distinct rows touched over its steps) of this worker."""
    ids, labels = data
    steps, touched = 0, set()
    for batch in batches(len(ids), args.batch_size, args.seed, epoch)[:args.max_batches]:
        mine = np.array_split(batch, store.num_workers)[store.rank]
        x, y = mx.nd.array(ids[mine]), mx.nd.array(labels[mine])
        with autograd.record():
            loss = loss_fn(net(x), y)
        loss.backward()
        trainer.step(1)            # scaled by 1 / the global batch: W workers sum to its mean
        touched.update(np.unique(ids[mine]).tolist())
        steps += 1
    return steps, len(touched)


def main():
    args = parse_args()
    store = kv.create(args.kvstore)
    if args.batch_size < store.num_workers:
        sys.exit(f"--batch-size {args.batch_size} is smaller than the {store.num_workers} "
                 "workers: every worker needs samples; raise --batch-size")
    data = click_data(args)
    net, trainer = build(args, store)
    loss_fn = gluon.loss.SigmoidBinaryCrossEntropyLoss()
    kind = "dense" if args.dense else "row_sparse"
    print(f"worker {store.rank} of {store.num_workers}, kvstore {store.type}, {kind} table "
          f"{args.rows}x{args.dim}, {args.samples} samples of {args.fields} power-law ids, "
          f"initial loss {full_loss(net, loss_fn, *data):.6f}", flush=True)
    for epoch in range(1, args.epochs + 1):
        start = time.perf_counter()
        steps, touched = train_epoch(args, net, trainer, loss_fn, data, epoch, store)
        loss = full_loss(net, loss_fn, *data)
        print(f"worker {store.rank} epoch {epoch}: loss {loss:.6f}, "
              f"{steps} steps, {touched} of {args.rows} rows touched, "
              f"{time.perf_counter() - start:.2f}s", flush=True)
        # for minigluon-launch's job bar (silent otherwise)
        telemetry.report(epoch=epoch, epochs=args.epochs, steps=steps, loss=loss,
                         epoch_end=True)
    print(f"worker {store.rank} final loss {full_loss(net, loss_fn, *data):.6f}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
