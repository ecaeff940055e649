"""The impact penalty law of ``003_*``: ``F = k_imp x^n1_imp + d(x) xd``,
``d`` ramping from 0 at ``x = 0`` to ``d_max`` at ``x = p_max`` by the cubic
step ``3 s^2 - 2 s^3`` (``s = x / p_max``) and constant beyond (the
document's ``n2 = 0``: no power of ``x`` on the damping; its cut-off at
``p_max`` is not applied: contact continues).

Its defaults (the document's: ``k = 1e9`` N/m^2.2, ``d_max = 1e5`` N s/m)
model heavy machine parts: on a body of a few kilograms or less the damping
``d_max / m`` makes the contact overdamped and the stable step falls to
microseconds (:func:`simcore.laws.penalty.stable_step`); scale ``d_max`` with
the mass (the document advises below 1 % of the stiffness).
"""

import numpy as np

from ..kernel.config import jit
from ..kernel.parameter import Parameter
from .penalty_row import C_D_MAX, C_K_IMP, C_N1_IMP, C_P_MAX

NAME = "impact"
CODE = 5

PARAMETERS = (
    Parameter("k_imp", 1e9, (0.0, np.inf), "N/m^n1_imp",
              "stiffness of the 003 law k p^n1 (units N/m^n1_imp)",
              "contact", "any", -1, law=NAME),
    Parameter("n1_imp", 2.2, (1.0, 3.0), "1", "exponent n1 of the 003 law",
              "contact", "any", -1, law=NAME),
    Parameter("d_max", 1e5, (0.0, np.inf), "N s/m", "full damping of the 003 law",
              "contact", "any", -1, law=NAME),
    Parameter("p_max", 1e-3, (1e-9, np.inf), "m",
              "penetration at which the 003 law's damping is full", "contact", "any", -1,
              law=NAME),
)


@jit(borrow=True)
def spring_damper(row, x, v_i):
    """``(F_s, c)``: the spring force [N] and damping [N s/m] at ``x > 0``."""
    s = min(x / row[C_P_MAX], 1.0)
    return row[C_K_IMP] * x ** row[C_N1_IMP], row[C_D_MAX] * s * s * (3.0 - 2.0 * s)


@jit(borrow=True)
def tangent(row, trow, p, x, dx, vi, dvi):
    """``(dF_s, dc, direct)``: the tangents of :func:`spring_damper` along
    direction ``p`` (``trow (NCOEF, NT)`` the row's tangents, ``dx`` the
    penetration's) and whether a coefficient entered directly."""
    tk, tn, tm, tpm = trow[C_K_IMP, p], trow[C_N1_IMP, p], trow[C_D_MAX, p], trow[C_P_MAX, p]
    xn = x ** row[C_N1_IMP]
    spring = row[C_K_IMP] * xn
    ds = tk * xn + spring * (tn * np.log(x) + row[C_N1_IMP] * dx / x)
    pm = row[C_P_MAX]
    s, dsr = x / pm, 0.0
    if s < 1.0:
        dsr = dx / pm - x * tpm / (pm * pm)
    else:
        s = 1.0
    dc = tm * s * s * (3.0 - 2.0 * s) + row[C_D_MAX] * 6.0 * s * (1.0 - s) * dsr
    return ds, dc, tk != 0.0 or tn != 0.0 or tm != 0.0 or tpm != 0.0


def spring(row):
    """``(k, n)`` of the spring ``k x^n`` (host side, the stability guard)."""
    return row[C_K_IMP], row[C_N1_IMP]
