"""minigluon's floors hold: no upward import, no import cycle, no private name across modules.

The rule is in tests/layers.py; docs/architecture.md says what each floor is for. The planted
cases build small packages in a temporary folder so that each rule is seen to fail.
"""
import os
import textwrap

import pytest

import minigluon
from layers import FLOORS, Tree, import_cycles, private_imports, unplaced_units, upward_imports

PACKAGE_DIR = os.path.dirname(minigluon.__file__)


@pytest.fixture(scope="module")
def tree():
    return Tree(PACKAGE_DIR)


def test_every_unit_has_a_floor(tree):
    assert unplaced_units(tree) == [], "add the new unit to FLOORS in tests/layers.py"


def test_no_upward_import(tree):
    assert upward_imports(tree) == []


def test_no_import_cycle(tree):
    assert import_cycles(tree) == []


def test_no_private_name_crosses_modules(tree):
    assert private_imports(tree) == []


def _plant(tmp_path, files):
    """A package named minigluon under tmp_path with the given {relative path: source}."""
    for rel, source in files.items():
        path = tmp_path / "minigluon" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(source))
    for folder, _, names in os.walk(tmp_path / "minigluon"):
        if "__init__.py" not in names:
            open(os.path.join(folder, "__init__.py"), "w").close()
    return Tree(str(tmp_path / "minigluon"))


def test_a_planted_upward_import_inside_a_function_fails(tmp_path):
    planted = _plant(tmp_path, {
        "autograd.py": "def backward(x):\n    from .ndarray.ndarray import NDArray\n",
        "ndarray/ndarray.py": "from .. import autograd\n",
    })
    found = upward_imports(planted)
    assert len(found) == 1
    assert found[0].startswith(os.path.join("minigluon", "autograd.py") + ":2: ")
    assert "(floor 'autograd') imports minigluon.ndarray.ndarray (floor 'ndarray')" in found[0]
    assert import_cycles(planted) == [["minigluon.autograd", "minigluon.ndarray.ndarray"]]


def test_the_package_itself_is_the_top_floor(tmp_path):
    planted = _plant(tmp_path, {"__init__.py": "VERSION = 1\n",
                                "kvstore/van.py": "from .. import VERSION\n"})
    assert [line.split(": ", 1)[1] for line in upward_imports(planted)] == [
        "minigluon.kvstore.van (floor 'kvstore') imports minigluon (floor 'tools')"]


def test_a_cycle_on_one_floor_fails(tmp_path):
    planted = _plant(tmp_path, {"gluon/block.py": "from .parameter import Parameter\n",
                                "gluon/parameter.py": "from . import block\n"})
    assert upward_imports(planted) == []
    assert import_cycles(planted) == [["minigluon.gluon.block", "minigluon.gluon.parameter"]]


def test_a_private_name_from_another_module_fails(tmp_path):
    planted = _plant(tmp_path, {"io/mnist.py": "from ..gluon.data import _read_idx\n",
                                "__init__.py": "from . import _allocator\n",
                                "_allocator.py": ""})
    assert private_imports(planted) == [
        f"{os.path.join('minigluon', 'io', 'mnist.py')}:1: minigluon.io.mnist takes _read_idx "
        "from minigluon.gluon.data"]


def test_a_unit_without_a_floor_is_named(tmp_path):
    planted = _plant(tmp_path, {"serving/app.py": "", "ndarray/ndarray.py": ""})
    assert unplaced_units(planted) == ["serving"]


def test_floors_name_each_unit_once():
    units = [u for _, names in FLOORS for u in names]
    assert len(units) == len(set(units))
