"""The event loop: one scenario at a time, a batch of them in parallel.

Each pass of the loop of :func:`_scenario` is the list of stages:

1. forces: gravity plus the control forces active at ``t`` (windows ``[t0, t1)``);
2. contact: normal and friction forces of sustained contacts (``contact.solve``),
   giving every body a constant acceleration;
3. (symplectic only) the velocity kick at a grid time;
4. events: the earliest of the impacts (``collision``), stops, ``v_th``
   crossings and body-body sticks (``integrate``), control window edges,
   ``dt`` grid times where a direction rotates, and the end of the run.
   Over a run of such ``dt`` steps the search is skipped up to a time that
   a bound on the motion proves free of events (:func:`_quiet_time`), so
   the results are those of searching every step;
5. advance every body to that time (``integrate.drift``), writing the
   requested samples on the way;
6. resolve the event (``impulse``), log it, and propagate impulses through
   contacts that the impulse drove together.

Simultaneous events are resolved one at a time in a fixed order (lowest body,
then plane or partner index), so results are deterministic and identical
between serial and parallel runs.  A sample that falls exactly on an event
time reports the state before that event.
"""

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from numba import njit, prange

from . import buffers, contact, impulse, tangent
from .events import EVENT_FIELDS, EVENT_KINDS, EventKind  # noqa: F401  (re-exported)
from .parameter import GROUND_OFFSET, TIME_OFFSET, Parameter
from .collision import (
    SHAPE_SPHERE,
    UNSUPPORTED,
    contact_normal_body_body,
    gap_body_body,
    gap_body_plane,
    toi_body_body,
    toi_body_plane,
)
from .config import GAP_TOL, JIT_PARALLEL, MAX_LOOP, V_CONTACT, V_STOP, jit
from .integrate import INTEGRATOR_SYMPLECTIC, drift, sample, stop_time, vth_crossing

#: The offsets of the measurement set-up that the loop applies (see the
#: docstring of :func:`_scenario`): not material properties but nuisance
#: unknowns, fixed at 0 unless a fit frees them.
PARAMETERS = (
    Parameter("ground_offset", 0.0, (-np.inf, np.inf), "m",
              "height of the real ground above the dataset's ground_z; bodies that start "
              "resting on the nominal ground start resting on the offset one (for offsets "
              "within the reader's 3 mm snap)",
              "body resting on or hitting the ground", "global", GROUND_OFFSET, 1e-3),
    Parameter("time_offset", 0.0, (-np.inf, np.inf), "s",
              "delay of the controls' clock behind the trajectories': a window logged as "
              "[t0, t1) acts over [t0 + time_offset, t1 + time_offset)",
              "control window edge", "global", TIME_OFFSET, 1e-2),
)

#: A segment between events with more samples than this accumulates its
#: trajectory residuals by moments (``tangent.accumulate_segment``), fewer
#: one sample at a time; both give the same sums.
SEGMENT_MOMENTS = 3

# Event kinds of the log (simcore.events), as the plain integers the
# kernels write (an IntEnum constant makes numba compile other overloads).
EV_BODY_BODY = int(EventKind.BODY_BODY)
EV_BODY_WALL = int(EventKind.BODY_WALL)
EV_BODY_GROUND = int(EventKind.BODY_GROUND)
EV_STOP = int(EventKind.STOP)
EV_START = int(EventKind.START)


class Status(NamedTuple):
    """A scenario's outcome: its code (what the kernel returns) and message."""

    code: int
    message: str


STATUS_OK = 0
STATUS_MAX_ITER = 1
STATUS_UNSUPPORTED_PAIR = 2
STATUS_STALLED = 3
#: The scenario statuses, by code.
STATUSES = (
    Status(STATUS_OK, "ok"),
    Status(STATUS_MAX_ITER, "event loop exceeded its iteration limit"),
    Status(STATUS_UNSUPPORTED_PAIR, "a pair of shapes has no contact function"),
    Status(STATUS_STALLED, "too many events at one instant (contact chatter)"),
)
STATUS_MESSAGES = tuple(s.message for s in STATUSES)
assert all(s.code == k for k, s in enumerate(STATUSES))

# Internal event codes of one pass.
_NONE = 0
_IMPACT_PLANE = 1
_IMPACT_BODY = 2
_STOP = 3
_VTH = 4
_STICK = 5

#: Relative normal speed [m/s] under which touching surfaces that are being
#: pulled apart by their accelerations are taken to separate (rounding).
V_ROUND = 1e-12
#: Events at one instant after which a scenario is declared stalled.
MAX_ZERO_STEPS = 100_000


@jit
def _rel_normal(i, j, vel, acc, nrm):
    """Relative normal velocity and acceleration of body j over body i along ``nrm``."""
    un = 0.0
    an = 0.0
    for d in range(3):
        un += (vel[j, d] - vel[i, d]) * nrm[d]
        an += (acc[j, d] - acc[i, d]) * nrm[d]
    return un, an


@jit
def _log(ev_t, ev_kind, ev_a, ev_b, ev_n, ev_jn, ev_jt, ev_dva, ev_dvb, ev_slip,
         count, t, kind, a, b, n, jn, jt, dva, dvb, slip):
    """Append one event if the buffer has room; return the new count."""
    if count < ev_t.shape[0]:
        ev_t[count] = t
        ev_kind[count] = kind
        ev_a[count] = a
        ev_b[count] = b
        for d in range(3):
            ev_n[count, d] = n[d]
            ev_dva[count, d] = dva[d]
            ev_dvb[count, d] = dvb[d]
        ev_jn[count] = jn
        ev_jt[count] = jt
        ev_slip[count] = slip
    return count + 1


@jit
def _horizontal_speed(v):
    return np.sqrt(v[0] * v[0] + v[1] * v[1])


@jit
def _scenario(nb, nw, shape, radius, mass, mat, wall_n, wall_d, wall_mat,
              c_body, c_t0, c_t1, c_force, t_start, t_end, dt, gravity, ground_z,
              params, bb_idx, bw_idx, bg_idx, integrator, samp_t,
              pos, vel, out_pos, out_vel,
              ev_t, ev_kind, ev_a, ev_b, ev_n, ev_jn, ev_jt, ev_dva, ev_dvb, ev_slip, tan):
    """Simulate one scenario in place; returns ``(status, event_count, t)``.

    Arrays (this scenario only): ``shape``, ``radius``, ``mass``, ``mat (nb,)``;
    ``wall_n (nw, 3)``, ``wall_d``, ``wall_mat (nw,)``; controls ``c_body``,
    ``c_t0``, ``c_t1 (nc,)``, ``c_force (nc, 3)``; sample times
    ``samp_t (ns,)`` ascending; state ``pos``, ``vel (nb, 3)`` advanced in
    place; outputs ``out_pos``, ``out_vel (ns, nbmax, 3)`` and the event
    buffers of capacity ``cap``.

    ``tan`` holds the sensitivity arrays (see :mod:`simcore.tangent`):
    directions ``t_param``, ``t_vel``, ``t_ctrl (NT,)``; measured positions
    ``meas (ns, nbmax, 3)`` at the sample times (NaN: missing; zero rows: no
    trajectory loss) and its accumulators ``tr_sse (1,)``, ``tr_grad (NT,)``,
    ``tr_gn (NT, NT)`` (or ``(0, 0)``); the final-state tangents
    ``fin_tpos``, ``fin_tvel (nbmax, 3, NT)``; the event tangents ``ev_tt
    (cap, NT)``, ``ev_tdva``, ``ev_tdvb (cap, 3, NT)``; ``signal (NT,)`` and
    ``nondiff (1,)``.  With ``NT = 0`` only the trajectory loss is computed.

    The global offsets of ``params`` (see :mod:`simcore.params`) act here:
    the ground is the plane ``z = ground_z + params[GROUND_OFFSET]``, a body
    that starts resting on the nominal plane ``z = ground_z`` starts resting
    on that one, and control window ``q`` acts over ``[c_t0[q] + lag,
    c_t1[q] + lag)`` with ``lag = params[TIME_OFFSET]``.  Their tangents: a
    resting start has ``d z / d ground_offset = 1``, a ground impact's time
    moves with the plane (``tangent.impact_plane_time``), and a window edge
    with the lag (``d t_edge / d lag = 1``).
    """
    npl = nw + 1
    nc = c_body.shape[0]
    ns = samp_t.shape[0]

    # Scratch in two buffers (float and bool) carved into views: a
    # scenario's set-up costs two allocations, not thirty.
    nf = 4 * npl + 5 * nb + 2 * nb * npl + 2 * nb * nb + 6 * nb * 3 + 6 * 3
    fbuf = np.zeros(nf)
    off = 0
    plane_n = fbuf[off:off + 3 * npl].reshape((npl, 3))
    off += 3 * npl
    plane_d = fbuf[off:off + npl]
    off += npl
    inv_m = fbuf[off:off + nb]
    g_mu_s = fbuf[off + nb:off + 2 * nb]
    g_mu_k = fbuf[off + 2 * nb:off + 3 * nb]
    g_vth = fbuf[off + 3 * nb:off + 4 * nb]
    g_e = fbuf[off + 4 * nb:off + 5 * nb]
    off += 5 * nb
    pl_mu = fbuf[off:off + nb * npl].reshape((nb, npl))
    pl_e = fbuf[off + nb * npl:off + 2 * nb * npl].reshape((nb, npl))
    off += 2 * nb * npl
    b_mu = fbuf[off:off + nb * nb].reshape((nb, nb))
    b_e = fbuf[off + nb * nb:off + 2 * nb * nb].reshape((nb, nb))
    off += 2 * nb * nb
    start_dir = fbuf[off:off + 3 * nb].reshape((nb, 3))
    force = fbuf[off + 3 * nb:off + 6 * nb].reshape((nb, 3))
    free_acc = fbuf[off + 6 * nb:off + 9 * nb].reshape((nb, 3))
    acc = fbuf[off + 9 * nb:off + 12 * nb].reshape((nb, 3))
    dacc = fbuf[off + 12 * nb:off + 15 * nb].reshape((nb, 3))
    off += 18 * nb
    nrm = fbuf[off:off + 3]
    dva = fbuf[off + 3:off + 6]
    dvb = fbuf[off + 6:off + 9]
    zero3 = fbuf[off + 9:off + 12]
    rel = fbuf[off + 12:off + 15]
    at = fbuf[off + 15:off + 18]
    bbuf = np.zeros(nb * npl + nb * nb + 6 * nb, dtype=np.bool_)
    plane_contact = bbuf[:nb * npl].reshape((nb, npl))
    body_contact = bbuf[nb * npl:nb * npl + nb * nb].reshape((nb, nb))
    boff = nb * npl + nb * nb
    resting = bbuf[boff:boff + nb]
    starting = bbuf[boff + nb:boff + 2 * nb]
    started = bbuf[boff + 2 * nb:boff + 3 * nb]
    above = bbuf[boff + 3 * nb:boff + 4 * nb]
    work = bbuf[boff + 4 * nb:boff + 5 * nb]

    # Sensitivities: tangents of the state after the last event (see tangent.py).
    (t_param, t_vel, t_ctrl, meas, tr_sse, tr_grad, tr_gn, fin_tpos, fin_tvel,
     ev_tt, ev_tdva, ev_tdvb, signal, nondiff) = tan
    nt = t_param.shape[0]
    has_meas = ns > 0 and meas.shape[0] == ns
    tbuf = np.zeros(5 * nb * 3 * nt + 8 * nt)
    tpos = tbuf[:3 * nb * nt].reshape((nb, 3, nt))
    tvel = tbuf[3 * nb * nt:6 * nb * nt].reshape((nb, 3, nt))
    tacc = tbuf[6 * nb * nt:9 * nb * nt].reshape((nb, 3, nt))
    tfa = tbuf[9 * nb * nt:12 * nb * nt].reshape((nb, 3, nt))
    tsamp = tbuf[12 * nb * nt:15 * nb * nt].reshape((nb, 3, nt))
    toff = 15 * nb * nt
    ttau = tbuf[toff:toff + nt]
    ds = tbuf[toff + nt:toff + 2 * nt]
    tdva = tbuf[toff + 2 * nt:toff + 5 * nt].reshape((3, nt))
    tdvb = tbuf[toff + 5 * nt:toff + 8 * nt].reshape((3, nt))
    pdir = np.full(params.shape[0], -1, np.int64)
    for p in range(nt):
        if t_param[p] >= 0:
            pdir[t_param[p]] = p
    # The global offsets of the measurement set-up (see params.py).
    ground = ground_z + params[GROUND_OFFSET]
    lag = params[TIME_OFFSET]
    p_ground = pdir[GROUND_OFFSET]
    p_lag = pdir[TIME_OFFSET]
    # Everything the impulse tangents need, in one tuple (see _impact_plane).
    tg = (tpos, tvel, tdva, tdvb, ttau, pdir, signal, ev_tt, ev_tdva, ev_tdvb, mat,
          wall_mat, bg_idx, bw_idx, bb_idx)
    nd = 0
    if nt > 0:
        tangent.seed(nb, t_vel, tvel)
        if integrator == INTEGRATOR_SYMPLECTIC:
            nd |= tangent.ND_SYMPLECTIC

    # Planes: row 0 is the ground z = ground_z + ground_offset, then the walls.
    plane_n[0, 2] = 1.0
    plane_d[0] = ground
    if ground != ground_z:
        # A body resting on the nominal ground rests on the offset one.
        for i in range(nb):
            if abs(gap_body_plane(shape[i], pos[i], radius[i], plane_n[0], ground_z)) <= GAP_TOL:
                pos[i, 2] += ground - ground_z
    for k in range(nw):
        for d in range(3):
            plane_n[k + 1, d] = wall_n[k, d]
        plane_d[k + 1] = wall_d[k]

    # Coefficients through the material tables (see params.py).
    for i in range(nb):
        inv_m[i] = 1.0 / mass[i]
        g_mu_s[i] = params[bg_idx[mat[i], 0]]
        g_mu_k[i] = params[bg_idx[mat[i], 1]]
        g_vth[i] = params[bg_idx[mat[i], 2]]
        g_e[i] = params[bg_idx[mat[i], 3]]
        pl_e[i, 0] = g_e[i]  # pl_mu[:, 0] stays unused: the ground's mu follows its speed regime
        for k in range(nw):
            pl_mu[i, k + 1] = params[bw_idx[mat[i], wall_mat[k], 0]]
            pl_e[i, k + 1] = params[bw_idx[mat[i], wall_mat[k], 1]]
        for j in range(nb):
            b_mu[i, j] = params[bb_idx[mat[i], mat[j], 0]]
            b_e[i, j] = params[bb_idx[mat[i], mat[j], 1]]

    # Contacts present at the start: touching surfaces without a fast approach.
    for i in range(nb):
        for k in range(npl):
            g = gap_body_plane(shape[i], pos[i], radius[i], plane_n[k], plane_d[k])
            vn = vel[i, 0] * plane_n[k, 0] + vel[i, 1] * plane_n[k, 1] + vel[i, 2] * plane_n[k, 2]
            if g <= GAP_TOL and abs(vn) <= V_CONTACT:
                plane_contact[i, k] = True
                for d in range(3):
                    vel[i, d] -= vn * plane_n[k, d]
                tangent.project_plane(i, plane_n[k], tvel)
                if k == 0:
                    pos[i, 2] = ground + radius[i]
        if plane_contact[i, 0]:
            if p_ground >= 0:
                # Resting on the ground: its height moves with the plane.
                tpos[i, 2, p_ground] = 1.0
                signal[p_ground] += 1
            if _horizontal_speed(vel[i]) <= V_STOP:
                vel[i, 0] = 0.0
                vel[i, 1] = 0.0
                tvel[i, :2] = 0.0
                resting[i] = True
            above[i] = _horizontal_speed(vel[i]) >= g_vth[i]
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

    t = t_start
    ks = 0
    while ks < ns and samp_t[ks] <= t:
        sample(nb, pos, vel, acc, 0.0, out_pos[ks], out_vel[ks])
        if has_meas:
            _measure(nb, vel, acc, 0.0, tpos, tvel, tacc, ttau, tsamp, out_pos[ks],
                     meas[ks], tr_sse, tr_grad, tr_gn)
        ks += 1

    n_ev = 0
    status = STATUS_OK
    need_solve = True
    horizon = t
    zero_steps = 0
    # Through a run of dt steps where a direction rotates, no event can occur
    # before ``quiet_until`` (:func:`_quiet_time`): the search is skipped there.
    quiet_until = -np.inf
    grid_step = False
    for _loop in range(MAX_LOOP):
        if t >= t_end:
            break
        # Grid time after t (for symplectic kicks and rotating directions).
        kgrid = np.floor((t - t_start) / dt)
        grid_next = t_start + (kgrid + 1.0) * dt
        if grid_next <= t:
            grid_next = t_start + (kgrid + 2.0) * dt

        if need_solve:
            # Stage 1: forces active at t and the next window edge.
            next_edge = t_end
            window_edge = False
            for i in range(nb):
                for d in range(3):
                    force[i, d] = 0.0
            for q in range(nc):
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
            if nt > 0:
                tangent.free_acc(nb, t, lag, inv_m, c_body, c_t0, c_t1, t_ctrl, tfa)
                nd |= _general_contacts(nb, npl, plane_contact, body_contact)
            # Stage 2: sustained contacts.
            h_dir = 0.0
            for _attempt in range(2):
                rotating = contact.solve(nb, npl, mass, pos, vel, free_acc, plane_n,
                                         pl_mu, g_mu_s, g_mu_k, above, plane_contact,
                                         body_contact, b_mu, resting, starting,
                                         start_dir, acc, started, h_dir)
                for i in range(nb):
                    if started[i]:
                        n_ev = _log(ev_t, ev_kind, ev_a, ev_b, ev_n, ev_jn, ev_jt,
                                    ev_dva, ev_dvb, ev_slip, n_ev, t, EV_START, i, -1,
                                    start_dir[i], 0.0, 0.0, zero3, zero3, -1)
                        tdva[:] = 0.0
                        _log_tangent(ev_tt, ev_tdva, ev_tdvb, n_ev, ttau, tdva, tdva)
                        above[i] = False
                if not rotating or integrator == INTEGRATOR_SYMPLECTIC:
                    break
                # Directions rotate: step dt with the implicit direction.
                h_dir = min(grid_next, t_end) - t
            if nt > 0:
                _acc_tangent(nb, mat, vel, free_acc, g_mu_s, g_mu_k, bg_idx, pdir, above,
                             plane_contact, resting, starting, h_dir, tvel, tfa, ttau,
                             tacc, signal)
            if integrator == INTEGRATOR_SYMPLECTIC:
                # Stage 3: kick v' = v + a dt; a ground slide never reverses.
                h_kick = min(grid_next, t_end) - t
                for i in range(nb):
                    vx = vel[i, 0]
                    vy = vel[i, 1]
                    for d in range(3):
                        vel[i, d] += acc[i, d] * h_kick
                        dacc[i, d] = 0.0
                    if plane_contact[i, 0] and not starting[i] and (vx != 0.0 or vy != 0.0):
                        if vel[i, 0] * vx + vel[i, 1] * vy <= 0.0:
                            dva[0] = -vel[i, 0]
                            dva[1] = -vel[i, 1]
                            dva[2] = 0.0
                            vel[i, 0] = 0.0
                            vel[i, 1] = 0.0
                            resting[i] = True
                            n_ev = _log(ev_t, ev_kind, ev_a, ev_b, ev_n, ev_jn, ev_jt,
                                        ev_dva, ev_dvb, ev_slip, n_ev, t, EV_STOP, i, -1,
                                        zero3, 0.0, 0.0, dva, zero3, -1)
                    starting[i] = False
                    if plane_contact[i, 0]:
                        above[i] = _horizontal_speed(vel[i]) >= g_vth[i]
                horizon = min(grid_next, t_end)
            else:
                for i in range(nb):
                    for d in range(3):
                        dacc[i, d] = acc[i, d]
                horizon = next_edge
                if rotating and grid_next < horizon:
                    horizon = grid_next
            grid_step = integrator != INTEGRATOR_SYMPLECTIC and rotating and horizon == grid_next
            for i in range(nb):
                if started[i]:
                    grid_step = False
            if not grid_step:
                quiet_until = -np.inf
            need_solve = False

        # Stage 4: the earliest event within the horizon.
        h = horizon - t
        s_best = h
        ev_code = _NONE
        ev_i = -1
        ev_j = -1
        quiet = grid_step and horizon <= quiet_until
        if integrator != INTEGRATOR_SYMPLECTIC and not quiet:
            for i in range(nb):
                if resting[i]:
                    continue
                in_plane = False
                for k in range(npl):
                    if plane_contact[i, k]:
                        in_plane = True
                if in_plane:
                    s = stop_time(vel[i], dacc[i], s_best)
                    if s < s_best:
                        s_best = s
                        ev_code = _STOP
                        ev_i = i
                # Searched whatever the coefficients: with mu_s = mu_k the
                # crossing changes no force, but it splits the segment there
                # (and d/d mu_s is the share of the slide below v_th), and
                # the split must not depend on whether sensitivities are
                # asked for.
                if plane_contact[i, 0]:
                    s = vth_crossing(vel[i], dacc[i], g_vth[i], above[i], s_best)
                    if s < s_best:
                        s_best = s
                        ev_code = _VTH
                        ev_i = i
                for j in range(i + 1, nb):
                    if body_contact[i, j] and contact_normal_body_body(
                            shape[i], shape[j], pos[i], pos[j], nrm):
                        # Relative tangential velocity of the contact.
                        un, an = _rel_normal(i, j, vel, dacc, nrm)
                        for d in range(3):
                            rel[d] = (vel[j, d] - vel[i, d]) - un * nrm[d]
                        for d in range(3):
                            at[d] = (dacc[j, d] - dacc[i, d]) - an * nrm[d]
                        if rel[0] ** 2 + rel[1] ** 2 + rel[2] ** 2 <= V_STOP * V_STOP:
                            continue  # not sliding
                        s = stop_time(rel, at, s_best)
                        if s < s_best:
                            s_best = s
                            ev_code = _STICK
                            ev_i = i
                            ev_j = j
        for i in range(0 if quiet else nb):
            for k in range(npl):
                if plane_contact[i, k]:
                    continue
                g = gap_body_plane(shape[i], pos[i], radius[i], plane_n[k], plane_d[k])
                if abs(g) <= GAP_TOL:
                    vn = (vel[i, 0] * plane_n[k, 0] + vel[i, 1] * plane_n[k, 1]
                          + vel[i, 2] * plane_n[k, 2])
                    an = (dacc[i, 0] * plane_n[k, 0] + dacc[i, 1] * plane_n[k, 1]
                          + dacc[i, 2] * plane_n[k, 2])
                    if an > 0.0 and vn > -V_ROUND:
                        continue  # touching and pulled apart: separates
                s = toi_body_plane(shape[i], pos[i], vel[i], dacc[i], radius[i],
                                   plane_n[k], plane_d[k], s_best)
                if s == UNSUPPORTED:
                    return STATUS_UNSUPPORTED_PAIR, n_ev, t
                if s < s_best:
                    s_best = s
                    ev_code = _IMPACT_PLANE
                    ev_i = i
                    ev_j = k
            for j in range(i + 1, nb):
                if body_contact[i, j]:
                    continue
                g = gap_body_body(shape[i], shape[j], pos[i], radius[i], pos[j], radius[j])
                if abs(g) <= GAP_TOL and contact_normal_body_body(
                        shape[i], shape[j], pos[i], pos[j], nrm):
                    un, an = _rel_normal(i, j, vel, dacc, nrm)
                    if an > 0.0 and un > -V_ROUND:
                        continue
                s = toi_body_body(shape[i], shape[j], pos[i], vel[i], dacc[i], radius[i],
                                  pos[j], vel[j], dacc[j], radius[j], s_best)
                if s == UNSUPPORTED:
                    return STATUS_UNSUPPORTED_PAIR, n_ev, t
                if s < s_best:
                    s_best = s
                    ev_code = _IMPACT_BODY
                    ev_i = i
                    ev_j = j

        if grid_step and not quiet and ev_code == _NONE:
            # The bound holds while the forces do: up to the next window edge.
            quiet_until = min(t + _quiet_time(nb, npl, shape, pos, vel, dacc, free_acc,
                                              radius, plane_n, plane_d, plane_contact,
                                              body_contact, resting, above, g_mu_s, g_mu_k,
                                              g_vth), next_edge)
        elif ev_code != _NONE:
            quiet_until = -np.inf
        # Stage 5: advance to the event, writing the samples passed.
        t_new = horizon if ev_code == _NONE else t + s_best
        if ev_code != _NONE and t_new > horizon:
            t_new = horizon
        s_seg = t_new - t
        if nt > 0:
            nd |= _event_time_tangent(ev_code, ev_i, ev_j, s_seg, mat, pos, vel, dacc,
                                      plane_n, g_vth, bg_idx, pdir, tpos, tvel, tacc,
                                      ttau, ds, signal)
            if ev_code == _NONE and window_edge and t_new == next_edge and p_lag >= 0:
                # A window edge moves with the controls' clock: d t_edge / d lag = 1.
                ds[p_lag] += 1.0
                signal[p_lag] += 1
        k0 = ks
        while ks < ns and samp_t[ks] <= t_new:
            sample(nb, pos, vel, dacc, samp_t[ks] - t, out_pos[ks], out_vel[ks])
            ks += 1
        if has_meas and ks > k0:
            if ks - k0 > SEGMENT_MOMENTS:
                tangent.accumulate_segment(nb, vel, dacc, t, samp_t, k0, ks, tpos, tvel, tacc,
                                           ttau, out_pos, meas, tr_sse, tr_grad, tr_gn)
            else:
                for k in range(k0, ks):
                    _measure(nb, vel, dacc, samp_t[k] - t, tpos, tvel, tacc, ttau, tsamp,
                             out_pos[k], meas[k], tr_sse, tr_grad, tr_gn)
        drift(nb, pos, vel, dacc, s_seg)
        if nt > 0:
            tangent.drift(nb, vel, dacc, s_seg, ds, tpos, tvel, tacc, ttau)
        if t_new == t:
            zero_steps += 1
            if zero_steps > MAX_ZERO_STEPS:
                return STATUS_STALLED, n_ev, t
        else:
            zero_steps = 0
        t = t_new

        # Stage 6: resolve the event.
        if ev_code == _NONE:
            need_solve = True
            continue
        if integrator != INTEGRATOR_SYMPLECTIC:
            need_solve = True
        for q in range(nb):
            work[q] = False
        if ev_code == _IMPACT_PLANE:
            n_ev = _impact_plane(ev_i, ev_j, n_ev, t, pos, vel, acc, radius, mass,
                                 ground, plane_n, pl_mu, pl_e, g_mu_s, g_mu_k, g_vth,
                                 plane_contact, resting, starting, above, dva, dvb,
                                 ev_t, ev_kind, ev_a, ev_b, ev_n, ev_jn, ev_jt, ev_dva,
                                 ev_dvb, ev_slip, False, tg)
            work[ev_i] = True
        elif ev_code == _IMPACT_BODY:
            n_ev = _impact_body(ev_i, ev_j, n_ev, t, shape, pos, vel, acc, inv_m,
                                b_mu, b_e, body_contact, nrm, dva, dvb,
                                ev_t, ev_kind, ev_a, ev_b, ev_n, ev_jn, ev_jt, ev_dva,
                                ev_dvb, ev_slip, tg)
            work[ev_i] = True
            work[ev_j] = True
        elif ev_code == _STOP:
            # The slide has reached zero speed along its (frozen) direction:
            # the body stops.  (Where a push rotates the direction, any
            # sideways velocity is dropped too: first order in dt there.)
            for d in range(3):
                dva[d] = -vel[ev_i, d]
                vel[ev_i, d] = 0.0
                for p in range(nt):
                    tdva[d, p] = -tvel[ev_i, d, p]
                    tvel[ev_i, d, p] = 0.0
            if plane_contact[ev_i, 0]:
                resting[ev_i] = True
                starting[ev_i] = False
                above[ev_i] = False
                n_ev = _log(ev_t, ev_kind, ev_a, ev_b, ev_n, ev_jn, ev_jt, ev_dva,
                            ev_dvb, ev_slip, n_ev, t, EV_STOP, ev_i, -1, zero3, 0.0,
                            0.0, dva, zero3, -1)
                tdvb[:] = 0.0
                _log_tangent(ev_tt, ev_tdva, ev_tdvb, n_ev, ttau, tdva, tdvb)
            continue
        elif ev_code == _VTH:
            above[ev_i] = not above[ev_i]
            continue
        elif ev_code == _STICK:
            if nt > 0:
                nd |= tangent.ND_STICK
            # Remove the relative tangential velocity, conserving momentum.
            contact_normal_body_body(shape[ev_i], shape[ev_j], pos[ev_i], pos[ev_j], nrm)
            un = 0.0
            for d in range(3):
                un += (vel[ev_j, d] - vel[ev_i, d]) * nrm[d]
            wsum = inv_m[ev_i] + inv_m[ev_j]
            for d in range(3):
                ut = (vel[ev_j, d] - vel[ev_i, d]) - un * nrm[d]
                vel[ev_j, d] -= ut * inv_m[ev_j] / wsum
                vel[ev_i, d] += ut * inv_m[ev_i] / wsum
            continue

        # Impulses propagate through contacts the impact drove together.
        n_ev = _propagate(nb, npl, n_ev, t, shape, pos, vel, acc, radius, mass, inv_m,
                          ground, plane_n, pl_mu, pl_e, g_mu_s, g_mu_k, g_vth, b_mu,
                          b_e, plane_contact, body_contact, resting, starting, above,
                          work, nrm, dva, dvb, ev_t, ev_kind, ev_a, ev_b, ev_n, ev_jn,
                          ev_jt, ev_dva, ev_dvb, ev_slip, tg)
        if nt > 0:
            _contact_tangent(nb, npl, plane_n, plane_contact, resting, tvel)
    else:
        status = STATUS_MAX_ITER

    while ks < ns:
        sample(nb, pos, vel, acc, 0.0, out_pos[ks], out_vel[ks])
        if has_meas:
            _measure(nb, vel, acc, 0.0, tpos, tvel, tacc, ttau, tsamp, out_pos[ks],
                     meas[ks], tr_sse, tr_grad, tr_gn)
        ks += 1
    if nt > 0:
        # The state at the fixed end time (tau = t only moves if an event ended the run).
        for i in range(nb):
            for d in range(3):
                for p in range(nt):
                    fin_tpos[i, d, p] = tpos[i, d, p] - vel[i, d] * ttau[p]
                    fin_tvel[i, d, p] = tvel[i, d, p] - acc[i, d] * ttau[p]
        nondiff[0] = nd
    return status, n_ev, t


#: Relative safety margin of :func:`_quiet_time`'s bound.
QUIET_MARGIN = 1e-6


@jit
def _first_reach(g0, rate, a_max):
    """Smallest ``s >= 0`` at which ``g0 + rate s - a_max s^2 / 2`` can reach 0
    (``g0 > 0``, ``a_max >= 0``), or ``inf``."""
    if a_max > 0.0:
        return (rate + np.sqrt(rate * rate + 2.0 * a_max * g0)) / a_max
    if rate < 0.0:
        return -g0 / rate
    return np.inf


@jit
def _quiet_time(nb, npl, shape, pos, vel, acc, free_acc, radius, plane_n, plane_d,
                plane_contact, body_contact, resting, above, g_mu_s, g_mu_k, g_vth):
    """A time ``s`` from now within which no event of the search can occur
    while the forces stay as they are (0 when no such bound is at hand).

    Over dt steps where sliding directions rotate, every body's acceleration
    keeps a bounded size ``A``: ``|a_free,h| + mu |a_free,z|`` sliding on the
    ground (``mu`` the larger coefficient), ``|a|`` in free flight (constant),
    0 at rest.  So its velocity stays within ``A s`` of the current one and
    its position within ``A s^2 / 2`` of the straight line: a plane gap
    ``g0`` cannot close before ``g0 + (n . v) s - A s^2 / 2`` reaches 0, a
    sphere pair before ``gap - |v_j - v_i| s - (A_i + A_j) s^2 / 2`` does,
    a slide cannot stop before ``|v| / A`` nor cross ``v_th`` before
    ``| |v| - v_th | / A``.  Sustained wall or body contacts, other shapes
    than spheres and gaps within ``1e3 GAP_TOL`` give 0 (search every step).
    The bound is shrunk by ``QUIET_MARGIN``, far above rounding.
    """
    s_min = np.inf
    amax = np.empty(nb)
    for i in range(nb):
        if shape[i] != SHAPE_SPHERE:
            return 0.0
        for k in range(1, npl):
            if plane_contact[i, k]:
                return 0.0
        for j in range(nb):
            if j != i and body_contact[i, j]:
                return 0.0
        if resting[i]:
            amax[i] = 0.0
        elif plane_contact[i, 0]:
            mu = max(g_mu_s[i], g_mu_k[i])
            amax[i] = (np.sqrt(free_acc[i, 0] ** 2 + free_acc[i, 1] ** 2)
                       + mu * abs(free_acc[i, 2]))
            speed = np.sqrt(vel[i, 0] ** 2 + vel[i, 1] ** 2)
            if amax[i] > 0.0:
                s_min = min(s_min, speed / amax[i])
                margin = speed - g_vth[i] if above[i] else g_vth[i] - speed
                if margin <= 0.0:
                    return 0.0
                s_min = min(s_min, margin / amax[i])
        else:
            amax[i] = np.sqrt(acc[i, 0] ** 2 + acc[i, 1] ** 2 + acc[i, 2] ** 2)
    for i in range(nb):
        for k in range(npl):
            if plane_contact[i, k]:
                continue
            g0 = gap_body_plane(shape[i], pos[i], radius[i], plane_n[k], plane_d[k])
            if g0 <= 1e3 * GAP_TOL:
                return 0.0
            rate = vel[i, 0] * plane_n[k, 0] + vel[i, 1] * plane_n[k, 1] + vel[i, 2] * plane_n[k, 2]
            s_min = min(s_min, _first_reach(g0, rate, amax[i]))
        for j in range(i + 1, nb):
            g0 = gap_body_body(shape[i], shape[j], pos[i], radius[i], pos[j], radius[j])
            if g0 <= 1e3 * GAP_TOL:
                return 0.0
            w = np.sqrt((vel[j, 0] - vel[i, 0]) ** 2 + (vel[j, 1] - vel[i, 1]) ** 2
                        + (vel[j, 2] - vel[i, 2]) ** 2)
            s_min = min(s_min, _first_reach(g0, -w, amax[i] + amax[j]))
    return s_min * (1.0 - QUIET_MARGIN)


@jit
def _measure(nb, vel, acc, s, tpos, tvel, tacc, ttau, tsamp, out_pos_s, meas_s, tr_sse,
             tr_grad, tr_gn):
    """Trajectory residuals of one sample (``s`` after the last event) and their tangents."""
    if ttau.shape[0] > 0:
        tangent.sample(nb, vel, acc, s, tpos, tvel, tacc, ttau, tsamp)
    tangent.accumulate(nb, out_pos_s, meas_s, tsamp, tr_sse, tr_grad, tr_gn)


@jit
def _log_tangent(ev_tt, ev_tdva, ev_tdvb, count, ttau, tdva, tdvb):
    """Store the tangents of the event just logged (``count`` is the new count)."""
    k = count - 1
    if k < ev_tt.shape[0]:
        for p in range(ttau.shape[0]):
            ev_tt[k, p] = ttau[p]
            for d in range(3):
                ev_tdva[k, d, p] = tdva[d, p]
                ev_tdvb[k, d, p] = tdvb[d, p]


@jit
def _general_contacts(nb, npl, plane_contact, body_contact):
    """``ND_GENERAL`` if a body has a sustained wall or body contact, else 0."""
    for i in range(nb):
        for k in range(1, npl):
            if plane_contact[i, k]:
                return tangent.ND_GENERAL
        for j in range(nb):
            if body_contact[i, j]:
                return tangent.ND_GENERAL
    return 0


@jit
def _acc_tangent(nb, mat, vel, free_acc, g_mu_s, g_mu_k, bg_idx, pdir, above,
                 plane_contact, resting, starting, h_dir, tvel, tfa, ttau, tacc, signal):
    """Tangent of the accelerations just solved: free flight, static hold, or
    a ground slide (the coefficient of the body's speed regime)."""
    for i in range(nb):
        if not plane_contact[i, 0]:
            tacc[i] = tfa[i]
        elif resting[i]:
            tacc[i] = 0.0
        else:
            mu = g_mu_k[i] if above[i] else g_mu_s[i]
            p_mu = pdir[bg_idx[mat[i], 1 if above[i] else 0]]
            tangent.ground_slide(i, vel[i], free_acc[i], mu, starting[i], h_dir, tvel, tfa,
                                 ttau, p_mu, tacc, signal)


@jit
def _event_time_tangent(ev_code, ev_i, ev_j, s, mat, pos, vel, acc, plane_n, g_vth, bg_idx,
                        pdir, tpos, tvel, tacc, ttau, ds, signal):
    """``ds``: the tangent of the segment length (implicit function theorem);
    returns the nondiff flags it raises."""
    if ev_code == _IMPACT_PLANE:
        # The ground's height is the offset's direction; the walls are fixed.
        p_d = pdir[GROUND_OFFSET] if ev_j == 0 else -1
        if not tangent.impact_plane_time(ev_i, plane_n[ev_j], s, vel, acc, tpos, tvel,
                                         tacc, p_d, ds):
            return tangent.ND_GRAZING
        if p_d >= 0:
            signal[p_d] += 1
    elif ev_code == _IMPACT_BODY:
        if not tangent.impact_body_time(ev_i, ev_j, s, pos, vel, acc, tpos, tvel, tacc, ds):
            return tangent.ND_GRAZING
    elif ev_code == _STOP:
        tangent.stop_time(ev_i, vel, acc, tvel, tacc, ds)
    elif ev_code == _VTH:
        tangent.vth_time(ev_i, s, vel, acc, tvel, tacc, g_vth[ev_i],
                         pdir[bg_idx[mat[ev_i], 2]], ds, signal)
    else:
        # No event before the horizon (a fixed time), or a stick (flagged).
        tangent.fixed_time(ttau, ds)
    return 0


@jit
def _contact_tangent(nb, npl, plane_n, plane_contact, resting, tvel):
    """Keep the tangents on the active planes, and at rest for resting bodies."""
    for i in range(nb):
        for k in range(npl):
            if plane_contact[i, k]:
                tangent.project_plane(i, plane_n[k], tvel)
        if plane_contact[i, 0] and resting[i]:
            tvel[i, :2] = 0.0


@jit
def _impact_plane(i, k, n_ev, t, pos, vel, acc, radius, mass, ground_z, plane_n, pl_mu,
                  pl_e, g_mu_s, g_mu_k, g_vth, plane_contact, resting, starting, above,
                  dva, dvb, ev_t, ev_kind, ev_a, ev_b, ev_n, ev_jn, ev_jt, ev_dva,
                  ev_dvb, ev_slip, propagated, tg):
    """Impact of body i on plane k (0 = ground); logs it and returns the count.

    ``propagated``: the plane was already in contact and another impulse drove
    the body into it.  Newton's law per contact gives the rebound ``-e`` times
    the approach speed *before* the event, which was zero: the response is
    plastic and the contact stays.

    ``tg`` holds the tangents (``_scenario``); they go through the same
    impulse, with the same e, mu and sustained decision, and are logged.
    """
    (tpos, tvel, tdva, tdvb, ttau, pdir, signal, ev_tt, ev_tdva, ev_tdvb, mat, wall_mat,
     bg_idx, bw_idx, bb_idx) = tg
    n = plane_n[k]
    vn = vel[i, 0] * n[0] + vel[i, 1] * n[1] + vel[i, 2] * n[2]
    an = acc[i, 0] * n[0] + acc[i, 1] * n[1] + acc[i, 2] * n[2]
    # Zeno guard: a slow approach while pressed becomes sustained contact.
    sustained = propagated or (-vn < V_CONTACT and an <= 0.0)
    e = 0.0 if sustained else pl_e[i, k]
    if k == 0:
        fast = _horizontal_speed(vel[i]) >= g_vth[i]
        mu = g_mu_k[i] if fast else g_mu_s[i]
        p_mu = pdir[bg_idx[mat[i], 1 if fast else 0]]
        p_e = pdir[bg_idx[mat[i], 3]]
    else:
        mu = pl_mu[i, k]
        p_mu = pdir[bw_idx[mat[i], wall_mat[k - 1], 0]]
        p_e = pdir[bw_idx[mat[i], wall_mat[k - 1], 1]]
    if tvel.shape[2] > 0:  # tangents first: they read the velocity before the impulse
        tangent.impact_plane(i, vel[i], n, e, mu, sustained, p_e, p_mu, tvel, tdva, signal)
        tdvb[:] = 0.0
    jn, jt, slipped = impulse.body_plane(vel[i], n, e, mu, dva)
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
    n_ev = _log(ev_t, ev_kind, ev_a, ev_b, ev_n, ev_jn, ev_jt, ev_dva, ev_dvb, ev_slip,
                n_ev, t, kind, i, k - 1, n, jn * mass[i], jt * mass[i], dva, dvb,
                1 if slipped else 0)
    _log_tangent(ev_tt, ev_tdva, ev_tdvb, n_ev, ttau, tdva, tdvb)
    _after_velocity_change(i, vel, plane_contact, resting, starting, above, g_vth)
    return n_ev


@jit
def _impact_body(i, j, n_ev, t, shape, pos, vel, acc, inv_m, b_mu, b_e, body_contact,
                 nrm, dva, dvb, ev_t, ev_kind, ev_a, ev_b, ev_n, ev_jn, ev_jt, ev_dva,
                 ev_dvb, ev_slip, tg):
    """Impact between bodies i < j at the time-of-impact configuration
    (tangents as in :func:`_impact_plane`)."""
    (tpos, tvel, tdva, tdvb, ttau, pdir, signal, ev_tt, ev_tdva, ev_tdvb, mat, wall_mat,
     bg_idx, bw_idx, bb_idx) = tg
    contact_normal_body_body(shape[i], shape[j], pos[i], pos[j], nrm)
    un, an = _rel_normal(i, j, vel, acc, nrm)
    sustained = -un < V_CONTACT and an <= 0.0
    e = 0.0 if sustained else b_e[i, j]
    if tvel.shape[2] > 0:
        tangent.impact_body(i, j, vel[i], vel[j], pos, inv_m[i], inv_m[j], e, b_mu[i, j],
                            sustained, pdir[bb_idx[mat[i], mat[j], 1]],
                            pdir[bb_idx[mat[i], mat[j], 0]], tpos, tvel, tdva, tdvb, signal)
    jn, jt, slipped = impulse.body_body(vel[i], vel[j], inv_m[i], inv_m[j], nrm, e,
                                        b_mu[i, j], dva, dvb)
    if sustained:
        body_contact[i, j] = True
        body_contact[j, i] = True
        un = 0.0
        for d in range(3):
            un += (vel[j, d] - vel[i, d]) * nrm[d]
        _zero_normal_velocity(i, j, vel, inv_m, nrm, un)
    n_ev = _log(ev_t, ev_kind, ev_a, ev_b, ev_n, ev_jn, ev_jt, ev_dva, ev_dvb, ev_slip,
                n_ev, t, EV_BODY_BODY, i, j, nrm, jn, jt, dva, dvb, 1 if slipped else 0)
    _log_tangent(ev_tt, ev_tdva, ev_tdvb, n_ev, ttau, tdva, tdvb)
    return n_ev


@jit
def _zero_normal_velocity(i, j, vel, inv_m, nrm, un):
    """Remove the relative normal velocity ``un`` of bodies i, j (momentum kept)."""
    wsum = inv_m[i] + inv_m[j]
    for d in range(3):
        vel[j, d] -= un * nrm[d] * inv_m[j] / wsum
        vel[i, d] += un * nrm[d] * inv_m[i] / wsum


@jit
def _after_velocity_change(i, vel, plane_contact, resting, starting, above, g_vth):
    """Refresh the ground mode flags of body i after an impulse."""
    starting[i] = False
    if plane_contact[i, 0]:
        vh = _horizontal_speed(vel[i])
        resting[i] = vh <= V_STOP
        if resting[i]:
            vel[i, 0] = 0.0
            vel[i, 1] = 0.0
        above[i] = vh >= g_vth[i]
    else:
        resting[i] = False


@jit
def _propagate(nb, npl, n_ev, t, shape, pos, vel, acc, radius, mass, inv_m, ground_z,
               plane_n, pl_mu, pl_e, g_mu_s, g_mu_k, g_vth, b_mu, b_e, plane_contact,
               body_contact, resting, starting, above, work, nrm, dva, dvb, ev_t,
               ev_kind, ev_a, ev_b, ev_n, ev_jn, ev_jt, ev_dva, ev_dvb, ev_slip, tg):
    """Sequential impulses through the contacts of the bodies in ``work``.

    An active contact that now approaches faster than ``V_ROUND`` gets an
    impact impulse (logged): plastic against a plane (see ``_impact_plane``),
    with restitution between bodies (so a Newton's cradle passes the impulse
    along, as sequential impulses do).  One that separates is released, unless
    it separates slower than ``V_CONTACT`` while its accelerations do not pull
    it apart: the mirror of the Zeno guard, the contact stays and that small
    normal velocity is removed.  Passes repeat until nothing changes
    (at most ``4 nb`` passes).

    ``tg`` carries the tangents through the same impulses (see
    :func:`_impact_plane`).
    """
    tvel = tg[1]
    for _pass in range(4 * nb):
        changed = False
        for i in range(nb):
            if not work[i]:
                continue
            work[i] = False
            for k in range(npl):
                if not plane_contact[i, k]:
                    continue
                vn = vel[i, 0] * plane_n[k, 0] + vel[i, 1] * plane_n[k, 1] + vel[i, 2] * plane_n[k, 2]
                if vn < -V_ROUND:
                    plane_contact[i, k] = False
                    n_ev = _impact_plane(i, k, n_ev, t, pos, vel, acc, radius, mass,
                                         ground_z, plane_n, pl_mu, pl_e, g_mu_s, g_mu_k,
                                         g_vth, plane_contact, resting, starting, above,
                                         dva, dvb, ev_t, ev_kind, ev_a, ev_b, ev_n,
                                         ev_jn, ev_jt, ev_dva, ev_dvb, ev_slip, True, tg)
                    changed = True
                    work[i] = True
                elif vn > V_ROUND and (vn >= V_CONTACT or
                                       acc[i, 0] * plane_n[k, 0] + acc[i, 1] * plane_n[k, 1]
                                       + acc[i, 2] * plane_n[k, 2] > 0.0):
                    plane_contact[i, k] = False
                    if k == 0:
                        resting[i] = False
                        starting[i] = False
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
                un, an = _rel_normal(lo, hi, vel, acc, nrm)
                if un < -V_ROUND:
                    body_contact[lo, hi] = False
                    body_contact[hi, lo] = False
                    n_ev = _impact_body(lo, hi, n_ev, t, shape, pos, vel, acc, inv_m,
                                        b_mu, b_e, body_contact, nrm, dva, dvb, ev_t,
                                        ev_kind, ev_a, ev_b, ev_n, ev_jn, ev_jt, ev_dva,
                                        ev_dvb, ev_slip, tg)
                    _after_velocity_change(lo, vel, plane_contact, resting, starting,
                                           above, g_vth)
                    _after_velocity_change(hi, vel, plane_contact, resting, starting,
                                           above, g_vth)
                    work[lo] = True
                    work[hi] = True
                    changed = True
                elif un > V_ROUND and (un >= V_CONTACT or an > 0.0):
                    body_contact[lo, hi] = False
                    body_contact[hi, lo] = False
                else:
                    _zero_normal_velocity(lo, hi, vel, inv_m, nrm, un)
        if not changed:
            break
    for i in range(nb):
        _after_velocity_change(i, vel, plane_contact, resting, starting, above, g_vth)
    return n_ev


@jit
def _run_one(s, body_count, body_shape, body_radius, body_mass, body_mat,
             wall_count, wall_normal, wall_offset, wall_mat,
             ctrl_ptr, ctrl_body, ctrl_t0, ctrl_t1, ctrl_force,
             scen_t_start, scen_t_end, scen_dt, gravity, ground_z,
             params, bb_idx, bw_idx, bg_idx, integrator,
             samp_ptr, samp_t, pos, vel, out_pos, out_vel,
             ev_t, ev_kind, ev_a, ev_b, ev_n, ev_jn, ev_jt, ev_dva, ev_dvb,
             ev_slip, status, ev_count, t_final, t_param, t_vel, t_ctrl, meas, tr_sse,
             tr_grad, tr_gn, fin_tpos, fin_tvel, ev_tt, ev_tdva, ev_tdvb, signal, nondiff):
    """Scenario ``s`` of a batch: slice its arrays and run it (``params``
    holds one row of coefficients for all, or a row per scenario)."""
    nb = body_count[s]
    nw = wall_count[s]
    c0 = ctrl_ptr[s]
    c1 = ctrl_ptr[s + 1]
    k0 = samp_ptr[s]
    k1 = samp_ptr[s + 1]
    prow = s if params.shape[0] > 1 else 0
    if out_pos.shape[0] == 0:
        # Samples not kept: this scenario's own scratch, not one batch-wide array.
        o_pos = np.empty((k1 - k0, nb, 3))
        o_vel = np.empty((k1 - k0, nb, 3))
    else:
        o_pos = out_pos[k0:k1]
        o_vel = out_vel[k0:k1]
    st, ne, tf = _scenario(
        nb, nw, body_shape[s, :nb], body_radius[s, :nb], body_mass[s, :nb],
        body_mat[s, :nb], wall_normal[s, :nw], wall_offset[s, :nw], wall_mat[s, :nw],
        ctrl_body[c0:c1], ctrl_t0[c0:c1], ctrl_t1[c0:c1], ctrl_force[c0:c1],
        scen_t_start[s], scen_t_end[s], scen_dt[s], gravity, ground_z,
        params[prow], bb_idx, bw_idx, bg_idx, integrator, samp_t[k0:k1],
        pos[s, :nb], vel[s, :nb], o_pos, o_vel,
        ev_t[s], ev_kind[s], ev_a[s], ev_b[s], ev_n[s], ev_jn[s], ev_jt[s],
        ev_dva[s], ev_dvb[s], ev_slip[s],
        (t_param, t_vel, t_ctrl, meas[k0:k1], tr_sse[s:s + 1], tr_grad[s], tr_gn[s],
         fin_tpos[s], fin_tvel[s], ev_tt[s], ev_tdva[s], ev_tdvb[s], signal[s],
         nondiff[s:s + 1]))
    status[s] = st
    ev_count[s] = ne
    t_final[s] = tf


@njit(**JIT_PARALLEL)
def _simulate_parallel(args):
    """All scenarios in parallel (``prange``); each writes only its own slices."""
    for s in prange(args[0].shape[0]):
        _run_one(np.int64(s), *args)  # (prange indices are unsigned: one overload)


@jit
def _simulate_serial(args):
    """All scenarios one after the other (the reference for bit-identity)."""
    for s in range(args[0].shape[0]):
        _run_one(s, *args)


@dataclass(frozen=True)
class SimResult:
    """Output of :func:`simulate`, ragged arrays in CSR form.

    Samples: scenario ``s`` owns rows ``samp_ptr[s]:samp_ptr[s+1]`` of
    ``samp_t (M,)``, ``samp_pos`` and ``samp_vel (M, nbody, 3)``.
    ``final`` is the State at each scenario's end time.

    Events: scenario ``s`` owns rows ``event_ptr[s]:event_ptr[s+1]`` of
    ``event_t``, ``event_kind`` (index into ``EVENT_KINDS``), ``event_a``
    (body), ``event_b`` (other body, wall index, or -1 for the ground, stop
    and start), ``event_normal (E, 3)`` (from a to b, or the plane normal; the
    sliding direction for ``start``), ``event_jn``, ``event_jt`` (normal and
    tangential impulse [N s]), ``event_dva``, ``event_dvb (E, 3)`` (velocity
    change of a and b [m/s]) and ``event_slip`` (1 slip, 0 stick, -1 not an
    impact), in time order.

    ``sens`` holds the :class:`Sensitivities` when ``simulate`` was asked for
    them (``directions``) or for the trajectory residuals (``measured``).
    """

    samp_ptr: np.ndarray
    samp_t: np.ndarray
    samp_pos: np.ndarray
    samp_vel: np.ndarray
    final: object
    event_ptr: np.ndarray
    event_t: np.ndarray
    event_kind: np.ndarray
    event_a: np.ndarray
    event_b: np.ndarray
    event_normal: np.ndarray
    event_jn: np.ndarray
    event_jt: np.ndarray
    event_dva: np.ndarray
    event_dvb: np.ndarray
    event_slip: np.ndarray
    sens: object = None

    @property
    def event_count(self):
        return np.diff(self.event_ptr)

    def samples(self, s):
        """``(t, pos, vel)`` of scenario ``s``."""
        a, b = self.samp_ptr[s], self.samp_ptr[s + 1]
        return self.samp_t[a:b], self.samp_pos[a:b], self.samp_vel[a:b]

    def events(self, s):
        """The events of scenario ``s`` as a dict of arrays (``EVENT_FIELDS``)."""
        a, b = self.event_ptr[s], self.event_ptr[s + 1]
        return {f: getattr(self, "event_" + f)[a:b] for f in EVENT_FIELDS}


@dataclass(frozen=True)
class Directions:
    """The ``NT`` directions that sensitivities are taken along.

    Direction ``p`` moves one of: the coefficient ``params[param[p]]``; the
    initial velocity component ``vel[p] = 3 i + d`` of body ``i`` (in every
    scenario that has that body); the force component ``ctrl[p] = 3 q + d`` of
    the ``q``-th control window of each scenario.  Unused entries are -1.
    """

    param: np.ndarray
    vel: np.ndarray
    ctrl: np.ndarray
    labels: tuple

    @property
    def count(self):
        return self.param.shape[0]

    @classmethod
    def build(cls, params=(), velocities=(), controls=(), names=None):
        """From parameter indices, ``(body, dim)`` and ``(control, dim)`` pairs;
        ``names``: the coefficient vector's names (default the global ones)."""
        if names is None:
            from .params import NAMES as names
        rows = ([(int(q), -1, -1, names[q] if q < len(names) else f"param{q}")
                 for q in params]
                + [(-1, 3 * int(i) + int(d), -1, f"v0[{i}].{'xyz'[d]}") for i, d in velocities]
                + [(-1, -1, 3 * int(q) + int(d), f"u[{q}].{'xyz'[d]}") for q, d in controls])
        col = [np.array([r[k] for r in rows], np.int64).reshape(-1) for k in range(3)]
        return cls(col[0], col[1], col[2], tuple(r[3] for r in rows))


NO_DIRECTIONS = Directions(np.zeros(0, np.int64), np.zeros(0, np.int64),
                           np.zeros(0, np.int64), ())


@dataclass(frozen=True)
class Sensitivities:
    """Forward-mode sensitivities of a batch (``NT`` directions, see :mod:`tangent`).

    ``final_pos``, ``final_vel (nscen, nbmax, 3, NT)``: d(state at the end
    time); ``event_t (E, NT)``, ``event_dva``, ``event_dvb (E, 3, NT)``: d of
    each logged event's time and velocity changes (rows as in ``SimResult``);
    ``traj_sse (nscen,)``: the sum of squared position residuals against the
    measured samples, ``traj_grad (nscen, NT)`` = ``J^T r`` and ``traj_gn
    (nscen, NT, NT)`` = ``J^T J`` (symmetric; empty when not asked for);
    ``signal (nscen, NT)``: the events and segments in which each coefficient
    entered directly; ``nondiff (nscen,)``: flags of ``tangent.NONDIFF_REASONS``
    (0: the tangents are exact).
    """

    directions: Directions
    final_pos: np.ndarray
    final_vel: np.ndarray
    event_t: np.ndarray
    event_dva: np.ndarray
    event_dvb: np.ndarray
    traj_sse: np.ndarray
    traj_grad: np.ndarray
    traj_gn: np.ndarray
    signal: np.ndarray
    nondiff: np.ndarray


def _tangent_buffers(model, scen, directions, measured, gauss_newton, cap):
    nscen = scen.shape[0]
    nbmax = model.body_radius.shape[1]
    nt = directions.count
    meas = np.zeros((0, nbmax, 3)) if measured is None else measured
    ng = nt if gauss_newton else 0
    return (directions.param, directions.vel, directions.ctrl, meas,
            np.zeros(nscen), np.zeros((nscen, nt)), np.zeros((nscen, ng, ng)),
            np.zeros((nscen, nbmax, 3, nt)), np.zeros((nscen, nbmax, 3, nt)),
            np.zeros((nscen, cap, nt)), np.zeros((nscen, cap, 3, nt)),
            np.zeros((nscen, cap, 3, nt)), np.zeros((nscen, nt), np.int64),
            np.zeros(nscen, np.int64))


def _sample_csr(model, state, sample_times):
    """Validate per-scenario sample times and pack them as ``(ptr, t)``."""
    nscen = model.nscen
    ptr = np.zeros(nscen + 1, np.int64)
    if sample_times is None:
        return ptr, np.zeros(0)
    if len(sample_times) != nscen:
        raise ValueError(f"sample_times has {len(sample_times)} entries for {nscen} scenarios")
    parts = [np.asarray(ts, dtype=np.float64).reshape(-1) for ts in sample_times]
    ptr[1:] = np.cumsum([p.size for p in parts])
    flat = np.ascontiguousarray(np.concatenate(parts)) if parts else np.zeros(0)
    if flat.size == 0:
        return ptr, flat
    owner = np.repeat(np.arange(nscen), np.diff(ptr))

    def fail(k, what):
        s = int(owner[k])
        name = model.names[s] if model.names else s
        raise ValueError(f"scenario {name!r}: sample time {int(k - ptr[s])} = {flat[k]}: {what}")

    bad = np.flatnonzero(~np.isfinite(flat))
    if bad.size:
        fail(bad[0], "expected a finite number")
    dec = np.flatnonzero((np.diff(flat) < 0) & (owner[1:] == owner[:-1]))
    if dec.size:
        fail(dec[0] + 1, "decreases")
    out = np.flatnonzero((flat < state.time[owner]) | (flat > model.scen_t_end[owner]))
    if out.size:
        s = int(owner[out[0]])
        fail(out[0], f"outside the run [{state.time[s]}, {model.scen_t_end[s]}]")
    return ptr, flat


#: Events buffered at most per batch of scenarios re-run for overflowing
#: their first buffer (a batch holds at least one scenario).
RERUN_EVENTS = 1 << 16


def _event_buffers(nscen, cap):
    return (np.empty((nscen, cap)), np.empty((nscen, cap), np.int64),
            np.empty((nscen, cap), np.int64), np.empty((nscen, cap), np.int64),
            np.empty((nscen, cap, 3)), np.empty((nscen, cap)), np.empty((nscen, cap)),
            np.empty((nscen, cap, 3)), np.empty((nscen, cap, 3)),
            np.empty((nscen, cap), np.int64))


def _run(model, scen, pos, vel, time, samp_ptr, samp_t, cap, parallel, tan, keep=True):
    """Run the scenarios ``scen`` (indices into ``model``) with event capacity ``cap``.

    ``pos``, ``vel``, ``time`` are that subset's state, advanced in place;
    ``tan`` the tangent buffers (``_tangent_buffers``).
    Returns ``(out_pos, out_vel, events, status, ev_count)``.
    """
    m = model
    nscen = scen.shape[0]
    nbmax = m.body_radius.shape[1]
    rows = samp_t.shape[0] if keep else 0
    out_pos = buffers.zeros((rows, nbmax, 3))
    out_vel = buffers.zeros((rows, nbmax, 3))
    ev = _event_buffers(nscen, cap)
    status = np.zeros(nscen, np.int64)
    ev_count = np.zeros(nscen, np.int64)
    ctrl_ptr = m.ctrl_ptr
    every = nscen == m.nscen and bool(np.all(scen == np.arange(nscen)))
    ctrl_rows = np.arange(m.ctrl_body.shape[0]) if every else np.concatenate(
        [np.arange(ctrl_ptr[s], ctrl_ptr[s + 1]) for s in scen] + [np.zeros(0, np.int64)]
    ).astype(np.int64)
    sub_ptr = np.zeros(nscen + 1, np.int64)
    sub_ptr[1:] = np.cumsum(ctrl_ptr[scen + 1] - ctrl_ptr[scen])
    args = (m.body_count[scen], m.body_shape[scen], m.body_radius[scen], m.body_mass[scen],
            m.body_material[scen], m.wall_count[scen], m.wall_normal[scen],
            m.wall_offset[scen], m.wall_material[scen], sub_ptr, m.ctrl_body[ctrl_rows],
            m.ctrl_t0[ctrl_rows], m.ctrl_t1[ctrl_rows], m.ctrl_force[ctrl_rows], time,
            m.scen_t_end[scen], m.scen_dt[scen], m.gravity, m.ground_z,
            m.params[scen] if m.params.ndim == 2 else m.params[None, :],
            m.layout.bb, m.layout.bw, m.layout.bg,
            m.integrator, samp_ptr, samp_t, pos, vel, out_pos, out_vel) + ev + (
            status, ev_count, time) + tan
    # ``time`` is both the start time (read first) and the end time (written
    # last) of each scenario.
    (_simulate_parallel if parallel else _simulate_serial)(args)
    return out_pos, out_vel, ev, status, ev_count


def simulate(model, state, sample_times=None, event_capacity=64, parallel=True,
             directions=None, measured=None, gauss_newton=False, keep_samples=True):
    """Simulate every scenario of ``model`` from ``state``.

    ``sample_times`` is one ascending array of absolute times per scenario
    (within the run), or None for the final state only.  ``state`` is not
    modified.  Runs are deterministic and bit-identical with ``parallel``
    on or off.  Raises ``RuntimeError`` naming the scenario if one fails.

    Events are buffered ``event_capacity`` per scenario; a scenario with more
    is run again on its own with room for all of them, so memory follows the
    events that occur.

    Sensitivities (``result.sens``): ``directions`` (:class:`Directions`) asks
    for forward-mode tangents along them; ``measured (M, nbmax, 3)``, rows
    aligned with the sample times (NaN: not measured), adds the trajectory
    residuals ``sum |p(t_k) - p*(t_k)|^2`` per scenario with ``J^T r`` (and
    ``J^T J`` when ``gauss_newton``).  ``keep_samples=False`` drops the
    sampled states (``samp_pos``, ``samp_vel`` are empty) where only the
    residual sums are wanted: each scenario then samples into scratch of its
    own, and the batch never holds two ``(M, nbmax, 3)`` arrays.
    """
    model.layout.validate_rows(model.params, model.nscen)
    samp_ptr, samp_t = _sample_csr(model, state, sample_times)
    nscen = model.nscen
    cap = max(1, int(event_capacity))
    final = state.copy()
    every = np.arange(nscen)
    want = directions is not None or measured is not None
    directions = NO_DIRECTIONS if directions is None else directions
    if measured is not None:
        measured = np.ascontiguousarray(measured, dtype=np.float64)
        if measured.shape != (samp_t.shape[0], model.body_radius.shape[1], 3):
            raise ValueError(f"measured has shape {measured.shape}; expected "
                             f"{(samp_t.shape[0], model.body_radius.shape[1], 3)} "
                             "(one row per sample time)")
    tan = _tangent_buffers(model, every, directions, measured, gauss_newton, cap)
    out_pos, out_vel, ev, status, ev_count = _run(
        model, every, final.body_pos, final.body_vel, final.time, samp_ptr, samp_t, cap,
        parallel, tan, keep_samples)
    bad = np.flatnonzero(status != STATUS_OK)
    if bad.size:
        s = int(bad[0])
        name = model.names[s] if model.names else s
        raise RuntimeError(
            f"scenario {name!r}: {STATUS_MESSAGES[status[s]]} "
            f"(stopped at t = {final.time[s]}); {bad.size} scenario(s) failed")
    # Pack the events (row-major order of the buffers is CSR order),
    # re-running the scenarios that overflowed their buffer.
    ev = ev + tan[9:12]
    ptr = np.zeros(nscen + 1, np.int64)
    ptr[1:] = np.cumsum(ev_count)
    keep = ev_count <= cap
    mask = (np.arange(cap)[None, :] < ev_count[:, None]) & keep[:, None]
    if keep.all():
        flat = [b[mask] for b in ev]
    else:
        rows = (ptr[:-1, None] + np.arange(cap)[None, :])[mask]
        flat = [np.zeros((int(ptr[-1]),) + b.shape[2:], b.dtype) for b in ev]
        for f, b in zip(flat, ev):
            f[rows] = b[mask]
    # The overflowed scenarios again, in batches of like event counts (each
    # batch's buffer holds at most RERUN_EVENTS events), in parallel.
    over = np.flatnonzero(~keep)
    over = over[np.argsort(ev_count[over], kind="stable")]
    i = 0
    while i < over.size:
        j = i + 1
        while j < over.size and (j + 1 - i) * ev_count[over[j]] <= RERUN_EVENTS:
            j += 1
        idx = over[i:j]
        cap_b = int(ev_count[idx[-1]])
        tan_b = _tangent_buffers(model, idx, directions, None, False, cap_b)
        # ``state[idx]`` is a copy: the re-run advances it, never ``state``.
        _, _, ev_b, _, n_b = _run(model, idx, state.body_pos[idx], state.body_vel[idx],
                                  state.time[idx], np.zeros(idx.size + 1, np.int64), np.zeros(0),
                                  cap_b, parallel, tan_b)
        for f, b in zip(flat, ev_b + tan_b[9:12]):
            for k, s in enumerate(idx):
                f[ptr[s]:ptr[s + 1]] = b[k, :n_b[k]]
        i = j
    sens = None
    if want:
        gn = tan[6]
        if gn.shape[1]:
            gn = np.triu(gn) + np.transpose(np.triu(gn, 1), (0, 2, 1))
        sens = Sensitivities(directions, tan[7], tan[8], *flat[10:13], tan[4], tan[5], gn,
                             tan[12], tan[13])
    return SimResult(samp_ptr, samp_t, out_pos, out_vel, final, ptr, *flat[:10], sens=sens)
