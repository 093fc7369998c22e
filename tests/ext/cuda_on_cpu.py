"""minigluon_ext/cuda_src compiled for the CPU, as a backend for `minigluon_ext.gpu.Kernels`.

The CUDA sources are compiled by g++ with cuda_on_cpu.h in front (kernel qualifiers
dropped, thread coordinates as globals), and a launch calls the kernel once per thread of a
small grid, one thread after another. The kernels are grid-stride loops over independent
items (common.cuh's rule), so any grid gives the results a GPU gives, and the arithmetic is
the same IEEE float arithmetic (-ffp-contract=off, as NVRTC's --fmad=false). What this does
not check: that NVRTC accepts the source, and speed.

Arguments follow CuPy's kernel-call rule strictly: an array is a pointer, a scalar must be
a NumPy scalar of the kernel parameter's exact width (np.float32, np.int64, ...).
"""
import contextlib
import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile

import numpy as np

from minigluon_ext import gpu

HERE = os.path.dirname(os.path.abspath(__file__))
SHIM = os.path.join(HERE, "cuda_on_cpu.h")
GRID, BLOCK = 3, 4             # 12 threads: enough for every thread to stride at least once

_SCALARS = {np.float32: ctypes.c_float, np.float64: ctypes.c_double,
            np.int64: ctypes.c_longlong, np.int32: ctypes.c_int, np.uint32: ctypes.c_uint,
            np.uint64: ctypes.c_ulonglong}


def compiler():
    """The C++ compiler to use, or None."""
    return shutil.which(os.environ.get("CXX", "g++")) or shutil.which("c++")


class CpuBackend:
    """`Kernels`' backend that runs the CUDA sources, compiled for this CPU, on NumPy arrays."""

    xp = np

    def __init__(self, cache_dir=None):
        self.cache_dir = cache_dir or os.path.join(tempfile.gettempdir(),
                                                   f"minigluon-cuda-on-cpu-{os.getuid()}")
        self._libraries = {}
        self.launches = []             # (file, kernel, n) of each launch, for tests

    def library(self, file):
        """The shared library built from cuda_src/<file>.cu (built once per source text)."""
        if file not in self._libraries:
            self._libraries[file] = ctypes.CDLL(self._build(file))
        return self._libraries[file]

    def _build(self, file):
        with open(SHIM) as f:
            text = f.read() + "\n" + gpu.source(file)
        digest = hashlib.sha256(text.encode()).hexdigest()[:16]
        os.makedirs(self.cache_dir, exist_ok=True)
        so = os.path.join(self.cache_dir, f"{file}-{digest}.so")
        if os.path.exists(so):
            return so
        cxx = compiler()
        if cxx is None:
            raise RuntimeError("no C++ compiler (g++) to build the CUDA sources for the CPU; "
                               "install g++ or set CXX")
        src = os.path.join(self.cache_dir, f"{file}-{digest}.cpp")
        with open(src, "w") as f:
            f.write(text)
        tmp = f"{so}.{os.getpid()}.tmp"
        proc = subprocess.run([cxx, "-O1", "-std=c++14", "-shared", "-fPIC", "-ffp-contract=off",
                               "-fno-fast-math", "-Wall", "-Werror", "-Wno-unused-function",
                               "-o", tmp, src],
                              capture_output=True, text=True, timeout=120)
        if proc.returncode != 0:
            raise RuntimeError(f"compiling cuda_src/{file}.cu for the CPU failed:\n"
                               f"{proc.stderr}")
        os.replace(tmp, so)            # atomic: a parallel build never reads half a file
        return so

    @staticmethod
    def device_of(x):
        return contextlib.nullcontext()          # one "device": the host

    def launch(self, file, kernel, n, args, like):
        lib = self.library(file)
        fn = getattr(lib, kernel)
        fn.restype = None
        cargs = [self._arg(kernel, i, a) for i, a in enumerate(args)]
        dims = {name: _Dim3.in_dll(lib, name) for name in
                ("blockIdx", "blockDim", "threadIdx", "gridDim")}
        dims["gridDim"].x, dims["blockDim"].x = GRID, BLOCK
        for b in range(GRID):
            for t in range(BLOCK):
                dims["blockIdx"].x, dims["threadIdx"].x = b, t
                fn(*cargs)
        self.launches.append((file, kernel, n))

    @staticmethod
    def _arg(kernel, index, value):
        if isinstance(value, np.ndarray):
            return ctypes.c_void_p(value.ctypes.data)
        for kind, ctype in _SCALARS.items():
            if type(value) is kind:
                return ctype(value)
        raise TypeError(f"{kernel}: argument {index} is {type(value).__name__} {value!r}; a "
                        "kernel argument must be an array or a NumPy scalar of the parameter's "
                        "width (CuPy would guess a Python number's width)")


class _Dim3(ctypes.Structure):
    _fields_ = [("x", ctypes.c_uint), ("y", ctypes.c_uint), ("z", ctypes.c_uint)]


class CpuCopier:
    """minigluon/kvstore/staging.py's copier on the host, for tests: a "pinned buffer" is a
    NumPy array and a copy is np.copyto. It counts allocations, and the waits for copies
    to a "device" (each copy returns a handle whose synchronize() counts one)."""

    def __init__(self):
        self.allocations = 0
        self.synchronized = 0
        self.copies_to_device = 0

    def pinned(self, nbytes):
        self.allocations += 1
        return np.empty(nbytes, np.uint8)

    def to_host(self, src, dest):
        np.copyto(dest, src)

    def to_device(self, src, dest):
        np.copyto(dest.reshape(-1), src)
        self.copies_to_device += 1
        return _Done(self)


class _Done:
    def __init__(self, copier):
        self._copier = copier

    def synchronize(self):
        self._copier.synchronized += 1
