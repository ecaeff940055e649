"""Forward-mode sensitivities through the time-stepper (:mod:`simcore.rigid.rigid_engine`).

Each stage of a step has its tangent here, called by the stage itself when
the run carries directions (``Tangents.nt > 0``), on the same values, in the
same order, so the tangents are the exact derivatives of the computed
trajectory (the step's branches: contact or not, stick or slide, the
damping clamp, held fixed, as everywhere in the engine).  Direction ``p``
moves a coefficient of the parameter vector (``pdir[p]``; the ground
offset among them), an initial velocity or spin component (world frame),
or a control force component.  The body's own coefficients and the
recording's (:data:`simcore.kernel.parameter.BODY_PARAMETERS`,
``SCENE_PARAMETERS``) enter as ``dgrav`` (the gravity's tangent: ``dv_z -=
h dg`` each kick), ``dcom`` (the centre of mass's, body frame: the state
starts at ``x_c + R c``, the geometry and the samples sit at ``x - R c``)
and ``dlni`` (``d ln I``: an inertia scale moves the world inverse inertia
by ``-dlni I_w^-1``; the gyroscopic solve's fixed point does not depend on
a common factor of the moments).  A tilt of the ground moves its normal
``n`` (``dnormal``) and its offset ``n_z z0``: a ground point's depth and
place, its directions (``ddir``: ``dn``; ``dt1`` of the normalised ``e -
(e . n) n``; ``dt2 = dn x t1 + n x dt1``) and every stage that reads them
take it (the Moreau-Jean stepper's rows too, :func:`simcore.rigid.moreau._tangents`).

State tangents per body: ``pos``, ``vel``, ``omega (nb, 3, NT)`` and the
orientation's ``rot (nb, 3, NT)``, a small world-frame rotation: the
perturbed orientation is ``exp(rot / 2) q``, so a body-frame vector ``c``
moves by ``rot x (R c)`` and the world inertia's inverse by ``d(I_w^-1) u =
rot x (I_w^-1 u) - I_w^-1 (rot x u)``.  The orientation update ``q' =
exp(h w / 2) q`` carries it as ``rot' = R_E rot + J_l(h w) h dw`` (``R_E``
the step's rotation, ``J_l`` the left Jacobian of the rotation exponential).

Points on a plane (the ground, a wall) are differentiated exactly; a
body-body point (its normal and features move with both bodies) marks the
scenario ``ND_BODY_PENALTY`` (the fitter falls back to finite differences
there), as does a control window shifted by a time-offset direction
(``ND_LAG_STEPPED``: the window's edge moves across the step grid in jumps).
"""

from typing import NamedTuple

import numpy as np

from ..geometry.faces import turns_contacts
from ..geometry.rigid import (
    _sandwich,
    com_arm,
    cross,
    gyro_solve,
    gyroscopic,
    quat_rotate,
    quat_unrotate,
)
from ..kernel.config import jit
from ..kernel.parameter import (
    GROUND_OFFSET,
    M_COM_X,
    M_INERTIA,
    S_GRAVITY,
    S_TILT_X,
    S_TILT_Y,
    TIME_OFFSET,
)
from ..kernel.sensitivity import ND_BODY_PENALTY, ND_LAG_STEPPED, seed
from ..laws.impact_maps import frame_tangent
from ..laws.penalty import (
    C_ALPHA,
    C_E,
    C_KV,
    C_MU_K,
    C_MU_ROLL,
    C_MU_S,
    C_VE1,
    C_VE2,
    NCOEF,
    derive_tangent,
    law_tangent,
)


class Tangents(NamedTuple):
    """One scenario's tangent record (``NT`` directions, ``C`` points).

    ``nt``; ``pdir (NT,)`` the parameter each direction moves (-1: none);
    the state ``pos``, ``rot``, ``vel``, ``omega (nb, 3, NT)`` (module); the
    step's ``force``, ``torque (nb, 3, NT)``; the coefficient table's
    ``coef (3, nmat, nmat, NCOEF, NT)`` and the planes' ``offset (np, NT)``;
    per point the tangents of the engine's :class:`simcore.rigid.rigid_engine.Work`
    fields of the same names: ``depth``, ``vi``, ``fs``, ``cd``, ``slip``,
    ``kn``, ``pd``, ``fn``, ``pr``, ``mem_vi (C, NT)``, ``point (C, 3, NT)``,
    ``kmat``, ``kinv (C, 3, NT)``, ``pt (C, 2, NT)``, ``jac``, ``resp (C, 3,
    3, NT)`` (side i: a plane has none); ``used (NT,)``: contact point steps
    in which each direction's coefficient entered directly; ``nondiff (1,)``;
    ``iinv (nb, 3, 3)`` each body's world inverse inertia this step;
    ``centre (nb, 3, NT)`` the box centres' tangents (:func:`centres`);
    ``dgrav (NT,)``, ``dcom (nb, 3, NT)``, ``dlni (nb, NT)``: the seeds of
    the body's and the recording's coefficients (:func:`seed_body`);
    ``dnormal (NT, 3)`` the ground normal's tangent and ``ddir (C, 3, 3,
    NT)`` each point's directions' (zero off the ground).
    """

    nt: int
    pdir: np.ndarray
    pos: np.ndarray
    rot: np.ndarray
    vel: np.ndarray
    omega: np.ndarray
    force: np.ndarray
    torque: np.ndarray
    coef: np.ndarray
    offset: np.ndarray
    depth: np.ndarray
    point: np.ndarray
    vi: np.ndarray
    fs: np.ndarray
    cd: np.ndarray
    slip: np.ndarray
    jac: np.ndarray
    resp: np.ndarray
    kn: np.ndarray
    kmat: np.ndarray
    kinv: np.ndarray
    pd: np.ndarray
    fn: np.ndarray
    pt: np.ndarray
    pr: np.ndarray
    mem_vi: np.ndarray
    used: np.ndarray
    nondiff: np.ndarray
    iinv: np.ndarray
    centre: np.ndarray
    dgrav: np.ndarray
    dcom: np.ndarray
    dlni: np.ndarray
    dnormal: np.ndarray
    ddir: np.ndarray


@jit
def record(nb, nplane, cap, nmat, pdir, t_vel, t_omega, table, rows_g, rows_b, rows_w):
    """A scenario's :class:`Tangents`, seeded: the initial velocity and spin
    directions, the coefficient table's tangents (a direction moves every
    entry its parameter fills, and Hunt-Crossley's ``a(e)`` through ``e``);
    the ground's offset and the body's and the recording's coefficients are
    seeded by :func:`seed_body`."""
    nt = pdir.shape[0]
    tg = Tangents(nt, pdir, np.zeros((nb, 3, nt)), np.zeros((nb, 3, nt)), np.zeros((nb, 3, nt)),
                  np.zeros((nb, 3, nt)), np.zeros((nb, 3, nt)), np.zeros((nb, 3, nt)),
                  np.zeros((3, nmat, nmat, NCOEF, nt)), np.zeros((nplane, nt)),
                  np.zeros((cap, nt)), np.zeros((cap, 3, nt)), np.zeros((cap, nt)),
                  np.zeros((cap, nt)), np.zeros((cap, nt)), np.zeros((cap, nt)),
                  np.zeros((cap, 3, 3, nt)), np.zeros((cap, 3, 3, nt)), np.zeros((cap, nt)),
                  np.zeros((cap, 3, nt)), np.zeros((cap, 3, nt)), np.zeros((cap, nt)),
                  np.zeros((cap, nt)), np.zeros((cap, 2, nt)), np.zeros((cap, nt)),
                  np.zeros((cap, nt)), np.zeros(nt, np.int64), np.zeros(1, np.int64),
                  np.zeros((nb, 3, 3)), np.zeros((nb, 3, nt)), np.zeros(nt),
                  np.zeros((nb, 3, nt)), np.zeros((nb, nt)), np.zeros((nt, 3)),
                  np.zeros((cap, 3, 3, nt)))
    seed(nb, t_vel, tg.vel)
    seed(nb, t_omega, tg.omega)
    for p in range(nt):
        q = pdir[p]
        if q < 0:
            continue
        for a in range(nmat):
            for m in range(nmat):
                for col in range(rows_g.shape[1]):
                    if m == 0 and rows_g[a, col] == q:
                        tg.coef[0, a, 0, col, p] = 1.0
                    if rows_b[a, m, col] == q:
                        tg.coef[1, a, m, col, p] = 1.0
                    if rows_w[a, m, col] == q:
                        tg.coef[2, a, m, col, p] = 1.0
                for kind in range(3):
                    tg.coef[kind, a, m, C_ALPHA, p] = derive_tangent(table[kind, a, m],
                                                                     tg.coef[kind, a, m, C_E, p])
    return tg


@jit(borrow=True)
def seed_body(b, pl, tg, params, rows_m, rows_s):
    """The seeds of the body's own coefficients and the recording's (rows
    ``rows_m (nmat, 4)``, ``rows_s (3,)`` of the vector ``params``, -1: not
    held): the gravity's, each body's centre of mass shift (a unit along its
    axis) and inertia scale (``d ln I = 1 / scale``), the ground's normal
    and offset under a tilt (``n = (cos tx sin ty, -sin tx, cos tx cos
    ty)``, the offset ``n_z z0``) and its offset under ``ground_offset``
    (``n_z``).  Each seeded body (or the scene) counts once in ``used``: the
    coefficient enters the scenario's model directly."""
    tx = params[rows_s[S_TILT_X]] if rows_s[S_TILT_X] >= 0 else 0.0
    ty = params[rows_s[S_TILT_Y]] if rows_s[S_TILT_Y] >= 0 else 0.0
    z0 = pl.offset[0] / pl.normal[0, 2]
    for p in range(tg.nt):
        q = tg.pdir[p]
        if q < 0:
            continue
        if q == GROUND_OFFSET:
            tg.offset[0, p] = pl.normal[0, 2]
        if q == rows_s[S_GRAVITY]:
            tg.dgrav[p] = 1.0
            tg.used[p] += 1
        if q == rows_s[S_TILT_X] or q == rows_s[S_TILT_Y]:
            if q == rows_s[S_TILT_X]:
                dn = (-np.sin(tx) * np.sin(ty), -np.cos(tx), -np.sin(tx) * np.cos(ty))
            else:
                dn = (np.cos(tx) * np.cos(ty), 0.0, -np.cos(tx) * np.sin(ty))
            for a in range(3):
                tg.dnormal[p, a] = dn[a]
            tg.offset[0, p] = dn[2] * z0
            tg.used[p] += 1
        for i in range(b.count):
            if b.fixed[i]:
                continue
            row = rows_m[b.mat[i]]
            for a in range(3):
                if q == row[M_COM_X + a]:
                    tg.dcom[i, a, p] = 1.0
                    tg.used[p] += 1
            if q == row[M_INERTIA]:
                tg.dlni[i, p] = 1.0 / params[q]
                tg.used[p] += 1


@jit(borrow=True)
def seed_com(b, tg):
    """The seeds moved to the centres of mass (the state's
    :func:`simcore.rigid.rigid_engine._shift`): a spin direction ``dw`` moves the
    centre of mass's velocity ``v_c + w x R c`` by ``dw x R c``; a centre of
    mass direction ``dc`` moves its position by ``R dc`` and its velocity by
    ``w x R dc``; a turn of the start ``rot`` moves them by ``rot x R c``
    and ``w x (rot x R c)``."""
    for i in range(b.count):
        r = com_arm(b.quat[i], b.com[i])
        w = b.omega[i]
        for p in range(tg.nt):
            m = cross(tg.omega[i, 0, p], tg.omega[i, 1, p], tg.omega[i, 2, p], r[0], r[1], r[2])
            dc = com_arm(b.quat[i], tg.dcom[i, :, p])
            tr = cross(tg.rot[i, 0, p], tg.rot[i, 1, p], tg.rot[i, 2, p], r[0], r[1], r[2])
            x0, x1, x2 = dc[0] + tr[0], dc[1] + tr[1], dc[2] + tr[2]
            u = cross(w[0], w[1], w[2], x0, x1, x2)
            tg.pos[i, 0, p] += x0
            tg.pos[i, 1, p] += x1
            tg.pos[i, 2, p] += x2
            for a in range(3):
                tg.vel[i, a, p] += m[a] + u[a]


@jit(borrow=True)
def fall(tg, i, h):
    """The gravity's tangent of a kick of body ``i``: ``dv_z -= h dg``."""
    for p in range(tg.nt):
        tg.vel[i, 2, p] -= h * tg.dgrav[p]


@jit(borrow=True)
def centres(b, tg, tc):
    """``tc (nb, 3, NT)``: the tangents of the box centres ``x - R c``:
    ``dx - rot x R c - R dc``."""
    for i in range(b.count):
        r = com_arm(b.quat[i], b.com[i])
        for p in range(tg.nt):
            m = cross(tg.rot[i, 0, p], tg.rot[i, 1, p], tg.rot[i, 2, p], r[0], r[1], r[2])
            dc = com_arm(b.quat[i], tg.dcom[i, :, p])
            for a in range(3):
                tc[i, a, p] = tg.pos[i, a, p] - m[a] - dc[a]


@jit(borrow=True)
def to_centres(b, tg, tpos, tvel):
    """The tangents of the box centres' positions and velocities into
    ``tpos``, ``tvel (nb, 3, NT)``: of ``x - R c`` (:func:`centres`) and of
    ``v - w x R c``, ``dv - dw x R c - w x (rot x R c + R dc)``."""
    centres(b, tg, tpos)
    for i in range(b.count):
        r = com_arm(b.quat[i], b.com[i])
        w = b.omega[i]
        for p in range(tg.nt):
            m = cross(tg.omega[i, 0, p], tg.omega[i, 1, p], tg.omega[i, 2, p], r[0], r[1], r[2])
            dr = cross(tg.rot[i, 0, p], tg.rot[i, 1, p], tg.rot[i, 2, p], r[0], r[1], r[2])
            dc = com_arm(b.quat[i], tg.dcom[i, :, p])
            n = cross(w[0], w[1], w[2], dr[0] + dc[0], dr[1] + dc[1], dr[2] + dc[2])
            for a in range(3):
                tvel[i, a, p] = tg.vel[i, a, p] - m[a] - n[a]


@jit(borrow=True)
def _times(m, u0, u1, u2):
    return (m[0, 0] * u0 + m[0, 1] * u1 + m[0, 2] * u2, m[1, 0] * u0 + m[1, 1] * u1 + m[1, 2] * u2,
            m[2, 0] * u0 + m[2, 1] * u1 + m[2, 2] * u2)


@jit(borrow=True)
def _rotate_back(m, th, a, u0, u1, u2, du0, du1, du2):
    """``d(I_w^-1 u)`` for the orientation tangent ``th`` and ``du``:
    ``th x a + I_w^-1 (du - th x u)`` with ``a = I_w^-1 u`` and ``m =
    I_w^-1`` (a tuple)."""
    tu = cross(th[0], th[1], th[2], u0, u1, u2)
    b = _times(m, du0 - tu[0], du1 - tu[1], du2 - tu[2])
    ta = cross(th[0], th[1], th[2], a[0], a[1], a[2])
    return ta[0] + b[0], ta[1] + b[1], ta[2] + b[2]


@jit(borrow=True)
def inverse_inertia(b, tg):
    """Each body's ``I_w^-1 = R diag(1 / inertia) R^T`` at the step's
    orientation (zero for a fixed body)."""
    for i in range(b.count):
        w, x, y, z = b.quat[i, 0], b.quat[i, 1], b.quat[i, 2], b.quat[i, 3]
        j0, j1, j2 = 1.0 / b.inertia[i, 0], 1.0 / b.inertia[i, 1], 1.0 / b.inertia[i, 2]
        m = tg.iinv[i]
        # R's columns scaled: m = sum_k (1 / I_k) R[:, k] R[:, k]^T
        for a in range(3):
            m[a, 0] = m[a, 1] = m[a, 2] = 0.0
        for k in range(3):
            if k == 0:
                c0, c1, c2, s = 1 - 2 * (y * y + z * z), 2 * (x * y + w * z), 2 * (x * z - w * y), j0
            elif k == 1:
                c0, c1, c2, s = 2 * (x * y - w * z), 1 - 2 * (x * x + z * z), 2 * (y * z + w * x), j1
            else:
                c0, c1, c2, s = 2 * (x * z + w * y), 2 * (y * z - w * x), 1 - 2 * (x * x + y * y), j2
            m[0, 0] += s * c0 * c0
            m[0, 1] += s * c0 * c1
            m[0, 2] += s * c0 * c2
            m[1, 1] += s * c1 * c1
            m[1, 2] += s * c1 * c2
            m[2, 2] += s * c2 * c2
        m[1, 0], m[2, 0], m[2, 1] = m[0, 1], m[0, 2], m[1, 2]


@jit(borrow=True)
def detect(b, pl, pts, tg):
    """Tangents of the points' penetrations and positions (stage 1): a box
    corner ``c = x + R (c_b - c_m)`` (``x`` the centre of mass, ``c_m`` its
    place in the body frame) moves by ``dx + rot x R (c_b - c_m) - R dc_m``,
    its depth ``d - n . c`` by ``dd - n . dc``, the point ``c + depth n /
    2``; a sphere's depth ``r - (n . x_c - d)`` with its centre ``x_c = x -
    R c_m``."""
    inverse_inertia(b, tg)
    for c in range(pts.count[0]):
        if pts.j[c] >= 0:
            tg.nondiff[0] |= ND_BODY_PENALTY
            continue
        i, k = pts.i[c], pts.plane[c]
        n = pl.normal[k]
        x = b.pos[i]
        turns = turns_contacts(b.shape[i])
        half = 0.5 * pts.depth[c]
        if turns:
            r0 = pts.point[c, 0] - half * n[0] - x[0]
            r1 = pts.point[c, 1] - half * n[1] - x[1]
            r2 = pts.point[c, 2] - half * n[2] - x[2]
        else:  # a sphere's contact turns with its centre only
            r = com_arm(b.quat[i], b.com[i])
            r0, r1, r2 = -r[0], -r[1], -r[2]
        # the deepest point of the body (a corner, a sphere's bottom)
        w0 = pts.point[c, 0] - half * n[0]
        w1 = pts.point[c, 1] - half * n[1]
        w2 = pts.point[c, 2] - half * n[2]
        for p in range(tg.nt):
            dc = com_arm(b.quat[i], tg.dcom[i, :, p])
            th = tg.rot[i, :, p]
            m = cross(th[0], th[1], th[2], r0, r1, r2)
            d0 = tg.pos[i, 0, p] + m[0] - dc[0]
            d1 = tg.pos[i, 1, p] + m[1] - dc[1]
            d2 = tg.pos[i, 2, p] + m[2] - dc[2]
            dn0 = dn1 = dn2 = 0.0
            if k == 0:
                dn0, dn1, dn2 = tg.dnormal[p, 0], tg.dnormal[p, 1], tg.dnormal[p, 2]
                if not turns:  # a sphere's deepest point moves with the normal
                    rad = b.ext[i, 0]
                    d0, d1, d2 = d0 - rad * dn0, d1 - rad * dn1, d2 - rad * dn2
            dd = (tg.offset[k, p] - (n[0] * d0 + n[1] * d1 + n[2] * d2)
                  - (dn0 * w0 + dn1 * w1 + dn2 * w2))
            tg.depth[c, p] = dd
            hd = 0.5 * pts.depth[c]
            tg.point[c, 0, p] = d0 + 0.5 * dd * n[0] + hd * dn0
            tg.point[c, 1, p] = d1 + 0.5 * dd * n[1] + hd * dn1
            tg.point[c, 2, p] = d2 + 0.5 * dd * n[2] + hd * dn2


@jit(borrow=True)
def stiction(row, trow, p, s, ds):
    """Tangent of :func:`simcore.laws.penalty.stiction` at slip ``s`` moving by
    ``ds``, and whether a coefficient entered directly."""
    lo, hi = row[C_VE1], row[C_VE2]
    if s <= lo:
        return trow[C_MU_S, p], trow[C_MU_S, p] != 0.0
    if s >= hi:
        return trow[C_MU_K, p], trow[C_MU_K, p] != 0.0
    tlo, thi = trow[C_VE1, p], trow[C_VE2, p]
    span = hi - lo
    u = (s - lo) / span
    du = (ds - tlo) / span - (s - lo) * (thi - tlo) / (span * span)
    tms, tmk = trow[C_MU_S, p], trow[C_MU_K, p]
    dmu = (tms + (tmk - tms) * u * u * (3.0 - 2.0 * u)
           + (row[C_MU_K] - row[C_MU_S]) * 6.0 * u * (1.0 - u) * du)
    return dmu, tms != 0.0 or tmk != 0.0 or tlo != 0.0 or thi != 0.0


@jit(borrow=True)
def springs(b, pl, coef, w, tg):
    """Tangents of stage 2: the first-touch speeds (the memory's tangent or
    the approach rate's), the spring forces and damping, the slip speeds,
    and the forces and torques ``rho x F`` on the bodies; the memory's
    tangents replaced."""
    pts = w.pts
    n = pts.count[0]
    tg.force[:] = 0.0
    tg.torque[:] = 0.0
    for c in range(n):
        if pts.j[c] >= 0:
            continue
        i = pts.i[c]
        nrm = pts.normal[c]
        kind, ma, mb = pts.kind[c], b.mat[i], pl.mat[pts.plane[c]]
        row = coef.table[kind, ma, mb]
        trow = tg.coef[kind, ma, mb]
        rho0 = pts.point[c, 0] - b.pos[i, 0]
        rho1 = pts.point[c, 1] - b.pos[i, 1]
        rho2 = pts.point[c, 2] - b.pos[i, 2]
        w0, w1, w2 = b.omega[i, 0], b.omega[i, 1], b.omega[i, 2]
        m = cross(w0, w1, w2, rho0, rho1, rho2)
        v0, v1, v2 = b.vel[i, 0] + m[0], b.vel[i, 1] + m[1], b.vel[i, 2] + m[2]
        vn = v0 * nrm[0] + v1 * nrm[1] + v2 * nrm[2]
        vt0, vt1, vt2 = v0 - vn * nrm[0], v1 - vn * nrm[1], v2 - vn * nrm[2]
        slip = w.slip[c]
        kv = row[C_KV]
        fs = w.fs[c]
        f0, f1, f2 = fs * nrm[0] - kv * vt0, fs * nrm[1] - kv * vt1, fs * nrm[2] - kv * vt2
        src = w.src[c]
        ground = pts.plane[c] == 0
        for p in range(tg.nt):
            dr0 = tg.point[c, 0, p] - tg.pos[i, 0, p]
            dr1 = tg.point[c, 1, p] - tg.pos[i, 1, p]
            dr2 = tg.point[c, 2, p] - tg.pos[i, 2, p]
            a = cross(tg.omega[i, 0, p], tg.omega[i, 1, p], tg.omega[i, 2, p], rho0, rho1, rho2)
            e = cross(w0, w1, w2, dr0, dr1, dr2)
            dv0 = tg.vel[i, 0, p] + a[0] + e[0]
            dv1 = tg.vel[i, 1, p] + a[1] + e[1]
            dv2 = tg.vel[i, 2, p] + a[2] + e[2]
            dn0 = dn1 = dn2 = 0.0
            if ground:
                dn0, dn1, dn2 = tg.dnormal[p, 0], tg.dnormal[p, 1], tg.dnormal[p, 2]
            dvn = (dv0 * nrm[0] + dv1 * nrm[1] + dv2 * nrm[2]
                   + v0 * dn0 + v1 * dn1 + v2 * dn2)
            if src >= 0:
                dvi = tg.mem_vi[src, p]
            else:
                dvi = -dvn if -vn > 0.0 else 0.0
            tg.vi[c, p] = dvi
            dfs, dcd, hit = law_tangent(coef.laws[kind], row, trow, p, pts.depth[c],
                                        tg.depth[c, p], w.vi[c], dvi)
            tg.fs[c, p] = dfs
            tg.cd[c, p] = dcd
            dt0 = dv0 - dvn * nrm[0] - vn * dn0
            dt1 = dv1 - dvn * nrm[1] - vn * dn1
            dt2 = dv2 - dvn * nrm[2] - vn * dn2
            tg.slip[c, p] = (vt0 * dt0 + vt1 * dt1 + vt2 * dt2) / slip if slip > 0.0 else 0.0
            tkv = trow[C_KV, p]
            if tkv != 0.0 and slip > 0.0:
                hit = True
            df0 = dfs * nrm[0] + fs * dn0 - tkv * vt0 - kv * dt0
            df1 = dfs * nrm[1] + fs * dn1 - tkv * vt1 - kv * dt1
            df2 = dfs * nrm[2] + fs * dn2 - tkv * vt2 - kv * dt2
            tg.force[i, 0, p] += df0
            tg.force[i, 1, p] += df1
            tg.force[i, 2, p] += df2
            t1 = cross(dr0, dr1, dr2, f0, f1, f2)
            t2 = cross(rho0, rho1, rho2, df0, df1, df2)
            tg.torque[i, 0, p] += t1[0] + t2[0]
            tg.torque[i, 1, p] += t1[1] + t2[1]
            tg.torque[i, 2, p] += t1[2] + t2[2]
            if hit or (kind == 0 and tg.offset[0, p] != 0.0):
                tg.used[p] += 1
    for c in range(n):
        for p in range(tg.nt):
            tg.mem_vi[c, p] = tg.vi[c, p]


@jit(borrow=True)
def kick(b, tg, h):
    """Tangents of stage 3 (call before it): ``dv += h F / m``; the angular
    kick's Newton step ``w' = w1 - J^-1 f(w1)`` differentiates to ``dw' =
    J^-1 (I dw1 + h (dw1 x I y - I dw1 x y))`` with ``y = J^-1 f(w1)`` (its
    correction), in the body frame, where ``d(R^T u) = R^T (du - rot x u)``
    and ``d(R w') = R dw' + rot x (R w')``; an inertia scale ``d ln I``
    moves ``h tau / I`` by ``-d ln I h tau / I`` (the solve's fixed point
    does not move with a common factor of the moments)."""
    for i in range(b.count):
        if b.fixed[i]:
            continue
        im = b.inv_mass[i]
        q, iner, om, tq = b.quat[i], b.inertia[i], b.omega[i], b.torque[i]
        i0, i1, i2 = iner[0], iner[1], iner[2]
        wb = quat_unrotate(q, om[0], om[1], om[2])
        tb = quat_unrotate(q, tq[0], tq[1], tq[2])
        x0, x1, x2 = wb[0] + h * tb[0] / i0, wb[1] + h * tb[1] / i1, wb[2] + h * tb[2] / i2
        f = gyroscopic(iner, x0, x1, x2, h)
        newton = f[0] != 0.0 or f[1] != 0.0 or f[2] != 0.0
        y0 = y1 = y2 = 0.0
        if newton:
            y0, y1, y2 = gyro_solve(iner, x0, x1, x2, h, f[0], f[1], f[2])
        wn = quat_rotate(q, x0 - y0, x1 - y1, x2 - y2)
        for p in range(tg.nt):
            for a in range(3):
                tg.vel[i, a, p] += h * im * tg.force[i, a, p]
            th = tg.rot[i, :, p]
            dt = tg.torque[i, :, p]
            dw = tg.omega[i, :, p]
            m = cross(th[0], th[1], th[2], tq[0], tq[1], tq[2])
            dtb = quat_unrotate(q, dt[0] - m[0], dt[1] - m[1], dt[2] - m[2])
            m = cross(th[0], th[1], th[2], om[0], om[1], om[2])
            dwb = quat_unrotate(q, dw[0] - m[0], dw[1] - m[1], dw[2] - m[2])
            dl = tg.dlni[i, p]
            d0 = dwb[0] + h * (dtb[0] - dl * tb[0]) / i0
            d1 = dwb[1] + h * (dtb[1] - dl * tb[1]) / i1
            d2 = dwb[2] + h * (dtb[2] - dl * tb[2]) / i2
            if newton:
                a1 = cross(d0, d1, d2, i0 * y0, i1 * y1, i2 * y2)
                a2 = cross(i0 * d0, i1 * d1, i2 * d2, y0, y1, y2)
                d0, d1, d2 = gyro_solve(iner, x0, x1, x2, h, i0 * d0 + h * (a1[0] - a2[0]),
                                        i1 * d1 + h * (a1[1] - a2[1]),
                                        i2 * d2 + h * (a1[2] - a2[2]))
            dww = quat_rotate(q, d0, d1, d2)
            m = cross(th[0], th[1], th[2], wn[0], wn[1], wn[2])
            dw[0], dw[1], dw[2] = dww[0] + m[0], dww[1] + m[1], dww[2] + m[2]


@jit(borrow=True)
def controls(b, tg, i, q_row, t_ctrl, h, tq):
    """Tangents of a control's velocity change on body ``i`` (call before
    it): direction ``p`` with ``t_ctrl[p] = 3 q_row + d`` moves its force
    component d (``dv += h / m``); the torque's ``I_w^-1 h tau`` turns with
    the body."""
    inverse_inertia(b, tg)
    m = tg.iinv[i]
    for p in range(tg.nt):
        if t_ctrl[p] >= 0 and t_ctrl[p] // 3 == q_row:
            tg.vel[i, t_ctrl[p] % 3, p] += h * b.inv_mass[i]
        a0 = _times(m, h * tq[0], h * tq[1], h * tq[2])
        d = _rotate_back(m, tg.rot[i, :, p], a0, h * tq[0], h * tq[1], h * tq[2], 0.0, 0.0, 0.0)
        for a in range(3):
            tg.omega[i, a, p] += d[a] - tg.dlni[i, p] * a0[a]


@jit(borrow=True)
def prepare(b, w, tg, c):
    """Tangents of :func:`simcore.rigid.rigid_engine._prepare` for a point on a
    plane (its directions are the plane's, fixed): ``jac = rho x d``,
    ``resp = I_w^-1 jac``, ``K`` and its inverse (``dK^-1 = -K^-1 dK
    K^-1`` by entries); the impulses' tangents start at zero."""
    for p in range(tg.nt):
        tg.pt[c, 0, p] = 0.0
        tg.pt[c, 1, p] = 0.0
        tg.pr[c, p] = 0.0
        tg.pd[c, p] = 0.0
        tg.fn[c, p] = tg.fs[c, p]
    if w.pts.j[c] >= 0:
        return
    i = w.pts.i[c]
    m = tg.iinv[i]
    if w.pts.plane[c] == 0:
        directions(w, tg, c)
    p0 = w.pts.point[c]
    r0, r1, r2 = p0[0] - b.pos[i, 0], p0[1] - b.pos[i, 1], p0[2] - b.pos[i, 2]
    for p in range(tg.nt):
        th = tg.rot[i, :, p]
        dr0 = tg.point[c, 0, p] - tg.pos[i, 0, p]
        dr1 = tg.point[c, 1, p] - tg.pos[i, 1, p]
        dr2 = tg.point[c, 2, p] - tg.pos[i, 2, p]
        for k in range(3):
            d = w.dirs[c, k]
            jac = w.jac[c, 0, k]
            dd = tg.ddir[c, k, :, p]
            dj = cross(dr0, dr1, dr2, d[0], d[1], d[2])
            rd = cross(r0, r1, r2, dd[0], dd[1], dd[2])
            dj = (dj[0] + rd[0], dj[1] + rd[1], dj[2] + rd[2])
            dres = _rotate_back(m, th, w.resp[c, 0, k], jac[0], jac[1], jac[2], dj[0], dj[1],
                                dj[2])
            for a in range(3):
                tg.jac[c, k, a, p] = dj[a]
                tg.resp[c, k, a, p] = dres[a] - tg.dlni[i, p] * w.resp[c, 0, k, a]
        tg.kn[c, p] = _dot2(w, tg, c, 0, 0, p)
        k11 = _dot2(w, tg, c, 1, 1, p)
        k12 = _dot2(w, tg, c, 1, 2, p)
        k22 = _dot2(w, tg, c, 2, 2, p)
        kk = w.kmat[c]
        det = kk[0] * kk[2] - kk[1] * kk[1]
        ddet = k11 * kk[2] + kk[0] * k22 - 2.0 * kk[1] * k12
        tg.kmat[c, 0, p], tg.kmat[c, 1, p], tg.kmat[c, 2, p] = k11, k12, k22
        tg.kinv[c, 0, p] = (k22 - w.kinv[c, 0] * ddet) / det
        tg.kinv[c, 1, p] = (-k12 - w.kinv[c, 1] * ddet) / det
        tg.kinv[c, 2, p] = (k11 - w.kinv[c, 2] * ddet) / det


@jit(borrow=True)
def directions(w, tg, c):
    """``ddir[c]``: the tangents of a ground point's directions
    (:func:`simcore.rigid.rigid_engine._prepare`, the axes of
    :func:`simcore.laws.impact_maps.frame`) under the normal's ``dn``
    (:func:`simcore.laws.impact_maps.frame_tangent`)."""
    n = w.dirs[c, 0]
    t1 = w.dirs[c, 1]
    for p in range(tg.nt):
        dn = tg.dnormal[p]
        dt1, dt2 = frame_tangent(n, t1, dn)
        for q in range(3):
            tg.ddir[c, 0, q, p] = dn[q]
            tg.ddir[c, 1, q, p] = dt1[q]
            tg.ddir[c, 2, q, p] = dt2[q]


@jit(borrow=True)
def _dot2(w, tg, c, k, l, p):
    """Tangent of ``jac_k . resp_l`` (side i)."""
    out = 0.0
    for a in range(3):
        out += tg.jac[c, k, a, p] * w.resp[c, 0, l, a] + w.jac[c, 0, k, a] * tg.resp[c, l, a, p]
    return out


@jit(borrow=True, inline="always")
def along(b, w, tg, c, k, p):
    """Tangent of :func:`simcore.rigid.rigid_engine._along` (a plane point).
    Inlined, as :func:`push`: the sweeps call both once per direction, and
    a call would pass every field of the three records."""
    i = w.pts.i[c]
    d = w.dirs[c, k]
    jac = w.jac[c, 0, k]
    out = 0.0
    for a in range(3):
        out += (tg.vel[i, a, p] * d[a] + b.vel[i, a] * tg.ddir[c, k, a, p]
                + tg.omega[i, a, p] * jac[a] + b.omega[i, a] * tg.jac[c, k, a, p])
    return out


@jit(borrow=True, inline="always")
def push(b, w, tg, c, k, lam, dlam, p):
    """Tangent of :func:`simcore.rigid.rigid_engine._push` of ``lam`` (a plane point)."""
    i = w.pts.i[c]
    if b.fixed[i]:
        return
    im = b.inv_mass[i]
    d = w.dirs[c, k]
    for a in range(3):
        tg.vel[i, a, p] += im * (dlam * d[a] + lam * tg.ddir[c, k, a, p])
        tg.omega[i, a, p] += dlam * w.resp[c, 0, k, a] + lam * tg.resp[c, k, a, p]


@jit(borrow=True)
def damp(b, w, tg, c, h, rate, g, free, p_new):
    """Tangents of :func:`simcore.rigid.rigid_engine._damp` (call before its push):
    ``g = c h rate / (1 + c h K_nn)`` or the clamp ``-F_s h``."""
    if w.pts.j[c] >= 0:
        return
    ch = w.cd[c] * h
    den = 1.0 + ch * w.kn[c]
    for p in range(tg.nt):
        dr = -along(b, w, tg, c, 0, p) + tg.kn[c, p] * w.pd[c] + w.kn[c] * tg.pd[c, p]
        dch = tg.cd[c, p] * h
        if free:
            dp = (dch * rate + ch * dr) / den - g * (dch * w.kn[c] + ch * tg.kn[c, p]) / den
        else:
            dp = -tg.fs[c, p] * h
        push(b, w, tg, c, 0, p_new - w.pd[c], dp - tg.pd[c, p], p)
        tg.pd[c, p] = dp
        tg.fn[c, p] = tg.fs[c, p] + dp / h


@jit(borrow=True)
def friction(b, w, tg, c, row, trow, h, mu_v, u, p_new, stick, pyramidal):
    """Tangents of a point's friction impulse (call before its pushes):
    stick ``p = pt - K^-1 u``; slide ``p = -cap f / |f|`` with ``f = u - K
    pt`` and ``cap = mu(slip) F h`` (``mu_v``: the forward's ``mu(slip)``;
    ``|f|`` the 1-norm on the pyramid).  ``u = (u1, u2)`` the tangential
    rates, ``p_new = (p1, p2)`` the new accumulated impulses."""
    u1, u2 = u
    p1, p2 = p_new
    if w.pts.j[c] >= 0:
        return
    fn = w.fn[c]
    slip = w.slip[c]
    cap = mu_v * max(fn, 0.0) * h
    kk, ki = w.kmat[c], w.kinv[c]
    pt0, pt1 = w.pt[c, 0], w.pt[c, 1]
    f1 = u1 - (kk[0] * pt0 + kk[1] * pt1)
    f2 = u2 - (kk[1] * pt0 + kk[2] * pt1)
    i = w.pts.i[c]
    d1, d2 = w.dirs[c, 1], w.dirs[c, 2]
    j1, j2 = w.jac[c, 0, 1], w.jac[c, 0, 2]
    r1, r2 = w.resp[c, 0, 1], w.resp[c, 0, 2]
    im = 0.0 if b.fixed[i] else b.inv_mass[i]
    lam1, lam2 = p1 - pt0, p2 - pt1
    for p in range(tg.nt):
        # both tangential rates at once (``along`` of directions 1 and 2)
        du1 = du2 = 0.0
        for a in range(3):
            v, o, om, bv = tg.vel[i, a, p], tg.omega[i, a, p], b.omega[i, a], b.vel[i, a]
            du1 += v * d1[a] + bv * tg.ddir[c, 1, a, p] + o * j1[a] + om * tg.jac[c, 1, a, p]
            du2 += v * d2[a] + bv * tg.ddir[c, 2, a, p] + o * j2[a] + om * tg.jac[c, 2, a, p]
        tp0, tp1 = tg.pt[c, 0, p], tg.pt[c, 1, p]
        if stick:
            t0, t1, t2 = tg.kinv[c, 0, p], tg.kinv[c, 1, p], tg.kinv[c, 2, p]
            dp1 = tp0 - (t0 * u1 + ki[0] * du1 + t1 * u2 + ki[1] * du2)
            dp2 = tp1 - (t1 * u1 + ki[1] * du1 + t2 * u2 + ki[2] * du2)
        else:
            dmu, hit = stiction(row, trow, p, slip, tg.slip[c, p])
            if hit and fn > 0.0:
                tg.used[p] += 1
            dcap = (dmu * fn + mu_v * tg.fn[c, p]) * h if fn > 0.0 else 0.0
            t0, t1, t2 = tg.kmat[c, 0, p], tg.kmat[c, 1, p], tg.kmat[c, 2, p]
            df1 = du1 - (t0 * pt0 + kk[0] * tp0 + t1 * pt1 + kk[1] * tp1)
            df2 = du2 - (t1 * pt0 + kk[1] * tp0 + t2 * pt1 + kk[2] * tp1)
            if pyramidal:
                norm = abs(f1) + abs(f2)
                dnorm = (df1 if f1 >= 0.0 else -df1) + (df2 if f2 >= 0.0 else -df2)
            else:
                norm = np.sqrt(f1 * f1 + f2 * f2)
                dnorm = (f1 * df1 + f2 * df2) / norm if norm > 0.0 else 0.0
            if norm > 0.0:
                dp1 = -(dcap * f1 + cap * df1) / norm + cap * f1 * dnorm / (norm * norm)
                dp2 = -(dcap * f2 + cap * df2) / norm + cap * f2 * dnorm / (norm * norm)
            else:
                dp1 = dp2 = 0.0
        # both pushes at once (``push`` along directions 1 and 2)
        e1, e2 = dp1 - tp0, dp2 - tp1
        if im > 0.0:
            for a in range(3):
                tg.vel[i, a, p] += im * (e1 * d1[a] + e2 * d2[a] + lam1 * tg.ddir[c, 1, a, p]
                                         + lam2 * tg.ddir[c, 2, a, p])
                tg.omega[i, a, p] += (e1 * r1[a] + lam1 * tg.resp[c, 1, a, p]
                                      + e2 * r2[a] + lam2 * tg.resp[c, 2, a, p])
        tg.pt[c, 0, p] = dp1
        tg.pt[c, 1, p] = dp2


@jit(borrow=True)
def rolling(b, w, tg, c, row, trow, h, e, mag, k, free, d):
    """Tangents of :func:`simcore.rigid.rigid_engine._rolling` (call before its
    update): ``mag = |w_t|``, ``e = w_t / mag`` (a 3-tuple), ``k = e . I_w^-1
    e`` (``dk = 2 de . a + 2 rot . (a x e)``, ``a = I_w^-1 e``), the
    accumulated ``min(pr + mag / k, mu_roll F h)`` and the update ``-d a``."""
    e0, e1, e2 = e
    if w.pts.j[c] >= 0:
        return
    i = w.pts.i[c]
    nrm = w.pts.normal[c]
    m = tg.iinv[i]
    a = _times(m, e0, e1, e2)
    axe = cross(a[0], a[1], a[2], e0, e1, e2)
    fn = w.fn[c]
    om = b.omega[i]
    wn = om[0] * nrm[0] + om[1] * nrm[1] + om[2] * nrm[2]
    ground = w.pts.plane[c] == 0
    for p in range(tg.nt):
        dw = tg.omega[i, :, p]
        th = tg.rot[i, :, p]
        g0 = g1 = g2 = 0.0
        if ground:
            g0, g1, g2 = tg.dnormal[p, 0], tg.dnormal[p, 1], tg.dnormal[p, 2]
        dn = (dw[0] * nrm[0] + dw[1] * nrm[1] + dw[2] * nrm[2]
              + om[0] * g0 + om[1] * g1 + om[2] * g2)
        r0 = dw[0] - dn * nrm[0] - wn * g0
        r1 = dw[1] - dn * nrm[1] - wn * g1
        r2 = dw[2] - dn * nrm[2] - wn * g2
        dmag = e0 * r0 + e1 * r1 + e2 * r2
        de0, de1, de2 = (r0 - e0 * dmag) / mag, (r1 - e1 * dmag) / mag, (r2 - e2 * dmag) / mag
        dl = tg.dlni[i, p]
        dk = 2.0 * (de0 * a[0] + de1 * a[1] + de2 * a[2]) + 2.0 * (
            th[0] * axe[0] + th[1] * axe[1] + th[2] * axe[2]) - dl * k
        if free:
            tot = tg.pr[c, p] + dmag / k - mag * dk / (k * k)
        else:
            tm = trow[C_MU_ROLL, p]
            if tm != 0.0:
                tg.used[p] += 1
            tot = (tm * fn + row[C_MU_ROLL] * tg.fn[c, p]) * h
        dd = tot - tg.pr[c, p]
        tg.pr[c, p] = tot
        da = _rotate_back(m, th, a, e0, e1, e2, de0, de1, de2)
        for x in range(3):
            dw[x] -= dd * a[x] + d * (da[x] - dl * a[x])


@jit(borrow=True)
def drift(b, tg, h):
    """Tangents of stage 5 (call before it): ``dx += h dv``; ``rot' = R_E
    rot + J_l(phi) h dw`` with ``phi = h w``, ``J_l = 1 + (1 - cos t) / t^2
    [phi]x + (t - sin t) / t^3 [phi]x^2`` (``t = |phi|``; series below 1e-4)."""
    for i in range(b.count):
        if b.fixed[i]:
            continue
        w0, w1, w2 = b.omega[i, 0], b.omega[i, 1], b.omega[i, 2]
        wn = np.sqrt(w0 * w0 + w1 * w1 + w2 * w2)
        half = 0.5 * h * wn
        if wn > 0.0:
            s, cs = np.sin(half) / wn, np.cos(half)
        else:
            s, cs = 0.5 * h, 1.0
        t = h * wn
        if t < 1e-4:
            ca, cb = 0.5 - t * t / 24.0, 1.0 / 6.0 - t * t / 120.0
        else:
            ca, cb = (1.0 - np.cos(t)) / (t * t), (t - np.sin(t)) / (t * t * t)
        f0, f1, f2 = h * w0, h * w1, h * w2
        for p in range(tg.nt):
            for a in range(3):
                tg.pos[i, a, p] += h * tg.vel[i, a, p]
            th = tg.rot[i, :, p]
            r = _sandwich(cs, s * w0, s * w1, s * w2, th[0], th[1], th[2])
            v0, v1, v2 = h * tg.omega[i, 0, p], h * tg.omega[i, 1, p], h * tg.omega[i, 2, p]
            m = cross(f0, f1, f2, v0, v1, v2)
            mm = cross(f0, f1, f2, m[0], m[1], m[2])
            th[0] = r[0] + v0 + ca * m[0] + cb * mm[0]
            th[1] = r[1] + v1 + ca * m[1] + cb * mm[1]
            th[2] = r[2] + v2 + ca * m[2] + cb * mm[2]


@jit(borrow=True)
def lag_check(tg, ctrl_count):
    """Mark the scenario when a direction moves the time offset and it has
    control windows (see the module)."""
    if ctrl_count == 0:
        return
    for p in range(tg.nt):
        if tg.pdir[p] == TIME_OFFSET:
            tg.nondiff[0] |= ND_LAG_STEPPED
