"""JIT policy and named numeric tolerances: the one place they are set.

Every kernel in simcore is compiled with :data:`JIT` (serial kernels) or
:data:`JIT_PARALLEL` (the batch driver).  ``fastmath`` stays off: results must
be bit-identical between serial and parallel runs, and the gradient checks of
the identification core compare against finite differences at 1e-6.

Kernels that only *borrow* arrays, ``jit(borrow=True)``, compile without
numba's reference counting (``_nrt=False``): they allocate no array and
return none, so every array they see (a record's field, a view they take)
belongs to a caller that keeps it alive for the call.  The event loop's
stages are such kernels: they run every pass, and counting the references
to their records' fields would cost more than their arithmetic.  Numba
refuses to compile an allocation in a borrowing kernel, so the promise is
checked at compile time.  A borrowing kernel may call one that allocates
(the allocating kernel counts its own references).

Numba gives every kernel two entry points besides its own: a CPython
one (for calls from Python, unboxing every argument) and a C-callable one
(for calls through its address).  Each costs compile time on an empty
cache, so a kernel keeps only those it is called through: the C-callable
one with ``jit(address=True)`` (the per-scenario kernels that
:func:`simcore.kernel.drivers.run_each` calls through their address); the
borrowing kernels, which other kernels call, no CPython one unless
``jit(borrow=True, python=True)`` (the stages the tests call one at a
time).  Called from Python, a kernel without one raises a ``TypeError``
naming it (numba itself would crash on the null entry point).

The kernels compile without LLVM's loop vectoriser (numba's
``LOOP_VECTORIZE``, switched off while a kernel compiles, under numba's
compiler lock, and restored after): their loops run over three
components or a few contacts, where it gains nothing at run time
(``docs/PERFORMANCE.md``), and it cost 5 s of the first run's minute.

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
``SKIN``
    Distance [m] under which the Moreau-Jean stepper counts two surfaces as
    touching (its bodies are detected a ``SKIN`` larger): a body resting on
    another with no penetration, as a stack settles, would otherwise have
    its contact points chosen by rounding (two corners of four: it tips).
``V_SLEEP``, ``T_SLEEP``
    The Moreau-Jean stepper puts a body in contact to sleep (holds it, takes
    no step for it) once every point of it has moved slower than ``V_SLEEP``
    [m/s] (its centre's speed plus its angular speed times its reach) for
    ``T_SLEEP`` [s]: at rest its steps return velocities of rounding size,
    and a body rocking or sliding to a stop passes the threshold for one
    step at most.  A body balanced within about 1e-3 rad of an edge's tipping
    point could be held there; a sphere rolling slower than ``V_SLEEP`` stops.
"""

import ast
import functools
import hashlib
import os
import tempfile
from pathlib import Path

from numba import njit
from numba.core import caching
from numba.core import config as numba_config
from numba.core.compiler_lock import global_compiler_lock
from numba.core.registry import CPUDispatcher

#: The simcore package's folder: kernels are the jitted functions of any
#: module below it, at any depth.
_PACKAGE = Path(__file__).resolve().parents[1]


def cache_root():
    """Where the compiled kernels are kept: ``NUMBA_CACHE_DIR`` when set (it
    then holds the whole cache), else ``$XDG_CACHE_HOME/contactfit/numba``
    (``~/.cache`` when unset; the temporary directory without a home)."""
    if os.environ.get("NUMBA_CACHE_DIR"):
        return os.environ["NUMBA_CACHE_DIR"]
    base = os.environ.get("XDG_CACHE_HOME") or (
        os.path.join(os.environ["HOME"], ".cache") if os.environ.get("HOME")
        else tempfile.gettempdir())
    return os.path.join(base, "contactfit", "numba")


def module_name(path):
    """A simcore file's module name relative to the package, dotted
    (``simcore/sliding/stages.py`` -> ``sliding.stages``; a package's
    ``__init__.py`` -> the package), or None outside simcore."""
    path = Path(path).resolve()
    try:
        parts = list(path.relative_to(_PACKAGE).with_suffix("").parts)
    except ValueError:
        return None
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _file(name):
    """The file of a simcore module named by :func:`module_name`, or None."""
    base = _PACKAGE.joinpath(*name.split(".")) if name else _PACKAGE
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def _imported(name, path):
    """The simcore modules a module's source imports, as :func:`module_name`
    names: relative imports at any level, absolute ``simcore.`` ones, and
    ``from PACKAGE import module`` (the module and the package's
    ``__init__``)."""
    package = name.split(".")[:-1] if path.name != "__init__.py" else name.split(".")
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - (node.level - 1)] if node.level > 1 else package
                if node.level - 1 > len(package):
                    continue
                target = base + (node.module.split(".") if node.module else [])
            elif node.module and node.module.split(".")[0] == "simcore":
                target = node.module.split(".")[1:]
            else:
                continue
            found.add(".".join(target))
            found.update(".".join(target + [a.name]) for a in node.names)
        elif isinstance(node, ast.Import):
            found.update(".".join(a.name.split(".")[1:]) for a in node.names
                         if a.name.split(".")[0] == "simcore")
    # a module imported also runs its packages' __init__
    with_packages = set(found)
    for dotted in found:
        parts = dotted.split(".")
        with_packages.update(".".join(parts[:k]) for k in range(1, len(parts)))
    # simcore's own __init__ only gathers the public names: no kernel reads it
    return frozenset(n for n in with_packages if n and n != name and _file(n) is not None)


@functools.cache
def _source(name):
    """A simcore module's source bytes and the simcore modules it imports."""
    path = _file(name)
    return path.read_bytes(), _imported(name, path)


#: Modules whose kernels are compiled for other modules' records: the batch
#: drivers receive every engine's batch, outputs and per-scenario kernel, and
#: numba's index of their compiled versions pickles those types by name, so a
#: record renamed or removed anywhere must start them afresh.  Their stamp
#: covers every simcore module.
WIDE = frozenset({"kernel.drivers"})


def closure_modules(module):
    """A simcore module (a :func:`module_name`) and every simcore module it
    imports, transitively: what its jitted code can read (callees, and
    global constants, which numba freezes into the compiled code); every
    simcore module for the modules of :data:`WIDE`."""
    if module in WIDE:
        return {module_name(p) for p in _PACKAGE.rglob("*.py")} - {""}
    seen, todo = set(), [module]
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo.extend(_source(name)[1])
    return seen


@functools.cache
def source_closure(module):
    """The digest of :func:`closure_modules`' sources."""
    digest = hashlib.sha256()
    for name in sorted(closure_modules(module)):
        digest.update(name.encode())
        digest.update(_source(name)[0])
    return digest.hexdigest()


class _ClosureLocator(caching._SourceFileBackedLocatorMixin, caching._CacheLocator):
    """numba's cache locator for simcore's kernels, in any subpackage.

    numba's own stamp is the hash of the kernel's file alone, but a kernel's
    compiled code inlines callees from other modules: editing one of those
    would leave a stale kernel.  This stamp, and the directory the kernels
    are kept in, is :func:`source_closure` of the kernel's module, so a
    kernel recompiles exactly when a module it can read changes, and editing
    a module no jitted code imports (``identify/fit.py``, ``flows/``)
    recompiles nothing.  Modules are told apart by their dotted name, so two
    files of one name in different subpackages never share a stamp.
    """

    def __init__(self, py_func, py_file):
        self._py_file = py_file
        self._module = module_name(py_file)
        self._lineno = py_func.__code__.co_firstlineno
        # A directory per source version: numba unpickles an index before it
        # compares stamps, and an index written by other sources may name
        # types that no longer exist.
        self._cache_path = os.path.join(cache_root(), self.get_suitable_cache_subpath(py_file),
                                        source_closure(self._module)[:16])

    def get_cache_path(self):
        return self._cache_path

    def get_source_stamp(self):
        return source_closure(self._module)

    @classmethod
    def from_function(cls, py_func, py_file):
        if module_name(py_file) is None:
            return None
        return super().from_function(py_func, py_file)


caching.CacheImpl._locator_classes.insert(0, _ClosureLocator)
# Every stamp now, from the sources as this process imports them: a file
# edited while a long run compiles cannot pair old code with a new stamp.
for _path in _PACKAGE.rglob("*.py"):
    source_closure(module_name(_path))


def _ready_marker(task, module):
    return Path(cache_root()) / f"ready-{task}-{source_closure(module)[:16]}"


def compiled(task, module="data.replay"):
    """Whether a run of ``task`` (a name of the caller's) compiled and cached
    the kernels of ``module``'s closure for its current sources (it then
    called :func:`mark_compiled`)."""
    return _ready_marker(task, module).exists()


def mark_compiled(task, module="data.replay"):
    """Note that ``task``'s kernels are in the cache (see :func:`compiled`)."""
    try:
        path = _ready_marker(task, module)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()
    except OSError:
        pass  # an unwritable cache only costs the compile message next time


JIT = dict(cache=True, nogil=True, fastmath=False, error_model="numpy")
JIT_PARALLEL = dict(JIT, parallel=True)

GAP_TOL = 1e-12
V_CONTACT = 1e-5
V_STOP = 1e-12
PIVOT_TOL = 1e-12
DIR_TOL = 1e-12
ROOT_MAXITER = 200
SKIN = 1e-9
V_SLEEP = 1e-4
T_SLEEP = 0.02

#: Iterations of one scenario's event loop after which it is abandoned with
#: ``STATUS_MAX_ITER`` (a guard against a bug, never reached by valid input).
MAX_LOOP = 50_000_000


class _Kernel(CPUDispatcher):
    """A simcore kernel: compiled without LLVM's loop vectoriser (see the
    module docstring); numba's setting is left as it was for other code."""

    def compile(self, sig):
        with global_compiler_lock:
            vectorize = numba_config.LOOP_VECTORIZE
            numba_config.LOOP_VECTORIZE = False
            try:
                return super().compile(sig)
            finally:
                numba_config.LOOP_VECTORIZE = vectorize


class _KernelOnly(_Kernel):
    """A kernel compiled without a CPython entry point: other kernels call
    it, Python gets an error (see the module docstring)."""

    def __call__(self, *args, **kws):
        f = self.py_func
        raise TypeError(f"{f.__module__}.{f.__qualname__} is called by other kernels only: "
                        "it has no Python entry point (jit(python=True) gives it one)")


def jit(fn=None, *, borrow=False, python=None, address=False, **overrides):
    """``numba.njit`` with the project policy (``cache``, ``nogil``, no
    fastmath); ``borrow``: a kernel that only borrows arrays; ``python``:
    callable from Python (by default, all but the borrowing kernels);
    ``address``: callable through its address (see above)."""
    opts = dict(JIT, **overrides)
    python = not borrow if python is None else python
    opts["no_cfunc_wrapper"] = not address
    opts["no_cpython_wrapper"] = not python
    # (set either way: numba lets a kernel that leaves it unset inherit it
    # from the kernel being compiled when it is first called, so a kernel
    # first compiled from a borrowing caller would lose its allocations)
    opts["_nrt"] = not borrow

    def compile_(f):
        kernel = njit(**opts)(f)
        kernel.__class__ = _Kernel if python else _KernelOnly
        return kernel

    return compile_ if fn is None else compile_(fn)
