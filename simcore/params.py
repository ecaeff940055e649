"""The coefficient vector: names, defaults, bounds and material-pair lookup.

Parameters form one named float64 vector ``params (NPARAM,)``; kernels index
it by the integer constants below and never see names.  Defaults are typical
of phenolic billiard balls on cloth with rubber cushions; they are starting
points for a fit, not measured truth.

=========  ========  =====================================================
name       default   meaning
=========  ========  =====================================================
mu_s       0.30      ground friction below the threshold speed v_th ("static"
                     in the patent: it also acts on a body moving slower than
                     v_th, and holds a body at rest while the applied force is
                     within mu_s * N)
mu_k       0.20      ground friction at speeds >= v_th (kinetic)
v_th       0.05      threshold speed [m/s] between the two ground coefficients
mu_bb      0.06      body-body Coulomb friction (impulse and sustained contact)
e_bb       0.95      body-body restitution
mu_w       0.15      body-wall Coulomb friction (claim 10)
e_bw       0.75      body-wall restitution
e_bg       0.50      body-ground restitution (falling spheres bounce)
=========  ========  =====================================================

Material pairs
--------------
The kernels never read ``params[MU_BB]`` directly.  They read
``params[bb_index[mat_a, mat_b, k]]`` (k = 0 friction, 1 restitution),
``params[bw_index[mat_body, mat_wall, k]]`` and ``params[bg_index[mat_body, k]]``
(k = mu_s, mu_k, v_th, e_bg).  With one material every table points at the
global entries; per-pair coefficients are new rows of ``params`` and new table
entries, with no kernel change.
"""

from dataclasses import dataclass

import numpy as np

MU_S, MU_K, V_TH, MU_BB, E_BB, MU_W, E_BW, E_BG = range(8)
NPARAM = 8

NAMES = ("mu_s", "mu_k", "v_th", "mu_bb", "e_bb", "mu_w", "e_bw", "e_bg")
DEFAULTS = {
    "mu_s": 0.30,
    "mu_k": 0.20,
    "v_th": 0.05,
    "mu_bb": 0.06,
    "e_bb": 0.95,
    "mu_w": 0.15,
    "e_bw": 0.75,
    "e_bg": 0.50,
}
#: Closed bounds of each parameter; ``v_th`` must also be strictly positive and
#: ``mu_s >= mu_k`` (checked in :func:`validate`).
BOUNDS = {
    "mu_s": (0.0, np.inf),
    "mu_k": (0.0, np.inf),
    "v_th": (0.0, np.inf),
    "mu_bb": (0.0, np.inf),
    "e_bb": (0.0, 1.0),
    "mu_w": (0.0, np.inf),
    "e_bw": (0.0, 1.0),
    "e_bg": (0.0, 1.0),
}


def vector(values=None):
    """Return the float64 parameter vector, defaults filled in for missing names.

    ``values`` is a mapping of parameter names to numbers.  An unknown name,
    a non-finite value or a value outside its bounds is a ``ValueError`` that
    names the parameter and what was expected.
    """
    values = dict(values or {})
    unknown = sorted(set(values) - set(NAMES))
    if unknown:
        raise ValueError(
            f"unknown parameter name(s) {unknown}; expected some of {list(NAMES)}"
        )
    vec = np.array([values.get(n, DEFAULTS[n]) for n in NAMES], dtype=np.float64)
    validate(vec)
    return vec


def as_dict(vec):
    """Map a parameter vector back to ``{name: float}``."""
    vec = np.asarray(vec, dtype=np.float64)
    return {n: float(vec[i]) for i, n in enumerate(NAMES)}


def validate(vec):
    """Raise ``ValueError`` naming the first parameter that is out of range."""
    vec = np.asarray(vec, dtype=np.float64)
    if vec.shape != (NPARAM,):
        raise ValueError(f"parameter vector has shape {vec.shape}, expected ({NPARAM},)")
    for i, name in enumerate(NAMES):
        x = vec[i]
        lo, hi = BOUNDS[name]
        if not np.isfinite(x):
            raise ValueError(f"parameter {name} = {x}: expected a finite number")
        if x < lo or x > hi:
            raise ValueError(f"parameter {name} = {x}: expected {lo} <= {name} <= {hi}")
    if vec[V_TH] <= 0.0:
        raise ValueError(f"parameter v_th = {vec[V_TH]}: expected v_th > 0")
    if vec[MU_S] < vec[MU_K]:
        raise ValueError(
            f"parameter mu_s = {vec[MU_S]} < mu_k = {vec[MU_K]}: expected mu_s >= mu_k"
        )


@dataclass(frozen=True)
class MaterialTables:
    """Index tables from material ids to rows of the parameter vector.

    ``bb (nmat, nmat, 2)``: (friction, restitution) of a body-body pair;
    ``bw (nmat, nwmat, 2)``: (friction, restitution) of a body-wall pair;
    ``bg (nmat, 4)``: (mu_s, mu_k, v_th, e_bg) of a body on the ground.
    """

    bb: np.ndarray
    bw: np.ndarray
    bg: np.ndarray

    @classmethod
    def single(cls, nmat=1, nwmat=1):
        """Every material pair reads the global coefficients."""
        bb = np.empty((nmat, nmat, 2), dtype=np.int64)
        bb[..., 0], bb[..., 1] = MU_BB, E_BB
        bw = np.empty((nmat, nwmat, 2), dtype=np.int64)
        bw[..., 0], bw[..., 1] = MU_W, E_BW
        bg = np.empty((nmat, 4), dtype=np.int64)
        bg[:] = (MU_S, MU_K, V_TH, E_BG)
        return cls(bb, bw, bg)
