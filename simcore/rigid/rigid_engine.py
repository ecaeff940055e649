"""The time-stepper: rigid boxes and spheres under penalty contact laws.

:func:`run` is what :func:`simcore.engine.simulate` calls for a model whose
integrator is ``penalty`` (:mod:`simcore.sliding.integrate`; chosen for boxes or a
penalty law).  Each step of size ``h`` reads as its stages:

1. ``detect``: the contact points at the current poses (:mod:`simcore.geometry.faces`);
2. ``springs``: each point's law split into its spring force and its
   damping at the point's penetration (:mod:`simcore.laws.penalty`), the spring
   and the viscous friction summed into forces and torques on the bodies;
3. ``kick``: velocities under those forces, gravity and the control forces
   (semi-implicit Euler: ``v' = v + h a``; angular velocities by
   :func:`simcore.geometry.rigid.angular_kick`);
4. ``impulses``: projected Gauss-Seidel over the points
   (:data:`FRICTION_SWEEPS` sweeps in a fixed order), each point in turn:
   its damping impulse at the end-of-step approach rate (implicit:
   ``P_d = c h xd' / (1 + c h K_nn)`` with ``xd'`` the rate without it and
   ``K_nn`` the normal inverse effective mass; the total normal impulse
   clamped at >= 0), then its friction impulse under the cone of that
   normal force: the one that stops its slip when the
   cone ``mu(s) F h`` holds it (stick); otherwise the cone's impulse
   opposing the slip the point would have without its own friction (slide:
   ``-mu F h u/|u|``; the pyramidal cone ``-mu F h u/(|u_1| + |u_2|)``, on
   its edge), then the rolling resistance.  Clamping the stick impulse
   radially instead would tilt a sliding corner's friction off the slip (the
   tangential matrix of an off-centre point couples the axes) and weaken it;
5. ``drift``: ``x' = x + h v'``, ``q' = exp(h w'/2) q``.

The step size: between two sample times (or the end) the stepper takes the
fewest equal steps no longer than the scenario's ``h`` (the model's
``scen_dt``, bounded by the stability guard at build time,
:func:`simcore.laws.penalty.stable_step`), so every sample is a step's end.

A contact remembers, by its feature key, the approach speed it began with
(the Hunt-Crossley damping is scaled to it); a point that leaves contact
forgets it.  Fixed bodies (``fixed``: a table top, a platform, a ramp) never
move; their contacts are body-body contacts.  Runs are deterministic and
bit-identical between the serial and parallel drivers.
"""

from typing import NamedTuple

import numpy as np

from ..geometry.collision import SHAPE_BOX, SHAPE_SPHERE
from ..geometry.faces import (
    KIND_BODY,
    KIND_GROUND,
    KIND_WALL,
    PAIR_NONE,
    Points,
    body_body,
    body_plane,
    bounding_radius,
    known,
    pair_of,
    points,
)
from ..geometry.rigid import (
    angular_kick,
    com_arm,
    cross,
    ground_normal,
    integrate_orientation,
    inv_inertia_times,
)
from ..kernel import drivers
from ..kernel.config import SKIN, jit
from ..kernel.parameter import (
    BODY_PARAMETERS,
    GROUND_OFFSET,
    M_COM_X,
    M_INERTIA,
    S_GRAVITY,
    S_TILT_X,
    S_TILT_Y,
    SCENE_PARAMETERS,
    TIME_OFFSET,
)
from ..kernel.records import TangentIO, outputs
from ..kernel.sensitivity import accumulate, seed
from ..kernel.status import (
    STATUS_MESSAGES,
    STATUS_OK,
    STATUS_OVERFLOW,
    STATUS_UNSUPPORTED_PAIR,
)
from ..laws.impact_maps import DISK, EDGES
from ..laws.penalty import (
    C_KV,
    C_MU_ROLL,
    CODES,
    CONE_PYRAMIDAL,
    NCOEF,
    derive,
    spring_damper_of,
    stiction,
)
from ..laws.registry import LAW_IMPULSE
from . import moreau, phases, rigid_tangent
from .moreau import coefficient_row as _row
from .phases import Phases

#: The law codes the time-stepper's kernels run, per contact kind (ground,
#: body, wall; ``laws.registry.KINDS``), and its shape codes (a body that is
#: not a sphere is taken as a box): :func:`simcore.engine.simulate` refuses
#: anything else.
LAWS = (CODES, CODES, CODES)
#: The Moreau-Jean stepper's: the penalty laws' coefficients, and the
#: patent's impulse law on the sliding spheres (:mod:`simcore.rigid.moreau`).
MOREAU_LAWS = tuple(codes + (LAW_IMPULSE,) for codes in LAWS)
SHAPES = (SHAPE_SPHERE, SHAPE_BOX)
#: The coefficients held only when named that this engine reads.
READS = tuple(p.name for p in BODY_PARAMETERS + SCENE_PARAMETERS)

#: Gauss-Seidel sweeps of the friction impulses per step.
FRICTION_SWEEPS = 8


class Batch(NamedTuple):
    """A batch of scenarios as the time-stepper reads it (see
    :class:`simcore.model.Model` for the per-scenario arrays).  ``body_ext
    (nscen, nb, 3)``: half extents (a sphere: its radius in each);
    ``body_inertia (nscen, nb, 3)``: principal inertia (about the centre of
    mass); ``body_com (nscen, nb, 3)``: the centre of mass in the body frame,
    from the box's centre; ``body_fixed``: bool; ``scen_h (nscen,)``: the
    largest step; ``rows_g (nmat, 15)``, ``rows_b``, ``rows_w (nmat, nmat,
    15)``: the vector rows of each contact
    kind's coefficient columns (:data:`simcore.laws.penalty.OWN` then ``SHARED``,
    -1: not held); ``rows_m (nmat, 4)``, ``rows_s (3,)``: those of the
    body's own coefficients by material and of the recording's
    (:data:`simcore.kernel.parameter.MASS_COLUMNS`, ``SCENE_COLUMNS``; -1: the
    tables' values, ``gravity`` and a level ground); ``laws (3,)`` the law
    codes of the kinds; ``cone``."""

    body_count: np.ndarray
    body_shape: np.ndarray
    body_ext: np.ndarray
    body_mass: np.ndarray
    body_inertia: np.ndarray
    body_com: np.ndarray
    body_fixed: np.ndarray
    body_material: np.ndarray
    wall_count: np.ndarray
    wall_normal: np.ndarray
    wall_offset: np.ndarray
    wall_material: np.ndarray
    ctrl_ptr: np.ndarray
    ctrl_body: np.ndarray
    ctrl_t0: np.ndarray
    ctrl_t1: np.ndarray
    ctrl_force: np.ndarray
    ctrl_torque: np.ndarray
    scen_t_end: np.ndarray
    scen_h: np.ndarray
    samp_ptr: np.ndarray
    samp_t: np.ndarray
    params: np.ndarray
    rows_g: np.ndarray
    rows_b: np.ndarray
    rows_w: np.ndarray
    rows_m: np.ndarray
    rows_s: np.ndarray
    laws: np.ndarray
    cone: int
    gravity: float
    ground_z: float


class Bodies(NamedTuple):
    """One scenario's bodies: ``count``; the state ``pos``, ``quat``,
    ``vel``, ``omega`` (while a scenario runs: of the centre of mass;
    outside, and in the samples: of the box's centre, :func:`_shift`);
    ``inv_mass`` (0: fixed), ``inertia`` (inf: fixed; the table's times the
    material's ``inertia_scale``), ``shape``, ``ext``, ``com`` (the centre
    of mass from the box's centre, body frame: the table's plus the
    material's ``com_x, com_y, com_z``), ``mat``,
    ``fixed``; the step's ``force`` and ``torque (nb, 3)``; ``centre (nb,
    3)``: the box centres at the last :func:`_centres`."""

    count: int
    pos: np.ndarray
    quat: np.ndarray
    vel: np.ndarray
    omega: np.ndarray
    inv_mass: np.ndarray
    inertia: np.ndarray
    shape: np.ndarray
    ext: np.ndarray
    com: np.ndarray
    mat: np.ndarray
    fixed: np.ndarray
    force: np.ndarray
    torque: np.ndarray
    centre: np.ndarray


class Planes(NamedTuple):
    """The ground (plane 0: through ``(0, 0, ground)``, its normal turned by
    the ``tilt_x``, ``tilt_y`` of :data:`simcore.kernel.parameter.SCENE_PARAMETERS`
    from ``+z``; material 0) and the walls (plane ``1 + k``): ``count``,
    ``normal (np, 3)``, ``offset`` (``n . x = offset`` on the plane), ``mat
    (np,)``."""

    count: int
    normal: np.ndarray
    offset: np.ndarray
    mat: np.ndarray


class Coef(NamedTuple):
    """Dense coefficient rows (:data:`simcore.laws.penalty.NCOEF` columns) of
    every contact: ``table (3, nmat, nmat, NCOEF)`` indexed by the kind, the
    body's material and the other's (the other body's, the wall's; 0 for the
    ground); the law codes ``laws (3,)`` and the cone."""

    table: np.ndarray
    laws: np.ndarray
    cone: int


class Work(NamedTuple):
    """Per-point work arrays of a step (capacity ``C``): the points; the
    spring force ``fs``, damping ``cd``, normal inverse effective mass
    ``kn``, damping impulse ``pd`` and the resulting normal force ``fn``;
    first-touch approach speed ``vi``, slip speed at the step's start
    ``slip``; the directions ``dirs (C, 3, 3)`` (normal, tangent axes) and
    per side (i, j) the angular Jacobians ``jac`` and responses ``resp (C,
    2, 3, 3)`` along them (:func:`_prepare`); the
    tangential inverse effective mass ``kmat (C, 3)`` (entries 11, 12, 22:
    the slip velocity per unit impulse) and its inverse ``kinv (C, 3)``;
    the friction impulse ``pt (C, 2)`` and rolling impulse ``pr (C,)``
    accumulated over the sweeps; the memory of the previous step's points
    ``mem_key (C,)``, ``mem_vi (C,)``, ``mem_n (1,)``, and where each point's
    first-touch speed came from ``src (C,)`` (its memory slot; -1: now); the
    contact phases ``phases`` (:mod:`simcore.rigid.phases`)."""

    pts: Points
    fs: np.ndarray
    cd: np.ndarray
    kn: np.ndarray
    pd: np.ndarray
    fn: np.ndarray
    vi: np.ndarray
    slip: np.ndarray
    dirs: np.ndarray
    jac: np.ndarray
    resp: np.ndarray
    kmat: np.ndarray
    kinv: np.ndarray
    pt: np.ndarray
    pr: np.ndarray
    mem_key: np.ndarray
    mem_vi: np.ndarray
    mem_n: np.ndarray
    src: np.ndarray
    phases: Phases


@jit(borrow=True)
def _point_velocity(b, i, p):
    """Velocity of body ``i``'s material point at ``p`` (zero for i < 0)."""
    if i < 0:
        return 0.0, 0.0, 0.0
    r0, r1, r2 = p[0] - b.pos[i, 0], p[1] - b.pos[i, 1], p[2] - b.pos[i, 2]
    w = b.omega[i]
    return (b.vel[i, 0] + w[1] * r2 - w[2] * r1, b.vel[i, 1] + w[2] * r0 - w[0] * r2,
            b.vel[i, 2] + w[0] * r1 - w[1] * r0)


@jit(borrow=True)
def _relative_velocity(b, pts, c):
    """Velocity of body i's point relative to body j's at point ``c``."""
    p = pts.point[c]
    vi = _point_velocity(b, pts.i[c], p)
    vj = _point_velocity(b, pts.j[c], p)
    return vi[0] - vj[0], vi[1] - vj[1], vi[2] - vj[2]


@jit(borrow=True)
def _add_force(b, i, p, sign, f0, f1, f2):
    """Add the force ``sign * f`` at ``p`` to body ``i``'s force and torque."""
    if i < 0 or b.fixed[i]:
        return
    f0, f1, f2 = sign * f0, sign * f1, sign * f2
    r0, r1, r2 = p[0] - b.pos[i, 0], p[1] - b.pos[i, 1], p[2] - b.pos[i, 2]
    b.force[i, 0] += f0
    b.force[i, 1] += f1
    b.force[i, 2] += f2
    b.torque[i, 0] += r1 * f2 - r2 * f1
    b.torque[i, 1] += r2 * f0 - r0 * f2
    b.torque[i, 2] += r0 * f1 - r1 * f0


@jit(borrow=True)
def _arm(b, i):
    """Body ``i``'s centre of mass from its box centre, ``r = R c``, and that
    arm's velocity ``w x r`` (two tuples)."""
    r = com_arm(b.quat[i], b.com[i])
    w = b.omega[i]
    return r, cross(w[0], w[1], w[2], r[0], r[1], r[2])


@jit(borrow=True)
def _shift(b, sign):
    """Move the state from the box centres to the centres of mass (``sign``
    1) or back (-1): ``x_m = x_c + R c``, ``v_m = v_c + w x R c``."""
    for i in range(b.count):
        r, u = _arm(b, i)
        for a in range(3):
            b.pos[i, a] += sign * r[a]
            b.vel[i, a] += sign * u[a]


@jit(borrow=True)
def _centres(b):
    """``b.centre``: each box's centre ``x - R c`` (the geometry's origin)."""
    for i in range(b.count):
        r = com_arm(b.quat[i], b.com[i])
        for a in range(3):
            b.centre[i, a] = b.pos[i, a] - r[a]


@jit(borrow=True)
def detect(b, pl, pts):
    """Stage 1: the contact points of every body against the planes and every
    pair (a bounding-sphere test first), from the box centres (the points'
    arms, their torques, from the centres of mass), by the pair table of
    :mod:`simcore.geometry.faces`.  Returns the status: ``STATUS_OVERFLOW``
    when the record overflowed, ``STATUS_UNSUPPORTED_PAIR`` for a shape or
    a pair without a kernel."""
    pts.count[0] = 0
    _centres(b)
    for i in range(b.count):
        if not known(b.shape[i]):
            return STATUS_UNSUPPORTED_PAIR
    for i in range(b.count):
        if b.fixed[i]:
            continue
        for k in range(pl.count):
            if not body_plane(pts, i, b.shape[i], b.centre[i], b.quat[i], b.ext[i],
                              pl.normal[k], pl.offset[k], k, KIND_GROUND if k == 0 else KIND_WALL):
                return STATUS_OVERFLOW
    for i in range(b.count):
        for j in range(i + 1, b.count):
            if b.fixed[i] and b.fixed[j]:
                continue
            pair = pair_of(b.shape[i], b.shape[j])
            if pair[0] == PAIR_NONE:
                return STATUS_UNSUPPORTED_PAIR
            ri = bounding_radius(b.shape[i], b.ext[i])
            rj = bounding_radius(b.shape[j], b.ext[j])
            ci, cj = b.centre[i], b.centre[j]
            d0, d1, d2 = ci[0] - cj[0], ci[1] - cj[1], ci[2] - cj[2]
            if d0 * d0 + d1 * d1 + d2 * d2 > (ri + rj) ** 2:
                continue
            if not body_body(pts, pair, i, j, ci, b.quat[i], b.ext[i], cj, b.quat[j], b.ext[j]):
                return STATUS_OVERFLOW
    return STATUS_OK


@jit(borrow=True)
def _prepare(b, w, c):
    """Point ``c``'s directions (``dirs[c]``: the normal ``n``, then the
    tangent axes ``t1``, the world x axis (y where ``n`` is near x) made
    normal to ``n``, and ``t2 = n x t1``), each side's angular Jacobian
    ``r x d`` and response ``I^-1 (r x d)`` along them (``jac``, ``resp``;
    zero for a plane or a fixed body), the 2x2 tangential matrix ``K`` (slip
    velocity per unit impulse: ``K_ab = (1/m_i + 1/m_j) t_a . t_b + (r_i x
    t_a) . I_i^-1 (r_i x t_b) + (same for j)``) and its inverse, each as its
    entries 11, 12, 22, and ``K_nn``, the same along the normal."""
    pts = w.pts
    n0, n1, n2 = pts.normal[c, 0], pts.normal[c, 1], pts.normal[c, 2]
    e0, e1 = (1.0, 0.0) if abs(n0) < 0.9 else (0.0, 1.0)
    dot = e0 * n0 + e1 * n1
    a0, a1, a2 = e0 - dot * n0, e1 - dot * n1, -dot * n2
    norm = np.sqrt(a0 * a0 + a1 * a1 + a2 * a2)
    a0, a1, a2 = a0 / norm, a1 / norm, a2 / norm
    d = w.dirs[c]
    d[0, 0], d[0, 1], d[0, 2] = n0, n1, n2
    d[1, 0], d[1, 1], d[1, 2] = a0, a1, a2
    d[2, 0], d[2, 1], d[2, 2] = n1 * a2 - n2 * a1, n2 * a0 - n0 * a2, n0 * a1 - n1 * a0
    p = pts.point[c]
    inv_sum = 0.0
    for side in range(2):
        i = pts.i[c] if side == 0 else pts.j[c]
        moving = i >= 0 and not b.fixed[i]
        if moving:
            inv_sum += b.inv_mass[i]
            r0, r1, r2 = p[0] - b.pos[i, 0], p[1] - b.pos[i, 1], p[2] - b.pos[i, 2]
        for k in range(3):
            jac = w.jac[c, side, k]
            resp = w.resp[c, side, k]
            if not moving:
                for a in range(3):
                    jac[a] = 0.0
                    resp[a] = 0.0
                continue
            jac[0] = r1 * d[k, 2] - r2 * d[k, 1]
            jac[1] = r2 * d[k, 0] - r0 * d[k, 2]
            jac[2] = r0 * d[k, 1] - r1 * d[k, 0]
            rr = inv_inertia_times(b.quat[i], b.inertia[i], jac[0], jac[1], jac[2])
            resp[0], resp[1], resp[2] = rr[0], rr[1], rr[2]
    k11, k12, k22, knn = inv_sum, 0.0, inv_sum, inv_sum
    for side in range(2):
        jac, resp = w.jac[c, side], w.resp[c, side]
        knn += jac[0, 0] * resp[0, 0] + jac[0, 1] * resp[0, 1] + jac[0, 2] * resp[0, 2]
        k11 += jac[1, 0] * resp[1, 0] + jac[1, 1] * resp[1, 1] + jac[1, 2] * resp[1, 2]
        k12 += jac[1, 0] * resp[2, 0] + jac[1, 1] * resp[2, 1] + jac[1, 2] * resp[2, 2]
        k22 += jac[2, 0] * resp[2, 0] + jac[2, 1] * resp[2, 1] + jac[2, 2] * resp[2, 2]
    w.kn[c] = knn
    det = k11 * k22 - k12 * k12
    w.kmat[c, 0], w.kmat[c, 1], w.kmat[c, 2] = k11, k12, k22
    w.kinv[c, 0], w.kinv[c, 1], w.kinv[c, 2] = k22 / det, -k12 / det, k11 / det


@jit(borrow=True)
def _along(b, w, c, k):
    """The velocity of body i's point ``c`` relative to body j's along the
    point's direction ``k`` (0 the normal, 1 and 2 the tangent axes)."""
    d = w.dirs[c, k]
    out = 0.0
    for side in range(2):
        i = w.pts.i[c] if side == 0 else w.pts.j[c]
        if i < 0:
            continue
        jac = w.jac[c, side, k]
        u = (b.vel[i, 0] * d[0] + b.vel[i, 1] * d[1] + b.vel[i, 2] * d[2]
             + b.omega[i, 0] * jac[0] + b.omega[i, 1] * jac[1] + b.omega[i, 2] * jac[2])
        out += u if side == 0 else -u
    return out


@jit(borrow=True)
def _push(b, w, c, k, lam):
    """The impulse ``lam`` along point ``c``'s direction ``k`` on body i,
    ``-lam`` on body j, into their velocities."""
    d = w.dirs[c, k]
    for side in range(2):
        i = w.pts.i[c] if side == 0 else w.pts.j[c]
        if i < 0 or b.fixed[i]:
            continue
        s = lam if side == 0 else -lam
        im = s * b.inv_mass[i]
        resp = w.resp[c, side, k]
        b.vel[i, 0] += im * d[0]
        b.vel[i, 1] += im * d[1]
        b.vel[i, 2] += im * d[2]
        b.omega[i, 0] += s * resp[0]
        b.omega[i, 1] += s * resp[1]
        b.omega[i, 2] += s * resp[2]


@jit(borrow=True)
def springs(b, pl, coef, w, tg):
    """Stage 2: each point's first-touch speed (from the memory, or its
    approach speed now), spring force and damping under its kind's law, slip
    speed and viscous friction; the springs and the viscous friction summed
    as forces and torques on the bodies; the memory replaced by this step's
    points."""
    pts = w.pts
    n = pts.count[0]
    for i in range(b.count):
        for a in range(3):
            b.force[i, a] = 0.0
            b.torque[i, a] = 0.0
    for c in range(n):
        nrm = pts.normal[c]
        v = _relative_velocity(b, pts, c)
        vn = v[0] * nrm[0] + v[1] * nrm[1] + v[2] * nrm[2]
        vi = max(-vn, 0.0)
        w.src[c] = -1
        for k in range(w.mem_n[0]):
            if w.mem_key[k] == pts.key[c]:
                vi = w.mem_vi[k]
                w.src[c] = k
                break
        w.vi[c] = vi
        kind, ma, mb = _row(b, pl, pts, c)
        row = coef.table[kind, ma, mb]
        f, w.cd[c] = spring_damper_of(coef.laws[pts.kind[c]], row, pts.depth[c], vi)
        w.fs[c] = f
        vt0, vt1, vt2 = v[0] - vn * nrm[0], v[1] - vn * nrm[1], v[2] - vn * nrm[2]
        w.slip[c] = np.sqrt(vt0 * vt0 + vt1 * vt1 + vt2 * vt2)
        kv = row[C_KV]
        f0 = f * nrm[0] - kv * vt0
        f1 = f * nrm[1] - kv * vt1
        f2 = f * nrm[2] - kv * vt2
        _add_force(b, pts.i[c], pts.point[c], 1.0, f0, f1, f2)
        _add_force(b, pts.j[c], pts.point[c], -1.0, f0, f1, f2)
    if tg.nt:
        rigid_tangent.springs(b, pl, coef, w, tg)
    for c in range(n):
        w.mem_key[c] = pts.key[c]
        w.mem_vi[c] = w.vi[c]
    w.mem_n[0] = n


@jit(borrow=True)
def kick(b, tg, gravity, h):
    """Stage 3: velocities after ``h`` under the step's forces and gravity."""
    if tg.nt:
        rigid_tangent.kick(b, tg, h)
    for i in range(b.count):
        if b.fixed[i]:
            continue
        if tg.nt:
            rigid_tangent.fall(tg, i, h)
        im = b.inv_mass[i]
        b.vel[i, 0] += h * im * b.force[i, 0]
        b.vel[i, 1] += h * im * b.force[i, 1]
        b.vel[i, 2] += h * (im * b.force[i, 2] - gravity)
        angular_kick(b.quat[i], b.omega[i], b.inertia[i], b.torque[i], h)


@jit(borrow=True)
def impulses(b, pl, coef, w, tg, h):
    """Stage 4: the damping and friction impulses (see the module),
    Gauss-Seidel over the points in their order, :data:`FRICTION_SWEEPS`
    sweeps; ``fn`` holds each point's normal force after them."""
    pts = w.pts
    n = pts.count[0]
    for c in range(n):
        w.pt[c, 0] = 0.0
        w.pt[c, 1] = 0.0
        w.pr[c] = 0.0
        w.pd[c] = 0.0
        w.fn[c] = w.fs[c]
        _prepare(b, w, c)
        if tg.nt:
            rigid_tangent.prepare(b, w, tg, c)
    for _ in range(FRICTION_SWEEPS):
        for c in range(n):
            _damp(b, w, tg, c, h)
            kind, ma, mb = _row(b, pl, pts, c)
            row = coef.table[kind, ma, mb]
            mu = stiction(row, w.slip[c])
            cap = mu * max(w.fn[c], 0.0) * h
            u1 = _along(b, w, c, 1)
            u2 = _along(b, w, c, 2)
            # the point's impulse that stops its slip (stick) ...
            p1 = w.pt[c, 0] - (w.kinv[c, 0] * u1 + w.kinv[c, 1] * u2)
            p2 = w.pt[c, 1] - (w.kinv[c, 1] * u1 + w.kinv[c, 2] * u2)
            stick = _in_cone(p1, p2, cap, coef.cone)
            if not stick:
                # ... or, outside the cone, the cone's impulse against the
                # slip the point would have without its own friction
                f1 = u1 - (w.kmat[c, 0] * w.pt[c, 0] + w.kmat[c, 1] * w.pt[c, 1])
                f2 = u2 - (w.kmat[c, 1] * w.pt[c, 0] + w.kmat[c, 2] * w.pt[c, 1])
                norm = (abs(f1) + abs(f2) if coef.cone == CONE_PYRAMIDAL
                        else np.sqrt(f1 * f1 + f2 * f2))
                p1, p2 = (-cap * f1 / norm, -cap * f2 / norm) if norm > 0.0 else (0.0, 0.0)
            if tg.nt:
                rigid_tangent.friction(b, w, tg, c, row, tg.coef[kind, ma, mb], h, mu, (u1, u2),
                                       (p1, p2), stick, coef.cone == CONE_PYRAMIDAL)
            _push(b, w, c, 1, p1 - w.pt[c, 0])
            _push(b, w, c, 2, p2 - w.pt[c, 1])
            w.pt[c, 0], w.pt[c, 1] = p1, p2
            if row[C_MU_ROLL] > 0.0 and w.fn[c] > 0.0:
                _rolling(b, w, tg, c, row, tg.coef[kind, ma, mb], h)


@jit(borrow=True)
def _damp(b, w, tg, c, h):
    """The damping impulse of point ``c`` at its end-of-step approach rate
    (implicit), the total normal impulse kept >= 0; ``fn[c]`` updated."""
    rate = -_along(b, w, c, 0) + w.kn[c] * w.pd[c]
    ch = w.cd[c] * h
    g = ch * rate / (1.0 + ch * w.kn[c])
    p = max(g, -w.fs[c] * h)
    if tg.nt:
        rigid_tangent.damp(b, w, tg, c, h, rate, g, g >= -w.fs[c] * h, p)
    _push(b, w, c, 0, p - w.pd[c])
    w.pd[c] = p
    w.fn[c] = w.fs[c] + p / h


@jit(borrow=True)
def _in_cone(p1, p2, cap, cone):
    """Whether the tangential impulse ``(p1, p2)`` is within the cone of
    radius ``cap``: ``|p| <= cap`` (elliptic) or ``|p1| + |p2| <= cap``."""
    if cone == CONE_PYRAMIDAL:
        return abs(p1) + abs(p2) <= cap
    return p1 * p1 + p2 * p2 <= cap * cap


@jit(borrow=True)
def _rolling(b, w, tg, c, row, trow, h):
    """The rolling resistance of point ``c``: an angular impulse against the
    relative angular velocity's tangential part, accumulated up to
    ``mu_roll F h`` (``row``: the point's coefficients, ``trow`` their
    tangents)."""
    cap = row[C_MU_ROLL] * w.fn[c] * h
    pts = w.pts
    i, j = pts.i[c], pts.j[c]
    nrm = pts.normal[c]
    r0, r1, r2 = b.omega[i, 0], b.omega[i, 1], b.omega[i, 2]
    if j >= 0:
        r0, r1, r2 = r0 - b.omega[j, 0], r1 - b.omega[j, 1], r2 - b.omega[j, 2]
    wn = r0 * nrm[0] + r1 * nrm[1] + r2 * nrm[2]
    r0, r1, r2 = r0 - wn * nrm[0], r1 - wn * nrm[1], r2 - wn * nrm[2]
    mag = np.sqrt(r0 * r0 + r1 * r1 + r2 * r2)
    if mag == 0.0:
        return
    e0, e1, e2 = r0 / mag, r1 / mag, r2 / mag
    k = 0.0
    for side in range(2):
        q = i if side == 0 else j
        if q >= 0 and not b.fixed[q]:
            ie = inv_inertia_times(b.quat[q], b.inertia[q], e0, e1, e2)
            k += e0 * ie[0] + e1 * ie[1] + e2 * ie[2]
    if k <= 0.0:
        return
    total = min(w.pr[c] + mag / k, cap)
    d = total - w.pr[c]
    if tg.nt:
        rigid_tangent.rolling(b, w, tg, c, row, trow, h, (e0, e1, e2), mag, k,
                              w.pr[c] + mag / k < cap, d)
    w.pr[c] = total
    for side in range(2):
        q = i if side == 0 else j
        if q >= 0 and not b.fixed[q]:
            s = -d if side == 0 else d
            dw = inv_inertia_times(b.quat[q], b.inertia[q], s * e0, s * e1, s * e2)
            b.omega[q, 0] += dw[0]
            b.omega[q, 1] += dw[1]
            b.omega[q, 2] += dw[2]


@jit(borrow=True)
def drift(b, tg, h):
    """Stage 5: positions and orientations after ``h`` at the new velocities."""
    if tg.nt:
        rigid_tangent.drift(b, tg, h)
    for i in range(b.count):
        if b.fixed[i]:
            continue
        for a in range(3):
            b.pos[i, a] += h * b.vel[i, a]
        integrate_orientation(b.quat[i], b.omega[i, 0], b.omega[i, 1], b.omega[i, 2], h)


@jit(borrow=True)
def _controls(b, tg, batch, t_ctrl, s, t, lag, h):
    """The control forces and torques active at ``t`` (windows shifted by
    ``lag``) as velocity changes over ``h``."""
    for q in range(batch.ctrl_ptr[s], batch.ctrl_ptr[s + 1]):
        i = batch.ctrl_body[q]
        if batch.ctrl_t0[q] + lag <= t < batch.ctrl_t1[q] + lag and not b.fixed[i]:
            if tg.nt:
                rigid_tangent.controls(b, tg, i, q, t_ctrl, h, batch.ctrl_torque[q])
            for a in range(3):
                b.vel[i, a] += h * b.inv_mass[i] * batch.ctrl_force[q, a]
            tq = batch.ctrl_torque[q]
            dw = inv_inertia_times(b.quat[i], b.inertia[i], h * tq[0], h * tq[1], h * tq[2])
            for a in range(3):
                b.omega[i, a] += dw[a]


@jit(borrow=True)
def step(b, pl, coef, w, tg, gravity, h):
    """One step of the time-stepper: the five stages, with the tangents of
    ``tg`` (:class:`simcore.rigid.rigid_tangent.Tangents`; none when ``tg.nt`` is
    0).  Returns :func:`detect`'s status (the step is taken when it is
    ``STATUS_OK``)."""
    status = detect(b, pl, w.pts)
    if status != STATUS_OK:
        return status
    if tg.nt:
        rigid_tangent.detect(b, pl, w.pts, tg)
    springs(b, pl, coef, w, tg)
    kick(b, tg, gravity, h)
    impulses(b, pl, coef, w, tg, h)
    drift(b, tg, h)
    return STATUS_OK


@jit(borrow=True)
def moreau_step(b, pl, coef, w, tg, mw, gravity, h):
    """One step of the Moreau-Jean integrator (:mod:`simcore.rigid.moreau`):
    detect, free velocity, impulses, drift, with the tangents of ``tg``;
    ``mw`` its :class:`simcore.rigid.moreau.Work`.  Returns the status."""
    status = detect(b, pl, w.pts)
    if status != STATUS_OK:
        return status
    if tg.nt:
        rigid_tangent.detect(b, pl, w.pts, tg)
    moreau.free_velocity(b, mw, tg, gravity, h)
    status = moreau.impulses(b, pl, coef, w.pts, mw, tg,
                             EDGES if coef.cone == CONE_PYRAMIDAL else DISK, h)
    if status != STATUS_OK:
        return status
    drift(b, tg, h)  # (a body asleep has no velocity)
    return STATUS_OK


@jit(borrow=True)
def _point_impulses(w, h):
    """The last step's impulse on ``pts.i`` at each contact point into
    ``w.phases.point``: its normal force over the step and its friction
    impulse (the rolling resistance, a torque, left out)."""
    for c in range(w.pts.count[0]):
        for a in range(3):
            w.phases.point[c, a] = (h * w.fn[c] * w.pts.normal[c, a] + w.pt[c, 0] * w.dirs[c, 1, a]
                                    + w.pt[c, 1] * w.dirs[c, 2, a])


@jit(borrow=True)
def _sample(b, out, k):
    """Sample ``k``: the box centres' poses and velocities (``b.centre``
    current)."""
    for i in range(b.count):
        u = _arm(b, i)[1]
        for a in range(3):
            out.out_pos[k, i, a] = b.centre[i, a]
            out.out_vel[k, i, a] = b.vel[i, a] - u[a]
            out.out_omega[k, i, a] = b.omega[i, a]
        for a in range(4):
            out.out_quat[k, i, a] = b.quat[i, a]


@jit(borrow=True)
def _target(batch, s, k, t):
    """The next stop after time ``t`` of scenario ``s`` at sample row ``k``:
    ``(last, target, nstep, h)``, the fewest equal steps no longer than the
    scenario's ``h`` that reach it."""
    last = k >= batch.samp_ptr[s + 1]
    target = batch.scen_t_end[s] if last else batch.samp_t[k]
    span = target - t
    if span <= 0.0:
        return last, t, 0, 0.0
    nstep = int(np.ceil(span / batch.scen_h[s] * (1.0 - 1e-12)))
    return last, target, nstep, span / nstep


@jit(borrow=True)
def _at_sample(batch, s, b, tg, tan, out, k, keep):
    """Sample row ``k``: the poses into ``out`` (when kept), and the position
    residuals into ``tan``'s sums when it has measurements
    (:func:`simcore.kernel.sensitivity.accumulate`)."""
    _centres(b)
    if keep:
        _sample(b, out, k)
    if tan.meas.shape[0] == batch.samp_t.shape[0] and tan.meas.shape[0] > 0:
        rigid_tangent.centres(b, tg, tg.centre)
        accumulate(b.count, b.centre, tan.meas[k], tg.centre, tan.tr_sse[s:s + 1],
                   tan.tr_grad[s], tan.tr_gn[s])


@jit(borrow=True)
def _scenario(batch, s, b, pl, coef, w, tg, tan, out, keep):
    """Run scenario ``s`` from ``out.time[s]`` to its end, sampling at its
    sample times (:func:`_at_sample`).  Returns the status."""
    lag = batch.params[min(s, batch.params.shape[0] - 1)][TIME_OFFSET]
    g = _gravity(batch, s)
    t, k, steps = out.time[s], batch.samp_ptr[s], 0
    while True:
        last, target, nstep, h = _target(batch, s, k, t)
        for q in range(nstep):
            _controls(b, tg, batch, tan.t_ctrl, s, t + q * h, lag, h)
            status = step(b, pl, coef, w, tg, g, h)
            if status != STATUS_OK:
                out.steps[s] = steps
                return status
            if out.ev_f.shape[1] and not phases.idle(w.phases, w.pts):
                _point_impulses(w, h)
                out.ev_count[s] = phases.log(w.phases, b, w.pts, w.phases.point, t + q * h,
                                             out.ev_f[s], out.ev_i[s], out.ev_count[s])
            steps += 1
        t = target
        if last:
            break
        _at_sample(batch, s, b, tg, tan, out, k, keep)
        k += 1
    out.time[s], out.steps[s] = t, steps
    return STATUS_OK


@jit
def _skinned(b):
    """The bodies ``b`` with extents ``SKIN`` larger (the Moreau-Jean
    stepper's geometry: :data:`simcore.kernel.config.SKIN`); the state is
    shared."""
    return Bodies(b.count, b.pos, b.quat, b.vel, b.omega, b.inv_mass, b.inertia, b.shape,
                  b.ext + SKIN, b.com, b.mat, b.fixed, b.force, b.torque, b.centre)


@jit(borrow=True)
def _uncontrolled(batch, s, t, lag, h, m, mw):
    """How many of the next ``m`` steps from ``t`` (at most) no control of
    scenario ``s`` acts in (0 when one acts now: it wakes its body)."""
    for q in range(batch.ctrl_ptr[s], batch.ctrl_ptr[s + 1]):
        t0, t1 = batch.ctrl_t0[q] + lag, batch.ctrl_t1[q] + lag
        if t0 <= t < t1:
            moreau.wake(mw, batch.ctrl_body[q])
            m = 0
        elif t < t0:
            m = min(m, max(int(np.floor((t0 - t) / h)) - 1, 0))
    return m


@jit
def _scenario_moreau(batch, s, b, pl, coef, w, tg, tan, out, keep):
    """:func:`_scenario` with the Moreau-Jean step, the quiet steps taken at
    once (:func:`simcore.rigid.moreau.quiet`; not with tangents, which take
    every step): the stepper's geometry and work arrays, then its loop
    (:func:`_moreau_loop`)."""
    b = _skinned(b)
    mw = moreau.work(b, w.pts.key.shape[0], tg.nt)
    return _moreau_loop(batch, s, (b, pl, coef, w, tg, mw), tan, out, keep)


@jit(borrow=True)
def _moreau_loop(batch, s, scene, tan, out, keep):
    """:func:`_scenario_moreau`'s steps, ``scene = (b, pl, coef, w, tg,
    mw)``: a borrowing kernel (a step counts no references: the scenarios'
    shared records, ``batch`` and ``tan``, are read by every thread)."""
    b, pl, coef, w, tg, mw = scene
    g = _gravity(batch, s)
    lag = batch.params[min(s, batch.params.shape[0] - 1)][TIME_OFFSET]
    t, k, steps = out.time[s], batch.samp_ptr[s], 0
    while True:
        last, target, nstep, h = _target(batch, s, k, t)
        q = 0
        while q < nstep:
            m = moreau.quiet(b, pl, mw, g, h, _uncontrolled(batch, s, t + q * h, lag, h,
                                                            nstep - q, mw)) if tg.nt == 0 else 0
            if m > 0:
                moreau.fly(b, mw, g, h, m)
            else:
                _controls(b, tg, batch, tan.t_ctrl, s, t + q * h, lag, h)
                status = moreau_step(b, pl, coef, w, tg, mw, g, h)
                if status != STATUS_OK:
                    out.time[s], out.steps[s] = t + q * h, steps
                    return status
                if out.ev_f.shape[1] and not phases.idle(w.phases, w.pts):
                    out.ev_count[s] = phases.log(w.phases, b, w.pts, mw.point, t + q * h,
                                                 out.ev_f[s], out.ev_i[s], out.ev_count[s])
                m = 1
            q += m
            steps += m
        t = target
        if last:
            break
        _at_sample(batch, s, b, tg, tan, out, k, keep)
        k += 1
    out.time[s], out.steps[s] = t, steps
    return STATUS_OK


@jit
def _coefficients(params, rows_g, rows_b, rows_w):
    """The dense :class:`Coef` table from a parameter row and the layout's
    row tables (:class:`Batch`), with Hunt-Crossley's ``a(e)`` per row."""
    nmat = rows_g.shape[0]
    ncol = rows_g.shape[1]
    table = np.zeros((3, nmat, nmat, NCOEF))
    for a in range(nmat):
        for m in range(nmat):
            for col in range(ncol):
                if m == 0 and rows_g[a, col] >= 0:
                    table[KIND_GROUND, a, 0, col] = params[rows_g[a, col]]
                if rows_b[a, m, col] >= 0:
                    table[KIND_BODY, a, m, col] = params[rows_b[a, m, col]]
                if rows_w[a, m, col] >= 0:
                    table[KIND_WALL, a, m, col] = params[rows_w[a, m, col]]
            for kind in range(3):
                derive(table[kind, a, m])
    return table


@jit(borrow=True)
def _gravity(batch, s):
    """Scenario ``s``'s free fall: its ``gravity`` coefficient, or the batch's."""
    q = batch.rows_s[S_GRAVITY]
    return batch.params[min(s, batch.params.shape[0] - 1)][q] if q >= 0 else batch.gravity


@jit(borrow=True)
def _held(params, q, default):
    """``params[q]``, or ``default`` where the layout does not hold it (-1)."""
    return params[q] if q >= 0 else default


@jit
def capacity(nb, nplane):
    """Contact points a scenario can hold: 8 per body and plane, 8 per pair."""
    return 8 * nb * nplane + 8 * nb * (nb - 1) // 2 + 1


@jit
def _setup(batch, s, out, tan):
    """The records and work arrays of scenario ``s`` (its state: ``out``'s)
    and its tangent record (the directions of ``tan``)."""
    nb = batch.body_count[s]
    nw = batch.wall_count[s]
    params = batch.params[min(s, batch.params.shape[0] - 1)]
    inv_mass = np.zeros(nb)
    inertia = np.empty((nb, 3))
    com = np.empty((nb, 3))
    for i in range(nb):
        fixed = batch.body_fixed[s, i]
        row = batch.rows_m[batch.body_material[s, i]]
        inv_mass[i] = 0.0 if fixed else 1.0 / batch.body_mass[s, i]
        scale = _held(params, row[M_INERTIA], 1.0)
        for a in range(3):
            inertia[i, a] = np.inf if fixed else batch.body_inertia[s, i, a] * scale
            com[i, a] = batch.body_com[s, i, a] + _held(params, row[M_COM_X + a], 0.0)
    b = Bodies(nb, out.pos[s], out.quat[s], out.vel[s], out.omega[s], inv_mass, inertia,
               batch.body_shape[s], batch.body_ext[s], com, batch.body_material[s],
               batch.body_fixed[s], np.zeros((nb, 3)), np.zeros((nb, 3)), np.zeros((nb, 3)))
    normal = np.zeros((nw + 1, 3))
    offset = np.zeros(nw + 1)
    mat = np.zeros(nw + 1, np.int64)
    tx = _held(params, batch.rows_s[S_TILT_X], 0.0)
    ty = _held(params, batch.rows_s[S_TILT_Y], 0.0)
    normal[0, 0], normal[0, 1], normal[0, 2] = ground_normal(tx, ty)
    offset[0] = normal[0, 2] * (batch.ground_z + params[GROUND_OFFSET])
    for k in range(nw):
        normal[k + 1] = batch.wall_normal[s, k]
        offset[k + 1] = batch.wall_offset[s, k]
        mat[k + 1] = batch.wall_material[s, k]
    pl = Planes(nw + 1, normal, offset, mat)
    table = _coefficients(params, batch.rows_g, batch.rows_b, batch.rows_w)
    coef = Coef(table, batch.laws, batch.cone)
    cap = capacity(nb, nw + 1)
    pts = points(cap)
    w = Work(pts, np.zeros(cap), np.zeros(cap), np.zeros(cap), np.zeros(cap), np.zeros(cap),
             np.zeros(cap), np.zeros(cap), np.zeros((cap, 3, 3)), np.zeros((cap, 2, 3, 3)),
             np.zeros((cap, 2, 3, 3)), np.zeros((cap, 3)), np.zeros((cap, 3)),
             np.zeros((cap, 2)), np.zeros(cap),
             np.zeros(cap, np.int64), np.zeros(cap), np.zeros(1, np.int64),
             np.zeros(cap, np.int64), phases.phases(nb, nw + 1, cap))
    tg = rigid_tangent.record(nb, nw + 1, cap, table.shape[1], tan.t_param, tan.t_vel,
                              tan.t_omega, table, batch.rows_g, batch.rows_b, batch.rows_w)
    seed(nb, tan.t_pos, tg.pos)
    seed(nb, tan.t_rot, tg.rot)
    rigid_tangent.seed_body(b, pl, tg, params, batch.rows_m, batch.rows_s)
    rigid_tangent.lag_check(tg, batch.ctrl_ptr[s + 1] - batch.ctrl_ptr[s])
    return b, pl, coef, w, tg


@jit(address=True)
def _run_one(s, batch, out, tan):
    """Set up scenario ``s`` and run it; its samples into ``out`` when it
    keeps them (has rows for them), its sensitivities into ``tan``."""
    b, pl, coef, w, tg, keep = _begin(s, batch, out, tan)
    out.status[s] = _scenario(batch, s, b, pl, coef, w, tg, tan, out, keep)
    _end(s, b, tg, tan)


@jit(address=True)
def _run_one_moreau(s, batch, out, tan):
    """:func:`_run_one` on the Moreau-Jean integrator (an entry of its own:
    the penalty stepper's does not compile the Moreau-Jean stepper)."""
    b, pl, coef, w, tg, keep = _begin(s, batch, out, tan)
    out.status[s] = _scenario_moreau(batch, s, b, pl, coef, w, tg, tan, out, keep)
    _end(s, b, tg, tan)


@jit
def _begin(s, batch, out, tan):
    """Scenario ``s``'s records (:func:`_setup`), its state moved to the
    centres of mass and their tangents seeded, and whether it keeps samples."""
    b, pl, coef, w, tg = _setup(batch, s, out, tan)
    _shift(b, 1.0)
    rigid_tangent.seed_com(b, tg)
    return b, pl, coef, w, tg, out.out_pos.shape[0] > 0


@jit
def _end(s, b, tg, tan):
    """Scenario ``s``'s final tangents and flags into ``tan``, its state back
    to the box centres."""
    if tg.nt:
        nb = b.count
        rigid_tangent.to_centres(b, tg, tan.fin_tpos[s, :nb], tan.fin_tvel[s, :nb])
        tan.nondiff[s] = tg.nondiff[0]
        for p in range(tg.nt):
            tan.signal[s, p] = tg.used[p] if tg.pdir[p] >= 0 else 1
    _shift(b, -1.0)


@jit
def _report(batch, s, out, tan, h):
    """One step's contact forces of scenario ``s`` at its state (the state
    is left as it was): the work record after the friction stage."""
    b, pl, coef, w, tg = _setup(batch, s, out, tan)
    pos, quat, vel, omega = b.pos.copy(), b.quat.copy(), b.vel.copy(), b.omega.copy()
    _shift(b, 1.0)
    ok = detect(b, pl, w.pts) == STATUS_OK
    if ok:
        springs(b, pl, coef, w, tg)
        kick(b, tg, _gravity(batch, s), h)
        impulses(b, pl, coef, w, tg, h)
    b.pos[:], b.quat[:], b.vel[:], b.omega[:] = pos, quat, vel, omega
    return ok, w


def report(batch, pos, vel, omega, quat, time, s):
    """The contact points of scenario ``s`` of ``batch`` at the given state,
    as the document ``003_*`` lists its outputs, per point: ``body``,
    ``other`` (-1: a plane), ``plane`` (0 the ground, ``1 + k`` wall ``k``;
    -1 a body), ``corner``, ``contact`` (the normal force is > 0),
    ``penetration`` [m], ``point``, ``normal_force``, ``friction_force``,
    ``total_force (n, 3)`` [m, N] on ``body`` over the scenario's step."""
    nscen, nb = batch.body_mass.shape
    out = outputs(pos, vel, time, omega=omega, quat=quat)
    h = float(batch.scen_h[s])
    ok, w = _report(batch, s, out, no_tangents(nb), h)
    if not ok:
        raise RuntimeError(f"scenario {s}: {STATUS_MESSAGES[STATUS_OVERFLOW]}")
    n = int(w.pts.count[0])
    normal = w.fn[:n, None] * w.pts.normal[:n]
    fric = (w.pt[:n, :1] * w.dirs[:n, 1] + w.pt[:n, 1:] * w.dirs[:n, 2]) / h
    return {"body": w.pts.i[:n].copy(), "other": w.pts.j[:n].copy(),
            "plane": w.pts.plane[:n].copy(), "corner": w.pts.corner[:n].copy(),
            "contact": w.fn[:n] > 0.0, "penetration": w.pts.depth[:n].copy(),
            "point": w.pts.point[:n].copy(),
            "normal_force": normal, "friction_force": fric, "total_force": normal + fric}


def no_tangents(nb, nscen=1):
    """Tangent buffers (:class:`simcore.kernel.records.TangentIO`) of no direction."""
    z = np.zeros(0, np.int64)
    return TangentIO(z, z, z, np.zeros((0, nb, 3)), np.zeros(nscen), np.zeros((nscen, 0)),
                     np.zeros((nscen, 0, 0)), np.zeros((nscen, nb, 3, 0)),
                     np.zeros((nscen, nb, 3, 0)), np.zeros((nscen, 0, 0)),
                     np.zeros((nscen, 0, 3, 0)), np.zeros((nscen, 0, 3, 0)),
                     np.zeros((nscen, 0), np.int64), np.zeros(nscen, np.int64), z, z, z)


def run(batch, pos, vel, omega, quat, time, parallel=True, keep=True, tan=None,
        integrator="penalty", cap=0):
    """Run the scenarios of ``batch`` (:class:`Batch`) from the state ``pos``,
    ``vel``, ``omega``, ``quat``, ``time`` (advanced in place); with ``tan``
    (:class:`simcore.kernel.records.TangentIO`) its sensitivities along the
    directions it holds; ``integrator``: ``penalty`` (this module's step) or
    ``moreau`` (:mod:`simcore.rigid.moreau`); ``cap``: the contact phases'
    events logged per scenario (:mod:`simcore.rigid.phases`; 0: none;
    ``out.ev_count`` counts beyond it).  Returns the :class:`simcore.kernel.records.Outputs`."""
    nscen, nb = batch.body_mass.shape
    rows = batch.samp_t.shape[0] if keep else 0
    out = outputs(pos, vel, time, omega=omega, quat=quat, rows=rows, spin=True, turn=True,
                  cap=cap)
    if tan is None:
        tan = no_tangents(nb, nscen)
    drivers.run_each(_run_one_moreau if integrator == "moreau" else _run_one, batch, out, tan,
                     parallel)
    return out
