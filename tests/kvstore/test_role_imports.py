"""What the processes of a job import: a scheduler or server serves from the top of
`import minigluon` and loads only its part of the kvstore (an optimizer when a worker sends
one), the launcher loads no NumPy (nor tqdm or a web server it does not use), and
`import minigluon` still gives every name (each loaded on first use, with mx.nd.np /
mx.nd.CachedOp / mx.sym.np set as before).

The job's processes write the modules they had loaded when they exited (an atexit hook put
before `import minigluon`), so a test sees what a real role imported over its whole life.
"""
import json
import os
import subprocess
import sys
import textwrap
import time

import pytest

from test_dist_cluster import Job, assert_gone, base_env, free_port

DEADLINE = 60
# never in a scheduler or a server: the training side of the package
TRAINING = ("minigluon.gluon", "minigluon.symbol", "minigluon.image", "minigluon.io",
            "minigluon.module", "minigluon.recordio", "minigluon.numpy", "minigluon.metric",
            "minigluon.initializer", "minigluon.kvstore.dist")
# only in a server that got an optimizer
UPDATING = ("minigluon.ndarray", "minigluon.optimizer")

RECORD = """\
import atexit, json, os, sys

def _record():
    with open(f"modules-{os.environ.get('DMLC_ROLE', 'none')}.json", "w") as f:
        json.dump(sorted(sys.modules), f)

atexit.register(_record)
import minigluon as mx
"""

# a user's optimizer in a module of its own, which imports minigluon as any script does:
# a server unpickling it imports the module while its own `import minigluon` still serves
MY_OPTIMIZER = """\
import minigluon as mx


@mx.optimizer.register
class HalfSGD(mx.optimizer.SGD):
    '''SGD at half the learning rate it is given.'''

    def __init__(self, learning_rate=0.01, **kwargs):
        super().__init__(learning_rate=learning_rate / 2, **kwargs)
"""


def run_recorded(tmp_path, worker_code, env=None):
    """One job (scheduler, one server, one worker) of a script that records its modules;
    the modules each role had loaded, by role."""
    script = tmp_path / "job.py"
    script.write_text(RECORD + textwrap.dedent(worker_code))
    common = base_env(env)
    common.update(DMLC_PS_ROOT_URI="127.0.0.1", DMLC_PS_ROOT_PORT=str(free_port()),
                  DMLC_NUM_SERVER="1", DMLC_NUM_WORKER="1")
    job, files_before = Job(), set(os.listdir("/tmp"))
    try:
        for role in ("scheduler", "server", "worker"):
            job.start(role, [sys.executable, str(script)], dict(common, DMLC_ROLE=role),
                      tmp_path)
        outputs, late = job.finish(time.monotonic() + DEADLINE)
    finally:
        job.kill_all()
    assert_gone([p.pid for _, p in job.procs], files_before=files_before)
    assert not late, f"killed after the {DEADLINE} s deadline: {late}"
    bad = {n: o for n, o in outputs.items() if o[0] != 0}
    assert not bad, f"processes failed: {bad}"
    return {role: set(json.loads((tmp_path / f"modules-{role}.json").read_text()))
            for role in ("scheduler", "server", "worker")}


def loaded(modules, names):
    return sorted(n for n in names if n in modules)


def test_scheduler_and_server_import_only_their_part(tmp_path):
    modules = run_recorded(tmp_path, """
    from minigluon import nd
    kv = mx.kv.create('dist_sync')
    kv.init(3, nd.ones((4,)))
    kv.push(3, nd.ones((4,)) * 5)
    out = nd.zeros((4,))
    kv.pull(3, out=out)
    assert out.asnumpy().tolist() == [5.0] * 4, out
    """)
    for role in ("scheduler", "server"):
        assert "minigluon.kvstore.role" in modules[role]
        assert loaded(modules[role], TRAINING + UPDATING) == [], role
    assert "minigluon.kvstore.scheduler" in modules["scheduler"]
    assert "minigluon.kvstore.server" not in modules["scheduler"]
    assert "minigluon.kvstore.server" in modules["server"]
    assert "minigluon.kvstore.dist" in modules["worker"]      # the worker is a full user


def test_a_server_loads_the_optimizer_a_worker_sends(tmp_path):
    (tmp_path / "my_optimizer.py").write_text(MY_OPTIMIZER)
    modules = run_recorded(tmp_path, """
    from minigluon import nd
    from my_optimizer import HalfSGD
    kv = mx.kv.create('dist_sync')
    kv.set_optimizer(HalfSGD(learning_rate=0.5, rescale_grad=1.0))
    kv.init(3, nd.ones((4,)))
    kv.push(3, nd.ones((4,)) * 2)
    out = nd.zeros((4,))
    kv.pull(3, out=out)
    assert out.asnumpy().tolist() == [0.5] * 4, out      # 1 - 0.25 * 2
    """, env={"MINIGLUON_PS_SECRET": "a-secret-of-the-job-0123456789"})
    server = modules["server"]
    assert loaded(server, UPDATING + ("my_optimizer",)) == sorted(UPDATING + ("my_optimizer",))
    assert loaded(server, TRAINING) == []


def _modules_after(code):
    env = base_env()
    env.pop("DMLC_ROLE", None)
    out = subprocess.run([sys.executable, "-c", code + "\nimport sys, json\n"
                          "print(json.dumps(sorted(sys.modules)))"],
                         env=env, capture_output=True, text=True, timeout=DEADLINE)
    assert out.returncode == 0, out.stderr
    return set(json.loads(out.stdout.splitlines()[-1]))


def test_the_launcher_imports_no_numpy():
    # nor its progress bar's tqdm and its live page's web server, until a job asks for them
    modules = _modules_after("import minigluon.tools.launch")
    assert loaded(modules, ("numpy", "zmq", "tqdm", "http.server", "minigluon.ndarray",
                            "minigluon.kvstore.dist")) == []


def test_import_minigluon_gives_every_name_on_first_use():
    code = """
import minigluon as mx
from minigluon import gluon, nd
import minigluon.numpy, minigluon.numpy_extension, minigluon.symbol, minigluon.context
assert mx.nd is nd and mx.ndarray is nd and mx.gluon is gluon
assert mx.np is minigluon.numpy and mx.npx is minigluon.numpy_extension
assert mx.sym is minigluon.symbol and mx.rnd is mx.random and mx.kv is mx.kvstore
assert mx.init is mx.initializer and mx.img is mx.image and mx.mod is mx.module
assert mx.cpu is minigluon.context.cpu and mx.Context is minigluon.context.Context
assert mx.use_np is mx.util.use_np and mx.MXNetError is mx.base.MXNetError
assert mx.kv.create('teststore').__class__ is mx.kv.TestStore
names = set(dir(mx))
assert {'gluon', 'nd', 'np', 'kv', 'optimizer', 'io', 'mod', 'cpu'} <= names, names
star = {}
exec("from minigluon import *", star)
assert star["nd"] is mx.nd and star["gluon"] is mx.gluon and star["cpu"] is mx.cpu
try:
    mx.no_such_thing
except AttributeError as err:
    assert "no_such_thing" in str(err)
else:
    raise AssertionError("mx.no_such_thing did not raise")
"""
    _modules_after(code)


def test_nd_and_sym_get_np_npx_and_cached_op_from_the_modules_that_set_them():
    code = """
import minigluon.ndarray as nd
import minigluon.symbol as sym
try:
    nd.np
except AttributeError as err:
    assert "minigluon.numpy is imported" in str(err), err
else:
    raise AssertionError("nd.np before minigluon.numpy was imported")
from minigluon import numpy as np_, numpy_extension as npx
from minigluon.numpy import symbol as np_symbol
from minigluon.symbol import CachedOp
assert nd.np is np_ and nd.npx is npx and nd.CachedOp is CachedOp
assert sym.np is np_symbol and sym.npx is npx
"""
    _modules_after(code)


@pytest.mark.parametrize("first", ["symbol", "numpy", "numpy_extension", "numpy.symbol",
                                   "ndarray", "gluon", "module", "optimizer"])
def test_np_npx_and_cached_op_are_set_whichever_module_loads_first(first):
    _modules_after(f"""
import minigluon.{first}
import minigluon as mx
import minigluon.numpy.symbol as np_symbol
assert mx.nd.np is mx.np and mx.nd.npx is mx.npx and mx.nd.CachedOp is mx.sym.CachedOp
assert mx.sym.np is np_symbol and mx.sym.npx is mx.npx
""")


def test_a_hybrid_block_reaches_f_np_and_f_npx_with_only_gluon_imported():
    code = """
from minigluon.gluon import nn
import minigluon.ndarray as nd

class Block(nn.HybridBlock):
    def hybrid_forward(self, F, x):
        return F.npx.relu(F.np.abs(x.as_np_ndarray())).as_nd_ndarray()

block = Block()
x = nd.array([-1.0, 2.0])
assert block(x).asnumpy().tolist() == [1.0, 2.0]
block.hybridize()
assert block(x).asnumpy().tolist() == [1.0, 2.0]
"""
    _modules_after(code)
