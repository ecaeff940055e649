"""Hunt and Crossley's penalty law (``001_*``; the default for boxes):
``F = k_hc x^n_hc (1 + chi xd)`` with ``chi = a(e) / v_i``, ``v_i`` the
approach speed when the contact began and ``e`` the pair's restitution
(``e_bg``, ``e_bb``, ``e_bw``).

For this force, ``m x'' = -F`` gives ``chi v_i - ln(1 + chi v_i) = -chi e
v_i - ln(1 - chi e v_i)`` between the approach speed ``v_i`` and the
rebound speed ``e v_i`` whatever ``k_hc``, ``n_hc`` and the mass (energy:
``m v dv = -k x^n (1 + chi v) dx``, integrated over compression and
restitution), so ``a(e) = chi v_i`` is the root of ``a (1 + e) - ln(1 + a)
+ ln(1 - a e) = 0`` in ``(0, 1/e)`` (:func:`alpha`): a contact with that
damping rebounds with exactly ``e`` (gravity during the contact aside).  The
classical ``3 (1 - e) / 2`` is first order in ``1 - e``; at ``e = 0.6`` it
gives ``a = 0.6`` where the exact root is 0.97.  Contacts that begin slower
than :data:`~simcore.laws.penalty_row.V_IMPACT_MIN` take ``v_i =
V_IMPACT_MIN`` (a bounce at that speed rises less than a nanometre).

``a(e)`` is the row's derived column ``C_ALPHA`` (:func:`derive`), computed
once per row at set-up, with its tangent through ``e`` (:func:`alpha_slope`).
"""

import numpy as np

from ..kernel.config import jit
from ..kernel.parameter import Parameter
from .penalty_row import C_ALPHA, C_E, C_K_HC, C_N_HC, V_IMPACT_MIN

NAME = "hunt_crossley"
CODE = 4

PARAMETERS = (
    Parameter("k_hc", 1e8, (0.0, np.inf), "N/m^n_hc",
              "Hunt-Crossley stiffness (units N/m^n_hc; damping from the pair's restitution)",
              "contact", "any", -1, law=NAME),
    Parameter("n_hc", 1.5, (1.0, 3.0), "1", "Hunt-Crossley exponent (1.5: Hertz)",
              "contact", "any", -1, law=NAME),
)


@jit
def alpha(e):
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


@jit
def alpha_slope(e, a):
    """``da/de`` of :func:`alpha` by the implicit function theorem on ``F(a,
    e) = a (1 + e) - ln(1 + a) + ln(1 - a e)``: ``-F_e / F_a``; 0 where
    ``a(e)`` is clamped (``e >= 1``, ``e < 1e-3``)."""
    if e >= 1.0 or e < 1e-3:
        return 0.0
    f_a = 1.0 + e - 1.0 / (1.0 + a) - e / (1.0 - a * e)
    f_e = a - a / (1.0 - a * e)
    return -f_e / f_a


@jit
def derive(row):
    """Fill the row's derived column: ``row[C_ALPHA] = a(row[C_E])``."""
    row[C_ALPHA] = alpha(row[C_E])


@jit
def derive_tangent(row, te):
    """The tangent of the derived column ``C_ALPHA`` given ``te``, that of
    the restitution ``C_E``."""
    return te * alpha_slope(row[C_E], row[C_ALPHA])


@jit(borrow=True)
def spring_damper(row, x, v_i):
    """``(F_s, c)``: the spring force [N] and damping [N s/m] at ``x > 0``
    and approach speed at first touch ``v_i``."""
    spring = row[C_K_HC] * x ** row[C_N_HC]
    return spring, spring * row[C_ALPHA] / max(v_i, V_IMPACT_MIN)


@jit(borrow=True)
def tangent(row, trow, p, x, dx, vi, dvi):
    """``(dF_s, dc, direct)``: the tangents of :func:`spring_damper` along
    direction ``p`` (``trow (NCOEF, NT)`` the row's tangents, ``dx``, ``dvi``
    the penetration's and the approach speed's) and whether a coefficient
    entered directly."""
    tk, tn, ta = trow[C_K_HC, p], trow[C_N_HC, p], trow[C_ALPHA, p]
    xn = x ** row[C_N_HC]
    spring = row[C_K_HC] * xn
    ds = tk * xn + spring * (tn * np.log(x) + row[C_N_HC] * dx / x)
    v = max(vi, V_IMPACT_MIN)
    dv = dvi if vi > V_IMPACT_MIN else 0.0
    a = row[C_ALPHA]
    dc = (ds * a + spring * ta) / v - spring * a * dv / (v * v)
    return ds, dc, tk != 0.0 or tn != 0.0 or ta != 0.0


def spring(row):
    """``(k, n)`` of the spring ``k x^n`` (host side, the stability guard)."""
    return row[C_K_HC], row[C_N_HC]
