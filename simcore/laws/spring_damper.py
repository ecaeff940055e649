"""The linear spring-damper penalty law of ``001_*``: ``F = k_sd x + c_sd xd``
at penetration ``x`` [m] and rate ``xd`` [m/s] (the family's conventions:
:mod:`simcore.laws.penalty`)."""

import numpy as np

from ..kernel.config import jit
from ..kernel.parameter import Parameter
from .penalty_row import C_C_SD, C_K_SD

NAME = "spring_damper"
CODE = 3

PARAMETERS = (
    Parameter("k_sd", 1e6, (0.0, np.inf), "N/m", "stiffness of the linear spring-damper",
              "contact", "any", -1, law=NAME),
    Parameter("c_sd", 100.0, (0.0, np.inf), "N s/m", "damping of the linear spring-damper",
              "contact", "any", -1, law=NAME),
)


@jit(borrow=True)
def spring_damper(row, x, v_i):
    """``(F_s, c)``: the spring force [N] and damping [N s/m] at ``x > 0``."""
    return row[C_K_SD] * x, row[C_C_SD]


@jit(borrow=True)
def tangent(row, trow, p, x, dx, vi, dvi):
    """``(dF_s, dc, direct)``: the tangents of :func:`spring_damper` along
    direction ``p`` (``trow (NCOEF, NT)`` the row's tangents, ``dx`` the
    penetration's) and whether a coefficient entered directly."""
    tk, tc = trow[C_K_SD, p], trow[C_C_SD, p]
    return tk * x + row[C_K_SD] * dx, tc, tk != 0.0 or tc != 0.0


def spring(row):
    """``(k, n)`` of the spring ``k x^n`` (host side, the stability guard)."""
    return row[C_K_SD], 1.0
