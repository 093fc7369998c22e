"""Build of minigluon's C extension; everything else about the package is in pyproject.toml.

`pip install .` and `pip install -e .` compile `minigluon_ext._kernels` from
minigluon_ext/src/*.c.  Flags: -O3 for baseline x86-64 (no -march=native: the wheel must
run on any x86-64; AVX2/F16C paths are picked at run time), -ffp-contract=off so no
multiply-add is fused (the NumPy fallback must give the same bits), -pthread for the
reduction threads.
"""
import glob
import os

from setuptools import Extension, setup

HERE = os.path.dirname(os.path.abspath(__file__))


def _rel(pattern):
    return sorted(os.path.relpath(p, HERE) for p in glob.glob(os.path.join(HERE, pattern)))


kernels = Extension(
    "minigluon_ext._kernels",
    sources=_rel("minigluon_ext/src/*.c"),
    depends=_rel("minigluon_ext/src/*.h"),
    include_dirs=["minigluon_ext/src"],
    extra_compile_args=["-O3", "-std=gnu11", "-ffp-contract=off", "-pthread",
                        "-fvisibility=hidden", "-Wall"],
    extra_link_args=["-pthread"],
)

# The header must travel in the sdist too (setuptools does not ship `depends`); the CUDA
# sources are compiled at run time by minigluon_ext/gpu.py; the job's live page
# (minigluon/tools/dashboard.py) is served from its HTML file.
setup(ext_modules=[kernels], package_data={"minigluon_ext": ["src/*.h", "cuda_src/*.cu",
                                                             "cuda_src/*.cuh"],
                                           "minigluon.tools": ["*.html"]})
