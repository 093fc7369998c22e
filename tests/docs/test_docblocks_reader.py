"""The block reader and the command rewriting of docblocks.py, on small documents."""
import re

import pytest

from docblocks import append_args, blocks, output_pattern, workers_started

DOC = '''# Title

```bash
python examples/a.py --x 1
```

<!-- doc-test: args: --max-batches 2 -->
<!-- doc-test: expect: done -->

```python
print("hi")
```

<!-- doc-test: setup:
import os
x = 1
-->
```python
print(x)
```

<!-- a plain comment -->
```
output
```
'''


def test_blocks_carry_the_markers_right_before_them(tmp_path):
    doc = tmp_path / "doc.md"
    doc.write_text(DOC)
    found = blocks(str(doc))
    assert [(b.number, b.line, b.lang, b.kind) for b in found] == [
        (1, 3, "bash", "shell"), (2, 10, "python", "python"), (3, 18, "python", "python"),
        (4, 23, "", "unmarked")]
    assert found[0].markers == {}
    assert found[1].markers == {"args": "--max-batches 2", "expect": "done"}
    assert found[2].markers == {"setup": "import os\nx = 1"}
    assert found[2].text == "print(x)\n"


def test_an_unknown_marker_is_an_error(tmp_path):
    doc = tmp_path / "doc.md"
    doc.write_text("<!-- doc-test: skipp: typo -->\n```bash\ntrue\n```\n")
    with pytest.raises(ValueError, match="unknown doc-test marker 'skipp'"):
        blocks(str(doc))


@pytest.mark.parametrize("command, want", [
    ("python examples/a.py --epochs 3",
     "python examples/a.py --epochs 3 --epochs 1"),
    ("python benchmarks/b.py --repeats 9     # one JSON line",
     "python benchmarks/b.py --repeats 9 --epochs 1 # one JSON line"),
    ("export COMMAND='python examples/a.py --kvstore dist_sync'",
     "export COMMAND='python examples/a.py --kvstore dist_sync --epochs 1'"),
    ("X=1 python examples/a.py &", "X=1 python examples/a.py --epochs 1 &"),
    ("minigluon-launch -n 2 \\", "minigluon-launch -n 2 \\"),
    ("    python examples/a.py --k dist_sync \\",
     "    python examples/a.py --k dist_sync --epochs 1 \\"),
    ("python -m minigluon.tools.doctor", "python -m minigluon.tools.doctor"),
])
def test_args_go_at_the_end_of_each_script_command(command, want):
    assert append_args(command, "--epochs 1") == want


def test_workers_are_counted_per_launch_role_and_plain_run():
    assert workers_started("minigluon-launch -n 3 -s 1 python examples/a.py") == 3
    assert workers_started("minigluon-launch -n 2 \\\n  python examples/a.py") == 2
    assert workers_started("python examples/a.py\nX=1 python examples/a.py --gpus 2") == 2
    by_hand = "\n".join(f"DMLC_ROLE={r} $COMMAND &" for r in ("server", "scheduler",
                                                                "worker", "worker"))
    assert workers_started("export COMMAND='python examples/a.py'\n" + by_hand) == 2


def test_documented_output_matches_with_other_numbers():
    pattern = output_pattern("[worker 0] worker 0 epoch 1: 2401.0 samples/s, ... lr 0.1")
    assert re.fullmatch(pattern, "[worker 1] worker 1 epoch 2: 37.5 samples/s, loss 2.3, "
                                 "train acc 0.2, lr 0.05")
    assert not re.fullmatch(pattern, "[worker 1] worker 1 epoch 2: 37.5 images/s, lr 0.05")
