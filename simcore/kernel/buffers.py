"""Large arrays whose pages are mapped in one system call.

NumPy advises the kernel to back every array of 4 MB or more with
transparent huge pages (``madvise(MADV_HUGEPAGE)``).  Where the kernel
compacts memory to honour that advice at the first touch
(``/sys/kernel/mm/transparent_hugepage/defrag`` = ``madvise``, as on the
machines this project is measured on), writing a fresh 1.9 GB array runs at
0.5-0.7 GB/s: 3-4 s, where a 10,000-scenario dataset's columns and its
measured positions take several such arrays.  An anonymous mapping with
``MAP_POPULATE`` and ordinary pages has all of them in place when it
returns: 0.55-0.6 s for the same 1.9 GB, and the first write after it runs
at memory speed (0.08 s).  (Memory the virtual machine has not backed yet
costs more either way: 1.4 GB took 3.9 s to populate in a fresh process
right after a 3 GB read.)  Figures from a probe that writes 1.9 GB once in
a fresh process, and from ``python -m benchmarks.pipeline``, whose read of
60 M rows went from 10-12 s to 3.2-3.9 s.

Only arrays of at least :data:`MIN_BYTES` go this way (below it the
difference is noise), and only where the platform has ``MAP_POPULATE``
(Linux); elsewhere these are ``np.empty``, ``np.zeros`` and ``np.full``.
The memory is returned when the last array viewing it is collected.
"""

import mmap

import numpy as np

#: Arrays at least this large are mapped and populated at once.
MIN_BYTES = 64 << 20

_FLAGS = (mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | mmap.MAP_POPULATE
          if hasattr(mmap, "MAP_POPULATE") else None)


def _mapped(shape, dtype):
    """A populated anonymous mapping as a zeroed array of ``shape``, or None
    when it is under :data:`MIN_BYTES`, empty, or the platform has no
    ``MAP_POPULATE``."""
    shape = (shape,) if np.isscalar(shape) else tuple(shape)
    dtype = np.dtype(dtype)
    count = int(np.prod(shape, dtype=np.int64))
    nbytes = count * dtype.itemsize
    if _FLAGS is None or nbytes == 0 or nbytes < MIN_BYTES:
        return None
    return np.frombuffer(mmap.mmap(-1, nbytes, flags=_FLAGS), dtype, count).reshape(shape)


def zeros(shape, dtype=np.float64):
    """``np.zeros(shape, dtype)``; a large one is mapped populated (anonymous
    pages are zero)."""
    out = _mapped(shape, dtype)
    return np.zeros(shape, dtype) if out is None else out


def empty(shape, dtype=np.float64):
    """``np.empty(shape, dtype)`` (a large one comes zeroed: :func:`zeros`)."""
    out = _mapped(shape, dtype)
    return np.empty(shape, dtype) if out is None else out


def full(shape, value, dtype=np.float64):
    """``np.full(shape, value, dtype)``."""
    out = zeros(shape, dtype)
    out.fill(value)
    return out
