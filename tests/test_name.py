"""mx.name: automatic symbol names from the current NameManager, fresh counters per scope,
Prefix, and the class-level `current`."""
import pytest

import minigluon as mx


def _names(make, count):
    return [make().name for _ in range(count)]


def test_a_fresh_manager_starts_counting_again_and_restores_the_outer_one():
    x = mx.sym.var("x")
    outer = mx.sym.relu(x).name
    with mx.name.NameManager():
        assert _names(lambda: mx.sym.relu(x), 2) == ["relu0", "relu1"]
        assert mx.sym.FullyConnected(x, num_hidden=2).name == "fullyconnected0"
    number = int(outer[len("relu"):])
    assert mx.sym.relu(x).name == f"relu{number + 1}"


def test_prefix_puts_its_prefix_before_automatic_and_given_names():
    x = mx.sym.var("x")
    with mx.name.Prefix("enc_"):
        assert mx.sym.relu(x).name == "enc_relu0"
        assert mx.sym.relu(x, name="mine").name == "enc_mine"
        assert mx.sym.var("v").name == "v"      # variables are named as given
    manager = mx.name.Prefix("p_")
    assert manager.get("kept", "relu") == "p_kept" and manager.get(None, "relu") == "p_relu0"


def test_a_plain_manager_keeps_given_names():
    with mx.name.NameManager():
        assert mx.sym.relu(mx.sym.var("x"), name="mine").name == "mine"


def test_current_is_a_class_property_and_checks_its_value():
    manager = mx.name.NameManager()
    with manager:
        assert mx.name.NameManager.current is manager
    assert mx.name.NameManager.current is not manager
    with pytest.raises(TypeError, match="must be a NameManager, got 'x'"):
        mx.name.NameManager.current = "x"
