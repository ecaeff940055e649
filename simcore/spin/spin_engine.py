"""The event loop of the spinning model: spheres that slide, roll and spin on the ground.

:func:`run` is what :func:`simcore.engine.simulate` calls for a model built
with ``spin=True``.  Per scenario, :func:`_scenario` jumps from event to
event, every ball's motion between them in closed form
(:mod:`simcore.spin.spin`):

1. segments: each ball's constant accelerations and the time its motion
   state can last (``spin.segment``);
2. next event: the earliest of the balls' transitions (``slide_roll``,
   ``roll_rest``, ``roll_spin``, ``spin_rest``, and the unlogged ``v_th``
   crossing of a slide), the ball-ball and ball-cushion impacts (the exact
   times of impact of :mod:`simcore.geometry.collision`: constant accelerations, so
   the same polynomials as the sliding model's) and the end of the run;
3. advance: the samples passed on the way, then every ball to the event;
4. resolve: the transition, or the impact (:mod:`simcore.spin.spin_impact`,
   under the batch's laws), logged.

Pushes (the controls): each pass sums the forces of the windows active on
each ball (``[t0 + time_offset, t1 + time_offset)``) and segments a pushed
ball with ``spin.pushed_segment`` (steps of at most the scenario's ``dt``
where a direction turns); a window's edge ends a pass (``EDGE``, not
logged).  A push that sets a ball in motion logs ``start``, one that makes
a rolling ball slip ``roll_slide``.  Their sensitivities are exact for the
stepped motion (``spin_tangent.pushed_segment``); a window's edge is at a
fixed time shifted by ``time_offset``, which is its one coefficient.

Sensitivities.  Asked for them, the loop carries the tangents of
:mod:`simcore.spin.spin_tangent` stage by stage beside the state (the segments,
the events' times, the transitions, the impacts by a complex step), the
trajectory residual sums against the measured positions with ``J^T r`` and
``J^T J``, and counts per coefficient the segments and events that read it
(``signal``).  A grazing impact flags its scenario ``sensitivity.ND_GRAZING``.

Simultaneous events are resolved one at a time in a fixed order (a ball's
transition before impacts, lower indices first), so runs are deterministic
and identical between serial and parallel drivers.  A sample that falls
exactly on an event reports the state before it.
"""

from typing import NamedTuple

import numpy as np

from ..geometry.collision import SHAPE_SPHERE, toi_sphere_plane, toi_sphere_sphere
from ..kernel import drivers, sensitivity
from ..kernel.config import MAX_LOOP, jit
from ..kernel.eventlog import EventLog, Sums, log, log_tangent
from ..kernel.events import (
    EV_BODY_BODY,
    EV_BODY_WALL,
    EV_ROLL_REST,
    EV_ROLL_SLIDE,
    EV_ROLL_SPIN,
    EV_SLIDE_ROLL,
    EV_SPIN_REST,
    EV_START,
    NA,
)
from ..kernel.parameter import (
    B_E_BB,
    B_MU_BB,
    B_MU_BB_B,
    B_MU_BB_C,
    G_MU_K,
    G_MU_R,
    G_MU_S,
    G_MU_SP,
    G_V_TH,
    TIME_OFFSET,
    W_E_BW,
    W_MU_W,
    W_OMEGA_RATIO_W,
)
from ..kernel.records import outputs
from ..kernel.status import (
    STATUS_MAX_ITER,
    STATUS_OK,
    STATUS_STALLED,
    STATUS_UNSUPPORTED_PAIR,
    progress,
)
from ..laws import registry as laws
from ..laws.registry import IMPACT_CODES, LAW_IMPULSE, LAW_STRONGE_COMPLIANT, PairLaw
from . import spin, spin_impact, spin_tangent

#: The law codes this engine's kernels run, per contact kind (ground, body,
#: wall; ``laws.registry.KINDS``) and its shape codes: anything else is
#: refused by :func:`simcore.engine.simulate`.
LAWS = ((LAW_IMPULSE,), IMPACT_CODES, (LAW_IMPULSE, LAW_STRONGE_COMPLIANT))
SHAPES = (SHAPE_SPHERE,)
#: The coefficients held only when named that this engine reads: none.
READS = ()

# What ends a step of the loop.
NONE = 0
TRANSITION = 1
BALL_BALL = 2
BALL_WALL = 3
EDGE = 4  # a control window opens or closes



class Balls(NamedTuple):
    """A scenario's balls: the state ``pos``, ``vel``, ``w (nb, 3)`` and the
    constants ``radius``, ``mass``, ``mat (nb,)``."""

    pos: np.ndarray
    vel: np.ndarray
    w: np.ndarray
    radius: np.ndarray
    mass: np.ndarray
    mat: np.ndarray


class Walls(NamedTuple):
    """A scenario's cushions: the planes ``n (nw, 3)``, ``d``, their nose
    heights ``h`` (NaN: none) and materials ``mat (nw,)``."""

    n: np.ndarray
    d: np.ndarray
    h: np.ndarray
    mat: np.ndarray


class Cloth(NamedTuple):
    """Each ball's cloth coefficients (nb,), through its material."""

    mu_s: np.ndarray
    mu_k: np.ndarray
    v_th: np.ndarray
    mu_r: np.ndarray
    mu_sp: np.ndarray


class Motion(NamedTuple):
    """Each ball's segment: motion ``state`` and ``above`` (a slide in the
    ``mu_k`` regime) (nb,), accelerations ``acc``, ``alpha (nb, 3)``, how long
    it can last ``dur`` and what ends it ``end`` (nb,), and the push on it
    ``push (nb, 6)`` (force over mass, torque over inertia)."""

    state: np.ndarray
    above: np.ndarray
    acc: np.ndarray
    alpha: np.ndarray
    dur: np.ndarray
    end: np.ndarray
    push: np.ndarray


@jit(borrow=True)
def _cloth(cloth, i):
    """Ball ``i``'s cloth coefficients ``(mu_k, mu_s, v_th, mu_r, mu_sp)``."""
    return cloth.mu_k[i], cloth.mu_s[i], cloth.v_th[i], cloth.mu_r[i], cloth.mu_sp[i]


@jit(borrow=True)
def _segments(motion, vel, w, radius, gravity, cloth):
    """Every ball's segment from its current state (``spin.segment``)."""
    for i in range(vel.shape[0]):
        motion.dur[i], motion.end[i] = spin.segment(
            motion.state[i], motion.above[i], vel[i], w[i], radius[i], gravity, _cloth(cloth, i),
            motion.acc[i], motion.alpha[i])


@jit(borrow=True)
def _pushed_segments(motion, vel, w, radius, gravity, cloth, step):
    """The segments of a scenario with controls: a pushed ball's,
    ``motion.push[i]`` = (F/m, tau/I), by ``spin.pushed_segment`` with steps
    of at most ``step``, the others' by ``spin.segment``."""
    _segments(motion, vel, w, radius, gravity, cloth)
    push = motion.push
    for i in range(vel.shape[0]):
        pushed = False
        for d in range(6):
            pushed = pushed or push[i, d] != 0.0
        if pushed:
            motion.dur[i], motion.end[i] = spin.pushed_segment(
                motion.state[i], motion.above[i], vel[i], w[i], radius[i], gravity, push[i],
                _cloth(cloth, i), step, motion.acc[i], motion.alpha[i])


@jit(borrow=True)
def _pushes(ctrl, t, lag, mass, radius, push):
    """``push[i]`` = the summed force over mass and torque over the moment
    of inertia (``0.4 m R^2``) of the control windows active on ball i at
    ``t`` (``ctrl``: a scenario's rows ``(body, t0, t1, fx, fy, fz, tx, ty,
    tz)``, windows shifted by ``lag``); returns the next window edge after
    ``t`` (inf: none)."""
    push[:] = 0.0
    edge = np.inf
    for q in range(ctrl.shape[0]):
        i = int(ctrl[q, 0])
        t0, t1 = ctrl[q, 1] + lag, ctrl[q, 2] + lag
        if t0 <= t < t1:
            inertia = spin.INERTIA * mass[i] * radius[i] * radius[i]
            for d in range(3):
                push[i, d] += ctrl[q, 3 + d] / mass[i]
                push[i, 3 + d] += ctrl[q, 6 + d] / inertia
        for te in (t0, t1):
            if t < te < edge:
                edge = te
    return edge


@jit(borrow=True)
def _count_segments(motion, w, step, mat, bg_idx, used):
    """Count, per coefficient row, the balls' segments of length ``step``
    that read it: kinetic or static friction of a slide, rolling resistance,
    spinning friction on a vertical spin."""
    if step <= 0.0:
        return
    for i in range(w.shape[0]):
        st = motion.state[i]
        if st == spin.SLIDING:
            used[bg_idx[mat[i], G_MU_K if motion.above[i] else G_MU_S]] += 1
        elif st == spin.ROLLING:
            used[bg_idx[mat[i], G_MU_R]] += 1
        if w[i, 2] != 0.0:
            used[bg_idx[mat[i], G_MU_SP]] += 1


@jit(borrow=True)
def _count(used, rows, n):
    """Count the first ``n`` coefficient rows of ``rows`` (-1: absent) as read."""
    for c in range(n):
        if rows[c] >= 0:
            used[rows[c]] += 1


@jit(borrow=True)
def _enter(i, motion, vel, w, radius, v_th):
    """Ball i's motion state after an impact or at the start (``spin.classify``)."""
    st = spin.classify(vel[i], w[i], radius[i])
    motion.state[i] = st
    if st == spin.SLIDING:
        ux, uy = spin.slip(vel[i], w[i], radius[i])
        motion.above[i] = np.sqrt(ux * ux + uy * uy) >= v_th[i]
    elif st == spin.ROLLING:
        # No slip: w_xy = (z x v) / R exactly.
        w[i, 0] = -vel[i, 1] / radius[i]
        w[i, 1] = vel[i, 0] / radius[i]
    else:
        w[i, 0] = 0.0
        w[i, 1] = 0.0


@jit(borrow=True)
def _translating(state):
    return state == spin.SLIDING or state == spin.ROLLING


@jit(borrow=True)
def _next_event(s_best, motion, pos, vel, radius, wall_n, wall_d):
    """The earliest transition or impact before ``s_best``: ``(code, a, b, s)``."""
    code, ev_a, ev_b = NONE, -1, -1
    nb = pos.shape[0]
    for i in range(nb):
        if motion.dur[i] < s_best:
            s_best = motion.dur[i]
            code, ev_a = TRANSITION, i
    state, acc = motion.state, motion.acc
    for i in range(nb):
        moving = _translating(state[i])
        for j in range(i + 1, nb):
            if not (moving or _translating(state[j])):
                continue
            s = toi_sphere_sphere(pos[i], vel[i], acc[i], radius[i], pos[j], vel[j], acc[j],
                                  radius[j], s_best)
            if s < s_best:
                s_best, code, ev_a, ev_b = s, BALL_BALL, i, j
        if not moving:
            continue
        for k in range(wall_n.shape[0]):
            s = toi_sphere_plane(pos[i], vel[i], acc[i], radius[i], wall_n[k], wall_d[k], s_best)
            if s < s_best:
                s_best, code, ev_a, ev_b = s, BALL_WALL, i, k
    return code, ev_a, ev_b, s_best


@jit(borrow=True)
def _sample(t, t_new, ks, motion, balls, samp_t, out, meas, tg, sums):
    """Write the samples from ``ks`` up to ``t_new`` (each ball moved along its
    segment from ``t``) into ``out = (out_pos, out_vel, out_w)``, and their
    residuals against ``meas`` (no rows: none) with their tangents into
    ``sums``; returns the next sample index."""
    pos, vel, w, radius = balls.pos, balls.vel, balls.w, balls.radius
    out_pos, out_vel, out_w = out
    while ks < samp_t.shape[0] and samp_t[ks] <= t_new:
        s = samp_t[ks] - t
        for i in range(pos.shape[0]):
            spin.advance(motion.state[i], pos[i], vel[i], w[i], motion.acc[i], motion.alpha[i],
                         radius[i], s, out_pos[ks, i], out_vel[ks, i], out_w[ks, i])
        if meas.shape[0]:
            spin_tangent.sample(vel, motion.acc, s, tg)
            spin_tangent.accumulate(ks, pos.shape[0], out_pos, meas, tg, sums.sse, sums.grad,
                                    sums.gn)
        ks += 1
    return ks


@jit(borrow=True)
def _transition(i, n_ev, t, motion, vel, w, radius, ev, zero3, gravity, cloth):
    """Resolve ball i's transition at ``t`` (its segment's end); returns the event count."""
    end = motion.end[i]
    if end == spin.END_VTH:
        motion.above[i] = not motion.above[i]  # the slide goes on under the other mu (not logged)
        return n_ev
    if end == spin.END_STEP:
        return n_ev  # a pushed ball's direction, taken again
    if end == spin.END_SPIN_ZERO:
        w[i, 2] = 0.0  # the torque drives it through zero (see spin.END_SPIN_ZERO)
        return n_ev
    if end == spin.END_SET_OFF:
        kind = EV_ROLL_SLIDE if motion.state[i] == spin.ROLLING else EV_START
        motion.state[i] = spin.set_off(motion.state[i], motion.push[i], radius[i], gravity,
                                       cloth.mu_s[i], cloth.mu_r[i], cloth.mu_sp[i])
        motion.above[i] = False  # no slip yet
        return log(ev, n_ev, t, kind, i, NA, zero3, 0.0, 0.0, zero3, zero3, NA)
    if end == spin.END_SLIDE:
        motion.state[i] = spin.ROLLING
        w[i, 0] = -vel[i, 1] / radius[i]
        w[i, 1] = vel[i, 0] / radius[i]
        return log(ev, n_ev, t, EV_SLIDE_ROLL, i, NA, zero3, 0.0, 0.0, zero3, zero3, NA)
    for d in range(2):
        vel[i, d] = 0.0
        w[i, d] = 0.0
    if end == spin.END_ROLL and w[i, 2] != 0.0:
        motion.state[i] = spin.SPINNING
        return log(ev, n_ev, t, EV_ROLL_SPIN, i, NA, zero3, 0.0, 0.0, zero3, zero3, NA)
    w[i, 2] = 0.0
    motion.state[i] = spin.STATIONARY
    kind = EV_ROLL_REST if end == spin.END_ROLL else EV_SPIN_REST
    return log(ev, n_ev, t, kind, i, NA, zero3, 0.0, 0.0, zero3, zero3, NA)


@jit
def _ball_ball(i, j, n_ev, t, balls, pc, code, ev, v3, moving):
    """Resolve the impact of balls i < j at ``t`` (moved apart to
    ``spin_impact.SEPARATION`` first) under the body-body law ``code``;
    returns the event count."""
    pos, vel, w, radius, mass, mat = (balls.pos, balls.vel, balls.w, balls.radius, balls.mass,
                                      balls.mat)
    nrm, dva, dwa, dvb, dwb = v3[0], v3[1], v3[2], v3[3], v3[4]
    spin_impact.separate_pair(pos[i], vel[i], pos[j], vel[j], radius[i], radius[j], moving)
    dist = 0.0
    for d in range(3):
        nrm[d] = pos[j, d] - pos[i, d]
        dist += nrm[d] * nrm[d]
    dist = np.sqrt(dist)
    for d in range(3):
        nrm[d] /= dist
    row = pc[mat[i], mat[j]]
    law = PairLaw(code, row[B_E_BB], row[B_MU_BB], row[B_MU_BB_B], row[B_MU_BB_C])
    jn, jt, slipped = spin_impact.ball_ball(law, (vel[i], w[i], mass[i], radius[i]),
                                            (vel[j], w[j], mass[j], radius[j]), nrm, (dva, dwa),
                                            (dvb, dwb))
    dva[2] = 0.0  # the cloth takes the vertical part: the balls stay on it
    dvb[2] = 0.0
    for d in range(3):
        vel[i, d] += dva[d]
        vel[j, d] += dvb[d]
        w[i, d] += dwa[d]
        w[j, d] += dwb[d]
    return log(ev, n_ev, t, EV_BODY_BODY, i, j, nrm, jn, jt, dva, dvb,
               1 if slipped else 0)


@jit
def _ball_wall(i, k, n_ev, t, ground, balls, walls, wc, code, ev, v3):
    """Resolve ball i's impact on wall k at ``t`` (moved to
    ``spin_impact.SEPARATION`` from it first) under the body-wall law
    ``code``; returns the event count."""
    pos, vel, w, radius, mass, mat = (balls.pos, balls.vel, balls.w, balls.radius, balls.mass,
                                      balls.mat)
    wall_n, wall_d, wall_h, wall_mat = walls.n, walls.d, walls.h, walls.mat
    nrm, dva, dwa, zero3 = v3[0], v3[1], v3[2], v3[5]
    spin_impact.separate_wall(pos[i], vel[i], radius[i], wall_n[k], wall_d[k])
    gap = (wall_n[k, 0] * pos[i, 0] + wall_n[k, 1] * pos[i, 1] + wall_n[k, 2] * pos[i, 2]
           - wall_d[k])
    spin_impact.cushion_normal(wall_n[k], gap, pos[i, 2] - ground - wall_h[k], nrm)
    row = wc[mat[i], wall_mat[k]]
    jn, jt, slipped = spin_impact.ball_cushion(
        code, row[W_E_BW], row[W_MU_W], row[W_OMEGA_RATIO_W], vel[i], w[i], mass[i],
        radius[i], nrm, dva, dwa)
    dva[2] = 0.0  # the table takes the vertical part: no hop
    for d in range(3):
        vel[i, d] += dva[d]
        w[i, d] += dwa[d]
    return log(ev, n_ev, t, EV_BODY_WALL, i, k, nrm, jn, jt, dva, zero3,
               1 if slipped else 0)


@jit
def _tables(params, bb_idx, bw_idx, mat, wall_mat):
    """The pair coefficients through the material tables: ``pc (nmat, nmat,
    4)`` (mu_bb, e_bb, mu_bb_b, mu_bb_c; 0 where absent) and ``wc (nmat,
    nmat, 3)`` (mu_w, e_bw, omega_ratio_w)."""
    nmat = bb_idx.shape[0]
    pc = np.zeros((nmat, nmat, 4))
    wc = np.zeros((nmat, nmat, 3))
    for a in range(nmat):
        for b in range(nmat):
            for c in range(4):
                q = bb_idx[a, b, c]
                pc[a, b, c] = params[q] if q >= 0 else 0.0
            for c in range(3):
                q = bw_idx[a, b, c]
                wc[a, b, c] = params[q] if q >= 0 else 0.0
    return pc, wc


@jit
def _set_up(b, s, pos, vel, w):
    """A scenario's records: ``(balls, walls, cloth, motion, pc, wc, cdir)``,
    ``cdir (5, nb)`` the directions of each ball's cloth rows (filled later)."""
    nb = b.body_count[s]
    nw = b.wall_count[s]
    mat = b.body_material[s, :nb]
    wall_mat = b.wall_material[s, :nw]
    params = b.params[s if b.params.shape[0] > 1 else 0]
    cbuf = np.empty((5, nb))
    for i in range(nb):
        for c, col in enumerate((G_MU_S, G_MU_K, G_V_TH, G_MU_R, G_MU_SP)):
            cbuf[c, i] = params[b.bg_idx[mat[i], col]]
    cloth = Cloth(cbuf[0], cbuf[1], cbuf[2], cbuf[3], cbuf[4])
    pc, wc = _tables(params, b.bb_idx, b.bw_idx, mat, wall_mat)
    mbuf = np.zeros((2, nb, 3))
    motion = Motion(np.zeros(nb, np.int64), np.zeros(nb, np.bool_), mbuf[0], mbuf[1],
                    np.zeros(nb), np.zeros(nb, np.int64), np.zeros((nb, 6)))
    balls = Balls(pos, vel, w, b.body_radius[s, :nb], b.body_mass[s, :nb], mat)
    # Walls: the planes n . p = d (n into the table).
    walls = Walls(b.wall_normal[s, :nw], b.wall_offset[s, :nw], b.wall_height[s, :nw], wall_mat)
    return balls, walls, cloth, motion, pc, wc


@jit(borrow=True)
def _push_tangents(ctrl, t, lag, mass, t_ctrl, tpush):
    """``tpush[i, d, p]``: direction ``p`` with ``t_ctrl[p] = 3 q + d``
    moves control ``q``'s force component ``d``, so its ball's push (force
    over mass) by ``1/m`` while the window is active at ``t`` (as
    :func:`_pushes`)."""
    tpush[:] = 0.0
    for p in range(t_ctrl.shape[0]):
        c = t_ctrl[p]
        if c < 0 or c // 3 >= ctrl.shape[0]:
            continue
        q = c // 3
        if ctrl[q, 1] + lag <= t < ctrl[q, 2] + lag:
            i = int(ctrl[q, 0])
            tpush[i, c % 3, p] += 1.0 / mass[i]


@jit(borrow=True)
def _tangent_segments(motion, balls, gravity, cloth, cdir, tg, step):
    """The tangents of every ball's segment (``spin_tangent.segment``; a
    pushed ball's ``spin_tangent.pushed_segment``, steps of at most ``step``;
    also a ball under a window of zero force with a direction on it: the
    push's tangent acts from zero)."""
    push, tpush = motion.push, tg.tpush
    for i in range(balls.pos.shape[0]):
        coef = (cloth.mu_s[i], cloth.mu_k[i], cloth.v_th[i], cloth.mu_r[i], cloth.mu_sp[i])
        dirs = (cdir[0, i], cdir[1, i], cdir[2, i], cdir[3, i], cdir[4, i])
        pushed = False
        for d in range(6):
            pushed = pushed or push[i, d] != 0.0
        for d in range(3):
            for p in range(tpush.shape[2]):
                pushed = pushed or tpush[i, d, p] != 0.0
        if pushed:
            spin_tangent.pushed_segment(i, motion.state[i], motion.above[i], balls.vel[i],
                                        balls.w[i], balls.radius[i], gravity, (push[i], step),
                                        coef, dirs, (motion.dur[i], motion.end[i]), tg)
        else:
            spin_tangent.segment(i, motion.state[i], motion.above[i], balls.vel[i], balls.w[i],
                                 balls.radius[i], gravity, coef, dirs, motion.dur[i],
                                 motion.end[i], tg)


@jit(borrow=True)
def _event_tangent(code, a, k, step, motion, balls, walls, tg, ds, ldir):
    """``ds``, the tangent of the step to the event ``code`` (of ball ``a``,
    and ball or wall ``k``); ``ldir``: the direction of ``time_offset``,
    which moves a window's edge (-1: none).  Returns nondiff flags (a
    grazing impact)."""
    if code == NONE or code == EDGE:
        for p in range(ds.shape[0]):
            ds[p] = (1.0 if code == EDGE and p == ldir else 0.0) - tg.ttau[p]
    elif code == TRANSITION:
        for p in range(ds.shape[0]):
            ds[p] = tg.tdur[a, p]
    elif not spin_tangent.impact_time(a, k if code == BALL_BALL else -1, step, balls.pos,
                                      balls.vel, motion.acc,
                                      walls.n[k] if code == BALL_WALL else walls.n[0], ds, tg):
        return sensitivity.ND_GRAZING
    return 0


@jit
def _resolve(event, n_ev, t, tables, motion, balls, walls, cloth, ev, tg, v3, used):
    """Resolve the event ``event = (code, a, k)`` (of ball ``a``, and ball or
    wall ``k``) at ``t``, its tangents first (they read the state before
    it); returns the event count.  ``tables``: the batch's ``(bg_idx,
    bb_idx, bw_idx, laws, ground_z, gravity)`` and the scenario's pair
    tables ``(pc, wc)`` (not the batch record, nor the records in a tuple: a
    call per event would count the references of all their arrays; 10 %
    of the billiards benchmark when the records came as a tuple)."""
    code, a, k = event
    bg_idx, bb_idx, bw_idx, codes, ground, gravity, pc, wc = tables
    mat, radius = balls.mat, balls.radius
    nt = tg.ttau.shape[0]
    count = n_ev
    tg.tdva[:] = 0.0
    tg.tdvb[:] = 0.0
    if code == EDGE:
        used[TIME_OFFSET] += 1
        return n_ev
    if code == TRANSITION:
        end = motion.end[a]
        if end == spin.END_VTH:
            used[bg_idx[mat[a], G_V_TH]] += 1
        n_ev = _transition(a, n_ev, t, motion, balls.vel, balls.w, radius, ev, v3[5],
                           gravity, cloth)
        if nt and end < spin.END_STEP:
            spin_tangent.transition(a, end, motion.state[a], radius[a], tg)
    elif code == BALL_BALL:
        moving = _translating(motion.state[a]) or _translating(motion.state[k])
        rows = bb_idx[mat[a], mat[k]]
        if nt:
            spin_tangent.pair(a, k, codes[laws.BODY_BODY], pc[mat[a], mat[k]],
                              (_pdir(tg, rows[0]), _pdir(tg, rows[1]), _pdir(tg, rows[2]),
                               _pdir(tg, rows[3])), moving, balls.pos, balls.vel, balls.w,
                              radius, balls.mass, tg)
        n_ev = _ball_ball(a, k, n_ev, t, balls, pc, codes[laws.BODY_BODY], ev, v3, moving)
        _count(used, rows, 4)
        for i in (a, k):
            _enter(i, motion, balls.vel, balls.w, radius, cloth.v_th)
            if nt:
                spin_tangent.enter(i, motion.state[i], radius[i], tg)
    else:
        rows = bw_idx[mat[a], walls.mat[k]]
        if nt:
            spin_tangent.wall(a, codes[laws.BODY_WALL], wc[mat[a], walls.mat[k]],
                              (_pdir(tg, rows[0]), _pdir(tg, rows[1]), _pdir(tg, rows[2])),
                              (walls.n[k], walls.d[k], walls.h[k]), ground, balls.pos,
                              balls.vel, balls.w, radius, balls.mass, tg)
        n_ev = _ball_wall(a, k, n_ev, t, ground, balls, walls, wc, codes[laws.BODY_WALL], ev,
                          v3)
        _count(used, rows, 3)
        _enter(a, motion, balls.vel, balls.w, radius, cloth.v_th)
        if nt:
            spin_tangent.enter(a, motion.state[a], radius[a], tg)
    if n_ev > count:
        log_tangent(ev.tt, ev.tdva, ev.tdvb, n_ev, tg.ttau, tg.tdva, tg.tdvb)
    return n_ev


@jit
def _pdir(tg, row):
    return tg.pdir[row] if row >= 0 else -1


# Inlined into _run_one, which as a kernel's caller would re-optimise it all once more.
@jit(inline="always")
def _scenario(b, s, state, out, ev, t, used, tg, sums, meas, t_ctrl):
    """Simulate scenario ``s`` of batch ``b`` from ``t`` in place (``state =
    (pos, vel, w)``); returns ``(status, event_count, t, nondiff)``.
    ``out``: the sample rows
    ``(out_pos, out_vel, out_w)``; ``ev``: the :class:`simcore.sliding.stages.EventLog`;
    ``used`` counts per coefficient row the segments and events that read it;
    ``tg``: the tangents (:mod:`simcore.spin.spin_tangent`, no directions: none),
    ``sums`` the trajectory residual sums against ``meas``; ``t_ctrl`` the
    directions on control forces (:func:`_push_tangents`)."""
    pos, vel, w = state
    balls, walls, cloth, motion, pc, wc = _set_up(b, s, pos, vel, w)
    radius, mat = balls.radius, balls.mat
    nb = radius.shape[0]
    samp_t = b.samp_t[b.samp_ptr[s]:b.samp_ptr[s + 1]]
    nt = tg.ttau.shape[0]
    cdir = np.full((5, nb), -1, np.int64)
    for i in range(nb):
        for c, col in enumerate((G_MU_S, G_MU_K, G_V_TH, G_MU_R, G_MU_SP)):
            cdir[c, i] = _pdir(tg, b.bg_idx[mat[i], col])
    v3 = np.zeros((6, 3))
    ds = np.zeros(nt)
    tables = (b.bg_idx, b.bb_idx, b.bw_idx, b.laws, b.ground_z, b.gravity, pc, wc)
    ctrl = np.empty((b.ctrl_ptr[s + 1] - b.ctrl_ptr[s], 9))
    for q in range(ctrl.shape[0]):
        r = b.ctrl_ptr[s] + q
        ctrl[q, 0], ctrl[q, 1], ctrl[q, 2] = b.ctrl_body[r], b.ctrl_t0[r], b.ctrl_t1[r]
        for d in range(3):
            ctrl[q, 3 + d] = b.ctrl_force[r, d]
            ctrl[q, 6 + d] = b.ctrl_torque[r, d]
    lag = b.params[s if b.params.shape[0] > 1 else 0][TIME_OFFSET]
    ldir = _pdir(tg, TIME_OFFSET)
    push = motion.push
    step_max = b.scen_dt[s]
    for i in range(nb):
        _enter(i, motion, vel, w, radius, cloth.v_th)
        if nt:
            spin_tangent.enter(i, motion.state[i], radius[i], tg)
    ks = _sample(t, t, 0, motion, balls, samp_t, out, meas, tg, sums)
    n_ev, nd, passes, since = 0, 0, 0, t
    # The fields the loop reads, unpacked once (a field read in the loop
    # costs a reference count per pass).
    t_end, gravity, bg_idx, wall_n, wall_d = (b.scen_t_end[s], b.gravity, b.bg_idx, walls.n,
                                              walls.d)
    for _loop in range(MAX_LOOP):
        if t >= t_end:
            break
        # (a scenario without controls never pays for them)
        edge = _pushes(ctrl, t, lag, balls.mass, radius, push) if ctrl.shape[0] else np.inf
        if nt and ctrl.shape[0]:
            _push_tangents(ctrl, t, lag, balls.mass, t_ctrl, tg.tpush)
        if ctrl.shape[0]:
            _pushed_segments(motion, vel, w, radius, gravity, cloth, step_max)
        else:
            _segments(motion, vel, w, radius, gravity, cloth)
        if nt:
            _tangent_segments(motion, balls, gravity, cloth, cdir, tg, step_max)
        code, ev_a, ev_b, step = _next_event(min(t_end, edge) - t, motion, pos, vel, radius,
                                             wall_n, wall_d)
        if code == NONE and edge < t_end:
            code = EDGE
        t_new = t_end if code == NONE else t + step
        _count_segments(motion, w, t_new - t, mat, bg_idx, used)
        ks = _sample(t, t_new, ks, motion, balls, samp_t, out, meas, tg, sums)
        if nt:
            nd |= _event_tangent(code, ev_a, ev_b, t_new - t, motion, balls, walls, tg, ds,
                                 ldir)
            spin_tangent.advance(motion.state, vel, w, motion.acc, motion.alpha, radius,
                                 t_new - t, ds, tg)
        for i in range(nb):
            spin.advance(motion.state[i], pos[i], vel[i], w[i], motion.acc[i], motion.alpha[i],
                         radius[i], t_new - t, pos[i], vel[i], w[i])
        passes, since, stalled = progress(passes, since, t_new)
        if stalled:
            return STATUS_STALLED, n_ev, t_new, nd
        t = t_new
        if code != NONE:
            n_ev = _resolve((code, ev_a, ev_b), n_ev, t, tables, motion, balls, walls, cloth, ev,
                            tg, v3, used)
    else:
        return STATUS_MAX_ITER, n_ev, t, nd
    # Samples at the end time (or after a run stopped early), and the state's
    # tangents at the fixed end time.
    if ctrl.shape[0]:
        _pushes(ctrl, t, lag, balls.mass, radius, push)
        if nt:
            _push_tangents(ctrl, t, lag, balls.mass, t_ctrl, tg.tpush)
        _pushed_segments(motion, vel, w, radius, b.gravity, cloth, step_max)
    else:
        _segments(motion, vel, w, radius, b.gravity, cloth)
    if nt:
        _tangent_segments(motion, balls, b.gravity, cloth, cdir, tg, step_max)
    _sample(t, np.inf, ks, motion, balls, samp_t, out, meas, tg, sums)
    if nt:
        # At the fixed end time (tau moves only if an event ended the run).
        for p in range(nt):
            ds[p] = -tg.ttau[p]
        spin_tangent.advance(motion.state, vel, w, motion.acc, motion.alpha, radius, 0.0, ds, tg)
    return STATUS_OK, n_ev, t, nd


@jit(address=True)
def _run_one(s, b, out, tan):
    """Scenario ``s`` of a batch: its slices of the outputs and tangent
    buffers (``tan``: :class:`simcore.kernel.records.TangentIO`), and the run."""
    nb = b.body_count[s]
    for i in range(nb):
        if b.body_shape[s, i] != SHAPE_SPHERE:  # balls only: no other shape's physics
            out.status[s] = STATUS_UNSUPPORTED_PAIR
            return
    k0 = b.samp_ptr[s]
    k1 = b.samp_ptr[s + 1]
    if out.out_pos.shape[0] == 0:
        o_pos = np.empty((k1 - k0, nb, 3))
        o_vel = np.empty((k1 - k0, nb, 3))
        o_w = np.empty((k1 - k0, nb, 3))
    else:
        o_pos = out.out_pos[k0:k1]
        o_vel = out.out_vel[k0:k1]
        o_w = out.out_omega[k0:k1]
    used = np.zeros(b.params.shape[1], np.int64)
    nt = tan.t_param.shape[0]
    tg = spin_tangent.scratch(nb, nt, b.params.shape[1], tan.t_param, tan.t_vel, tan.t_omega)
    meas = tan.meas[k0:k1] if tan.meas.shape[0] == b.samp_t.shape[0] else tan.meas[:0]
    ev = EventLog(out.ev_f[s], out.ev_i[s], tan.ev_tt[s], tan.ev_tdva[s], tan.ev_tdvb[s])
    sums = Sums(tan.tr_sse[s:s + 1], tan.tr_grad[s], tan.tr_gn[s])
    st, ne, tf, nd = _scenario(b, s, (out.pos[s, :nb], out.vel[s, :nb], out.omega[s, :nb]),
                               (o_pos, o_vel, o_w), ev, out.time[s], used, tg, sums, meas,
                               tan.t_ctrl)
    out.status[s] = st
    out.ev_count[s] = ne
    out.time[s] = tf
    tan.nondiff[s] = nd
    for p in range(nt):
        q = tan.t_param[p]
        tan.signal[s, p] = used[q] if q >= 0 else 1
    if nt:
        tan.fin_tpos[s, :nb] = tg.tp
        tan.fin_tvel[s, :nb] = tg.tv


def run(batch, pos, vel, omega, time, cap, parallel, tan, keep=True):
    """Run the scenarios of ``batch`` (:class:`simcore.kernel.records.Batch` of a
    spinning model) with event capacity ``cap``; ``pos``, ``vel``, ``omega``,
    ``time`` are their state, advanced in place; ``tan`` the
    :class:`simcore.kernel.records.TangentIO` it writes the sensitivities to (module
    docstring).  Returns the :class:`simcore.kernel.records.Outputs`."""
    nscen, nbmax = batch.body_radius.shape
    rows = batch.samp_t.shape[0] if keep else 0
    out = outputs(pos, vel, time, omega=omega, rows=rows, cap=cap, spin=True)
    drivers.run_each(_run_one, batch, out, tan, parallel)
    return out
