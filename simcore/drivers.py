"""The batch drivers: every scenario of a batch through an engine's
per-scenario kernel, in parallel (``prange``) or one after another.

An engine's per-scenario kernel has the signature ``scenario(s, batch, out,
tan)``: it reads scenario ``s`` of ``batch``, writes only its own slices of
``out`` and ``tan``, and returns nothing.  :func:`run_each` hands it to the
driver as a first-class function (numba's ``types.FunctionType``, a call
through the kernel's address), not as a callee the driver's code links in.
Numba re-optimises and re-emits the whole call tree of every kernel a
kernel links in, and the ``prange`` driver does so twice (its loop body is
a kernel of its own): a driver that called the engine directly compiled
the engine two more times, a quarter of an empty cache's first run.  Through
the address, the drivers compile in about a second each, the same two serve
every engine, and the call costs one indirect jump per scenario.
"""

import numpy as np
from numba import prange, typeof, types

from .config import JIT_PARALLEL, jit


@jit(**JIT_PARALLEL)
def _each_parallel(n, scenario, batch, out, tan):
    """Scenarios ``0 .. n-1`` in parallel; each writes only its own slices."""
    for s in prange(n):
        scenario(np.int64(s), batch, out, tan)  # (prange indices are unsigned)


@jit
def _each_serial(n, scenario, batch, out, tan):
    """Scenarios ``0 .. n-1`` one after the other (the reference for bit-identity)."""
    for s in range(n):
        scenario(np.int64(s), batch, out, tan)


def run_each(scenario, batch, out, tan, parallel=True):
    """Run ``scenario(s, batch, out, tan)`` (a jitted kernel) for every
    scenario ``s`` of ``batch`` (``batch.body_count``'s length).

    The driver is compiled (or loaded from the cache) for the argument types
    with ``scenario`` typed as a function of them, and called through that
    compiled overload: called through the dispatcher, numba would type
    ``scenario`` as the kernel itself and link it in."""
    driver = _each_parallel if parallel else _each_serial
    argtypes = (typeof(batch), typeof(out), typeof(tan))
    fn = types.FunctionType(types.none(types.int64, *argtypes))
    key = (types.int64, fn, *argtypes)
    compiled = driver.overloads.get(key)
    if compiled is None:
        driver.compile(key)
        compiled = driver.overloads[key]
    compiled.entry_point(batch.body_count.shape[0], scenario, batch, out, tan)
