"""BatchProcessor: what the estimator does with one batch, in training and in evaluation.
Subclass it and override `fit_batch` / `evaluate_batch` for other kinds of batches."""
from .... import autograd
from ...utils import split_and_load

__all__ = ["BatchProcessor"]


class BatchProcessor:
    """Split a `(data, label)` batch over the estimator's devices, run the net and the
    loss; `fit_batch` records and back-propagates (the GradientUpdateHandler steps)."""

    def _get_data_and_label(self, batch, ctx, batch_axis=0):
        data = split_and_load(batch[0], ctx_list=ctx, batch_axis=batch_axis)
        label = split_and_load(batch[1], ctx_list=ctx, batch_axis=batch_axis)
        return data, label

    def evaluate_batch(self, estimator, val_batch, batch_axis=0):
        """(data, label, pred, loss), lists with one entry per device, on a validation
        batch with `estimator.val_net` and `estimator.val_loss`."""
        data, label = self._get_data_and_label(val_batch, estimator.context, batch_axis)
        pred = [estimator.val_net(x) for x in data]
        loss = [estimator.val_loss(y_hat, y) for y_hat, y in zip(pred, label)]
        return data, label, pred, loss

    def fit_batch(self, estimator, train_batch, batch_axis=0):
        """(data, label, pred, loss), lists with one entry per device, after a forward and
        backward pass of `estimator.net` and `estimator.loss` on a training batch."""
        data, label = self._get_data_and_label(train_batch, estimator.context, batch_axis)
        with autograd.record():
            pred = [estimator.net(x) for x in data]
            loss = [estimator.loss(y_hat, y) for y_hat, y in zip(pred, label)]
        for value in loss:
            value.backward()
        return data, label, pred, loss
