"""Impacts of spinning spheres: ball-ball and ball-cushion, with the contact points' slip.

Notation as in :mod:`simcore.laws.impulse`: balls i and j, unit normal ``n``
from i to j; a cushion's normal ``n`` from its contact towards the ball's
centre.  Solid spheres, ``I = 2/5 m R^2``; an impulse ``P`` on a ball at its
surface point ``c`` (from the centre) changes ``v`` by ``P / m`` and ``w``
by ``(c x P) / I``.  Balls stay on the cloth: after every impact ``v_z = 0``
(the table takes an impulse's vertical part, pooltool's "FIXME3D" choice:
no hop).

Ball-ball (``c_i = R_i n``, ``c_j = -R_j n``):

* the contact points' slip of j over i, ``u = (v_j + w_j x (-R_j n)) -
  (v_i + w_i x (R_i n))``, its normal part ``u_n = (v_j - v_i) . n`` and
  tangential part ``u_t`` (which may point out of the table's plane when the
  balls carry top or back spin);
* normal impulse with restitution ``e`` (``e_bb``): ``J_n = -(1 + e) u_n / W``,
  ``W = 1/m_i + 1/m_j``;
* friction opposite ``u_t``, at most the law's slip bound and never more
  than the no-slip impulse ``|u_t| / W_t``, ``W_t = W + R_i^2 / I_i +
  R_j^2 / I_j = 7/2 W`` (pooltool's ``-1/7`` of the slip per equal ball).
  The bound is :func:`simcore.laws.registry.slip_bound`'s: ``mu_bb J_n`` under the
  impulse law, ``2 (mu_bb + mu_bb_b exp(-mu_bb_c |u_t|)) e |u_n| / W``
  under ``frictional_inelastic`` (pooltool's velocity change of at most
  ``mu e |u_n|`` per equal ball: the separation speed, not the normal
  impulse per mass).

Ball-cushion (``c = -R n``): the contact point's velocity ``v_c = v + w x
(-R n)``, normal part ``v_n0 = v . n < 0``, tangential ``u_t``.  The impulse
law: ``J_n = -(1 + e) v_n0 m``, friction ``min(mu_w J_n, m |u_t| / (7/2))``
opposite ``u_t``.  Stronge's compliant impact (:mod:`simcore.laws.stronge`):
the final contact velocities ``v_nf``, ``v_tf`` of :func:`stronge.collinear`
give ``dv = (v_nf - v_n0) n + (v_tf - v_t0) / (7/2) t`` and ``dw = 5/(2R)
(-n) x ((v_tf - v_t0) / (7/2) t)`` (pooltool's ``_solve``).  A cushion with
a nose height tilts ``n`` (:func:`cushion_normal`).

Every function here takes real or complex numbers (the real parts take
every decision): :mod:`simcore.spin.spin_tangent` differentiates them by a
complex step.

Separation.  Before an impact is resolved the balls are moved apart to a
gap of :data:`SEPARATION` = 1e-6 m along their velocities, as pooltool does
(``make_kiss`` of ``ball_ball/core.py`` and ``ball_cushion/core.py``, with
its fallbacks), so that rounding never leaves two surfaces overlapping:
:func:`separate_pair`, :func:`separate_wall`.  It moves a ball by about a
micrometre; without it rest positions differ from pooltool's by up to
0.14 mm and slow cushion impacts by milliseconds.
"""

import numpy as np

from ..geometry.rigid import cross
from ..kernel.config import jit
from ..laws import frictional_inelastic, stronge
from ..laws.impulse import capped
from ..laws.registry import LAW_FRICTIONAL_INELASTIC, LAW_IMPULSE, LAW_STRONGE_COMPLIANT
from .spin import INERTIA

#: ``W_t / W`` of two solid spheres, and of a solid sphere on a fixed surface.
TANGENTIAL = 1.0 + 1.0 / INERTIA
#: The gap [m] at which impacts are resolved (pooltool's ``MIN_DIST``).
SEPARATION = 1e-6


@jit
def _apart(pi, pj, ri, rj):
    """pooltool's fallback: both balls moved along the line of centres by half
    of what brings the gap to :data:`SEPARATION`."""
    d0 = pj[0] - pi[0]
    d1 = pj[1] - pi[1]
    d2 = pj[2] - pi[2]
    dist = np.sqrt(d0 * d0 + d1 * d1 + d2 * d2)
    corr = 0.5 * (ri + rj - dist + SEPARATION) / dist
    pi[0] -= corr * d0
    pi[1] -= corr * d1
    pi[2] -= corr * d2
    pj[0] += corr * d0
    pj[1] += corr * d1
    pj[2] += corr * d2


@jit
def separate_pair(pi, vi, pj, vj, ri, rj, moving):
    """Move balls i, j (positions ``pi``, ``pj`` in place) to a gap of
    :data:`SEPARATION`: along their velocities by the root ``s`` of
    ``|(p_j - p_i) + s (v_j - v_i)| = r_i + r_j + SEPARATION`` nearest 0
    (pooltool's real roots: imaginary part under 1e-3 of the real one),
    unless neither translates (``moving`` False) or the pair's midpoint
    would move more than 5 separations: then :func:`_apart`."""
    if not moving:
        _apart(pi, pj, ri, rj)
        return
    c = (pj[0] - pi[0], pj[1] - pi[1], pj[2] - pi[2])
    b = (vj[0] - vi[0], vj[1] - vi[1], vj[2] - vi[2])
    target = ri + rj + SEPARATION
    qa = b[0] * b[0] + b[1] * b[1] + b[2] * b[2]
    qb = 2.0 * (b[0] * c[0] + b[1] * c[1] + b[2] * c[2])
    qc = c[0] * c[0] + c[1] * c[1] + c[2] * c[2] - target * target
    if qa.real == 0.0:
        _apart(pi, pj, ri, rj)
        return
    disc = qb * qb - 4.0 * qa * qc
    if disc.real >= 0.0:
        sq = np.sqrt(disc)
        s1 = (-qb - sq) / (2.0 * qa)
        s2 = (-qb + sq) / (2.0 * qa)
        s = s1 if abs(s1.real) < abs(s2.real) else s2
    else:
        re = -qb / (2.0 * qa)
        if re.real == 0.0 or np.sqrt(-disc.real) / (2.0 * qa.real) / abs(re.real) >= 1e-3:
            _apart(pi, pj, ri, rj)
            return
        s = re
    shift = 0.5 * abs(s.real) * np.sqrt((vi[0].real + vj[0].real) ** 2
                                        + (vi[1].real + vj[1].real) ** 2
                                        + (vi[2].real + vj[2].real) ** 2)
    if shift > 5.0 * SEPARATION:
        _apart(pi, pj, ri, rj)
        return
    for d in range(3):
        pi[d] += s * vi[d]
        pj[d] += s * vj[d]


@jit
def separate_wall(p, v, r, n_wall, d_wall):
    """Move a ball (``p`` in place) touching the wall ``n . x = d`` to
    ``r + SEPARATION`` from it: back along its velocity, or along the normal
    where that would move it more than 5 separations (pooltool's fallback)."""
    gap = n_wall[0] * p[0] + n_wall[1] * p[1] + n_wall[2] * p[2] - d_wall
    vn = -(n_wall[0] * v[0] + n_wall[1] * v[1] + n_wall[2] * v[2])
    if vn.real != 0.0:
        s = (gap - r - SEPARATION) / vn
        speed = np.sqrt(v[0].real ** 2 + v[1].real ** 2 + v[2].real ** 2)
        if abs(s.real) * speed <= 5.0 * SEPARATION:
            for d in range(3):
                p[d] += s * v[d]
            return
    for d in range(3):
        p[d] += (r + SEPARATION - gap) * n_wall[d]


@jit
def cushion_normal(n_wall, gap, rise, out):
    """The impact normal of a ball touching a cushion: from the nose line
    (where the wall plane meets the nose height) to the centre, ``gap`` from
    the plane and ``rise`` above the nose line (negative: below it), i.e.
    the unit vector along ``gap n_wall + rise z`` (for a ball one radius
    from the plane, ``R n_wall + (R - height) z``); the wall's own normal
    when ``rise`` is NaN (no nose height: a vertical plane)."""
    if np.isnan(rise.real):
        for d in range(3):
            out[d] = n_wall[d]
        return
    nx = gap * n_wall[0]
    ny = gap * n_wall[1]
    nz = gap * n_wall[2] + rise
    norm = np.sqrt(nx * nx + ny * ny + nz * nz)
    out[0] = nx / norm
    out[1] = ny / norm
    out[2] = nz / norm


@jit(borrow=True, python=True)
def ball_ball(law, ball_i, ball_j, n, out_i, out_j):
    """Velocity and spin changes of balls i, j (module docstring) under
    ``law`` (a :class:`simcore.laws.registry.PairLaw`: the body-body law's code and
    the pair's coefficients); each ball ``(v, w, m, R)``, the normal ``n``
    from i to j; writes ``out_i = (dv_i, dw_i)``, ``out_j``; returns ``(J_n,
    J_t, slipped)`` [N s]."""
    vi, wi, mi, ri = ball_i
    vj, wj, mj, rj = ball_j
    dvi, dwi = out_i
    dvj, dwj = out_j
    e, mu = law.e, law.mu
    for d in range(3):
        dvi[d] = 0.0
        dwi[d] = 0.0
        dvj[d] = 0.0
        dwj[d] = 0.0
    un = (vj[0] - vi[0]) * n[0] + (vj[1] - vi[1]) * n[1] + (vj[2] - vi[2]) * n[2]
    if un.real >= 0.0:
        return 0.0 * un, 0.0 * un, False
    inv_sum = 1.0 / mi + 1.0 / mj
    jn = -(1.0 + e) * un / inv_sum
    # Contact points' slip of j over i: v + w x c at c_j = -R_j n, c_i = R_i n.
    aj = cross(wj[0], wj[1], wj[2], -rj * n[0], -rj * n[1], -rj * n[2])
    ai = cross(wi[0], wi[1], wi[2], ri * n[0], ri * n[1], ri * n[2])
    u0 = vj[0] + aj[0] - vi[0] - ai[0]
    u1 = vj[1] + aj[1] - vi[1] - ai[1]
    u2 = vj[2] + aj[2] - vi[2] - ai[2]
    uc = u0 * n[0] + u1 * n[1] + u2 * n[2]
    t0 = u0 - uc * n[0]
    t1 = u1 - uc * n[1]
    t2 = u2 - uc * n[2]
    ut = np.sqrt(t0 * t0 + t1 * t1 + t2 * t2)
    if law.code == LAW_FRICTIONAL_INELASTIC:
        bound = frictional_inelastic.slip_bound(e, mu, law.mu_b, law.mu_c, un, ut, inv_sum)
    elif law.code == LAW_IMPULSE:
        bound = mu * jn
    else:
        bound = np.nan * jn  # a code without a kernel: never another law's impulse
    jt, slipped = capped(ut / (TANGENTIAL * inv_sum), bound)
    if ut.real > 0.0:
        t0 /= ut
        t1 /= ut
        t2 /= ut
    # Impulse on j: J_n n - J_t t; on i its opposite.
    p0 = jn * n[0] - jt * t0
    p1 = jn * n[1] - jt * t1
    p2 = jn * n[2] - jt * t2
    # dw = (c x P) / I: both balls turn by -5/(2 m R) n x P_j.
    q = cross(n[0], n[1], n[2], p0, p1, p2)
    ki = -1.0 / (INERTIA * mi * ri)
    kj = -1.0 / (INERTIA * mj * rj)
    for d, pd in enumerate((p0, p1, p2)):
        dvj[d] = pd / mj
        dvi[d] = -pd / mi
        dwj[d] = kj * q[d]
        dwi[d] = ki * q[d]
    return jn, jt, slipped


@jit
def ball_cushion(law, e, mu, ratio, v, w, m, r, n, dv, dw):
    """Velocity and spin changes of a ball hitting a cushion of impact normal
    ``n`` (module docstring) under the body-wall ``law`` code; returns
    ``(J_n, J_t, slipped)`` [N s] (``slipped``: gross slip under Stronge's law)."""
    for d in range(3):
        dv[d] = 0.0
        dw[d] = 0.0
    vn = v[0] * n[0] + v[1] * n[1] + v[2] * n[2]
    if vn.real >= 0.0:
        return 0.0 * vn, 0.0 * vn, False
    # Contact point velocity v + w x (-R n); w x n is tangential.
    a = cross(w[0], w[1], w[2], -r * n[0], -r * n[1], -r * n[2])
    t0 = v[0] + a[0] - vn * n[0]
    t1 = v[1] + a[1] - vn * n[1]
    t2 = v[2] + a[2] - vn * n[2]
    ut = np.sqrt(t0 * t0 + t1 * t1 + t2 * t2)
    if ut.real > 0.0:
        t0 /= ut
        t1 /= ut
        t2 /= ut
    if law == LAW_STRONGE_COMPLIANT:
        # Stronge's signs: v_t0 <= 0 along the direction opposite the slip.
        vtf, vnf, regime = stronge.collinear(-ut, vn, mu, e, ratio)
        jn = m * (vnf - vn)
        jt = m * (vtf + ut) / TANGENTIAL
        slipped = regime == stronge.GROSS_SLIP
    elif law == LAW_IMPULSE:
        jn = -(1.0 + e) * vn * m
        jt, slipped = capped(m * ut / TANGENTIAL, mu * jn)
    else:  # a code without a kernel: never another law's impulse
        jn = np.nan * vn
        jt, slipped = np.nan * vn, False
    p0 = jn * n[0] - jt * t0
    p1 = jn * n[1] - jt * t1
    p2 = jn * n[2] - jt * t2
    q = cross(n[0], n[1], n[2], p0, p1, p2)
    k = -1.0 / (INERTIA * m * r)
    for d, pd in enumerate((p0, p1, p2)):
        dv[d] = pd / m
        dw[d] = k * q[d]
    return jn, jt, slipped
