"""The restricted unpickler servers load optimizers and optimizer states with: the job's
own optimizers and states load exactly; a payload naming any other callable is refused."""
import os
import pickle
import sys
import textwrap

import numpy as np
import pytest

import minigluon as mx
from minigluon import nd
from minigluon.kvstore.safe_pickle import loads


class Evil:
    def __reduce__(self):
        return (os.system, ("echo pwned",))


def test_optimizers_and_their_states_load_exactly():
    opt = mx.optimizer.Adam(wd=1e-3, multi_precision=True, lr_scheduler=mx.lr_scheduler.
                            FactorScheduler(step=10, factor=0.5, base_lr=0.1))
    back = loads(pickle.dumps(opt, protocol=pickle.HIGHEST_PROTOCOL))
    assert type(back) is mx.optimizer.Adam and back.wd == 1e-3
    assert type(back.lr_scheduler) is mx.lr_scheduler.FactorScheduler
    updater = mx.optimizer.get_updater(opt)
    weight = nd.ones((3,), dtype=np.float16)
    updater(0, nd.ones((3,), dtype=np.float16), weight)
    blob = updater.get_states(dump_optimizer=True)
    master = loads(blob)["states"][0][0]                     # the float32 master copy
    np.testing.assert_array_equal(master.data, pickle.loads(blob)["states"][0][0].data)
    assert loads(pickle.dumps(np.float32(2.5))) == 2.5


@pytest.mark.parametrize("payload", [os.system, eval, getattr, Evil(), {"x": [print]}])
def test_any_other_callable_is_refused(payload):
    with pytest.raises(pickle.UnpicklingError, match="may not be loaded from an optimizer "
                                                     "payload"):
        loads(pickle.dumps(payload))


def test_a_custom_optimizer_module_is_imported_only_when_authenticated(tmp_path, monkeypatch):
    (tmp_path / "my_custom_opt.py").write_text(textwrap.dedent("""
        import minigluon as mx
        class HalfSGD(mx.optimizer.SGD):
            pass
        """))
    monkeypatch.syspath_prepend(str(tmp_path))
    import my_custom_opt
    blob = pickle.dumps(my_custom_opt.HalfSGD(learning_rate=0.5))
    del sys.modules["my_custom_opt"]
    with pytest.raises(pickle.UnpicklingError, match="imported only in a job with "
                                                     "MINIGLUON_PS_SECRET"):
        loads(blob)
    assert "my_custom_opt" not in sys.modules                # nothing was imported
    assert loads(blob, may_import=True).lr == 0.5
    del sys.modules["my_custom_opt"]
