"""JIT policy and named numeric tolerances: the one place they are set.

Every kernel in simcore is compiled with :data:`JIT` (serial kernels) or
:data:`JIT_PARALLEL` (the batch driver).  ``fastmath`` stays off: results must
be bit-identical between serial and parallel runs, and the gradient checks of
the identification core compare against finite differences at 1e-6.

Tolerances (SI units):

``GAP_TOL``
    Distance [m] under which two surfaces count as touching when contacts are
    formed at the start of a run.
``V_CONTACT``
    Approach speed [m/s] below which an impact between surfaces that are being
    pressed together is treated as plastic and the pair enters sustained
    contact.  This is the Zeno guard of the event-driven scheme: a ball pressed
    into a wall with restitution e > 0 would otherwise bounce infinitely often
    in finite time.  The bounce it removes has speed below e * V_CONTACT.
``V_STOP``
    Speed [m/s] under which a tangential velocity left after a stop event is
    taken as zero (it is zero up to rounding in the exact integrator).
``PIVOT_TOL``
    Relative pivot size under which a contact-force equation is taken as
    redundant (for example a sphere touching two opposite walls).
``DIR_TOL``
    Relative size of the component of a tangential acceleration normal to the
    sliding direction above which that direction is said to rotate, so the
    step is bounded by ``dt``.
``ROOT_MAXITER``
    Iteration cap of the safeguarded Newton root finder.
"""

import hashlib
import os
import tempfile
from pathlib import Path

import numba
from numba import njit


def _source_keyed_cache_dir():
    """A numba cache directory keyed by the hash of every simcore source file.

    numba's ``cache=True`` invalidates a kernel only when its own file
    changes; a kernel that inlines functions from another module would keep
    a stale compilation after that module is edited.  Keying the directory on
    all of simcore's sources makes any edit a fresh cache.  ``NUMBA_CACHE_DIR``
    set by the user wins.
    """
    digest = hashlib.sha256()
    for path in sorted(Path(__file__).parent.glob("*.py")):
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    base = os.environ.get("XDG_CACHE_HOME") or (
        os.path.join(os.environ["HOME"], ".cache") if os.environ.get("HOME") else tempfile.gettempdir())
    return os.path.join(base, "contactfit", "numba-" + digest.hexdigest()[:16])


if not os.environ.get("NUMBA_CACHE_DIR"):
    numba.config.CACHE_DIR = _source_keyed_cache_dir()

JIT = dict(cache=True, nogil=True, fastmath=False, error_model="numpy")
JIT_PARALLEL = dict(JIT, parallel=True)

GAP_TOL = 1e-12
V_CONTACT = 1e-5
V_STOP = 1e-12
PIVOT_TOL = 1e-12
DIR_TOL = 1e-12
ROOT_MAXITER = 200

#: Iterations of one scenario's event loop after which it is abandoned with
#: ``STATUS_MAX_ITER`` (a guard against a bug, never reached by valid input).
MAX_LOOP = 50_000_000


def jit(fn=None, **overrides):
    """``numba.njit`` with the project policy (``cache``, ``nogil``, no fastmath)."""
    opts = dict(JIT, **overrides)
    if fn is None:
        return njit(**opts)
    return njit(**opts)(fn)
