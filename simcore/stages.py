"""The stages of one pass of the event loop (:func:`simcore.engine._scenario`).

Each stage is a function of the scenario's records (:mod:`simcore.records`)
and the state ``pos``, ``vel (nb, 3)``; it writes the state, the workspace
``w`` and the tangent workspace ``tw`` and returns what the driver needs to
decide the next stage.  In the order the driver calls them:

1. :func:`setup`: planes, per-body coefficients through the material tables,
   contacts present at the start;
2. :func:`forces`: gravity plus the control forces active at ``t`` (windows
   ``[t0 + lag, t1 + lag)``), and the next window edge;
3. :func:`sustained_contacts`: normal and friction forces of sustained
   contacts (``contact.solve``), giving every body a constant acceleration;
   then, for the symplectic integrator, :func:`symplectic_kick`;
4. :func:`next_event`: the earliest of the impacts (``collision``), stops,
   ``v_th`` crossings and body-body sticks (``integrate``) within the horizon;
   over ``dt`` steps where a direction rotates the search is skipped up to a
   time that :func:`quiet_time` proves free of events;
5. :func:`advance`: every body to the event time (``integrate.drift``), writing
   the samples passed and their residuals;
6. :func:`simcore.resolve.resolve`: the event's impulse or mode change.

Sensitivities live beside each stage (``tangent``): a stage that changes the
state maps the tangents with the same intermediates.
"""

import numpy as np

from . import contact, tangent
from .collision import (
    SHAPE_SPHERE,
    UNSUPPORTED,
    contact_normal_body_body,
    gap_body_body,
    gap_body_plane,
    toi_body_body,
    toi_body_plane,
)
from .config import GAP_TOL, V_CONTACT, V_STOP, jit
from .events import EventKind, log_event, log_tangent
from .integrate import INTEGRATOR_SYMPLECTIC, drift, sample, stop_time, vth_crossing
from .params import GROUND_OFFSET, TIME_OFFSET

#: A segment between events with more samples than this accumulates its
#: trajectory residuals by moments (``tangent.accumulate_segment``), fewer
#: one sample at a time; both give the same sums.
SEGMENT_MOMENTS = 3
#: Relative normal speed [m/s] under which touching surfaces that are being
#: pulled apart by their accelerations are taken to separate (rounding).
V_ROUND = 1e-12
#: Relative safety margin of :func:`quiet_time`'s bound.
QUIET_MARGIN = 1e-6

# What :func:`next_event` found (the driver's event codes).
NONE = 0
IMPACT_PLANE = 1
IMPACT_BODY = 2
STOP = 3
VTH = 4
STICK = 5
UNSUPPORTED_PAIR = -1


@jit
def horizontal_speed(v):
    return np.sqrt(v[0] * v[0] + v[1] * v[1])


@jit
def rel_normal(i, j, vel, acc, nrm):
    """Relative normal velocity and acceleration of body j over body i along ``nrm``."""
    un = 0.0
    an = 0.0
    for d in range(3):
        un += (vel[j, d] - vel[i, d]) * nrm[d]
        an += (acc[j, d] - acc[i, d]) * nrm[d]
    return un, an


@jit
def setup(sc, w, tw, sens, pos, vel):
    """Stage 1: planes, coefficients and the contacts present at the start.

    The ground is the plane ``z = ground_z + params[GROUND_OFFSET]``; a body
    that starts resting on the nominal plane ``z = ground_z`` starts resting
    on that one (its tangent along the offset is 1).  Coefficients come
    through the material tables (:mod:`simcore.params`).  Touching surfaces
    without a fast approach (``|v_n| <= V_CONTACT``) start in sustained
    contact.  Returns the scenario's initial nondiff flags.
    """
    nb = sc.radius.shape[0]
    nw = sc.wall_n.shape[0]
    npl = nw + 1
    nt = sens.t_param.shape[0]
    for p in range(nt):
        if sens.t_param[p] >= 0:
            tw.pdir[sens.t_param[p]] = p
    ground = sc.ground_z + sc.params[GROUND_OFFSET]
    p_ground = tw.pdir[GROUND_OFFSET]
    nd = 0
    if nt > 0:
        tangent.seed(nb, sens.t_vel, tw.tvel)
        if sc.integrator == INTEGRATOR_SYMPLECTIC:
            nd |= tangent.ND_SYMPLECTIC

    # Planes: row 0 is the ground, then the walls.
    w.plane_n[0, 2] = 1.0
    w.plane_d[0] = ground
    if ground != sc.ground_z:
        # A body resting on the nominal ground rests on the offset one.
        for i in range(nb):
            if abs(gap_body_plane(sc.shape[i], pos[i], sc.radius[i], w.plane_n[0],
                                  sc.ground_z)) <= GAP_TOL:
                pos[i, 2] += ground - sc.ground_z
    for k in range(nw):
        for d in range(3):
            w.plane_n[k + 1, d] = sc.wall_n[k, d]
        w.plane_d[k + 1] = sc.wall_d[k]

    # Coefficients through the material tables.
    prm = sc.params
    for i in range(nb):
        mi = sc.mat[i]
        w.inv_m[i] = 1.0 / sc.mass[i]
        w.g_mu_s[i] = prm[sc.bg_idx[mi, 0]]
        w.g_mu_k[i] = prm[sc.bg_idx[mi, 1]]
        w.g_vth[i] = prm[sc.bg_idx[mi, 2]]
        w.g_e[i] = prm[sc.bg_idx[mi, 3]]
        w.pl_e[i, 0] = w.g_e[i]  # pl_mu[:, 0] stays unused: the ground's mu follows its regime
        for k in range(nw):
            w.pl_mu[i, k + 1] = prm[sc.bw_idx[mi, sc.wall_mat[k], 0]]
            w.pl_e[i, k + 1] = prm[sc.bw_idx[mi, sc.wall_mat[k], 1]]
        for j in range(nb):
            w.b_mu[i, j] = prm[sc.bb_idx[mi, sc.mat[j], 0]]
            w.b_e[i, j] = prm[sc.bb_idx[mi, sc.mat[j], 1]]

    # Contacts present at the start: touching surfaces without a fast approach.
    for i in range(nb):
        for k in range(npl):
            g = gap_body_plane(sc.shape[i], pos[i], sc.radius[i], w.plane_n[k], w.plane_d[k])
            vn = (vel[i, 0] * w.plane_n[k, 0] + vel[i, 1] * w.plane_n[k, 1]
                  + vel[i, 2] * w.plane_n[k, 2])
            if g <= GAP_TOL and abs(vn) <= V_CONTACT:
                w.plane_contact[i, k] = True
                for d in range(3):
                    vel[i, d] -= vn * w.plane_n[k, d]
                tangent.project_plane(i, w.plane_n[k], tw.tvel)
                if k == 0:
                    pos[i, 2] = ground + sc.radius[i]
        if w.plane_contact[i, 0]:
            if p_ground >= 0:
                # Resting on the ground: its height moves with the plane.
                tw.tpos[i, 2, p_ground] = 1.0
                sens.signal[p_ground] += 1
            if horizontal_speed(vel[i]) <= V_STOP:
                vel[i, 0] = 0.0
                vel[i, 1] = 0.0
                tw.tvel[i, :2] = 0.0
                w.resting[i] = True
            w.above[i] = horizontal_speed(vel[i]) >= w.g_vth[i]
    for i in range(nb):
        for j in range(i + 1, nb):
            g = gap_body_body(sc.shape[i], sc.shape[j], pos[i], sc.radius[i], pos[j],
                              sc.radius[j])
            if g <= GAP_TOL and contact_normal_body_body(sc.shape[i], sc.shape[j], pos[i],
                                                          pos[j], w.nrm):
                un = 0.0
                for d in range(3):
                    un += (vel[j, d] - vel[i, d]) * w.nrm[d]
                if abs(un) <= V_CONTACT:
                    w.body_contact[i, j] = True
                    w.body_contact[j, i] = True
    return nd


@jit
def forces(sc, w, tw, sens, t):
    """Stage 2: the applied forces at ``t`` and the free accelerations
    (``free_acc = force / m - g z``); returns ``(next_edge, window_edge)``,
    the next control window edge after ``t`` (``t_end`` if none) and whether
    there is one.  Window ``q`` acts over ``[c_t0[q] + lag, c_t1[q] + lag)``
    with ``lag = params[TIME_OFFSET]``."""
    nb = sc.radius.shape[0]
    lag = sc.params[TIME_OFFSET]
    next_edge = sc.t_end
    window_edge = False
    for i in range(nb):
        for d in range(3):
            w.force[i, d] = 0.0
    for q in range(sc.c_body.shape[0]):
        w0 = sc.c_t0[q] + lag
        w1 = sc.c_t1[q] + lag
        if w0 <= t < w1:
            for d in range(3):
                w.force[sc.c_body[q], d] += sc.c_force[q, d]
        if w0 > t and w0 < next_edge:
            next_edge = w0
            window_edge = True
        if w1 > t and w1 < next_edge:
            next_edge = w1
            window_edge = True
    for i in range(nb):
        w.free_acc[i, 0] = w.force[i, 0] * w.inv_m[i]
        w.free_acc[i, 1] = w.force[i, 1] * w.inv_m[i]
        w.free_acc[i, 2] = w.force[i, 2] * w.inv_m[i] - sc.gravity
    if sens.t_param.shape[0] > 0:
        tangent.free_acc(nb, t, lag, w.inv_m, sc.c_body, sc.c_t0, sc.c_t1, sens.t_ctrl, tw.tfa)
    return next_edge, window_edge


@jit
def _general_contacts(w):
    """``ND_GENERAL`` if a body has a sustained wall or body contact, else 0."""
    nb = w.inv_m.shape[0]
    for i in range(nb):
        for k in range(1, w.plane_n.shape[0]):
            if w.plane_contact[i, k]:
                return tangent.ND_GENERAL
        for j in range(nb):
            if w.body_contact[i, j]:
                return tangent.ND_GENERAL
    return 0


@jit
def sustained_contacts(sc, w, tw, sens, ev, pos, vel, t, grid_next):
    """Stage 3: contact forces and the accelerations they leave.

    Bodies that start to slide from rest log a ``start`` event.  Where a
    friction direction rotates (exact integrator), the solve is repeated with
    the implicit (backward Euler) direction over the ``dt`` step to
    ``grid_next``.  Returns ``(rotating, nondiff flags)``: whether a
    direction rotates; ``ND_GENERAL`` where the tangents cannot follow.
    """
    nb = sc.radius.shape[0]
    npl = sc.wall_n.shape[0] + 1
    h_dir = 0.0
    rotating = False
    nd = 0
    if sens.t_param.shape[0] > 0:
        nd = _general_contacts(w)
    for _attempt in range(2):
        rotating = contact.solve(nb, npl, sc.mass, w, pos, vel, h_dir)
        for i in range(nb):
            if w.started[i]:
                log_event(ev, t, EventKind.START, i, -1, w.start_dir[i], 0.0, 0.0, w.zero3,
                          w.zero3, -1)
                tw.tdva[:] = 0.0
                log_tangent(ev, tw.ttau, tw.tdva, tw.tdva)
                w.above[i] = False
        if not rotating or sc.integrator == INTEGRATOR_SYMPLECTIC:
            break
        h_dir = min(grid_next, sc.t_end) - t
    if sens.t_param.shape[0] > 0:
        acc_tangent(sc, w, tw, sens, vel, h_dir)
    return rotating, nd


@jit
def acc_tangent(sc, w, tw, sens, vel, h_dir):
    """Tangent of the accelerations just solved: free flight, static hold, or
    a ground slide (the coefficient of the body's speed regime)."""
    for i in range(sc.radius.shape[0]):
        if not w.plane_contact[i, 0]:
            tw.tacc[i] = tw.tfa[i]
        elif w.resting[i]:
            tw.tacc[i] = 0.0
        else:
            mu = w.g_mu_k[i] if w.above[i] else w.g_mu_s[i]
            p_mu = tw.pdir[sc.bg_idx[sc.mat[i], 1 if w.above[i] else 0]]
            tangent.ground_slide(i, vel[i], w.free_acc[i], mu, w.starting[i], h_dir, tw.tvel,
                                 tw.tfa, tw.ttau, p_mu, tw.tacc, sens.signal)


@jit
def symplectic_kick(sc, w, ev, vel, t, h_kick):
    """Stage 3 of the symplectic integrator: ``v' = v + a h`` at a grid time;
    a ground slide that would reverse stops instead (a ``stop`` event), and
    the segment then drifts with zero acceleration (``dacc = 0``)."""
    for i in range(sc.radius.shape[0]):
        vx = vel[i, 0]
        vy = vel[i, 1]
        for d in range(3):
            vel[i, d] += w.acc[i, d] * h_kick
            w.dacc[i, d] = 0.0
        if w.plane_contact[i, 0] and not w.starting[i] and (vx != 0.0 or vy != 0.0):
            if vel[i, 0] * vx + vel[i, 1] * vy <= 0.0:
                w.dva[0] = -vel[i, 0]
                w.dva[1] = -vel[i, 1]
                w.dva[2] = 0.0
                vel[i, 0] = 0.0
                vel[i, 1] = 0.0
                w.resting[i] = True
                log_event(ev, t, EventKind.STOP, i, -1, w.zero3, 0.0, 0.0, w.dva, w.zero3, -1)
        w.starting[i] = False
        if w.plane_contact[i, 0]:
            w.above[i] = horizontal_speed(vel[i]) >= w.g_vth[i]


@jit
def _mode_events(sc, w, pos, vel, nt, s_best):
    """The earliest stop, ``v_th`` crossing or body-body stick within
    ``s_best``: ``(s, code, i, j)`` (``code`` NONE if none).

    The ``v_th`` crossing is searched whatever the coefficients: with
    ``mu_s == mu_k`` it changes no force, but it splits the segment there,
    and the split must not depend on whether sensitivities are asked for.
    """
    nb = sc.radius.shape[0]
    npl = sc.wall_n.shape[0] + 1
    acc = w.dacc
    code = NONE
    ev_i = -1
    ev_j = -1
    for i in range(nb):
        if w.resting[i]:
            continue
        in_plane = False
        for k in range(npl):
            if w.plane_contact[i, k]:
                in_plane = True
        if in_plane:
            s = stop_time(vel[i], acc[i], s_best)
            if s < s_best:
                s_best = s
                code = STOP
                ev_i = i
        if w.plane_contact[i, 0]:
            s = vth_crossing(vel[i], acc[i], w.g_vth[i], w.above[i], s_best)
            if s < s_best:
                s_best = s
                code = VTH
                ev_i = i
        for j in range(i + 1, nb):
            if w.body_contact[i, j] and contact_normal_body_body(
                    sc.shape[i], sc.shape[j], pos[i], pos[j], w.nrm):
                # Relative tangential velocity of the contact.
                un, an = rel_normal(i, j, vel, acc, w.nrm)
                for d in range(3):
                    w.rel[d] = (vel[j, d] - vel[i, d]) - un * w.nrm[d]
                for d in range(3):
                    w.at[d] = (acc[j, d] - acc[i, d]) - an * w.nrm[d]
                if w.rel[0] ** 2 + w.rel[1] ** 2 + w.rel[2] ** 2 <= V_STOP * V_STOP:
                    continue  # not sliding
                s = stop_time(w.rel, w.at, s_best)
                if s < s_best:
                    s_best = s
                    code = STICK
                    ev_i = i
                    ev_j = j
    return s_best, code, ev_i, ev_j


@jit
def _impacts(sc, w, pos, vel, s_best, code, ev_i, ev_j):
    """The earliest impact within ``s_best`` (a body reaching a plane or
    another body it is not in contact with), else the arguments unchanged;
    ``code`` UNSUPPORTED_PAIR for a pair of shapes with no contact function.
    Touching surfaces that their accelerations pull apart separate."""
    nb = sc.radius.shape[0]
    npl = sc.wall_n.shape[0] + 1
    acc = w.dacc
    for i in range(nb):
        for k in range(npl):
            if w.plane_contact[i, k]:
                continue
            g = gap_body_plane(sc.shape[i], pos[i], sc.radius[i], w.plane_n[k], w.plane_d[k])
            if abs(g) <= GAP_TOL:
                vn = (vel[i, 0] * w.plane_n[k, 0] + vel[i, 1] * w.plane_n[k, 1]
                      + vel[i, 2] * w.plane_n[k, 2])
                an = (acc[i, 0] * w.plane_n[k, 0] + acc[i, 1] * w.plane_n[k, 1]
                      + acc[i, 2] * w.plane_n[k, 2])
                if an > 0.0 and vn > -V_ROUND:
                    continue  # touching and pulled apart: separates
            s = toi_body_plane(sc.shape[i], pos[i], vel[i], acc[i], sc.radius[i],
                               w.plane_n[k], w.plane_d[k], s_best)
            if s == UNSUPPORTED:
                return s_best, UNSUPPORTED_PAIR, i, k
            if s < s_best:
                s_best = s
                code = IMPACT_PLANE
                ev_i = i
                ev_j = k
        for j in range(i + 1, nb):
            if w.body_contact[i, j]:
                continue
            g = gap_body_body(sc.shape[i], sc.shape[j], pos[i], sc.radius[i], pos[j],
                              sc.radius[j])
            if abs(g) <= GAP_TOL and contact_normal_body_body(
                    sc.shape[i], sc.shape[j], pos[i], pos[j], w.nrm):
                un, an = rel_normal(i, j, vel, acc, w.nrm)
                if an > 0.0 and un > -V_ROUND:
                    continue
            s = toi_body_body(sc.shape[i], sc.shape[j], pos[i], vel[i], acc[i], sc.radius[i],
                              pos[j], vel[j], acc[j], sc.radius[j], s_best)
            if s == UNSUPPORTED:
                return s_best, UNSUPPORTED_PAIR, i, j
            if s < s_best:
                s_best = s
                code = IMPACT_BODY
                ev_i = i
                ev_j = j
    return s_best, code, ev_i, ev_j


@jit
def next_event(sc, w, pos, vel, nt, h, quiet):
    """Stage 4: the earliest event within ``h`` seconds: ``(s, code, i, j)``
    (``code`` NONE: none before ``h``).  Mode changes (stop, ``v_th``,
    stick) are searched by the exact integrator only; a ``quiet`` step (see
    :func:`quiet_time`) searches nothing."""
    s_best = h
    code = NONE
    ev_i = -1
    ev_j = -1
    if quiet:
        return s_best, code, ev_i, ev_j
    if sc.integrator != INTEGRATOR_SYMPLECTIC:
        s_best, code, ev_i, ev_j = _mode_events(sc, w, pos, vel, nt, s_best)
    return _impacts(sc, w, pos, vel, s_best, code, ev_i, ev_j)


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
def quiet_time(sc, w, pos, vel):
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
    nb = sc.radius.shape[0]
    npl = sc.wall_n.shape[0] + 1
    acc = w.dacc
    s_min = np.inf
    amax = np.empty(nb)
    for i in range(nb):
        if sc.shape[i] != SHAPE_SPHERE:
            return 0.0
        for k in range(1, npl):
            if w.plane_contact[i, k]:
                return 0.0
        for j in range(nb):
            if j != i and w.body_contact[i, j]:
                return 0.0
        if w.resting[i]:
            amax[i] = 0.0
        elif w.plane_contact[i, 0]:
            mu = max(w.g_mu_s[i], w.g_mu_k[i])
            amax[i] = (np.sqrt(w.free_acc[i, 0] ** 2 + w.free_acc[i, 1] ** 2)
                       + mu * abs(w.free_acc[i, 2]))
            speed = np.sqrt(vel[i, 0] ** 2 + vel[i, 1] ** 2)
            if amax[i] > 0.0:
                s_min = min(s_min, speed / amax[i])
                margin = speed - w.g_vth[i] if w.above[i] else w.g_vth[i] - speed
                if margin <= 0.0:
                    return 0.0
                s_min = min(s_min, margin / amax[i])
        else:
            amax[i] = np.sqrt(acc[i, 0] ** 2 + acc[i, 1] ** 2 + acc[i, 2] ** 2)
    for i in range(nb):
        for k in range(npl):
            if w.plane_contact[i, k]:
                continue
            g0 = gap_body_plane(sc.shape[i], pos[i], sc.radius[i], w.plane_n[k], w.plane_d[k])
            if g0 <= 1e3 * GAP_TOL:
                return 0.0
            rate = vel[i, 0] * w.plane_n[k, 0] + vel[i, 1] * w.plane_n[k, 1] + vel[i, 2] * w.plane_n[k, 2]
            s_min = min(s_min, _first_reach(g0, rate, amax[i]))
        for j in range(i + 1, nb):
            g0 = gap_body_body(sc.shape[i], sc.shape[j], pos[i], sc.radius[i], pos[j],
                               sc.radius[j])
            if g0 <= 1e3 * GAP_TOL:
                return 0.0
            d2 = ((vel[j, 0] - vel[i, 0]) ** 2 + (vel[j, 1] - vel[i, 1]) ** 2
                  + (vel[j, 2] - vel[i, 2]) ** 2)
            s_min = min(s_min, _first_reach(g0, -np.sqrt(d2), amax[i] + amax[j]))
    return s_min * (1.0 - QUIET_MARGIN)


@jit
def measure(nb, vel, acc, s, tw, sens, out_pos_s, meas_s):
    """Trajectory residuals of one sample (``s`` after the last event) and their tangents."""
    if tw.ttau.shape[0] > 0:
        tangent.sample(nb, vel, acc, s, tw.tpos, tw.tvel, tw.tacc, tw.ttau, tw.tsamp)
    tangent.accumulate(nb, out_pos_s, meas_s, tw.tsamp, sens.tr_sse, sens.tr_grad, sens.tr_gn)


@jit
def sample_here(sc, tw, sens, pos, vel, acc, out_pos, out_vel, ks, t_upto):
    """Samples at the current state (no drift) for the sample times up to
    ``t_upto``, from index ``ks``; returns the next sample index."""
    nb = sc.radius.shape[0]
    ns = sc.samp_t.shape[0]
    has_meas = ns > 0 and sens.meas.shape[0] == ns
    while ks < ns and sc.samp_t[ks] <= t_upto:
        sample(nb, pos, vel, acc, 0.0, out_pos[ks], out_vel[ks])
        if has_meas:
            measure(nb, vel, acc, 0.0, tw, sens, out_pos[ks], sens.meas[ks])
        ks += 1
    return ks


@jit
def _event_time_tangent(code, ev_i, ev_j, s, sc, w, tw, sens, pos, vel):
    """``tw.ds``: the tangent of the segment length (implicit function
    theorem); returns the nondiff flags it raises."""
    acc = w.dacc
    pdir = tw.pdir
    if code == IMPACT_PLANE:
        # The ground's height is the offset's direction; the walls are fixed.
        p_d = pdir[GROUND_OFFSET] if ev_j == 0 else -1
        if not tangent.impact_plane_time(ev_i, w.plane_n[ev_j], s, vel, acc, tw.tpos, tw.tvel,
                                         tw.tacc, p_d, tw.ds):
            return tangent.ND_GRAZING
        if p_d >= 0:
            sens.signal[p_d] += 1
    elif code == IMPACT_BODY:
        if not tangent.impact_body_time(ev_i, ev_j, s, pos, vel, acc, tw.tpos, tw.tvel,
                                        tw.tacc, tw.ds):
            return tangent.ND_GRAZING
    elif code == STOP:
        tangent.stop_time(ev_i, vel, acc, tw.tvel, tw.tacc, tw.ds)
    elif code == VTH:
        tangent.vth_time(ev_i, s, vel, acc, tw.tvel, tw.tacc, w.g_vth[ev_i],
                         pdir[sc.bg_idx[sc.mat[ev_i], 2]], tw.ds, sens.signal)
    else:
        # No event before the horizon (a fixed time), or a stick (flagged).
        tangent.fixed_time(tw.ttau, tw.ds)
    return 0


@jit
def advance(sc, w, tw, sens, pos, vel, out_pos, out_vel, code, ev_i, ev_j, t, t_new, ks,
            at_edge):
    """Stage 5: drift every body from ``t`` to ``t_new`` on its parabola,
    writing the samples passed (a sample exactly at ``t_new`` reports the
    state before the event there) and their residuals; carry the tangents
    through the segment, whose end moves with the event (``code``) or, at a
    control window edge (``at_edge``), with the controls' clock.  Returns
    ``(ks, nondiff flags)``."""
    nb = sc.radius.shape[0]
    ns = sc.samp_t.shape[0]
    acc = w.dacc
    s_seg = t_new - t
    nt = sens.t_param.shape[0]
    nd = 0
    if nt > 0:
        nd = _event_time_tangent(code, ev_i, ev_j, s_seg, sc, w, tw, sens, pos, vel)
        p_lag = tw.pdir[TIME_OFFSET]
        if code == NONE and at_edge and p_lag >= 0:
            # A window edge moves with the controls' clock: d t_edge / d lag = 1.
            tw.ds[p_lag] += 1.0
            sens.signal[p_lag] += 1
    k0 = ks
    while ks < ns and sc.samp_t[ks] <= t_new:
        sample(nb, pos, vel, acc, sc.samp_t[ks] - t, out_pos[ks], out_vel[ks])
        ks += 1
    if ns > 0 and sens.meas.shape[0] == ns and ks > k0:
        if ks - k0 > SEGMENT_MOMENTS:
            tangent.accumulate_segment(nb, vel, acc, t, sc.samp_t, k0, ks, tw, out_pos,
                                       sens.meas, sens)
        else:
            for k in range(k0, ks):
                measure(nb, vel, acc, sc.samp_t[k] - t, tw, sens, out_pos[k], sens.meas[k])
    drift(nb, pos, vel, acc, s_seg)
    if nt > 0:
        tangent.drift(nb, vel, acc, s_seg, tw.ds, tw.tpos, tw.tvel, tw.tacc, tw.ttau)
    return ks, nd


@jit
def final_tangents(sc, w, tw, sens, vel):
    """The tangents of the state at the fixed end time (``tau`` only moves
    if an event ended the run)."""
    nt = sens.t_param.shape[0]
    for i in range(sc.radius.shape[0]):
        for d in range(3):
            for p in range(nt):
                sens.fin_tpos[i, d, p] = tw.tpos[i, d, p] - vel[i, d] * tw.ttau[p]
                sens.fin_tvel[i, d, p] = tw.tvel[i, d, p] - w.acc[i, d] * tw.ttau[p]
