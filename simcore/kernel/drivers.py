"""The batch drivers: every scenario of a batch through an engine's
per-scenario kernel, in parallel (``prange``) or one after another.

An engine's per-scenario kernel has the signature ``scenario(s, batch, out,
tan)``: it reads scenario ``s`` of ``batch``, writes only its own slices of
``out`` and ``tan``, returns nothing, and reports a failure by a status in
``out``, never by raising.  :func:`run_each` hands it to the driver as a
first-class function (numba's ``types.FunctionType``, a call through the
address of the kernel's C-callable entry point, ``jit(address=True)``), not
as a callee the driver's code links in.
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

try:  # numba's own key of a value's type, computed in C (what its dispatcher matches on)
    from numba._dispatcher import compute_fingerprint as _fingerprint
except ImportError:  # pragma: no cover - a numba without it: the type itself
    _fingerprint = typeof


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


#: The drivers' compiled entry points, by kernel, driver and argument types.
_ENTRIES = {}


def run_each(scenario, batch, out, tan, parallel=True):
    """Run ``scenario(s, batch, out, tan)`` (a jitted kernel) for every
    scenario ``s`` of ``batch`` (``batch.body_count``'s length).

    The driver is compiled (or loaded from the cache) for the argument types
    with ``scenario`` typed as a function of them, and called through that
    compiled overload: called through the dispatcher, numba would type
    ``scenario`` as the kernel itself and link it in.  The overload is kept
    by the arguments' type fingerprints, so a call costs what a
    dispatcher's does, not a typing of every array of the records."""
    key = (scenario, parallel, _fingerprint(batch), _fingerprint(out), _fingerprint(tan))
    entry = _ENTRIES.get(key)
    if entry is None:
        entry = _ENTRIES.setdefault(key, _entry(scenario, parallel, batch, out, tan))
    driver, kernel = entry
    driver(batch.body_count.shape[0], kernel, batch, out, tan)


class _Address(types.WrapperAddressProtocol):
    """A compiled kernel as a first-class function (numba's protocol): the
    address of its C-callable entry point for one signature.  (Handed the
    dispatcher itself, the driver's entry would look the address up anew
    at every call, 0.13 ms.)"""

    def __init__(self, kernel, sig):
        compiled = kernel.get_compile_result(sig)  # compiles it if need be
        self._library = compiled.library  # keeps the code alive
        self._address = compiled.library.get_pointer_to_function(
            compiled.fndesc.llvm_cfunc_wrapper_name)
        self._sig = sig

    def __wrapper_address__(self):
        return self._address

    def signature(self):
        return self._sig


def _entry(scenario, parallel, batch, out, tan):
    """The driver's entry point and the kernel's address for these
    arguments, each compiled (or loaded from the cache) if need be."""
    driver = _each_parallel if parallel else _each_serial
    argtypes = (typeof(batch), typeof(out), typeof(tan))
    fn = types.FunctionType(types.none(types.int64, *argtypes))
    kernel = _Address(scenario, fn.signature)
    key = (types.int64, fn, *argtypes)
    if key not in driver.overloads:
        driver.compile(key)
    return driver.overloads[key].entry_point, kernel
