"""Suite-wide setup: the checkout's bytecode is compiled once, before any test starts a
process.

Where PYTHONDONTWRITEBYTECODE=1 is set (as on this project's machines), Python
never writes __pycache__, so each process the suite starts (schedulers, servers, workers,
examples, doc blocks: thousands in a run) compiled all of minigluon from source again:
about 0.4 s of CPU each, half the cost of `import minigluon`. Python still reads bytecode it
finds, checked against each source's size and time, so compiling once here gives those
processes the import a user's installed package has, and nothing else changes.
"""
import compileall
import os

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
# what the suite's processes import: the package, the C extension's Python side, and the
# helpers the examples and benchmarks share (examples/_common.py ...)
COMPILED = ("minigluon", "minigluon_ext", "examples", "benchmarks")


def pytest_configure(config):
    for folder in COMPILED:
        path = os.path.join(REPO, folder)
        if os.path.isdir(path):
            # quiet=1: only a file that fails to compile is printed (its import fails anyway)
            compileall.compile_dir(path, quiet=1)
