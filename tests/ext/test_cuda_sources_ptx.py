"""minigluon_ext/cuda_src compiled for a GPU without one: nvcc turns each source (as
gpu.source gives it to NVRTC, with NVRTC's options) into PTX, and every launch that
gpu.Kernels makes passes the arguments the kernel declares there, one by one (a pointer
for an array, the exact float and integer widths for scalars: CuPy passes a NumPy scalar
by its dtype, so a wrong width would shift every later argument on a GPU).

Also: no fused multiply-add in the PTX (--fmad=false) and IEEE-rounded division and square
root, which the bit-for-bit tests on the CPU build rely on. Needs nvcc (a CUDA toolkit);
NVRTC itself and a GPU are tests/gpu's.
"""
import re
import shutil
import subprocess

import numpy as np
import pytest

from minigluon_ext import gpu

import cuda_on_cpu

NVCC = shutil.which("nvcc")
pytestmark = pytest.mark.skipif(NVCC is None or cuda_on_cpu.compiler() is None,
                                reason="needs nvcc (a CUDA toolkit) and g++")
FILES = ("twobit", "update")


def nvcc_options():
    """gpu.NVRTC_OPTIONS as nvcc spells them (--std=c++14 is -std=c++14)."""
    return [opt.replace("--std=", "-std=") for opt in gpu.NVRTC_OPTIONS]


@pytest.fixture(scope="module")
def ptx(tmp_path_factory):
    """{file: PTX text} for sm_90 (H100/H200)."""
    folder = tmp_path_factory.mktemp("ptx")
    procs = {}
    for name in FILES:                     # side by side: each nvcc takes seconds
        src = folder / f"{name}.cu"
        src.write_text(gpu.source(name))
        procs[name] = subprocess.Popen([NVCC, "-ptx", "-arch=sm_90", *nvcc_options(),
                                        "-Werror", "all-warnings", "-o",
                                        str(folder / f"{name}.ptx"), str(src)],
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                       text=True)
    out = {}
    for name, proc in procs.items():
        try:
            _, err = proc.communicate(timeout=300)
        finally:
            proc.kill()                    # no-op once it exited; ends it past the deadline
            proc.wait()
        assert proc.returncode == 0, f"nvcc refused cuda_src/{name}.cu:\n{err}"
        out[name] = (folder / f"{name}.ptx").read_text()
    return out


def entries(ptx_text):
    """{kernel: [PTX parameter types]} of the kernels a PTX file defines."""
    found = {}
    for name, params in re.findall(r"\.entry\s+(\w+)\s*\(([^)]*)\)", ptx_text):
        found[name] = re.findall(r"\.param\s+\.(\w+)", params)
    return found


class RecordingBackend(cuda_on_cpu.CpuBackend):
    """The CPU build, recording each launch's argument types as PTX would name them."""

    WIDTHS = {np.float32: "f32", np.float64: "f64", np.int32: "u32", np.uint32: "u32",
              np.int64: "u64", np.uint64: "u64"}

    def __init__(self):
        super().__init__()
        self.calls = []

    def launch(self, file, kernel, n, args, like):
        kinds = ["u64" if isinstance(a, np.ndarray) else self.WIDTHS[type(a)] for a in args]
        self.calls.append((file, kernel, kinds))
        super().launch(file, kernel, n, args, like)


def every_kernel_once(k):
    """Each kernel of twobit.cu and update.cu, in float32 and float64."""
    for dtype in (np.float32, np.float64):
        w, g, m, v = (np.linspace(-1, 1, 40).astype(dtype) + i for i in range(4))
        k.sgd_update(w, g, m, 0.1, 1e-3, 0.9, 1.0, 0.5)
        k.sgd_update(w, g, None, 0.1)
        k.adam_update(w, g, m, np.abs(v), 1e-3, wd=1e-4)
        k.nag_mom_update(w, g, m, 0.1, 0.9, form="operator")
        k.sgd_scaled_update(w, g, 0.1, 1e-3)
        codes = k.quantize_2bit(g, np.zeros_like(g), 0.5)
        k.dequantize_2bit_add(codes, 0.5, w)


def test_nvcc_compiles_each_source_without_fma_and_with_ieee_division(ptx):
    for name, text in ptx.items():
        assert entries(text), f"cuda_src/{name}.cu defines no kernel"
        assert not re.search(r"\bfma\.", text), f"{name}: a fused multiply-add"
        assert not re.search(r"\b(div|sqrt)\.(approx|full)\.", text), \
            f"{name}: an approximate division or square root"


def test_each_launch_passes_the_parameters_its_kernel_declares(ptx):
    backend = RecordingBackend()
    every_kernel_once(gpu.Kernels(backend))
    declared = {}
    for name in FILES:
        declared.update({k: (name, p) for k, p in entries(ptx[name]).items()})
    for file, kernel, kinds in backend.calls:
        assert kernel in declared, f"{kernel} is launched but {file}.cu does not define it"
        assert declared[kernel] == (file, kinds), \
            f"{kernel}: passed {kinds}, {declared[kernel][0]}.cu declares {declared[kernel][1]}"
    assert {k for _, k, _ in backend.calls} == set(declared), "a kernel was never launched"
