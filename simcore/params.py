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

Two global offsets follow the coefficients.  They are not material
properties but nuisance unknowns of the measurement set-up, fixed at 0 unless
a fit frees them (:data:`COEFFICIENTS` is the default free set):

=============  =======  ==================================================
name           default  meaning
=============  =======  ==================================================
ground_offset  0.0      height [m] of the real ground above the dataset's
                        ``ground_z``.  The simulated ground is the plane
                        ``z = ground_z + ground_offset``; a body that starts
                        resting on the nominal ground (its initial height
                        ``ground_z + r``, as the reader snaps it) starts
                        resting on the offset one, every other initial
                        position stays as measured.  For offsets within the
                        reader's 3 mm snap; a larger one belongs in
                        ``dataset.yaml``'s ``ground_z``.
time_offset    0.0      delay [s] of the controls' clock behind the
                        trajectories': a window logged as ``[t0, t1)`` acts
                        over ``[t0 + time_offset, t1 + time_offset)`` of the
                        simulated (= measured) time.  The scenario itself is
                        started from the measured samples, so a shift of
                        the whole clock is invisible; only the lag between
                        the commanded forces and the tracked motion (the
                        latency of a motion-capture or video pipeline) can
                        be identified.
=============  =======  ==================================================

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

MU_S, MU_K, V_TH, MU_BB, E_BB, MU_W, E_BW, E_BG, GROUND_OFFSET, TIME_OFFSET = range(10)
NPARAM = 10

NAMES = ("mu_s", "mu_k", "v_th", "mu_bb", "e_bb", "mu_w", "e_bw", "e_bg",
         "ground_offset", "time_offset")
#: The contact coefficients proper: what a fit frees unless told otherwise.
COEFFICIENTS = NAMES[:8]
#: The global offsets of the measurement set-up (nuisance unknowns).
OFFSETS = NAMES[8:]
DEFAULTS = {
    "mu_s": 0.30,
    "mu_k": 0.20,
    "v_th": 0.05,
    "mu_bb": 0.06,
    "e_bb": 0.95,
    "mu_w": 0.15,
    "e_bw": 0.75,
    "e_bg": 0.50,
    "ground_offset": 0.0,
    "time_offset": 0.0,
}
#: The offsets' natural size: relative measures (a weak-identifiability
#: threshold, multi-start spreads) are taken against ``max(|value|, scale)``,
#: since an offset's true value may be zero.
OFFSET_SCALE = {"ground_offset": 1e-3, "time_offset": 1e-2}
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
    "ground_offset": (-np.inf, np.inf),
    "time_offset": (-np.inf, np.inf),
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


def validate_rows(values, nscen=None):
    """:func:`validate` a vector, or each distinct row of an ``(n, NPARAM)``
    array once (the finite differences' copies repeat a few rows many
    times); with ``nscen``, such an array must have that many rows."""
    vec = np.asarray(values, dtype=np.float64)
    if vec.ndim != 2:
        validate(vec)
        return
    if nscen is not None and vec.shape[0] != nscen:
        raise ValueError(f"parameter rows: {vec.shape[0]} for {nscen} scenarios")
    for row in np.unique(vec, axis=0):
        validate(row)


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
