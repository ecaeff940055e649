"""Impulse resolution at an impact (claims 6, 7 and 10 of the source patent).

Notation: body i and body j (or body i and a plane), unit normal ``n`` from i
to j (the plane normal, into the free side), relative velocity
``u = v_j - v_i`` (``u = -v_i`` against a plane, which does not move), taken at
the time-of-impact configuration.

* Normal impulse with restitution e (claim 6), for an approach ``u . n < 0``::

      J_n = -(1 + e) (u . n) / (1/m_i + 1/m_j)          (1/m_j = 0 for a plane)

  so that the relative normal velocity after is ``-e`` times the one before.

* Coulomb friction impulse (claims 7, 10): opposite the tangential relative
  velocity ``u_t = u - (u . n) n``, of magnitude ``mu J_n`` (slip) but never
  more than the impulse that brings ``u_t`` to zero,
  ``J_stick = |u_t| / (1/m_i + 1/m_j)`` (stick).  The patent writes the
  friction as a force ``mu J_n / dt`` acting over one step (body-body) or over
  the wall penetration time ``t_cw`` (claim 10); its impulse is ``mu J_n``
  either way, so the step length drops out.  The bodies do not spin in the
  patent's sliding model (angular velocity stays zero), so the tangential
  effective mass is the translational one.

The impulse on body j is ``J_n n - J_t t``, on body i the opposite, with
``t = u_t / |u_t|``.  Between bodies the law is applied through the law seam
(:func:`simcore.laws.registry.pair_impact`, which other laws share: they differ in the
bound on a slipping friction impulse).
"""

from typing import NamedTuple

import numpy as np

from ..kernel.config import jit
from ..kernel.parameter import E_BB, E_BG, E_BW, MU_BB, MU_W, Parameter

#: The coefficients of the impulse law, per material pair.
PARAMETERS = (
    Parameter("mu_bb", 0.06, (0.0, np.inf), "1",
              "body-body Coulomb friction (impulse and sustained contact)",
              "body-body impact that slipped", "body", MU_BB),
    Parameter("e_bb", 0.95, (0.0, 1.0), "1", "body-body restitution", "body-body impact",
              "body", E_BB),
    Parameter("mu_w", 0.15, (0.0, np.inf), "1", "body-wall Coulomb friction (claim 10)",
              "wall impact that slipped", "wall", MU_W),
    Parameter("e_bw", 0.75, (0.0, 1.0), "1", "body-wall restitution", "wall impact", "wall",
              E_BW),
    Parameter("e_bg", 0.50, (0.0, 1.0), "1", "body-ground restitution (falling spheres bounce)",
              "ground bounce", "ground", E_BG),
)


@jit
def capped(j_stick, j_slip):
    """Friction impulse ``min(J_stick, J_slip)`` and whether it slips: the
    impulse that stops the tangential motion, unless the law's bound on a
    slipping impulse is smaller (real or complex: the real parts decide)."""
    if j_stick.real <= j_slip.real:
        return j_stick, False
    return j_slip, True


@jit
def coulomb(j_stick, mu, jn):
    """Friction impulse ``min(J_stick, mu J_n)`` and whether it slips."""
    return capped(j_stick, mu * jn)


@jit
def pair_split(vi, vj, n, e, inv_sum):
    """Normal and tangential parts of an impact between bodies i and j:
    ``(u_n, J_n, t0, t1, t2, |u_t|)`` with ``u = v_j - v_i``, ``J_n =
    max(-(1 + e) u_n / W, 0)`` (``W = inv_sum = 1/m_i + 1/m_j``) and the unit
    tangential direction ``t = u_t / |u_t|`` (zero when ``u_t = 0``)."""
    u0 = vj[0] - vi[0]
    u1 = vj[1] - vi[1]
    u2 = vj[2] - vi[2]
    # Relative normal velocity (negative while approaching).
    un = u0 * n[0] + u1 * n[1] + u2 * n[2]
    jn = -(1.0 + e) * un / inv_sum
    if jn < 0.0:
        jn = 0.0
    t0 = u0 - un * n[0]
    t1 = u1 - un * n[1]
    t2 = u2 - un * n[2]
    ut = np.sqrt(t0 * t0 + t1 * t1 + t2 * t2)
    if ut > 0.0:
        t0 /= ut
        t1 /= ut
        t2 /= ut
    return un, jn, t0, t1, t2, ut


@jit
def apply_pair(vi, vj, inv_mi, inv_mj, n, jn, jt, t0, t1, t2, dvi, dvj):
    """Apply the impulse ``J_n n - J_t t`` to body j and its opposite to body
    i: ``vi``, ``vj`` (3,) are updated, ``dvi``, ``dvj`` receive the changes."""
    i0 = jn * n[0] - jt * t0
    i1 = jn * n[1] - jt * t1
    i2 = jn * n[2] - jt * t2
    dvj[0] = i0 * inv_mj
    dvj[1] = i1 * inv_mj
    dvj[2] = i2 * inv_mj
    dvi[0] = -i0 * inv_mi
    dvi[1] = -i1 * inv_mi
    dvi[2] = -i2 * inv_mi
    for d in range(3):
        vj[d] += dvj[d]
        vi[d] += dvi[d]


@jit
def plane_split(v, n, e):
    """Normal and tangential parts of a body's impact on a plane, per unit mass:
    ``(v_n, J_n, t0, t1, t2, |v_t|)`` with ``J_n = max(-(1 + e) v_n, 0)`` and
    the unit tangential direction ``t`` (zero when ``v_t = 0``)."""
    vn = v[0] * n[0] + v[1] * n[1] + v[2] * n[2]
    jn = -(1.0 + e) * vn
    if jn < 0.0:
        jn = 0.0
    t0 = v[0] - vn * n[0]
    t1 = v[1] - vn * n[1]
    t2 = v[2] - vn * n[2]
    vt = np.sqrt(t0 * t0 + t1 * t1 + t2 * t2)
    if vt > 0.0:
        t0 /= vt
        t1 /= vt
        t2 /= vt
    return vn, jn, t0, t1, t2, vt


class Impact(NamedTuple):
    """An impact's impulse and the intermediates its tangent reads: the
    normal velocity ``vn`` (relative, of j against i; a body's own against a
    plane), the normal and friction impulses ``jn``, ``jt`` (per unit mass
    against a plane), the unit tangential direction ``(t0, t1, t2)``, the
    tangential speed ``vt`` and whether the friction impulse slipped."""

    vn: float
    jn: float
    jt: float
    t0: float
    t1: float
    t2: float
    vt: float
    slipped: bool


@jit
def plane_impact(v, n, e, mu):
    """The :class:`Impact` of a body with velocity ``v`` on a fixed plane of
    normal ``n`` (per unit mass), before it is applied."""
    vn, jn, t0, t1, t2, vt = plane_split(v, n, e)
    jt, slipped = coulomb(vt, mu, jn)
    return Impact(vn, jn, jt, t0, t1, t2, vt, slipped)


@jit
def apply_plane(v, n, imp, dv):
    """Apply a plane :class:`Impact` to ``v`` in place; ``dv`` receives the
    change.  Stick leaves the tangential velocity zero exactly, not up to
    rounding."""
    if imp.slipped:
        dv[0] = imp.jn * n[0] - imp.jt * imp.t0
        dv[1] = imp.jn * n[1] - imp.jt * imp.t1
        dv[2] = imp.jn * n[2] - imp.jt * imp.t2
        for d in range(3):
            v[d] += dv[d]
    else:
        vn_after = imp.vn + imp.jn
        for d in range(3):
            dv[d] = vn_after * n[d] - v[d]
            v[d] = vn_after * n[d]
