"""The overlap switch on the Trainer's side: only distributed stores overlap (local
training keeps its step), and MINIGLUON_OVERLAP is read and checked in config."""
import numpy as np
import pytest

import minigluon as mx
from minigluon import autograd, config, gluon, nd


@pytest.mark.parametrize("kvstore", ["device", "local", None])
def test_local_stores_never_overlap_and_register_no_hook(kvstore):
    net = gluon.nn.Dense(3, in_units=4)
    net.initialize(mx.init.One(), ctx=[mx.cpu(0), mx.cpu(1)])
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1},
                            kvstore=kvstore, overlap=True)
    for ctx in (mx.cpu(0), mx.cpu(1)):
        with autograd.record():
            loss = net(nd.ones((2, 4), ctx=ctx)).sum()
        loss.backward()
    trainer.step(4)
    assert trainer._overlap is None
    assert all(arr._grad_hooks is None for p in net.collect_params().values()
               for arr in p.list_data())
    # each copy: 1 - 0.1 * (sum over both devices of 2 rows of ones) / 4
    np.testing.assert_allclose(net.weight.data(mx.cpu(1)).asnumpy(), np.full((3, 4), 0.9))


def test_minigluon_overlap_is_read_in_config(monkeypatch):
    monkeypatch.delenv("MINIGLUON_OVERLAP", raising=False)
    assert config.overlap() is True
    monkeypatch.setenv("MINIGLUON_OVERLAP", "0")
    assert config.overlap() is False
    monkeypatch.setenv("MINIGLUON_OVERLAP", "maybe")
    with pytest.raises(config.ConfigError, match="MINIGLUON_OVERLAP must be 0 or 1, got 'maybe'"):
        config.overlap()


def test_a_trainer_takes_the_switch_from_the_environment_or_its_argument(monkeypatch):
    param = gluon.Parameter("w", shape=(2,))
    param.initialize()
    monkeypatch.setenv("MINIGLUON_OVERLAP", "0")
    assert gluon.Trainer([param], "sgd")._overlap_wanted is False
    assert gluon.Trainer([param], "sgd", overlap=True)._overlap_wanted is True
    monkeypatch.setenv("MINIGLUON_OVERLAP", "1")
    assert gluon.Trainer([param], "sgd", overlap=False)._overlap_wanted is False
