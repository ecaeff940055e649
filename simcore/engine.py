"""The event loop: one scenario at a time, a batch of them in parallel.

Each pass of the loop of :func:`_scenario` is the list of stages:

1. forces: gravity plus the control forces active at ``t`` (windows ``[t0, t1)``);
2. contact: normal and friction forces of sustained contacts (``contact.solve``),
   giving every body a constant acceleration;
3. (symplectic only) the velocity kick at a grid time;
4. events: the earliest of the impacts (``collision``), stops, ``v_th``
   crossings and body-body sticks (``integrate``), control window edges,
   ``dt`` grid times where a direction rotates, and the end of the run;
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

import numpy as np
from numba import njit, prange

from . import contact, impulse
from .collision import (
    UNSUPPORTED,
    contact_normal_body_body,
    gap_body_body,
    gap_body_plane,
    toi_body_body,
    toi_body_plane,
)
from .config import GAP_TOL, JIT_PARALLEL, MAX_LOOP, V_CONTACT, V_STOP, jit
from .integrate import INTEGRATOR_SYMPLECTIC, drift, sample, stop_time, vth_crossing

# Event kinds of the log.
EV_BODY_BODY = 0
EV_BODY_WALL = 1
EV_BODY_GROUND = 2
EV_STOP = 3
EV_START = 4
EVENT_KINDS = ("body-body", "body-wall", "body-ground", "stop", "start")

# Scenario status codes.
STATUS_OK = 0
STATUS_MAX_ITER = 1
STATUS_UNSUPPORTED_PAIR = 2
STATUS_STALLED = 3
STATUS_MESSAGES = (
    "ok",
    "event loop exceeded its iteration limit",
    "a pair of shapes has no contact function",
    "too many events at one instant (contact chatter)",
)

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
              ev_t, ev_kind, ev_a, ev_b, ev_n, ev_jn, ev_jt, ev_dva, ev_dvb, ev_slip):
    """Simulate one scenario in place; returns ``(status, event_count, t)``.

    Arrays (this scenario only): ``shape``, ``radius``, ``mass``, ``mat (nb,)``;
    ``wall_n (nw, 3)``, ``wall_d``, ``wall_mat (nw,)``; controls ``c_body``,
    ``c_t0``, ``c_t1 (nc,)``, ``c_force (nc, 3)``; sample times
    ``samp_t (ns,)`` ascending; state ``pos``, ``vel (nb, 3)`` advanced in
    place; outputs ``out_pos``, ``out_vel (ns, nbmax, 3)`` and the event
    buffers of capacity ``cap``.
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

    # Planes: row 0 is the ground z = ground_z, then the walls.
    plane_n[0, 2] = 1.0
    plane_d[0] = ground_z
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
                if k == 0:
                    pos[i, 2] = ground_z + radius[i]
        if plane_contact[i, 0]:
            if _horizontal_speed(vel[i]) <= V_STOP:
                vel[i, 0] = 0.0
                vel[i, 1] = 0.0
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
        ks += 1

    n_ev = 0
    status = STATUS_OK
    need_solve = True
    horizon = t
    zero_steps = 0
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
            for i in range(nb):
                for d in range(3):
                    force[i, d] = 0.0
            for q in range(nc):
                if c_t0[q] <= t < c_t1[q]:
                    for d in range(3):
                        force[c_body[q], d] += c_force[q, d]
                if c_t0[q] > t and c_t0[q] < next_edge:
                    next_edge = c_t0[q]
                if c_t1[q] > t and c_t1[q] < next_edge:
                    next_edge = c_t1[q]
            for i in range(nb):
                free_acc[i, 0] = force[i, 0] * inv_m[i]
                free_acc[i, 1] = force[i, 1] * inv_m[i]
                free_acc[i, 2] = force[i, 2] * inv_m[i] - gravity
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
                        above[i] = False
                if not rotating or integrator == INTEGRATOR_SYMPLECTIC:
                    break
                # Directions rotate: step dt with the implicit direction.
                h_dir = min(grid_next, t_end) - t
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
            need_solve = False

        # Stage 4: the earliest event within the horizon.
        h = horizon - t
        s_best = h
        ev_code = _NONE
        ev_i = -1
        ev_j = -1
        if integrator != INTEGRATOR_SYMPLECTIC:
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
                if plane_contact[i, 0] and g_mu_s[i] != g_mu_k[i]:
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
        for i in range(nb):
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

        # Stage 5: advance to the event, writing the samples passed.
        t_new = horizon if ev_code == _NONE else t + s_best
        if ev_code != _NONE and t_new > horizon:
            t_new = horizon
        while ks < ns and samp_t[ks] <= t_new:
            sample(nb, pos, vel, dacc, samp_t[ks] - t, out_pos[ks], out_vel[ks])
            ks += 1
        drift(nb, pos, vel, dacc, t_new - t)
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
                                 ground_z, plane_n, pl_mu, pl_e, g_mu_s, g_mu_k, g_vth,
                                 plane_contact, resting, starting, above, dva, dvb,
                                 ev_t, ev_kind, ev_a, ev_b, ev_n, ev_jn, ev_jt, ev_dva,
                                 ev_dvb, ev_slip, False)
            work[ev_i] = True
        elif ev_code == _IMPACT_BODY:
            n_ev = _impact_body(ev_i, ev_j, n_ev, t, shape, pos, vel, acc, inv_m,
                                b_mu, b_e, body_contact, nrm, dva, dvb,
                                ev_t, ev_kind, ev_a, ev_b, ev_n, ev_jn, ev_jt, ev_dva,
                                ev_dvb, ev_slip)
            work[ev_i] = True
            work[ev_j] = True
        elif ev_code == _STOP:
            # The slide has reached zero speed along its (frozen) direction:
            # the body stops.  (Where a push rotates the direction, any
            # sideways velocity is dropped too: first order in dt there.)
            for d in range(3):
                dva[d] = -vel[ev_i, d]
                vel[ev_i, d] = 0.0
            if plane_contact[ev_i, 0]:
                resting[ev_i] = True
                starting[ev_i] = False
                above[ev_i] = False
                n_ev = _log(ev_t, ev_kind, ev_a, ev_b, ev_n, ev_jn, ev_jt, ev_dva,
                            ev_dvb, ev_slip, n_ev, t, EV_STOP, ev_i, -1, zero3, 0.0,
                            0.0, dva, zero3, -1)
            continue
        elif ev_code == _VTH:
            above[ev_i] = not above[ev_i]
            continue
        elif ev_code == _STICK:
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
                          ground_z, plane_n, pl_mu, pl_e, g_mu_s, g_mu_k, g_vth, b_mu,
                          b_e, plane_contact, body_contact, resting, starting, above,
                          work, nrm, dva, dvb, ev_t, ev_kind, ev_a, ev_b, ev_n, ev_jn,
                          ev_jt, ev_dva, ev_dvb, ev_slip)
    else:
        status = STATUS_MAX_ITER

    while ks < ns:
        sample(nb, pos, vel, acc, 0.0, out_pos[ks], out_vel[ks])
        ks += 1
    return status, n_ev, t


@jit
def _impact_plane(i, k, n_ev, t, pos, vel, acc, radius, mass, ground_z, plane_n, pl_mu,
                  pl_e, g_mu_s, g_mu_k, g_vth, plane_contact, resting, starting, above,
                  dva, dvb, ev_t, ev_kind, ev_a, ev_b, ev_n, ev_jn, ev_jt, ev_dva,
                  ev_dvb, ev_slip, propagated):
    """Impact of body i on plane k (0 = ground); logs it and returns the count.

    ``propagated``: the plane was already in contact and another impulse drove
    the body into it.  Newton's law per contact gives the rebound ``-e`` times
    the approach speed *before* the event, which was zero: the response is
    plastic and the contact stays.
    """
    n = plane_n[k]
    vn = vel[i, 0] * n[0] + vel[i, 1] * n[1] + vel[i, 2] * n[2]
    an = acc[i, 0] * n[0] + acc[i, 1] * n[1] + acc[i, 2] * n[2]
    # Zeno guard: a slow approach while pressed becomes sustained contact.
    sustained = propagated or (-vn < V_CONTACT and an <= 0.0)
    e = 0.0 if sustained else pl_e[i, k]
    if k == 0:
        vt = _horizontal_speed(vel[i])
        mu = g_mu_k[i] if vt >= g_vth[i] else g_mu_s[i]
    else:
        mu = pl_mu[i, k]
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
    _after_velocity_change(i, vel, plane_contact, resting, starting, above, g_vth)
    return n_ev


@jit
def _impact_body(i, j, n_ev, t, shape, pos, vel, acc, inv_m, b_mu, b_e, body_contact,
                 nrm, dva, dvb, ev_t, ev_kind, ev_a, ev_b, ev_n, ev_jn, ev_jt, ev_dva,
                 ev_dvb, ev_slip):
    """Impact between bodies i < j at the time-of-impact configuration."""
    contact_normal_body_body(shape[i], shape[j], pos[i], pos[j], nrm)
    un, an = _rel_normal(i, j, vel, acc, nrm)
    sustained = -un < V_CONTACT and an <= 0.0
    e = 0.0 if sustained else b_e[i, j]
    jn, jt, slipped = impulse.body_body(vel[i], vel[j], inv_m[i], inv_m[j], nrm, e,
                                        b_mu[i, j], dva, dvb)
    if sustained:
        body_contact[i, j] = True
        body_contact[j, i] = True
        un = 0.0
        for d in range(3):
            un += (vel[j, d] - vel[i, d]) * nrm[d]
        _zero_normal_velocity(i, j, vel, inv_m, nrm, un)
    return _log(ev_t, ev_kind, ev_a, ev_b, ev_n, ev_jn, ev_jt, ev_dva, ev_dvb, ev_slip,
                n_ev, t, EV_BODY_BODY, i, j, nrm, jn, jt, dva, dvb, 1 if slipped else 0)


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
               ev_kind, ev_a, ev_b, ev_n, ev_jn, ev_jt, ev_dva, ev_dvb, ev_slip):
    """Sequential impulses through the contacts of the bodies in ``work``.

    An active contact that now approaches faster than ``V_ROUND`` gets an
    impact impulse (logged): plastic against a plane (see ``_impact_plane``),
    with restitution between bodies (so a Newton's cradle passes the impulse
    along, as sequential impulses do).  One that separates is released, unless
    it separates slower than ``V_CONTACT`` while its accelerations do not pull
    it apart: the mirror of the Zeno guard, the contact stays and that small
    normal velocity is removed.  Passes repeat until nothing changes
    (at most ``4 nb`` passes).
    """
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
                                         ev_jn, ev_jt, ev_dva, ev_dvb, ev_slip, True)
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
                                        ev_dvb, ev_slip)
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
             ev_slip, status, ev_count, t_final):
    """Scenario ``s`` of a batch: slice its arrays and run it."""
    nb = body_count[s]
    nw = wall_count[s]
    c0 = ctrl_ptr[s]
    c1 = ctrl_ptr[s + 1]
    k0 = samp_ptr[s]
    k1 = samp_ptr[s + 1]
    st, ne, tf = _scenario(
        nb, nw, body_shape[s, :nb], body_radius[s, :nb], body_mass[s, :nb],
        body_mat[s, :nb], wall_normal[s, :nw], wall_offset[s, :nw], wall_mat[s, :nw],
        ctrl_body[c0:c1], ctrl_t0[c0:c1], ctrl_t1[c0:c1], ctrl_force[c0:c1],
        scen_t_start[s], scen_t_end[s], scen_dt[s], gravity, ground_z,
        params, bb_idx, bw_idx, bg_idx, integrator, samp_t[k0:k1],
        pos[s, :nb], vel[s, :nb], out_pos[k0:k1], out_vel[k0:k1],
        ev_t[s], ev_kind[s], ev_a[s], ev_b[s], ev_n[s], ev_jn[s], ev_jt[s],
        ev_dva[s], ev_dvb[s], ev_slip[s])
    status[s] = st
    ev_count[s] = ne
    t_final[s] = tf


@njit(**JIT_PARALLEL)
def _simulate_parallel(args):
    """All scenarios in parallel (``prange``); each writes only its own slices."""
    for s in prange(args[0].shape[0]):
        _run_one(s, *args)


@jit
def _simulate_serial(args):
    """All scenarios one after the other (the reference for bit-identity)."""
    for s in range(args[0].shape[0]):
        _run_one(s, *args)


EVENT_FIELDS = ("t", "kind", "a", "b", "normal", "jn", "jt", "dva", "dvb", "slip")


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


def _event_buffers(nscen, cap):
    return (np.empty((nscen, cap)), np.empty((nscen, cap), np.int64),
            np.empty((nscen, cap), np.int64), np.empty((nscen, cap), np.int64),
            np.empty((nscen, cap, 3)), np.empty((nscen, cap)), np.empty((nscen, cap)),
            np.empty((nscen, cap, 3)), np.empty((nscen, cap, 3)),
            np.empty((nscen, cap), np.int64))


def _run(model, scen, pos, vel, time, samp_ptr, samp_t, cap, parallel):
    """Run the scenarios ``scen`` (indices into ``model``) with event capacity ``cap``.

    ``pos``, ``vel``, ``time`` are that subset's state, advanced in place.
    Returns ``(out_pos, out_vel, events, status, ev_count)``.
    """
    m = model
    nscen = scen.shape[0]
    nbmax = m.body_radius.shape[1]
    out_pos = np.zeros((samp_t.shape[0], nbmax, 3))
    out_vel = np.zeros((samp_t.shape[0], nbmax, 3))
    ev = _event_buffers(nscen, cap)
    status = np.zeros(nscen, np.int64)
    ev_count = np.zeros(nscen, np.int64)
    ctrl_ptr = m.ctrl_ptr
    ctrl_rows = np.concatenate([np.arange(ctrl_ptr[s], ctrl_ptr[s + 1]) for s in scen]).astype(np.int64) \
        if nscen != m.nscen else np.arange(m.ctrl_body.shape[0])
    sub_ptr = np.zeros(nscen + 1, np.int64)
    sub_ptr[1:] = np.cumsum(ctrl_ptr[scen + 1] - ctrl_ptr[scen])
    args = (m.body_count[scen], m.body_shape[scen], m.body_radius[scen], m.body_mass[scen],
            m.body_material[scen], m.wall_count[scen], m.wall_normal[scen],
            m.wall_offset[scen], m.wall_material[scen], sub_ptr, m.ctrl_body[ctrl_rows],
            m.ctrl_t0[ctrl_rows], m.ctrl_t1[ctrl_rows], m.ctrl_force[ctrl_rows], time,
            m.scen_t_end[scen], m.scen_dt[scen], m.gravity, m.ground_z,
            m.params, m.tables.bb, m.tables.bw, m.tables.bg,
            m.integrator, samp_ptr, samp_t, pos, vel, out_pos, out_vel) + ev + (
            status, ev_count, time)
    # ``time`` is both the start time (read first) and the end time (written
    # last) of each scenario.
    (_simulate_parallel if parallel else _simulate_serial)(args)
    return out_pos, out_vel, ev, status, ev_count


def simulate(model, state, sample_times=None, event_capacity=64, parallel=True):
    """Simulate every scenario of ``model`` from ``state``.

    ``sample_times`` is one ascending array of absolute times per scenario
    (within the run), or None for the final state only.  ``state`` is not
    modified.  Runs are deterministic and bit-identical with ``parallel``
    on or off.  Raises ``RuntimeError`` naming the scenario if one fails.

    Events are buffered ``event_capacity`` per scenario; a scenario with more
    is run again on its own with room for all of them, so memory follows the
    events that occur.
    """
    from . import params as P

    P.validate(model.params)
    samp_ptr, samp_t = _sample_csr(model, state, sample_times)
    nscen = model.nscen
    cap = max(1, int(event_capacity))
    final = state.copy()
    every = np.arange(nscen)
    out_pos, out_vel, ev, status, ev_count = _run(
        model, every, final.body_pos, final.body_vel, final.time, samp_ptr, samp_t, cap,
        parallel)
    bad = np.flatnonzero(status != STATUS_OK)
    if bad.size:
        s = int(bad[0])
        name = model.names[s] if model.names else s
        raise RuntimeError(
            f"scenario {name!r}: {STATUS_MESSAGES[status[s]]} "
            f"(stopped at t = {final.time[s]}); {bad.size} scenario(s) failed")
    # Pack the events (row-major order of the buffers is CSR order),
    # re-running the scenarios that overflowed their buffer.
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
    for s in np.flatnonzero(~keep):
        one = np.array([s])
        st = state.copy()
        zero = np.zeros(2, np.int64)
        _, _, ev1, _, n1 = _run(model, one, st.body_pos[one], st.body_vel[one],
                                st.time[one], zero, np.zeros(0), int(ev_count[s]), False)
        for f, b in zip(flat, ev1):
            f[ptr[s]:ptr[s + 1]] = b[0, :n1[0]]
    return SimResult(samp_ptr, samp_t, out_pos, out_vel, final, ptr, *flat)
