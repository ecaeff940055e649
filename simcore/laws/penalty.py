"""Penalty contact laws: normal force from penetration, friction from the
stiction curve, and the stable step they allow.

A contact point has a penetration ``x >= 0`` [m] (how far the surfaces
overlap along the contact normal) and a penetration rate ``xd`` [m/s]
(positive while they approach).  The normal force [N] is, per law
(``dataset.yaml`` ``laws:``, per contact kind):

``spring_damper`` (``001_*``)
    ``F = k_sd x + c_sd xd``.
``hunt_crossley`` (``001_*``; the default for boxes)
    ``F = k_hc x^n_hc (1 + chi xd)`` with ``chi = a(e) / v_i``, ``v_i`` the
    approach speed when the contact began and ``e`` the pair's restitution
    (``e_bg``, ``e_bb``, ``e_bw``).  For this force, ``m x'' = -F`` gives
    ``chi v_i - ln(1 + chi v_i) = -chi e v_i - ln(1 - chi e v_i)`` between
    the approach speed ``v_i`` and the rebound speed ``e v_i`` whatever
    ``k_hc``, ``n_hc`` and the mass (energy: ``m v dv = -k x^n (1 + chi v)
    dx``, integrated over compression and restitution), so ``a(e) = chi v_i``
    is the root of ``a (1 + e) - ln(1 + a) + ln(1 - a e) = 0`` in
    ``(0, 1/e)`` (:func:`hc_alpha`): a contact with that damping rebounds with
    exactly ``e`` (gravity during the contact aside).  The classical
    ``3 (1 - e) / 2`` is first order in ``1 - e``; at ``e = 0.6`` it gives
    ``a = 0.6`` where the exact root is 0.97.  Contacts that begin slower
    than :data:`V_IMPACT_MIN` take ``v_i = V_IMPACT_MIN`` (the damping of a
    touch at zero speed is unbounded; a bounce at that speed rises less
    than a nanometre).
``impact`` (``003_*``)
    ``F = k_imp x^n1_imp + d(x) xd``, ``d`` ramping from 0 at ``x = 0`` to
    ``d_max`` at ``x = p_max`` by the cubic step ``3 s^2 - 2 s^3``
    (``s = x / p_max``) and constant beyond (the document's ``n2 = 0``: no
    power of ``x`` on the damping).
    Its defaults (the document's: ``k = 1e9`` N/m^2.2, ``d_max = 1e5``
    N s/m) model heavy machine parts: on a body of a few kilograms or less the
    damping ``d_max / m`` makes the contact overdamped and the stable step
    falls to microseconds (:func:`stable_step`); scale ``d_max`` with the
    mass (the document advises below 1 % of the stiffness).

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

#: The law family these laws form (their shared coefficients are declared with
#: ``law=FAMILY``: a layout holds them when any contact kind uses one of them).
FAMILY = "penalty"
SPRING_DAMPER = "spring_damper"
HUNT_CROSSLEY = "hunt_crossley"
IMPACT = "impact"

#: Slowest approach speed [m/s] the Hunt-Crossley damping is scaled to.
V_IMPACT_MIN = 1e-4

#: Friction cones.
CONE_ELLIPTIC = 0
CONE_PYRAMIDAL = 1
CONES = ("elliptic", "pyramidal")

PARAMETERS = (
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
    Parameter("k_sd", 1e6, (0.0, np.inf), "N/m", "stiffness of the linear spring-damper",
              "contact", "any", -1, law=SPRING_DAMPER),
    Parameter("c_sd", 100.0, (0.0, np.inf), "N s/m", "damping of the linear spring-damper",
              "contact", "any", -1, law=SPRING_DAMPER),
    Parameter("k_hc", 1e8, (0.0, np.inf), "N/m^n_hc",
              "Hunt-Crossley stiffness (units N/m^n_hc; damping from the pair's restitution)",
              "contact", "any", -1, law=HUNT_CROSSLEY),
    Parameter("n_hc", 1.5, (1.0, 3.0), "1", "Hunt-Crossley exponent (1.5: Hertz)",
              "contact", "any", -1, law=HUNT_CROSSLEY),
    Parameter("k_imp", 1e9, (0.0, np.inf), "N/m^n1_imp",
              "stiffness of the 003 law k p^n1 (units N/m^n1_imp)",
              "contact", "any", -1, law=IMPACT),
    Parameter("n1_imp", 2.2, (1.0, 3.0), "1", "exponent n1 of the 003 law",
              "contact", "any", -1, law=IMPACT),
    Parameter("d_max", 1e5, (0.0, np.inf), "N s/m", "full damping of the 003 law",
              "contact", "any", -1, law=IMPACT),
    Parameter("p_max", 1e-3, (1e-9, np.inf), "m",
              "penetration at which the 003 law's damping is full", "contact", "any", -1,
              law=IMPACT),
)
#: The static friction of each kind defaults to that kind's kinetic coefficient.
DEFAULT_FROM = {"mu_bb_s": "mu_bb", "mu_w_s": "mu_w"}

#: Columns of a contact's coefficient row in the kernels (:func:`normal_force`,
#: :func:`stiction`), per contact kind: the kind's own static, kinetic and
#: restitution coefficients, then the laws' shared and own ones.
SHARED = ("v_e1", "v_e2", "k_v", "mu_roll", "k_sd", "c_sd", "k_hc", "n_hc", "k_imp",
          "n1_imp", "d_max", "p_max")
OWN = {"body_ground": ("mu_s", "mu_k", "e_bg"),
       "body_body": ("mu_bb_s", "mu_bb", "e_bb"),
       "body_wall": ("mu_w_s", "mu_w", "e_bw")}
(C_MU_S, C_MU_K, C_E, C_VE1, C_VE2, C_KV, C_MU_ROLL, C_K_SD, C_C_SD, C_K_HC, C_N_HC,
 C_K_IMP, C_N1_IMP, C_D_MAX, C_P_MAX) = range(15)
#: One more column, filled at set-up: Hunt-Crossley's ``a(e)`` of the row.
C_ALPHA = 15
NCOEF = 16

LAW_SPRING_DAMPER = 3
LAW_HUNT_CROSSLEY = 4
LAW_IMPACT = 5
#: The codes :func:`spring_damper_of` has a kernel for.
CODES = (LAW_SPRING_DAMPER, LAW_HUNT_CROSSLEY, LAW_IMPACT)


@jit
def hc_alpha(e):
    """``a(e) = chi v_i``, the root in ``(0, 1/e)`` of
    ``a (1 + e) - ln(1 + a) + ln(1 - a e) = 0`` (see the module): bisection
    on ``b = a e`` in ``(0, 1)``.  ``e >= 1``: 0 (no damping); ``e`` below
    1e-3 is taken as 1e-3 (the law cannot stop a contact dead)."""
    if e >= 1.0:
        return 0.0
    e = max(e, 1e-3)
    lo, hi = 0.0, 1.0  # b = a e
    for _ in range(200):
        b = 0.5 * (lo + hi)
        if b == lo or b == hi:
            break
        a = b / e
        f = a * (1.0 + e) - np.log1p(a) + np.log1p(-b)
        if f > 0.0:
            lo = b
        else:
            hi = b
    return 0.5 * (lo + hi) / e


@jit(borrow=True)
def spring_damper_of(law, row, x, v_i):
    """The spring force ``F_s`` [N] and damping ``c`` [N s/m] of the contact
    law ``law`` (a ``LAW_*`` code) with the coefficient row ``row (NCOEF,)``
    at penetration ``x > 0`` [m] and approach speed at first touch ``v_i``
    [m/s] (see the module): the force is ``max(F_s + c xd, 0)``."""
    if law == LAW_SPRING_DAMPER:
        return row[C_K_SD] * x, row[C_C_SD]
    if law == LAW_HUNT_CROSSLEY:
        spring = row[C_K_HC] * x ** row[C_N_HC]
        return spring, spring * row[C_ALPHA] / max(v_i, V_IMPACT_MIN)
    if law == LAW_IMPACT:
        s = min(x / row[C_P_MAX], 1.0)
        return row[C_K_IMP] * x ** row[C_N1_IMP], row[C_D_MAX] * s * s * (3.0 - 2.0 * s)
    return np.nan, np.nan  # a code without a kernel: never another law's force


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


def _known(law):
    if law not in CODES:
        raise ValueError(f"penalty law code {law} has no kernel (simcore/laws/penalty.py "
                         f"has {list(CODES)})")


def stiffness(law, row, x, v_i):
    """Linearised stiffness ``dF/dx`` [N/m] and damping ``dF/dxd`` [N s/m] of
    a contact at penetration ``x`` (host side, for :func:`stable_step`)."""
    _known(law)
    n = {LAW_SPRING_DAMPER: 1.0, LAW_HUNT_CROSSLEY: row[C_N_HC]}.get(law, row[C_N1_IMP])
    spring, damping = spring_damper_of.py_func(law, row, x, v_i)
    return n * spring / x, damping


def penetration(law, row, m_eff, v, weight):
    """The deepest penetration [m] of a contact of effective mass ``m_eff``
    [kg] met at speed ``v`` [m/s] (its kinetic energy stored in the spring,
    damping aside: an upper bound) or pressed by ``weight`` [N], whichever is
    deeper."""
    _known(law)
    energy = 0.5 * m_eff * v * v
    if law == LAW_SPRING_DAMPER:
        k, n = row[C_K_SD], 1.0
    elif law == LAW_HUNT_CROSSLEY:
        k, n = row[C_K_HC], row[C_N_HC]
    else:
        k, n = row[C_K_IMP], row[C_N1_IMP]
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
