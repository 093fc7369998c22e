"""NVRTC itself compiles every file of minigluon_ext/cuda_src, with gpu.py's options, to PTX
that holds the kernels gpu.py launches: what cuda_on_cpu cannot check. NVRTC needs no GPU,
only its library: the `nvidia-cuda-nvrtc` wheel (found on sys.path) or MINIGLUON_NVRTC=
/path/to/libnvrtc.so. Skipped where there is none.
"""
import ctypes
import ctypes.util
import glob
import importlib.util
import os
import re

import pytest

from minigluon_ext import gpu

# the kernels gpu.py launches, per source file, each for f32 and f64
KERNELS = {
    "twobit": ["quantize_2bit", "dequantize_2bit"],
    "columns": ["im2col", "col2im"],
    "pool": ["max_pool2d", "max_pool2d_backward", "max_pool2d_backward_planes", "avg_pool2d",
             "avg_pool2d_backward"],
    "relu": ["relu", "relu_backward"],
    "batchnorm": ["batch_norm_forward", "batch_norm_backward"],
    "update": ["sgd_update", "sgd_scaled_update", "adam_update", "nag_mom_update"],
}
ARCH = "-arch=compute_90"      # the H100's and H200's


def find_nvrtc():
    """The path of libnvrtc, or None."""
    if os.environ.get("MINIGLUON_NVRTC"):
        return os.environ["MINIGLUON_NVRTC"]
    spec = importlib.util.find_spec("nvidia")
    for root in (spec.submodule_search_locations or []) if spec else []:
        found = sorted(p for p in glob.glob(os.path.join(root, "*", "lib", "libnvrtc.so*"))
                       if ".alt." not in p)
        if found:
            return found[-1]
    return ctypes.util.find_library("nvrtc")


@pytest.fixture(scope="module")
def nvrtc():
    path = find_nvrtc()
    if path is None:
        pytest.skip("no libnvrtc: pip install nvidia-cuda-nvrtc, or set MINIGLUON_NVRTC")
    # NVRTC opens its builtins library by name: load it first from beside libnvrtc
    for builtins in glob.glob(os.path.join(os.path.dirname(path), "libnvrtc-builtins.so*")):
        if ".alt." not in builtins:
            ctypes.CDLL(builtins, mode=ctypes.RTLD_GLOBAL)
    lib = ctypes.CDLL(path)
    lib.nvrtcGetErrorString.restype = ctypes.c_char_p
    return lib


def compile_to_ptx(lib, name):
    """(status, log, ptx) of NVRTC on cuda_src/<name>.cu with gpu.py's options."""
    prog = ctypes.c_void_p()
    assert lib.nvrtcCreateProgram(ctypes.byref(prog), gpu.source(name).encode(),
                                  f"{name}.cu".encode(), 0, None, None) == 0
    options = [o.encode() for o in gpu.NVRTC_OPTIONS + (ARCH,)]
    argv = (ctypes.c_char_p * len(options))(*options)
    status = lib.nvrtcCompileProgram(prog, len(options), argv)
    size = ctypes.c_size_t()
    lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
    log = ctypes.create_string_buffer(size.value)
    lib.nvrtcGetProgramLog(prog, log)
    ptx = b""
    if status == 0:
        lib.nvrtcGetPTXSize(prog, ctypes.byref(size))
        buf = ctypes.create_string_buffer(size.value)
        lib.nvrtcGetPTX(prog, buf)
        ptx = buf.value
    lib.nvrtcDestroyProgram(ctypes.byref(prog))
    return status, log.value.decode(), ptx.decode()


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_nvrtc_compiles_the_source_cleanly_with_every_kernel(nvrtc, name):
    status, log, ptx = compile_to_ptx(nvrtc, name)
    assert status == 0, f"{name}.cu: {nvrtc.nvrtcGetErrorString(status).decode()}\n{log}"
    assert "warning" not in log, log
    entries = set(re.findall(r"\.entry (\w+)", ptx))
    want = {f"{k}_{suffix}" for k in KERNELS[name] for suffix in ("f32", "f64")}
    assert want <= entries, f"{name}.cu lacks {sorted(want - entries)}"


def test_every_source_file_is_compiled_here():
    files = {f[:-3] for f in os.listdir(gpu.SOURCE_DIR) if f.endswith(".cu")}
    assert files == set(KERNELS), "add the new cuda_src file and its kernels to KERNELS"
