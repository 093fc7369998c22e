"""Every fenced code block of README.md and docs/**/*.md, one case each (`docs/launch.md:3` is
the third block of docs/launch.md): python blocks run as programs, shell blocks run as
commands from the repository root, on small data, and what they print is checked. A block
that cannot run here carries a `doc-test` marker saying why (see docblocks.py); a block with
neither fails, so a new document cannot go untested by accident."""
import os
import re
import shutil
import socket

import pytest

from docblocks import (EPOCH, MNIST_SPLIT, REPO, SCRIPT, all_blocks, append_args, blocks,
                       output_pattern, run, workers_started)

BLOCKS = all_blocks()
DEADLINE = 60           # seconds per block; most take a few


def by_id(block_id):
    doc, number = block_id.rsplit(":", 1)
    return blocks(doc)[int(number) - 1]


@pytest.mark.timeout(DEADLINE + 30)
@pytest.mark.parametrize("block", BLOCKS, ids=[b.id for b in BLOCKS])
def test_block(block, tmp_path):
    if block.kind == "unmarked":
        pytest.fail(f"{block.id} (line {block.line}) is a ```{block.lang} block that is "
                    "neither run nor marked: give it a language (```bash, ```python) so "
                    "that it runs, or put a <!-- doc-test: output --> or "
                    "<!-- doc-test: skip: WHY --> comment right before it")
    if block.kind == "skip":
        assert block.markers["skip"], f"{block.id}: a skip marker must say why"
        pytest.skip(f"{block.id}: {block.markers['skip']}")
    if block.kind == "output":
        check_output_block(block)
        return
    if block.kind == "excerpt":
        check_excerpt(block)
        return
    if "needs" in block.markers and not shutil.which(block.markers["needs"]):
        pytest.skip(f"{block.id} needs {block.markers['needs']}, which is not installed")
    if block.kind == "python":
        run_python(block, tmp_path)
    else:
        run_shell(block, tmp_path)


def check_output_block(block):
    """Output that a block above prints is checked with that block; the others are text."""
    assert block.markers["output"] in ("", "of the block above"), \
        f"{block.id}: `output` takes nothing or 'of the block above'"
    if block.markers["output"]:
        above = by_id(f"{block.doc}:{block.number - 1}")
        assert above.kind == "shell", f"{block.id} is output of {above.id}, which does not run"
    else:
        assert block.text.strip(), f"{block.id} is empty"


def check_excerpt(block):
    """The block's lines appear in the file it names, in order, indentation aside."""
    path = os.path.join(REPO, block.markers["excerpt"])
    with open(path, encoding="utf-8") as f:
        source = [line.strip() for line in f]
    want = [line.strip() for line in block.text.strip().split("\n")]
    starts = [i for i, line in enumerate(source) if line == want[0]]
    assert any(source[i:i + len(want)] == want for i in starts), \
        f"{block.id} is no longer an excerpt of {block.markers['excerpt']}:\n{block.text}"


# ---- python --------------------------------------------------------------------------------
def program(block):
    """The block's code with its setup and check, after the blocks it continues."""
    parts = []
    if "continues" in block.markers:
        previous = [b for b in blocks(block.doc)
                    if b.number < block.number and b.kind == "python"]
        assert previous, f"{block.id} continues, but no python block comes before it"
        parts.append(program(previous[-1]))
    parts += [block.markers.get("setup", ""), block.text, block.markers.get("check", "")]
    return "\n".join(p for p in parts if p)


def run_python(block, tmp_path):
    source = tmp_path / "block.py"
    source.write_text(program(block))
    work = tmp_path / "work"
    work.mkdir()
    result = run(["python", str(source)], work, tmp_path, DEADLINE)
    where = f"{block.id} (line {block.line}) as a program:\n{source.read_text()}\n{result.text()}"
    assert not result.timed_out, f"ran past the {DEADLINE} s deadline: {where}"
    assert result.returncode == 0, where
    assert not result.left, f"processes left behind: {result.left}\n{where}"


# ---- shell ---------------------------------------------------------------------------------
def commands(block):
    """The block as it runs: console prompts dropped, the marker's arguments appended, the
    fixed port 9092 of the by-hand recipes replaced by a free one (other jobs may share this
    machine)."""
    text = block.text
    if block.lang == "console":
        text = "\n".join(line[2:] for line in text.split("\n") if line.startswith("$ "))
    text = append_args(text, block.markers.get("args", ""))
    return re.sub(r"\b9092\b", str(free_port()), text)


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def run_shell(block, tmp_path):
    text = commands(block)
    if "../shared/data/mnist-split" in text and not os.path.isdir(MNIST_SPLIT):
        pytest.skip(f"the real MNIST split is not at {MNIST_SPLIT}")
    script = tmp_path / "block.sh"
    script.write_text(text)
    result = run(["bash", "-e", str(script)], REPO, tmp_path, DEADLINE)
    where = f"{block.id} (line {block.line}), run as:\n{text}\n{result.text()}"
    assert not result.timed_out, f"ran past the {DEADLINE} s deadline: {where}"
    assert result.returncode == 0, where
    assert not result.left, f"processes left behind: {result.left}\n{where}"
    checked = check_examples(text, result, where)
    if "expect" in block.markers:
        assert re.search(block.markers["expect"], result.out + result.err), \
            f"no match for {block.markers['expect']!r}: {where}"
        checked = True
    following = blocks(block.doc)[block.number:block.number + 1]
    if following and following[0].markers.get("output") == "of the block above":
        check_printed(following[0], result, where)
        checked = True
    assert checked, (f"{block.id} ran, but nothing says what it should print: add "
                     "<!-- doc-test: expect: REGEX --> right before it")


def check_examples(text, result, where):
    """Every worker an example command started printed an epoch line, and a command that
    names real data trained on it (the scripts fall back to generated data loudly)."""
    if not any("examples/" in m[0] for m in SCRIPT.finditer(text)):
        return False
    workers = workers_started(text)
    assert workers, f"no worker found in the commands: {where}"
    found = EPOCH.findall(result.out)
    assert len(found) >= workers, f"{workers} workers, {len(found)} epoch lines: {where}"
    if "--synthetic" not in text:
        assert "SYNTHETIC" not in result.out + result.err, \
            f"trained on generated data although the command does not ask for it: {where}"
    return True


def check_printed(output, result, where):
    """Each line of the documented output matches a line the command printed."""
    printed = (result.out + result.err).split("\n")
    for sample in output.text.strip().split("\n"):
        pattern = re.compile(output_pattern(sample))
        assert any(pattern.fullmatch(line.strip()) for line in printed), \
            f"{output.id} shows\n  {sample}\nwhich no line printed matches: {where}"


# ---- the collection itself -----------------------------------------------------------------
def test_every_document_is_read_and_every_block_classified():
    docs = {b.doc for b in BLOCKS}
    assert {"README.md", "docs/launch.md", "docs/tutorials/distributed-training.md"} <= docs
    kinds = {b.kind for b in BLOCKS}
    assert kinds <= {"python", "shell", "skip", "output", "excerpt"}, \
        [b.id for b in BLOCKS if b.kind == "unmarked"]
    assert sum(b.kind in ("python", "shell") for b in BLOCKS) > \
        sum(b.kind == "skip" for b in BLOCKS)      # markers stay few: most blocks run
