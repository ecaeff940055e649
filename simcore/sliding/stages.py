"""The stages of the event loop, each a kernel of its own.

:func:`simcore.sliding.sliding_engine._scenario` is the driver: it reads as the list of
these stages.  Per pass of its loop:

1. :func:`forces`: gravity plus the control forces active at ``t``;
2. ``contact.solve``: normal and friction forces of sustained contacts,
   giving every body a constant acceleration; :func:`log_starts` logs the
   bodies that start to slide;
3. :func:`kick` (symplectic only): the velocity kick at a grid time;
4. :func:`slide_events` (the exact integrator: stops, ``v_th`` crossings,
   sticks) and :func:`impact_events`: the earliest event within the
   horizon; :func:`quiet_time` bounds a span free of events;
5. :func:`sample_segment` and :func:`residuals`: the samples passed on the
   way and their residuals, then ``integrate.drift`` to the event;
6. :func:`resolve`: the event's impulse, logged, propagated through the
   contacts it drove together (:func:`propagate`).

Records.  Kernels take plain arrays and a few named records (NamedTuples
of arrays, read by field name, built once per scenario by the driver and
by :func:`scratch`): :class:`Bodies`, :class:`Planes`, :class:`GroundCoef`,
:class:`PairCoef`, :class:`Flags`, :class:`Vec3`, :class:`EventLog`,
:class:`Tangents`, :class:`Segment` and :class:`Sums`.
"""

from typing import NamedTuple

import numpy as np

from ..geometry.collision import (
    SHAPE_SPHERE,
    UNSUPPORTED,
    contact_normal_body_body,
    gap_body_body,
    gap_body_plane,
    toi_body_body,
    toi_body_plane,
)
from ..kernel import sensitivity
from ..kernel.config import GAP_TOL, V_CONTACT, V_STOP, jit
from ..kernel.eventlog import log, log_tangent
from ..kernel.events import (
    EV_BODY_BODY,
    EV_BODY_GROUND,
    EV_BODY_WALL,
    EV_START,
    EV_STOP,
    NA,
)
from ..kernel.parameter import (
    B_E_BB,
    B_MU_BB,
    B_MU_BB_B,
    B_MU_BB_C,
    G_E_BG,
    G_MU_K,
    G_MU_S,
    G_V_TH,
    W_E_BW,
    W_MU_W,
)
from ..laws import impulse
from ..laws import registry as laws
from ..laws.registry import PairLaw
from . import tangent
from .contact import ABOVE, RESTING, STARTED, STARTING, Contacts
from .integrate import sample, stop_time, vth_crossing

# impact_plane's ``propagated``, a boolean for the same reason.
FRESH = np.bool_(False)
PROPAGATED = np.bool_(True)

# What ended a segment (the driver's event code).
NONE = 0
IMPACT_PLANE = 1
IMPACT_BODY = 2
STOP = 3
VTH = 4
STICK = 5
#: A shape pair without a time-of-impact function (the run fails with a status).
UNSUPPORTED_PAIR = 6

#: Relative normal speeds below this are rounding (m/s).
V_ROUND = 1e-12
#: A segment between events with more samples than this accumulates its
#: trajectory residuals by moments (``tangent.accumulate_segment``), fewer
#: one sample at a time; both give the same sums.
SEGMENT_MOMENTS = 3
#: Relative safety margin of :func:`quiet_time`'s bound.
QUIET_MARGIN = 1e-6


class Bodies(NamedTuple):
    """Per body (nb,) or (nb, 3): what the impulses and searches read."""

    shape: np.ndarray
    pos: np.ndarray
    vel: np.ndarray
    acc: np.ndarray
    radius: np.ndarray
    mass: np.ndarray
    inv_m: np.ndarray


class Planes(NamedTuple):
    """``n (npl, 3)``, ``d (npl,)``: the planes ``n . p = d``; row 0 the ground."""

    n: np.ndarray
    d: np.ndarray


class GroundCoef(NamedTuple):
    """Each body's ground coefficients (nb,), through its material."""

    mu_s: np.ndarray
    mu_k: np.ndarray
    v_th: np.ndarray
    e: np.ndarray


class PairCoef(NamedTuple):
    """Pair coefficients: body-plane ``pl_mu``, ``pl_e (nb, npl)`` (column 0
    the ground's restitution), body-body ``b_mu``, ``b_e``, and the
    speed-dependent friction ``b_mub``, ``b_muc (nb, nb)`` (read by
    ``frictional_inelastic`` only); the law code of each contact kind
    ``laws (3,)`` (:mod:`simcore.laws.registry`)."""

    pl_mu: np.ndarray
    pl_e: np.ndarray
    b_mu: np.ndarray
    b_e: np.ndarray
    b_mub: np.ndarray
    b_muc: np.ndarray
    laws: np.ndarray


#: Active contacts ``plane_contact (nb, npl)``, ``body_contact (nb, nb)`` and
#: the ground ``modes (NMODES, nb)`` bool, rows ``RESTING``, ``STARTING``
#: (slides from rest along ``start_dir``), ``STARTED`` (by the last contact
#: solve), ``ABOVE`` (speed regime ``>= v_th``) and ``WORK`` (impulse propagation).
Flags = Contacts
WORK = 4
NMODES = 5


class Vec3(NamedTuple):
    """3-vector scratch: a normal, two velocity changes, zeros, a relative
    velocity and acceleration."""

    nrm: np.ndarray
    dva: np.ndarray
    dvb: np.ndarray
    zero3: np.ndarray
    rel: np.ndarray
    at: np.ndarray


class Tangents(NamedTuple):
    """The tangents an impulse maps (see :mod:`simcore.sliding.tangent`) and where
    each coefficient's direction is found: ``pdir[q]`` the direction of
    coefficient ``q``, through the material tables."""

    tpos: np.ndarray
    tvel: np.ndarray
    tdva: np.ndarray
    tdvb: np.ndarray
    ttau: np.ndarray
    pdir: np.ndarray
    signal: np.ndarray
    mat: np.ndarray
    wall_mat: np.ndarray
    bg_idx: np.ndarray
    bw_idx: np.ndarray
    bb_idx: np.ndarray


class Segment(NamedTuple):
    """The tangents a segment between events moves, and of its length ``ds``."""

    tpos: np.ndarray
    tvel: np.ndarray
    tacc: np.ndarray
    ttau: np.ndarray
    tsamp: np.ndarray
    ds: np.ndarray


@jit
def scratch(nb, npl, law_codes):
    """A scenario's work arrays, carved from two buffers (float and bool):
    the set-up costs two allocations, not thirty.  Returns ``(plane_n,
    plane_d, inv_m, gc, pc, start_dir, force, free_acc, acc, dacc, v3, fl)``;
    ``pc.laws`` is ``law_codes``."""
    fbuf = np.zeros(4 * npl + 5 * nb + 2 * nb * npl + 4 * nb * nb + 15 * nb + 18)
    plane_n = fbuf[:3 * npl].reshape((npl, 3))
    plane_d = fbuf[3 * npl:4 * npl]
    off = 4 * npl
    inv_m = fbuf[off:off + nb]
    gc = GroundCoef(fbuf[off + nb:off + 2 * nb], fbuf[off + 2 * nb:off + 3 * nb],
                    fbuf[off + 3 * nb:off + 4 * nb], fbuf[off + 4 * nb:off + 5 * nb])
    off += 5 * nb
    planar = fbuf[off:off + 2 * nb * npl].reshape((2, nb, npl))
    off += 2 * nb * npl
    pairs = fbuf[off:off + 4 * nb * nb].reshape((4, nb, nb))
    off += 4 * nb * nb
    pc = PairCoef(planar[0], planar[1], pairs[0], pairs[1], pairs[2], pairs[3], law_codes)
    vecs = fbuf[off:off + 15 * nb].reshape((5, nb, 3))
    off += 15 * nb
    v3 = Vec3(fbuf[off:off + 3], fbuf[off + 3:off + 6], fbuf[off + 6:off + 9],
              fbuf[off + 9:off + 12], fbuf[off + 12:off + 15], fbuf[off + 15:off + 18])
    bbuf = np.zeros(nb * npl + nb * nb + NMODES * nb, dtype=np.bool_)
    fl = Flags(bbuf[:nb * npl].reshape((nb, npl)),
               bbuf[nb * npl:nb * npl + nb * nb].reshape((nb, nb)),
               bbuf[nb * npl + nb * nb:].reshape((NMODES, nb)))
    return (plane_n, plane_d, inv_m, gc, pc, vecs[0], vecs[1], vecs[2], vecs[3], vecs[4], v3, fl)


@jit
def tangent_scratch(nb, nt, nparam, t_param):
    """The tangents' work arrays: ``(tpos, tvel, tacc, tfa, tsamp (nb, 3, NT),
    ttau, ds (NT,), tdva, tdvb (3, NT), pdir (nparam,))``; ``pdir[q]`` is the
    direction of coefficient ``q`` (-1: none)."""
    tbuf = np.zeros(5 * nb * 3 * nt + 8 * nt)
    blocks = tbuf[:15 * nb * nt].reshape((5, nb, 3, nt))
    toff = 15 * nb * nt
    pdir = np.full(nparam, -1, np.int64)
    for p in range(nt):
        if t_param[p] >= 0:
            pdir[t_param[p]] = p
    return (blocks[0], blocks[1], blocks[2], blocks[3], blocks[4], tbuf[toff:toff + nt],
            tbuf[toff + nt:toff + 2 * nt], tbuf[toff + 2 * nt:toff + 5 * nt].reshape((3, nt)),
            tbuf[toff + 5 * nt:toff + 8 * nt].reshape((3, nt)), pdir)


@jit(borrow=True)
def rel_normal(i, j, vel, acc, nrm):
    """Relative normal velocity and acceleration of body j over body i."""
    un = 0.0
    an = 0.0
    for d in range(3):
        un += (vel[j, d] - vel[i, d]) * nrm[d]
        an += (acc[j, d] - acc[i, d]) * nrm[d]
    return un, an


@jit(borrow=True)
def horizontal_speed(v):
    return np.sqrt(v[0] * v[0] + v[1] * v[1])


# -- set-up ---------------------------------------------------------------

@jit(borrow=True)
def set_planes(shape, pos, radius, wall_n, wall_d, ground, ground_z, plane_n, plane_d):
    """Row 0 the ground ``z = ground`` (``ground_z`` plus the offset), then the
    walls; a body resting on the nominal ground rests on the offset one."""
    plane_n[0, 2] = 1.0
    plane_d[0] = ground
    if ground != ground_z:
        for i in range(pos.shape[0]):
            if abs(gap_body_plane(shape[i], pos[i], radius[i], plane_n[0], ground_z)) <= GAP_TOL:
                pos[i, 2] += ground - ground_z
    for k in range(wall_n.shape[0]):
        for d in range(3):
            plane_n[k + 1, d] = wall_n[k, d]
        plane_d[k + 1] = wall_d[k]


@jit(borrow=True)
def entry(values, row, absent):
    """``values[row]``, or ``absent`` for row -1 (a law's coefficient that the
    layout does not hold, since its law is not in use)."""
    return values[row] if row >= 0 else absent


@jit(borrow=True)
def set_coefficients(mass, mat, wall_mat, params, bg_idx, bw_idx, bb_idx, inv_m, gc, pc):
    """Each body's and pair's coefficients through the material tables
    (:class:`simcore.params.Layout`)."""
    g_mu_s, g_mu_k, g_vth, g_e = gc.mu_s, gc.mu_k, gc.v_th, gc.e
    pl_mu, pl_e, b_mu, b_e, b_mub, b_muc = pc.pl_mu, pc.pl_e, pc.b_mu, pc.b_e, pc.b_mub, pc.b_muc
    nb = mass.shape[0]
    for i in range(nb):
        inv_m[i] = 1.0 / mass[i]
        g_mu_s[i] = params[bg_idx[mat[i], G_MU_S]]
        g_mu_k[i] = params[bg_idx[mat[i], G_MU_K]]
        g_vth[i] = params[bg_idx[mat[i], G_V_TH]]
        g_e[i] = params[bg_idx[mat[i], G_E_BG]]
        pl_e[i, 0] = g_e[i]  # pl_mu[:, 0] stays unused: the ground's mu follows its speed regime
        for k in range(wall_mat.shape[0]):
            pl_mu[i, k + 1] = params[bw_idx[mat[i], wall_mat[k], W_MU_W]]
            pl_e[i, k + 1] = params[bw_idx[mat[i], wall_mat[k], W_E_BW]]
        for j in range(nb):
            b_mu[i, j] = params[bb_idx[mat[i], mat[j], B_MU_BB]]
            b_e[i, j] = params[bb_idx[mat[i], mat[j], B_E_BB]]
            b_mub[i, j] = entry(params, bb_idx[mat[i], mat[j], B_MU_BB_B], 0.0)
            b_muc[i, j] = entry(params, bb_idx[mat[i], mat[j], B_MU_BB_C], 0.0)


@jit(borrow=True)
def initial_contacts(shape, pos, vel, radius, planes, g_vth, fl, tpos, tvel, signal, p_ground,
                     nrm):
    """Contacts present at the start: touching surfaces without a fast
    approach; a body on the ground slower than ``V_STOP`` rests."""
    plane_n, plane_d = planes.n, planes.d
    plane_contact, body_contact, modes = fl.plane_contact, fl.body_contact, fl.modes
    nb = pos.shape[0]
    for i in range(nb):
        for k in range(plane_n.shape[0]):
            g = gap_body_plane(shape[i], pos[i], radius[i], plane_n[k], plane_d[k])
            vn = vel[i, 0] * plane_n[k, 0] + vel[i, 1] * plane_n[k, 1] + vel[i, 2] * plane_n[k, 2]
            if g <= GAP_TOL and abs(vn) <= V_CONTACT:
                plane_contact[i, k] = True
                for d in range(3):
                    vel[i, d] -= vn * plane_n[k, d]
                tangent.project_plane(i, plane_n[k], tvel)
                if k == 0:
                    pos[i, 2] = plane_d[0] + radius[i]
        if plane_contact[i, 0]:
            if p_ground >= 0:
                # Resting on the ground: its height moves with the plane.
                tpos[i, 2, p_ground] = 1.0
                signal[p_ground] += 1
            if horizontal_speed(vel[i]) <= V_STOP:
                vel[i, 0] = 0.0
                vel[i, 1] = 0.0
                tvel[i, :2] = 0.0
                modes[RESTING, i] = True
            modes[ABOVE, i] = horizontal_speed(vel[i]) >= g_vth[i]
    for i in range(nb):
        for j in range(i + 1, nb):
            g = gap_body_body(shape[i], shape[j], pos[i], radius[i], pos[j], radius[j])
            if g <= GAP_TOL and contact_normal_body_body(shape[i], shape[j], pos[i], pos[j], nrm):
                un = 0.0
                for d in range(3):
                    un += (vel[j, d] - vel[i, d]) * nrm[d]
                if abs(un) <= V_CONTACT:
                    body_contact[i, j] = True
                    body_contact[j, i] = True


# -- stages 1-3: forces, contacts, kick ----------------------------------------

@jit(borrow=True, python=True)
def forces(t, lag, t_end, gravity, inv_m, c_body, c_t0, c_t1, c_force, force, free_acc):
    """Stage 1: gravity plus the control forces active at ``t`` (window ``q``
    acts over ``[c_t0[q] + lag, c_t1[q] + lag)``); returns the next window
    edge after ``t`` (or ``t_end``) and whether there is one."""
    next_edge = t_end
    window_edge = False
    nb = inv_m.shape[0]
    for i in range(nb):
        for d in range(3):
            force[i, d] = 0.0
    for q in range(c_body.shape[0]):
        w0 = c_t0[q] + lag
        w1 = c_t1[q] + lag
        if w0 <= t < w1:
            for d in range(3):
                force[c_body[q], d] += c_force[q, d]
        if w0 > t and w0 < next_edge:
            next_edge = w0
            window_edge = True
        if w1 > t and w1 < next_edge:
            next_edge = w1
            window_edge = True
    for i in range(nb):
        free_acc[i, 0] = force[i, 0] * inv_m[i]
        free_acc[i, 1] = force[i, 1] * inv_m[i]
        free_acc[i, 2] = force[i, 2] * inv_m[i] - gravity
    return next_edge, window_edge


@jit(borrow=True, python=True)
def log_starts(n_ev, t, modes, start_dir, ev, ttau, tdva, zero3):
    """Stage 2's events: the bodies the contact solve started sliding;
    returns the event count and whether any started."""
    any_started = False
    for i in range(modes.shape[1]):
        if modes[STARTED, i]:
            any_started = True
            n_ev = log(ev, n_ev, t, EV_START, i, NA, start_dir[i], 0.0, 0.0, zero3, zero3, NA)
            tdva[:] = 0.0
            log_tangent(ev.tt, ev.tdva, ev.tdvb, n_ev, ttau, tdva, tdva)
            modes[ABOVE, i] = False
    return n_ev, any_started


@jit(borrow=True, python=True)
def kick(h, n_ev, t, vel, acc, dacc, g_vth, fl, ev, v3):
    """Stage 3 (symplectic): the kick ``v' = v + a h``; a ground slide never
    reverses (it stops, logged in ``ev``)."""
    plane_contact, modes, dva, zero3 = fl.plane_contact, fl.modes, v3.dva, v3.zero3
    for i in range(vel.shape[0]):
        vx = vel[i, 0]
        vy = vel[i, 1]
        for d in range(3):
            vel[i, d] += acc[i, d] * h
            dacc[i, d] = 0.0
        if plane_contact[i, 0] and not modes[STARTING, i] and (vx != 0.0 or vy != 0.0):
            if vel[i, 0] * vx + vel[i, 1] * vy <= 0.0:
                dva[0] = -vel[i, 0]
                dva[1] = -vel[i, 1]
                dva[2] = 0.0
                vel[i, 0] = 0.0
                vel[i, 1] = 0.0
                modes[RESTING, i] = True
                n_ev = log(ev, n_ev, t, EV_STOP, i, NA, zero3, 0.0, 0.0, dva, zero3, NA)
        modes[STARTING, i] = False
        if plane_contact[i, 0]:
            modes[ABOVE, i] = horizontal_speed(vel[i]) >= g_vth[i]
    return n_ev


# -- stage 4: the next event ------------------------------------------------------

@jit(borrow=True, python=True)
def impact_events(best, shape, pos, vel, acc, radius, planes, fl, nrm):
    """Stage 4, impacts: the earliest impact before the best event so far,
    ``best = (code, i, j, s)``, of a body on a plane it is not in contact
    with, or of two bodies not in contact; returns ``(code, i, j, s)``,
    ``best`` if none is earlier.  A shape pair without a time-of-impact
    function gives ``UNSUPPORTED_PAIR``."""
    code, ev_i, ev_j, s_best = best
    plane_n, plane_d = planes.n, planes.d
    plane_contact, body_contact = fl.plane_contact, fl.body_contact
    nb = pos.shape[0]
    for i in range(nb):
        for k in range(plane_n.shape[0]):
            if plane_contact[i, k]:
                continue
            g = gap_body_plane(shape[i], pos[i], radius[i], plane_n[k], plane_d[k])
            if abs(g) <= GAP_TOL:
                vn = (vel[i, 0] * plane_n[k, 0] + vel[i, 1] * plane_n[k, 1]
                      + vel[i, 2] * plane_n[k, 2])
                an = (acc[i, 0] * plane_n[k, 0] + acc[i, 1] * plane_n[k, 1]
                      + acc[i, 2] * plane_n[k, 2])
                if an > 0.0 and vn > -V_ROUND:
                    continue  # touching and pulled apart: separates
            s = toi_body_plane(shape[i], pos[i], vel[i], acc[i], radius[i],
                               plane_n[k], plane_d[k], s_best)
            if s == UNSUPPORTED:
                return UNSUPPORTED_PAIR, i, k, s_best
            if s < s_best:
                s_best = s
                code = IMPACT_PLANE
                ev_i = i
                ev_j = k
        for j in range(i + 1, nb):
            if body_contact[i, j]:
                continue
            g = gap_body_body(shape[i], shape[j], pos[i], radius[i], pos[j], radius[j])
            if abs(g) <= GAP_TOL and contact_normal_body_body(
                    shape[i], shape[j], pos[i], pos[j], nrm):
                un, an = rel_normal(i, j, vel, acc, nrm)
                if an > 0.0 and un > -V_ROUND:
                    continue
            s = toi_body_body(shape[i], shape[j], pos[i], vel[i], acc[i], radius[i],
                              pos[j], vel[j], acc[j], radius[j], s_best)
            if s == UNSUPPORTED:
                return UNSUPPORTED_PAIR, i, j, s_best
            if s < s_best:
                s_best = s
                code = IMPACT_BODY
                ev_i = i
                ev_j = j
    return code, ev_i, ev_j, s_best


@jit(borrow=True, python=True)
def slide_events(s_best, shape, pos, vel, acc, g_vth, plane_contact, body_contact, modes, nrm,
                 rel, at):
    """Stage 4, slides (the exact integrator): the earliest stop, ``v_th``
    crossing or body-body stick before ``s_best``: ``(code, i, j, s)``
    (``NONE`` and ``s_best`` if none)."""
    code = NONE
    ev_i = -1
    ev_j = -1
    nb = pos.shape[0]
    for i in range(nb):
        if modes[RESTING, i]:
            continue
        in_plane = False
        for k in range(plane_contact.shape[1]):
            if plane_contact[i, k]:
                in_plane = True
        if in_plane:
            s = stop_time(vel[i], acc[i], s_best)
            if s < s_best:
                s_best = s
                code = STOP
                ev_i = i
        # Searched whatever the coefficients: with mu_s = mu_k the crossing
        # changes no force, but it splits the segment there (and d/d mu_s is
        # the share of the slide below v_th), and the split must not depend
        # on whether sensitivities are asked for.
        if plane_contact[i, 0]:
            s = vth_crossing(vel[i], acc[i], g_vth[i], modes[ABOVE, i], s_best)
            if s < s_best:
                s_best = s
                code = VTH
                ev_i = i
        for j in range(i + 1, nb):
            if body_contact[i, j] and contact_normal_body_body(
                    shape[i], shape[j], pos[i], pos[j], nrm):
                # Relative tangential velocity of the contact.
                un, an = rel_normal(i, j, vel, acc, nrm)
                for d in range(3):
                    rel[d] = (vel[j, d] - vel[i, d]) - un * nrm[d]
                for d in range(3):
                    at[d] = (acc[j, d] - acc[i, d]) - an * nrm[d]
                if rel[0] ** 2 + rel[1] ** 2 + rel[2] ** 2 <= V_STOP * V_STOP:
                    continue  # not sliding
                s = stop_time(rel, at, s_best)
                if s < s_best:
                    s_best = s
                    code = STICK
                    ev_i = i
                    ev_j = j
    return code, ev_i, ev_j, s_best


@jit
def _first_reach(g0, rate, a_max):
    """Smallest ``s >= 0`` at which ``g0 + rate s - a_max s^2 / 2`` can reach 0
    (``g0 > 0``, ``a_max >= 0``), or ``inf``."""
    if a_max > 0.0:
        return (rate + np.sqrt(rate * rate + 2.0 * a_max * g0)) / a_max
    if rate < 0.0:
        return -g0 / rate
    return np.inf


@jit(borrow=True)
def _accel_bound(i, vel, acc, free_acc, fl, gc):
    """The size ``A`` body ``i``'s acceleration keeps while the forces stay
    (see :func:`quiet_time`)."""
    if fl.modes[RESTING, i]:
        return 0.0
    if fl.plane_contact[i, 0]:
        mu = max(gc.mu_s[i], gc.mu_k[i])
        return np.sqrt(free_acc[i, 0] ** 2 + free_acc[i, 1] ** 2) + mu * abs(free_acc[i, 2])
    return np.sqrt(acc[i, 0] ** 2 + acc[i, 1] ** 2 + acc[i, 2] ** 2)


@jit(borrow=True, python=True)
def quiet_time(shape, pos, vel, acc, free_acc, radius, planes, fl, gc):
    """A time ``s`` from now within which no event of the search can occur
    while the forces stay as they are (0 when no such bound is at hand).

    Over dt steps where sliding directions rotate, every body's acceleration
    keeps a bounded size ``A`` (:func:`_accel_bound`): ``|a_free,h| + mu
    |a_free,z|`` sliding on the ground (``mu`` the larger coefficient),
    ``|a|`` in free flight (constant), 0 at rest.  So its velocity stays
    within ``A s`` of the current one and its position within ``A s^2 / 2``
    of the straight line: a plane gap ``g0`` cannot close before ``g0 + (n
    . v) s - A s^2 / 2`` reaches 0, a sphere pair before ``gap - |v_j -
    v_i| s - (A_i + A_j) s^2 / 2`` does, a slide cannot stop before ``|v| /
    A`` nor cross ``v_th`` before ``| |v| - v_th | / A``.  Sustained wall or
    body contacts, other shapes than spheres and gaps within ``1e3
    GAP_TOL`` give 0 (search every step).  The bound is shrunk by
    ``QUIET_MARGIN``, far above rounding.
    """
    plane_n, plane_d = planes.n, planes.d
    plane_contact, body_contact, modes = fl.plane_contact, fl.body_contact, fl.modes
    nb = pos.shape[0]
    npl = plane_n.shape[0]
    s_min = np.inf
    for i in range(nb):
        if shape[i] != SHAPE_SPHERE:
            return 0.0
        for k in range(1, npl):
            if plane_contact[i, k]:
                return 0.0
        for j in range(nb):
            if j != i and body_contact[i, j]:
                return 0.0
        a_i = _accel_bound(i, vel, acc, free_acc, fl, gc)
        if plane_contact[i, 0] and not modes[RESTING, i] and a_i > 0.0:
            speed = np.sqrt(vel[i, 0] ** 2 + vel[i, 1] ** 2)
            s_min = min(s_min, speed / a_i)
            margin = speed - gc.v_th[i] if modes[ABOVE, i] else gc.v_th[i] - speed
            if margin <= 0.0:
                return 0.0
            s_min = min(s_min, margin / a_i)
    for i in range(nb):
        a_i = _accel_bound(i, vel, acc, free_acc, fl, gc)
        for k in range(npl):
            if plane_contact[i, k]:
                continue
            g0 = gap_body_plane(shape[i], pos[i], radius[i], plane_n[k], plane_d[k])
            if g0 <= 1e3 * GAP_TOL:
                return 0.0
            rate = (vel[i, 0] * plane_n[k, 0] + vel[i, 1] * plane_n[k, 1]
                    + vel[i, 2] * plane_n[k, 2])
            s_min = min(s_min, _first_reach(g0, rate, a_i))
        for j in range(i + 1, nb):
            g0 = gap_body_body(shape[i], shape[j], pos[i], radius[i], pos[j], radius[j])
            if g0 <= 1e3 * GAP_TOL:
                return 0.0
            w = np.sqrt((vel[j, 0] - vel[i, 0]) ** 2 + (vel[j, 1] - vel[i, 1]) ** 2
                        + (vel[j, 2] - vel[i, 2]) ** 2)
            s_min = min(s_min, _first_reach(g0, -w, a_i + _accel_bound(j, vel, acc, free_acc,
                                                                        fl, gc)))
    return s_min * (1.0 - QUIET_MARGIN)


# -- stage 5: advance -----------------------------------------------------------

@jit(borrow=True)
def measure(vel, acc, s, ts, out_pos_s, meas_s, sums):
    """Trajectory residuals of one sample (``s`` after the last event) and their tangents."""
    if ts.ttau.shape[0] > 0:
        tangent.sample(vel.shape[0], vel, acc, s, ts.tpos, ts.tvel, ts.tacc, ts.ttau, ts.tsamp)
    sensitivity.accumulate(vel.shape[0], out_pos_s, meas_s, ts.tsamp, sums.sse, sums.grad, sums.gn)


@jit(borrow=True)
def samples_now(ks, k_end, pos, vel, acc, out_pos, out_vel, meas, ts, sums):
    """Samples ``ks:k_end`` at the current state (at the start, and after the
    end of the run); returns ``k_end``."""
    has_meas = out_pos.shape[0] > 0 and meas.shape[0] == out_pos.shape[0]
    for k in range(ks, k_end):
        sample(pos.shape[0], pos, vel, acc, 0.0, out_pos[k], out_vel[k])
        if has_meas:
            measure(vel, acc, 0.0, ts, out_pos[k], meas[k], sums)
    return k_end


@jit(borrow=True, python=True)
def sample_segment(t, t_new, ks, pos, vel, acc, samp_t, out_pos, out_vel):
    """Stage 5: write the samples from ``ks`` up to ``t_new`` (the state at
    ``t`` moved along its parabola); returns the next sample index."""
    while ks < samp_t.shape[0] and samp_t[ks] <= t_new:
        sample(pos.shape[0], pos, vel, acc, samp_t[ks] - t, out_pos[ks], out_vel[ks])
        ks += 1
    return ks


@jit(borrow=True)
def residuals(k0, k1, t, vel, acc, samp_t, out_pos, meas, ts, sums):
    """Stage 5: the trajectory residuals (and their tangents) of samples
    ``k0:k1`` of the segment from ``t``."""
    if k1 - k0 > SEGMENT_MOMENTS:
        tangent.accumulate_segment(vel, acc, t, samp_t, k0, k1, ts, out_pos, meas, sums)
    else:
        for k in range(k0, k1):
            measure(vel, acc, samp_t[k] - t, ts, out_pos[k], meas[k], sums)


# -- stage 6: resolve ----------------------------------------------------------------

@jit
def resolve(event, n_ev, t, bodies, planes, gc, pc, fl, v3, ev, tg):
    """Stage 6: resolve the event ``event = (code, i, j)`` of bodies ``i``,
    ``j`` (or plane ``j``) at ``t``; returns ``(event count, nondiff flags)``."""
    code, i, j = event
    shape, pos, vel, inv_m = bodies.shape, bodies.pos, bodies.vel, bodies.inv_m
    plane_contact, modes = fl.plane_contact, fl.modes
    nrm, dva, zero3 = v3.nrm, v3.dva, v3.zero3
    tvel, tdva, tdvb, ttau = tg.tvel, tg.tdva, tg.tdvb, tg.ttau
    modes[WORK, :] = False
    if code == STOP:
        # The slide has reached zero speed along its (frozen) direction: the
        # body stops.  (Where a push rotates the direction, any sideways
        # velocity is dropped too: first order in dt there.)
        for d in range(3):
            dva[d] = -vel[i, d]
            vel[i, d] = 0.0
            for p in range(ttau.shape[0]):
                tdva[d, p] = -tvel[i, d, p]
                tvel[i, d, p] = 0.0
        if plane_contact[i, 0]:
            modes[RESTING, i] = True
            modes[STARTING, i] = False
            modes[ABOVE, i] = False
            n_ev = log(ev, n_ev, t, EV_STOP, i, NA, zero3, 0.0, 0.0, dva, zero3, NA)
            tdvb[:] = 0.0
            log_tangent(ev.tt, ev.tdva, ev.tdvb, n_ev, ttau, tdva, tdvb)
        return n_ev, 0
    if code == VTH:
        modes[ABOVE, i] = not modes[ABOVE, i]
        return n_ev, 0
    if code == STICK:
        # Remove the relative tangential velocity, conserving momentum.
        contact_normal_body_body(shape[i], shape[j], pos[i], pos[j], nrm)
        un = 0.0
        for d in range(3):
            un += (vel[j, d] - vel[i, d]) * nrm[d]
        wsum = inv_m[i] + inv_m[j]
        for d in range(3):
            ut = (vel[j, d] - vel[i, d]) - un * nrm[d]
            vel[j, d] -= ut * inv_m[j] / wsum
            vel[i, d] += ut * inv_m[i] / wsum
        return n_ev, sensitivity.ND_STICK if ttau.shape[0] > 0 else 0
    if code == IMPACT_PLANE:
        n_ev = impact_plane((i, j, FRESH), n_ev, t, bodies, planes, gc, pc, fl, v3, ev, tg)
        modes[WORK, i] = True
    else:
        n_ev = impact_body(i, j, n_ev, t, bodies, pc, fl, v3, ev, tg)
        modes[WORK, i] = True
        modes[WORK, j] = True
    # Impulses propagate through contacts the impact drove together.
    n_ev = propagate(n_ev, t, bodies, planes, gc, pc, fl, v3, ev, tg)
    if ttau.shape[0] > 0:
        contact_tangent(planes.n, plane_contact, modes, tvel)
    return n_ev, 0


@jit
def impact_plane(hit, n_ev, t, bodies, planes, gc, pc, fl, v3, ev, tg):
    """Impact ``hit = (i, k, propagated)`` of body i on plane k (0 = the
    ground, at ``planes.d[0]``); logs it and returns the count.

    ``propagated``: the plane was already in contact and another impulse drove
    the body into it.  Newton's law per contact gives the rebound ``-e`` times
    the approach speed *before* the event, which was zero: the response is
    plastic and the contact stays.

    The tangents ``tg`` go through the same impulse: they read its
    :class:`simcore.laws.impulse.Impact` (the same e, mu, sustained decision, slip
    and intermediates) before it is applied, and are logged.
    """
    i, k, propagated = hit
    ground_z = planes.d[0]
    pos, vel, acc, radius, mass = bodies.pos, bodies.vel, bodies.acc, bodies.radius, bodies.mass
    g_mu_s, g_mu_k, g_vth = gc.mu_s, gc.mu_k, gc.v_th
    plane_contact, modes = fl.plane_contact, fl.modes
    dva, dvb = v3.dva, v3.dvb
    tvel, tdva, tdvb, ttau, pdir = tg.tvel, tg.tdva, tg.tdvb, tg.ttau, tg.pdir
    mat, wall_mat, bg_idx, bw_idx = tg.mat, tg.wall_mat, tg.bg_idx, tg.bw_idx
    n = planes.n[k]
    vn = vel[i, 0] * n[0] + vel[i, 1] * n[1] + vel[i, 2] * n[2]
    an = acc[i, 0] * n[0] + acc[i, 1] * n[1] + acc[i, 2] * n[2]
    # Zeno guard: a slow approach while pressed becomes sustained contact.
    sustained = propagated or (-vn < V_CONTACT and an <= 0.0)
    e = 0.0 if sustained else pc.pl_e[i, k]
    if k == 0:
        fast = horizontal_speed(vel[i]) >= g_vth[i]
        mu = g_mu_k[i] if fast else g_mu_s[i]
        p_mu = pdir[bg_idx[mat[i], G_MU_K if fast else G_MU_S]]
        p_e = pdir[bg_idx[mat[i], G_E_BG]]
    else:
        mu = pc.pl_mu[i, k]
        p_mu = pdir[bw_idx[mat[i], wall_mat[k - 1], W_MU_W]]
        p_e = pdir[bw_idx[mat[i], wall_mat[k - 1], W_E_BW]]
    imp = impulse.plane_impact(vel[i], n, e, mu)
    if tvel.shape[2] > 0:  # tangents first: they read the velocity before the impulse
        tangent.impact_plane(i, vel[i], n, e, mu, imp, sustained, (p_e, p_mu), tvel, tdva,
                             tg.signal)
        tdvb[:] = 0.0
    impulse.apply_plane(vel[i], n, imp, dva)
    jn, jt, slipped = imp.jn, imp.jt, imp.slipped
    if sustained:
        plane_contact[i, k] = True
        vn = vel[i, 0] * n[0] + vel[i, 1] * n[1] + vel[i, 2] * n[2]
        for d in range(3):
            vel[i, d] -= vn * n[d]
        if k == 0:
            pos[i, 2] = ground_z + radius[i]
    kind = EV_BODY_GROUND if k == 0 else EV_BODY_WALL
    for d in range(3):
        dvb[d] = 0.0  # a plane does not move
    n_ev = log(ev, n_ev, t, kind, i, k - 1, n, jn * mass[i], jt * mass[i], dva, dvb,
               1 if slipped else 0)
    log_tangent(ev.tt, ev.tdva, ev.tdvb, n_ev, ttau, tdva, tdvb)
    after_velocity_change(i, vel, plane_contact, modes, g_vth)
    return n_ev


@jit
def impact_body(i, j, n_ev, t, bodies, pc, fl, v3, ev, tg):
    """Impact between bodies i < j at the time-of-impact configuration, under
    the body-body law of ``pc.laws`` (tangents as in :func:`impact_plane`:
    they read the law's :class:`simcore.laws.impulse.Impact` before it is applied)."""
    shape, pos, vel, acc, inv_m = bodies.shape, bodies.pos, bodies.vel, bodies.acc, bodies.inv_m
    nrm, dva, dvb = v3.nrm, v3.dva, v3.dvb
    tvel, pdir, mat, bb_idx = tg.tvel, tg.pdir, tg.mat, tg.bb_idx
    contact_normal_body_body(shape[i], shape[j], pos[i], pos[j], nrm)
    un, an = rel_normal(i, j, vel, acc, nrm)
    sustained = -un < V_CONTACT and an <= 0.0
    law = PairLaw(pc.laws[laws.BODY_BODY], 0.0 if sustained else pc.b_e[i, j], pc.b_mu[i, j],
                  pc.b_mub[i, j], pc.b_muc[i, j])
    imp = laws.pair_impact(law, vel[i], vel[j], inv_m[i], inv_m[j], nrm)
    if tvel.shape[2] > 0:  # tangents first: they read the velocities before the impulse
        rows = bb_idx[mat[i], mat[j]]
        tangent.impact_body((i, j), (vel[i], vel[j]), pos, nrm, imp, (inv_m[i], inv_m[j]), law,
                            sustained, (pdir[rows[1]], pdir[rows[0]], entry(pdir, rows[2], -1),
                                        entry(pdir, rows[3], -1)),
                            (tg.tpos, tvel, tg.tdva, tg.tdvb), tg.signal)
    impulse.apply_pair(vel[i], vel[j], inv_m[i], inv_m[j], nrm, imp.jn, imp.jt, imp.t0, imp.t1,
                       imp.t2, dva, dvb)
    jn, jt, slipped = imp.jn, imp.jt, imp.slipped
    if sustained:
        fl.body_contact[i, j] = True
        fl.body_contact[j, i] = True
        un = 0.0
        for d in range(3):
            un += (vel[j, d] - vel[i, d]) * nrm[d]
        zero_normal_velocity(i, j, vel, inv_m, nrm, un)
    n_ev = log(ev, n_ev, t, EV_BODY_BODY, i, j, nrm, jn, jt, dva, dvb,
               1 if slipped else 0)
    log_tangent(ev.tt, ev.tdva, ev.tdvb, n_ev, tg.ttau, tg.tdva, tg.tdvb)
    return n_ev


@jit
def zero_normal_velocity(i, j, vel, inv_m, nrm, un):
    """Remove the relative normal velocity ``un`` of bodies i, j (momentum kept)."""
    wsum = inv_m[i] + inv_m[j]
    for d in range(3):
        vel[j, d] -= un * nrm[d] * inv_m[j] / wsum
        vel[i, d] += un * nrm[d] * inv_m[i] / wsum


@jit
def after_velocity_change(i, vel, plane_contact, modes, g_vth):
    """Refresh the ground mode flags of body i after an impulse."""
    modes[STARTING, i] = False
    if plane_contact[i, 0]:
        vh = horizontal_speed(vel[i])
        modes[RESTING, i] = vh <= V_STOP
        if modes[RESTING, i]:
            vel[i, 0] = 0.0
            vel[i, 1] = 0.0
        modes[ABOVE, i] = vh >= g_vth[i]
    else:
        modes[RESTING, i] = False


@jit
def propagate(n_ev, t, bodies, planes, gc, pc, fl, v3, ev, tg):
    """Sequential impulses through the contacts of the bodies in ``work``.

    An active contact that now approaches faster than ``V_ROUND`` gets an
    impact impulse (logged): plastic against a plane (see :func:`impact_plane`),
    with restitution between bodies (so a Newton's cradle passes the impulse
    along, as sequential impulses do).  One that separates is released, unless
    it separates slower than ``V_CONTACT`` while its accelerations do not pull
    it apart: the mirror of the Zeno guard, the contact stays and that small
    normal velocity is removed.  Passes repeat until nothing changes
    (at most ``4 nb`` passes).  The tangents ``tg`` go through the same impulses.
    """
    shape, pos, vel, acc, inv_m = bodies.shape, bodies.pos, bodies.vel, bodies.acc, bodies.inv_m
    plane_n = planes.n
    g_vth = gc.v_th
    plane_contact, body_contact, modes = fl.plane_contact, fl.body_contact, fl.modes
    nrm = v3.nrm
    tvel = tg.tvel
    nb = pos.shape[0]
    for _pass in range(4 * nb):
        changed = False
        for i in range(nb):
            if not modes[WORK, i]:
                continue
            modes[WORK, i] = False
            for k in range(plane_n.shape[0]):
                if not plane_contact[i, k]:
                    continue
                vn = vel[i, 0] * plane_n[k, 0] + vel[i, 1] * plane_n[k, 1] + vel[i, 2] * plane_n[k, 2]
                if vn < -V_ROUND:
                    plane_contact[i, k] = False
                    n_ev = impact_plane((i, k, PROPAGATED), n_ev, t, bodies, planes, gc, pc, fl,
                                        v3, ev, tg)
                    changed = True
                    modes[WORK, i] = True
                elif vn > V_ROUND and (vn >= V_CONTACT or
                                       acc[i, 0] * plane_n[k, 0] + acc[i, 1] * plane_n[k, 1]
                                       + acc[i, 2] * plane_n[k, 2] > 0.0):
                    plane_contact[i, k] = False
                    if k == 0:
                        modes[RESTING, i] = False
                        modes[STARTING, i] = False
                else:
                    # Still in contact: the normal velocity is rounding.
                    for d in range(3):
                        vel[i, d] -= vn * plane_n[k, d]
                    tangent.project_plane(i, plane_n[k], tvel)
            for j in range(nb):
                if j == i or not body_contact[i, j]:
                    continue
                lo = min(i, j)
                hi = max(i, j)
                contact_normal_body_body(shape[lo], shape[hi], pos[lo], pos[hi], nrm)
                un, an = rel_normal(lo, hi, vel, acc, nrm)
                if un < -V_ROUND:
                    body_contact[lo, hi] = False
                    body_contact[hi, lo] = False
                    n_ev = impact_body(lo, hi, n_ev, t, bodies, pc, fl, v3, ev, tg)
                    after_velocity_change(lo, vel, plane_contact, modes, g_vth)
                    after_velocity_change(hi, vel, plane_contact, modes, g_vth)
                    modes[WORK, lo] = True
                    modes[WORK, hi] = True
                    changed = True
                elif un > V_ROUND and (un >= V_CONTACT or an > 0.0):
                    body_contact[lo, hi] = False
                    body_contact[hi, lo] = False
                else:
                    zero_normal_velocity(lo, hi, vel, inv_m, nrm, un)
        if not changed:
            break
    for i in range(nb):
        after_velocity_change(i, vel, plane_contact, modes, g_vth)
    return n_ev


# -- tangents of the stages ------------------------------------------------------

@jit(borrow=True)
def general_contacts(fl, pos, vel, planes, tg):
    """``ND_GENERAL`` if a body has a sustained wall or body contact, else 0
    (the caller then takes that scenario's derivatives by differences).

    A sustained contact that slides carries its friction's signal: a body
    sliding along a wall it is pressed into counts one segment for that
    wall's ``mu_w``, two bodies pressed together and sliding over each other
    one for their ``mu_bb`` (tangential speed over ``V_STOP``)."""
    plane_contact, body_contact = fl.plane_contact, fl.body_contact
    mat, wall_mat, pdir, signal = tg.mat, tg.wall_mat, tg.pdir, tg.signal
    nb = plane_contact.shape[0]
    flag = 0
    for i in range(nb):
        for k in range(1, plane_contact.shape[1]):
            if plane_contact[i, k]:
                flag = sensitivity.ND_GENERAL
                if _tangential_speed(vel[i], planes.n[k]) > V_STOP:
                    p = pdir[tg.bw_idx[mat[i], wall_mat[k - 1], W_MU_W]]
                    if p >= 0:
                        signal[p] += 1
        for j in range(i + 1, nb):
            if body_contact[i, j]:
                flag = sensitivity.ND_GENERAL
                dx = pos[j, 0] - pos[i, 0]
                dy = pos[j, 1] - pos[i, 1]
                dz = pos[j, 2] - pos[i, 2]
                size = np.sqrt(dx * dx + dy * dy + dz * dz)
                rel = (vel[j, 0] - vel[i, 0], vel[j, 1] - vel[i, 1], vel[j, 2] - vel[i, 2])
                if size > 0.0 and _tangential_speed(rel, (dx / size, dy / size,
                                                          dz / size)) > V_STOP:
                    p = pdir[tg.bb_idx[mat[i], mat[j], B_MU_BB]]
                    if p >= 0:
                        signal[p] += 1
    return flag


@jit(borrow=True)
def _tangential_speed(v, n):
    """``|v - (v . n) n|`` for a unit ``n``."""
    vn = v[0] * n[0] + v[1] * n[1] + v[2] * n[2]
    t0 = v[0] - vn * n[0]
    t1 = v[1] - vn * n[1]
    t2 = v[2] - vn * n[2]
    return np.sqrt(t0 * t0 + t1 * t1 + t2 * t2)


@jit(borrow=True)
def acc_tangent(vel, free_acc, gc, pbody, fl, h_dir, tvel, tfa, ttau, tacc, signal):
    """Tangent of the accelerations just solved: free flight, static hold, or
    a ground slide (the coefficient of the body's speed regime; ``pbody``:
    :func:`body_directions`)."""
    g_mu_s, g_mu_k, plane_contact, modes = gc.mu_s, gc.mu_k, fl.plane_contact, fl.modes
    for i in range(vel.shape[0]):
        if not plane_contact[i, 0]:
            for d in range(3):
                for p in range(tacc.shape[2]):
                    tacc[i, d, p] = tfa[i, d, p]
        elif modes[RESTING, i]:
            tacc[i] = 0.0
        else:
            mu = g_mu_k[i] if modes[ABOVE, i] else g_mu_s[i]
            p_mu = pbody[1 if modes[ABOVE, i] else 0, i]
            tangent.ground_slide(i, vel[i], free_acc[i], mu, modes[STARTING, i], h_dir, tvel, tfa,
                                 ttau, p_mu, tacc, signal)


@jit
def body_directions(pdir, bg_idx, mat):
    """``pbody (3, nb)``: the direction of each body's ``mu_s``, ``mu_k`` and
    ``v_th`` (through its material; -1: none)."""
    pbody = np.empty((3, mat.shape[0]), np.int64)
    for i in range(mat.shape[0]):
        for c in range(3):
            pbody[c, i] = pdir[bg_idx[mat[i], c]]
    return pbody


@jit
def event_time_tangent(event, s, pos, vel, acc, plane_n, g_vth, p_ground, pbody, ts, signal):
    """``ds``: the tangent of the segment length ``s`` to the event
    ``(code, i, j)`` (implicit function theorem); returns the nondiff flags
    it raises."""
    code, i, j = event
    tpos, tvel, tacc, ttau, ds = ts.tpos, ts.tvel, ts.tacc, ts.ttau, ts.ds
    if code == IMPACT_PLANE:
        # The ground's height is the offset's direction; the walls are fixed.
        p_d = p_ground if j == 0 else -1
        if not tangent.impact_plane_time(i, plane_n[j], s, vel, acc, tpos, tvel, tacc, p_d, ds):
            return sensitivity.ND_GRAZING
        if p_d >= 0:
            signal[p_d] += 1
    elif code == IMPACT_BODY:
        if not tangent.impact_body_time(i, j, s, pos, vel, acc, tpos, tvel, tacc, ds):
            return sensitivity.ND_GRAZING
    elif code == STOP:
        tangent.stop_time(i, vel, acc, tvel, tacc, ds)
    elif code == VTH:
        tangent.vth_time(i, s, vel, acc, tvel, tacc, g_vth[i], pbody[2, i], ds, signal)
    else:
        # No event before the horizon (a fixed time), or a stick (flagged).
        tangent.fixed_time(ttau, ds)
    return 0


@jit(borrow=True)
def contact_tangent(plane_n, plane_contact, modes, tvel):
    """Keep the tangents on the active planes, and at rest for resting bodies."""
    for i in range(plane_contact.shape[0]):
        for k in range(plane_n.shape[0]):
            if plane_contact[i, k]:
                tangent.project_plane(i, plane_n[k], tvel)
        if plane_contact[i, 0] and modes[RESTING, i]:
            tvel[i, :2] = 0.0


@jit(borrow=True)
def final_tangents(vel, acc, tpos, tvel, ttau, fin_tpos, fin_tvel):
    """The state's tangents at the fixed end time (``tau`` only moves if an
    event ended the run)."""
    for i in range(vel.shape[0]):
        for d in range(3):
            for p in range(ttau.shape[0]):
                fin_tpos[i, d, p] = tpos[i, d, p] - vel[i, d] * ttau[p]
                fin_tvel[i, d, p] = tvel[i, d, p] - acc[i, d] * ttau[p]
