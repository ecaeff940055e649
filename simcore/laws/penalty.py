"""Penalty contact laws: normal force from penetration, friction from the
stiction curve, and the stable step they allow.

A contact point has a penetration ``x >= 0`` [m] (how far the surfaces
overlap along the contact normal) and a penetration rate ``xd`` [m/s]
(positive while they approach).  The normal force [N] is, per law
(``dataset.yaml`` ``laws:``, per contact kind):

``spring_damper`` (``001_*``, :mod:`simcore.laws.spring_damper`)
    ``F = k_sd x + c_sd xd``.
``hunt_crossley`` (``001_*``, :mod:`simcore.laws.hunt_crossley`; the default for boxes)
    ``F = k_hc x^n_hc (1 + chi xd)``, ``chi = a(e) / v_i`` from the pair's
    restitution so that a contact rebounds with exactly ``e``.
``impact`` (``003_*``, :mod:`simcore.laws.impact`)
    ``F = k_imp x^n1_imp + d(x) xd``, the damping ramping to ``d_max`` at
    ``p_max``.

Each law is one module holding its code, its own coefficients, its kernel
``spring_damper(row, x, v_i)``, its tangent, its spring ``(k, n)`` for the
stability guard and the derived columns it fills (:func:`derive`); the
row's columns are :mod:`simcore.laws.penalty_row`'s.  This module holds
what the family shares (friction, the stable step) and the dispatchers,
which refuse a code without a module.

Every force is clamped at ``F >= 0`` (a contact never pulls).  Each law is
a spring ``F_s(x)`` and a damper ``c(x) xd`` (:func:`spring_damper_of`);
the time-stepper takes the spring explicitly and the damper implicitly
(at the end-of-step rate), so that heavy damping (a slow touch under
Hunt-Crossley, the ``003_*`` defaults) never limits the step: the stable
step of a contact of stiffness ``k``, damping ``c`` and mass ``m`` is then
``2 / w_n (sqrt(zeta^2 + 1) + zeta)``, where explicit damping would allow
only ``2 / w_n (sqrt(zeta^2 + 1) - zeta)`` (:func:`step_limit`).

Friction (every law) is a velocity-level impulse per contact, capped by the
cone ``|P_t| <= mu(s) F h`` over a step ``h``: it stops the contact's slip
exactly when the cone allows (a stick state: no creep), and slides with the
cap otherwise.  ``mu(s)`` is the stiction curve of ``003_*`` on the slip
speed ``s`` at the start of the step: ``mu_s`` (static: ``mu_s`` on the
ground, ``mu_bb_s`` body-body, ``mu_w_s`` walls) for ``s <= v_e1``, the
kinetic ``mu_k`` (``mu_k``, ``mu_bb``, ``mu_w``) for ``s >= v_e2``, the cubic
step between.  ``k_v`` adds a viscous force ``-k_v v_t`` [N s/m];
``mu_roll`` [m] is a rolling resistance arm: a torque of at most
``mu_roll F`` opposing the relative rolling (tangential angular velocity).
The cone is elliptic (round) or pyramidal (``|P_1| + |P_2| <= mu F h``
along the contact's tangent axes, the linearised cone of ``001_*``).
"""

import numpy as np

from ..kernel.config import jit
from ..kernel.parameter import Parameter
from . import hunt_crossley, impact, spring_damper
from .penalty_row import (  # noqa: F401 (the row's columns, read through this module)
    C_ALPHA,
    C_C_SD,
    C_D_MAX,
    C_E,
    C_K_HC,
    C_K_IMP,
    C_K_SD,
    C_KV,
    C_MU_K,
    C_MU_ROLL,
    C_MU_S,
    C_N1_IMP,
    C_N_HC,
    C_P_MAX,
    C_VE1,
    C_VE2,
    NCOEF,
    OWN,
    SHARED,
    V_IMPACT_MIN,
)

#: The law family these laws form (their shared coefficients are declared with
#: ``law=FAMILY``: a layout holds them when any contact kind uses one of them).
FAMILY = "penalty"
SPRING_DAMPER = spring_damper.NAME
HUNT_CROSSLEY = hunt_crossley.NAME
IMPACT = impact.NAME

#: Friction cones.
CONE_ELLIPTIC = 0
CONE_PYRAMIDAL = 1
CONES = ("elliptic", "pyramidal")

FAMILY_PARAMETERS = (
    Parameter("mu_bb_s", np.nan, (0.0, np.inf), "1",
              "body-body static friction of the penalty laws (default: mu_bb)",
              "body-body contact that stuck", "body", -1, law=FAMILY),
    Parameter("mu_w_s", np.nan, (0.0, np.inf), "1",
              "body-wall static friction of the penalty laws (default: mu_w)",
              "wall contact that stuck", "wall", -1, law=FAMILY),
    Parameter("v_e1", 0.01, (0.0, np.inf), "m/s",
              "slip speed up to which the static friction acts (stiction curve, 003)",
              "contact slipping slowly", "any", -1, law=FAMILY),
    Parameter("v_e2", 0.1, (0.0, np.inf), "m/s",
              "slip speed from which the kinetic friction acts (stiction curve, 003)",
              "contact slipping", "any", -1, law=FAMILY),
    Parameter("k_v", 0.0, (0.0, np.inf), "N s/m", "viscous friction: force -k_v v_t",
              "contact slipping", "any", -1, law=FAMILY),
    Parameter("mu_roll", 0.0, (0.0, np.inf), "m",
              "rolling resistance arm: torque of at most mu_roll F against rolling",
              "contact rolling", "any", -1, law=FAMILY),
)
#: The family's coefficients, then each law's own.
PARAMETERS = (FAMILY_PARAMETERS + spring_damper.PARAMETERS + hunt_crossley.PARAMETERS
              + impact.PARAMETERS)
#: The static friction of each kind defaults to that kind's kinetic coefficient.
DEFAULT_FROM = {"mu_bb_s": "mu_bb", "mu_w_s": "mu_w"}

LAW_SPRING_DAMPER = spring_damper.CODE
LAW_HUNT_CROSSLEY = hunt_crossley.CODE
LAW_IMPACT = impact.CODE
#: The codes the dispatchers have a module for.
CODES = (LAW_SPRING_DAMPER, LAW_HUNT_CROSSLEY, LAW_IMPACT)
_MODULES = {spring_damper.CODE: spring_damper, hunt_crossley.CODE: hunt_crossley,
            impact.CODE: impact}


@jit
def derive(row):
    """Fill a coefficient row's derived columns from its others (every
    law's: a row serves whichever law its contact kind uses)."""
    hunt_crossley.derive(row)


@jit
def derive_tangent(row, te):
    """The tangent of the derived column ``C_ALPHA`` given that of ``C_E``."""
    return hunt_crossley.derive_tangent(row, te)


@jit(borrow=True)
def spring_damper_of(law, row, x, v_i):
    """The spring force ``F_s`` [N] and damping ``c`` [N s/m] of the contact
    law ``law`` (a ``LAW_*`` code) with the coefficient row ``row (NCOEF,)``
    at penetration ``x > 0`` [m] and approach speed at first touch ``v_i``
    [m/s] (each law's module): the force is ``max(F_s + c xd, 0)``."""
    if law == LAW_SPRING_DAMPER:
        return spring_damper.spring_damper(row, x, v_i)
    if law == LAW_HUNT_CROSSLEY:
        return hunt_crossley.spring_damper(row, x, v_i)
    if law == LAW_IMPACT:
        return impact.spring_damper(row, x, v_i)
    return np.nan, np.nan  # a code without a kernel: never another law's force


@jit(borrow=True)
def law_tangent(law, row, trow, p, x, dx, vi, dvi):
    """Tangents ``(dF_s, dc)`` of :func:`spring_damper_of` along direction
    ``p`` (``trow (NCOEF, NT)`` the row's tangents), and whether a
    coefficient entered directly; NaN for a code without a module."""
    if law == LAW_SPRING_DAMPER:
        return spring_damper.tangent(row, trow, p, x, dx, vi, dvi)
    if law == LAW_HUNT_CROSSLEY:
        return hunt_crossley.tangent(row, trow, p, x, dx, vi, dvi)
    if law == LAW_IMPACT:
        return impact.tangent(row, trow, p, x, dx, vi, dvi)
    return np.nan, np.nan, True


@jit(borrow=True, python=True)
def normal_force(law, row, x, xd, v_i):
    """The normal force [N] of the contact law ``law`` at penetration ``x``
    [m] and rate ``xd`` [m/s] (:func:`spring_damper_of`), clamped at >= 0."""
    if x <= 0.0:
        return 0.0
    spring, damping = spring_damper_of(law, row, x, v_i)
    return max(spring + damping * xd, 0.0)


@jit(borrow=True, python=True)
def stiction(row, s):
    """The friction coefficient at slip speed ``s`` [m/s]: the stiction curve
    of ``003_*`` (``mu_s`` up to ``v_e1``, ``mu_k`` from ``v_e2``, the cubic
    step ``3 u^2 - 2 u^3`` between, ``u = (s - v_e1) / (v_e2 - v_e1)``)."""
    lo, hi = row[C_VE1], row[C_VE2]
    if s <= lo:
        return row[C_MU_S]
    if s >= hi:
        return row[C_MU_K]
    u = (s - lo) / (hi - lo)
    return row[C_MU_S] + (row[C_MU_K] - row[C_MU_S]) * u * u * (3.0 - 2.0 * u)


def spring_damper_py(law, row, x, v_i):
    """:func:`spring_damper_of` run as Python (host side: the stable step and
    the tests' NumPy oracle), by the law's module."""
    return _module(law).spring_damper.py_func(row, x, v_i)


def spring(law, row):
    """The spring ``(k, n)`` of the contact law ``law`` with the coefficient
    row ``row`` (its module's ``spring``)."""
    return _module(law).spring(row)


def _module(law):
    if law not in _MODULES:
        raise ValueError(f"penalty law code {law} has no kernel (simcore/laws/penalty.py "
                         f"has {list(CODES)})")
    return _MODULES[law]


def stiffness(law, row, x, v_i):
    """Linearised stiffness ``dF/dx`` [N/m] and damping ``dF/dxd`` [N s/m] of
    a contact at penetration ``x`` (host side, for :func:`stable_step`)."""
    n = _module(law).spring(row)[1]
    spring, damping = spring_damper_py(law, row, x, v_i)
    return n * spring / x, damping


def penetration(law, row, m_eff, v, weight):
    """The deepest penetration [m] of a contact of effective mass ``m_eff``
    [kg] met at speed ``v`` [m/s] (its kinetic energy stored in the spring,
    damping aside: an upper bound) or pressed by ``weight`` [N], whichever is
    deeper."""
    k, n = _module(law).spring(row)
    energy = 0.5 * m_eff * v * v
    if k <= 0.0:
        return 0.0
    x_impact = ((n + 1.0) * energy / k) ** (1.0 / (n + 1.0))
    x_static = (weight / k) ** (1.0 / n)
    return max(x_impact, x_static)


def step_limit(k, c, m, implicit=True):
    """The step limit [s] of semi-implicit Euler on a damped contact of
    stiffness ``k``, damping ``c`` and mass ``m`` (``w_n = sqrt(k / m)``,
    ``zeta = c / (2 sqrt(k m))``): ``2 / w_n (sqrt(zeta^2 + 1) + zeta)`` with
    the damper implicit (the time-stepper's), ``2 / w_n (sqrt(zeta^2 + 1) -
    zeta)`` with it explicit (``implicit=False``; for ``k = 0`` the damper's
    own ``2 m / c``).  Derived from the 2x2 step matrix of ``(x, v)``: its
    trace must stay within ``1 + det``."""
    if k <= 0.0:
        return 2.0 * m / c if c > 0.0 and not implicit else np.inf
    wn = np.sqrt(k / m)
    zeta = c / (2.0 * np.sqrt(k * m))
    root = np.sqrt(zeta * zeta + 1.0)
    return 2.0 / wn * (root + zeta if implicit else root - zeta)


def stable_step(law, row, m_eff, v, weight, safety=0.5):
    """The largest step [s] the time-stepper takes for a contact under ``law``
    (a ``LAW_*`` code, coefficient ``row``) of effective mass ``m_eff`` met at
    speeds up to ``v`` and pressed by up to ``weight``: ``safety`` times the
    limit of :func:`step_limit` (damper implicit) at the deepest penetration
    (:func:`penetration`), the smaller of an impact at ``v`` and a slow touch
    (:data:`V_IMPACT_MIN`), and of the explicit viscous friction ``2 m /
    k_v``.  The stiffness of a nonlinear law grows with penetration, hence
    the margin."""
    limit = 2.0 * m_eff / row[C_KV] if row[C_KV] > 0.0 else np.inf  # explicit viscous friction
    for speed in (max(v, V_IMPACT_MIN), V_IMPACT_MIN):
        x = penetration(law, row, m_eff, speed, weight)
        if x <= 0.0:
            continue
        k, c = stiffness(law, row, x, speed)
        limit = min(limit, step_limit(k, c, m_eff))
    return safety * limit
