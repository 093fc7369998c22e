"""mx.mod.Module: binding, initialization, one step against a NumPy oracle, training with
fit, scoring, prediction, checkpoints, and its errors."""
import numpy as np
import pytest

import minigluon as mx
from minigluon import nd

RNG = np.random.default_rng(5)


def linear_loss(num_hidden=1):
    """Mean squared error of a FullyConnected layer: data -> fc -> loss per sample."""
    data, label = mx.sym.Variable("data"), mx.sym.Variable("label")
    fc = mx.sym.FullyConnected(data, num_hidden=num_hidden, name="fc")
    return mx.sym.mean(mx.sym.square(fc - label), axis=1)


def regression_iter(n=40, batch_size=8, shuffle=False):
    x = RNG.uniform(-1, 1, (n, 4)).astype(np.float32)
    y = (x @ np.array([[0.5], [-1.0], [2.0], [0.25]], np.float32) + 0.3).astype(np.float32)
    return mx.io.NDArrayIter(x, y, batch_size=batch_size, label_name="label",
                             shuffle=shuffle), x, y


def bound_module(batch_size=8):
    mod = mx.mod.Module(linear_loss(), data_names=("data",), label_names=("label",))
    mod.bind(data_shapes=[("data", (batch_size, 4))], label_shapes=[("label", (batch_size, 1))])
    return mod


def test_parameters_are_the_non_input_arguments_with_inferred_shapes():
    mod = bound_module()
    mod.init_params(mx.init.Constant(0.5))
    args, aux = mod.get_params()
    assert sorted(args) == ["fc_bias", "fc_weight"] and aux == {}
    assert args["fc_weight"].shape == (1, 4) and args["fc_bias"].shape == (1,)
    assert (args["fc_weight"].asnumpy() == 0.5).all()
    assert (args["fc_bias"].asnumpy() == 0).all()        # *_bias: zeros, as in MXNet


def test_one_sgd_step_matches_the_numpy_gradient():
    it, x, y = regression_iter()
    mod = bound_module()
    mod.init_params(mx.init.Uniform(0.5))
    mod.init_optimizer(optimizer="sgd", optimizer_params={"learning_rate": 0.1})
    w0 = {k: v.asnumpy() for k, v in mod.get_params()[0].items()}
    batch = next(iter(it))
    mod.forward(batch, is_train=True)
    mod.backward()
    mod.update()
    xb, yb = x[:8], y[:8]
    err = xb @ w0["fc_weight"].T + w0["fc_bias"] - yb         # d(loss_i)/d(out_i) = 2 err
    grad_w, grad_b = (2 * err).T @ xb, (2 * err).sum(0)       # summed over the batch
    args = mod.get_params()[0]
    # rescale_grad defaults to 1 / batch_size
    np.testing.assert_allclose(args["fc_weight"].asnumpy(), w0["fc_weight"] - 0.1 * grad_w / 8,
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(args["fc_bias"].asnumpy(), w0["fc_bias"] - 0.1 * grad_b / 8,
                               rtol=1e-5, atol=1e-6)


def test_gradient_matches_finite_differences():
    mod = bound_module(batch_size=2)
    mod.init_params(mx.init.Uniform(0.5))
    batch = mx.io.DataBatch(data=[nd.array(RNG.uniform(-1, 1, (2, 4)))],
                            label=[nd.array(RNG.uniform(-1, 1, (2, 1)))])
    mod.forward(batch, is_train=True)
    mod.backward()
    analytic = mod._exec.grad_dict["fc_weight"].asnumpy().copy()
    weight = mod._exec.arg_dict["fc_weight"]
    base, eps, numeric = weight.asnumpy().copy(), 1e-2, np.zeros_like(analytic)
    for i in np.ndindex(base.shape):
        total = []
        for sign in (1, -1):
            trial = base.copy()
            trial[i] += sign * eps
            weight[:] = nd.array(trial)
            mod.forward(batch, is_train=False)
            total.append(mod.get_outputs()[0].asnumpy().sum())
        numeric[i] = (total[0] - total[1]) / (2 * eps)
    np.testing.assert_allclose(analytic, numeric, rtol=1e-2, atol=1e-3)


def test_fit_trains_and_score_reports_the_loss():
    it, _, _ = regression_iter(shuffle=True)
    mod = mx.mod.Module(linear_loss(), data_names=("data",), label_names=("label",))
    mod.fit(it, num_epoch=40, optimizer="adam", optimizer_params={"learning_rate": 0.05},
            eval_metric=mx.metric.Loss(), initializer=mx.init.Xavier())
    assert mod.score(it, eval_metric=mx.metric.Loss())[0][1] < 1e-3


def test_predict_concatenates_the_batches():
    it, x, _ = regression_iter()
    data = mx.sym.Variable("data")
    mod = mx.mod.Module(mx.sym.FullyConnected(data, num_hidden=3, name="fc"),
                        label_names=None)
    mod.bind(data_shapes=it.provide_data, for_training=False)
    mod.init_params(mx.init.Constant(0.1))
    out = mod.predict(it)
    np.testing.assert_allclose(out.asnumpy(), np.repeat(x.sum(1, keepdims=True) * 0.1, 3, 1),
                               rtol=1e-5, atol=1e-6)


def test_checkpoint_round_trip_keeps_params_and_optimizer_states(tmp_path):
    it, _, _ = regression_iter()
    mod = mx.mod.Module(linear_loss(), data_names=("data",), label_names=("label",))
    mod.fit(it, num_epoch=2, optimizer="adam", eval_metric=mx.metric.Loss())
    prefix = str(tmp_path / "net")
    mod.save_checkpoint(prefix, 2, save_optimizer_states=True)
    assert (tmp_path / "net-symbol.json").exists() and (tmp_path / "net-0002.params").exists()
    loaded = mx.mod.Module.load(prefix, 2, load_optimizer_states=True,
                                data_names=("data",), label_names=("label",))
    loaded.bind(data_shapes=it.provide_data, label_shapes=it.provide_label)
    loaded.init_optimizer(optimizer="adam")
    for name, value in mod.get_params()[0].items():
        np.testing.assert_array_equal(loaded.get_params()[0][name].asnumpy(), value.asnumpy())
    assert loaded._optimizer.num_update == mod._optimizer.num_update
    # both continue identically
    batch = next(iter(it))
    for m in (mod, loaded):
        m.forward_backward(batch)
        m.update()
    np.testing.assert_allclose(loaded.get_params()[0]["fc_weight"].asnumpy(),
                               mod.get_params()[0]["fc_weight"].asnumpy(), rtol=1e-6)


def test_lr_and_wd_mults_reach_the_optimizer():
    data = mx.sym.Variable("data")
    fc = mx.sym.FullyConnected(data, num_hidden=2, name="fc", lr_mult=0, wd_mult=0.5)
    mod = mx.mod.Module(fc, label_names=None)
    mod.bind(data_shapes=[("data", (3, 4))])
    mod.init_params()
    mod.init_optimizer(optimizer_params={"learning_rate": 1.0, "wd": 0.1})
    assert mod._optimizer.lr_mult == {"fc_weight": 0.0, "fc_bias": 0.0}
    before = mod.get_params()[0]["fc_weight"].asnumpy()
    mod.forward(mx.io.DataBatch([nd.ones((3, 4))]), is_train=True)
    mod.backward(mod.get_outputs())
    mod.update()
    np.testing.assert_array_equal(mod.get_params()[0]["fc_weight"].asnumpy(), before)


@pytest.mark.parametrize("make, needle", [
    (lambda: mx.mod.Module(linear_loss(), data_names=("x",)), "data_names \\['x'\\] are not"),
    (lambda: mx.mod.Module(linear_loss(), context=[mx.cpu(), mx.cpu(1)]), "one device"),
    (lambda: mx.mod.Module(linear_loss(), label_names=("label",)).init_params(),
     "call bind\\(\\) first"),
    (lambda: bound_module().update(), "call init_params\\(\\) first"),
    (lambda: mx.mod.Module(linear_loss(), label_names=("label",)).fit(None),
     "num_epoch is required"),
    (lambda: mx.mod.load_checkpoint("/nonexistent/net", 1), "no parameters file")])
def test_errors_say_what_to_do(make, needle):
    with pytest.raises(mx.MXNetError, match=needle):
        make()


def test_init_params_rejects_a_wrong_shape():
    mod = bound_module()
    with pytest.raises(mx.MXNetError, match="'fc_weight' has shape \\(2, 2\\)"):
        mod.init_params(arg_params={"fc_weight": nd.zeros((2, 2)), "fc_bias": nd.zeros(1)})
