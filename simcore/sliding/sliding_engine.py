"""The sliding engine's event loop: one scenario at a time, a batch of them in parallel.

Each pass of the loop of :func:`_scenario` is the list of stages:

1. forces: gravity plus the control forces active at ``t`` (windows ``[t0, t1)``);
2. contact: normal and friction forces of sustained contacts (``contact.solve``),
   giving every body a constant acceleration;
3. (symplectic only) the velocity kick at a grid time;
4. events: the earliest of the impacts (``collision``), stops, ``v_th``
   crossings and body-body sticks (``integrate``), control window edges,
   ``dt`` grid times where a direction rotates, and the end of the run.
   Over a run of such ``dt`` steps the search is skipped up to a time that
   a bound on the motion proves free of events (``stages.quiet_time``), so
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

from typing import NamedTuple

import numpy as np

from ..geometry.collision import SHAPE_SPHERE
from ..kernel import buffers, drivers, sensitivity
from ..kernel.config import MAX_LOOP, jit
from ..kernel.eventlog import EventLog, Sums
from ..kernel.parameter import GROUND_OFFSET, TIME_OFFSET
from ..kernel.records import TangentIO, outputs
from ..kernel.status import (
    STATUS_MAX_ITER,
    STATUS_OK,
    STATUS_STALLED,
    STATUS_UNSUPPORTED_PAIR,
    progress,
)
from ..laws.registry import IMPACT_CODES, LAW_IMPULSE
from . import contact, tangent
from . import stages as S
from .integrate import INTEGRATOR_SYMPLECTIC, drift

#: The law codes this engine's kernels run, per contact kind (in the order
#: of ``laws.registry.KINDS``: ground, body, wall): the impact seam's laws
#: between bodies, the impulse law against planes; and the shape codes.
#: :func:`simcore.engine.simulate` refuses anything else.
LAWS = ((LAW_IMPULSE,), IMPACT_CODES, (LAW_IMPULSE,))
SHAPES = (SHAPE_SPHERE,)
#: The coefficients held only when named that this engine reads: none.
READS = ()

class Scene(NamedTuple):
    """One scenario's constants (its slices of the batch)."""

    shape: np.ndarray
    radius: np.ndarray
    mass: np.ndarray
    mat: np.ndarray
    wall_n: np.ndarray
    wall_d: np.ndarray
    wall_mat: np.ndarray
    c_body: np.ndarray
    c_t0: np.ndarray
    c_t1: np.ndarray
    c_force: np.ndarray
    samp_t: np.ndarray


class Run(NamedTuple):
    """A run's scalars and coefficients: start and end time, step, gravity,
    nominal ground height, integrator code; the coefficient vector, the
    material tables (:class:`simcore.params.Layout`) and the law code of each
    contact kind (:mod:`simcore.laws.registry`)."""

    t_start: float
    t_end: float
    dt: float
    gravity: float
    ground_z: float
    integrator: int
    params: np.ndarray
    bb_idx: np.ndarray
    bw_idx: np.ndarray
    bg_idx: np.ndarray
    laws: np.ndarray


# Inlined into _run_one, which as a kernel's caller would re-optimise it all once more.
@jit(inline="always")
def _scenario(scene, run, pos, vel, out_pos, out_vel, ev, tan):
    """Simulate one scenario in place from its constants ``scene``, ``run``: the
    state ``pos``, ``vel (nb, 3)``, samples into ``out_pos``, ``out_vel``, events
    into ``ev``, sensitivities into ``tan``; returns ``(status, event_count, t)``.
    The loop is the stages of :mod:`simcore.sliding.stages`, the record fields
    it reads unpacked before it (a field read in the loop costs a reference
    count per pass).  A window ``[t0, t1)`` acts over ``[t0 + lag, t1 + lag)``,
    ``lag = params[TIME_OFFSET]``.  Through dt steps where a direction rotates,
    no event occurs before ``quiet_until``: the search is skipped there."""
    nb = pos.shape[0]
    shape, radius, mass, samp_t = scene.shape, scene.radius, scene.mass, scene.samp_t
    c_body, c_t0, c_t1, c_force = scene.c_body, scene.c_t0, scene.c_t1, scene.c_force
    t_start, t_end, dt, params = run.t_start, run.t_end, run.dt, run.params
    t_param, t_ctrl, meas, signal = tan.t_param, tan.t_ctrl, tan.meas, tan.signal
    nt, ns, symplectic = t_param.shape[0], samp_t.shape[0], run.integrator == INTEGRATOR_SYMPLECTIC
    has_meas = ns > 0 and meas.shape[0] == ns
    planes, bodies, drifting, gc, pc, fl, v3, tg, ts, forcing = _work(scene, run, pos, vel, tan)
    start_dir, force, free_acc, tfa, cw, fric, rm = forcing
    plane_n, inv_m, acc, dacc, g_vth = planes.n, bodies.inv_m, bodies.acc, drifting.acc, gc.v_th
    tpos, tvel, tacc, ttau, ds, tdva = ts.tpos, ts.tvel, ts.tacc, ts.ttau, ts.ds, tg.tdva
    plane_contact, body_contact, modes, zero3 = fl.plane_contact, fl.body_contact, fl.modes, v3.zero3
    sums = Sums(tan.tr_sse, tan.tr_grad, tan.tr_gn)
    lag, p_ground, p_lag = params[TIME_OFFSET], tg.pdir[GROUND_OFFSET], tg.pdir[TIME_OFFSET]
    pbody = S.body_directions(tg.pdir, run.bg_idx, scene.mat)
    nd = sensitivity.ND_SYMPLECTIC if nt > 0 and symplectic else 0
    ks = S.samples_now(np.int64(0), np.searchsorted(samp_t, t_start, "right"), pos, vel, acc,
                       out_pos, out_vel, meas, ts, sums)
    # int64 from the start (a literal 0 would compile the callees once more for it)
    n_ev, status, passes, since = np.int64(0), STATUS_OK, 0, t_start
    need_solve, rotating, grid_step, window_edge, started = True, False, False, False, False
    t, horizon, next_edge, quiet_until = t_start, t_start, t_end, -np.inf
    for _loop in range(MAX_LOOP):
        if t >= t_end:
            break
        grid_next = _grid_after(t, t_start, dt)
        if need_solve:
            # Stages 1-3: forces, sustained contacts, (symplectic) kick.
            next_edge, window_edge = S.forces(t, lag, t_end, run.gravity, inv_m, c_body, c_t0,
                                              c_t1, c_force, force, free_acc)
            if nt > 0:
                tangent.free_acc(nb, t, lag, inv_m, c_body, c_t0, c_t1, t_ctrl, tfa)
                nd |= S.general_contacts(fl, pos, vel, planes, tg)
            h_dir = 0.0
            for _attempt in range(3):
                answer = contact.solve(mass, pos, vel, free_acc, plane_n, fric, fl, start_dir,
                                       acc, h_dir, cw, rm)
                if answer < 0:  # the system needs more room: grow it, solve again
                    rm = contact.room(-answer, rm.ints.shape[0] // 3)
                    continue
                rotating = answer == contact.ROTATING
                n_ev, started = S.log_starts(n_ev, t, modes, start_dir, ev, ttau, tdva, zero3)
                if not rotating or symplectic or h_dir > 0.0:
                    break
                # Directions rotate: step dt with the implicit direction.
                h_dir = min(grid_next, t_end) - t
            if nt > 0:
                S.acc_tangent(vel, free_acc, gc, pbody, fl, h_dir, tvel, tfa, ttau, tacc, signal)
            if symplectic:
                horizon = min(grid_next, t_end)
                n_ev = S.kick(horizon - t, n_ev, t, vel, acc, dacc, g_vth, fl, ev, v3)
            else:
                for i in range(nb):
                    for d in range(3):
                        dacc[i, d] = acc[i, d]
                horizon = next_edge
                if rotating and grid_next < horizon:
                    horizon = grid_next
            grid_step = not symplectic and rotating and horizon == grid_next and not started
            if not grid_step:
                quiet_until = -np.inf
            need_solve = False

        # Stage 4: the earliest event within the horizon (slides: exact only).
        quiet = grid_step and horizon <= quiet_until
        code, ev_a, ev_b, s_best = S.NONE, -1, -1, horizon - t
        if not quiet:
            if not symplectic:
                code, ev_a, ev_b, s_best = S.slide_events(s_best, shape, pos, vel, dacc, g_vth,
                                                          plane_contact, body_contact, modes,
                                                          v3.nrm, v3.rel, v3.at)
            code, ev_a, ev_b, s_best = S.impact_events((code, ev_a, ev_b, s_best), shape, pos,
                                                       vel, dacc, radius, planes, fl, v3.nrm)
            if code == S.UNSUPPORTED_PAIR:
                return STATUS_UNSUPPORTED_PAIR, n_ev, t
            if grid_step and code == S.NONE:
                quiet_until = min(t + S.quiet_time(shape, pos, vel, dacc, free_acc, radius,
                                                   planes, fl, gc), next_edge)
        if code != S.NONE:
            quiet_until = -np.inf
        # Stage 5: advance to the event, writing the samples passed.
        t_new = horizon if code == S.NONE else min(t + s_best, horizon)
        if nt > 0:
            nd |= S.event_time_tangent((code, ev_a, ev_b), t_new - t, pos, vel, dacc, plane_n,
                                       g_vth, p_ground, pbody, ts, signal)
            if code == S.NONE and window_edge and t_new == next_edge and p_lag >= 0:
                ds[p_lag] += 1.0
                signal[p_lag] += 1
        k0, ks = ks, S.sample_segment(t, t_new, ks, pos, vel, dacc, samp_t, out_pos, out_vel)
        if has_meas and ks > k0:
            S.residuals(k0, ks, t, vel, dacc, samp_t, out_pos, meas, ts, sums)
        drift(nb, pos, vel, dacc, t_new - t)
        if nt > 0:
            tangent.drift(nb, vel, dacc, t_new - t, ds, tpos, tvel, tacc, ttau)
        passes, since, stalled = progress(passes, since, t_new)
        if stalled:
            return STATUS_STALLED, n_ev, t_new
        t = t_new

        # Stage 6: resolve the event.
        if code == S.NONE or not symplectic:
            need_solve = True
        if code != S.NONE:
            n_ev, flags = S.resolve((code, ev_a, ev_b), n_ev, t, bodies, planes, gc, pc, fl, v3,
                                    ev, tg)
            nd |= flags
    else:
        status = STATUS_MAX_ITER

    _finish(ks, ns, pos, vel, acc, out_pos, out_vel, ts, sums, tan, nd)
    return status, n_ev, t


@jit(borrow=True)
def _finish(ks, ns, pos, vel, acc, out_pos, out_vel, ts, sums, tan, nd):
    """The samples ``ks:ns`` at the end state, and the tangents at the
    fixed end time (with the scenario's nondiff flags ``nd``)."""
    S.samples_now(ks, ns, pos, vel, acc, out_pos, out_vel, tan.meas, ts, sums)
    if tan.t_param.shape[0] > 0:
        S.final_tangents(vel, acc, ts.tpos, ts.tvel, ts.ttau, tan.fin_tpos, tan.fin_tvel)
        tan.nondiff[0] = nd


@jit(inline="always")
def _work(scene, run, pos, vel, tan):
    """A scenario's work arrays (:func:`simcore.sliding.stages.scratch`,
    :func:`~simcore.sliding.stages.tangent_scratch`) as the stages' records,
    set up at ``run.t_start`` (the tangents seeded, then :func:`_set_up`):
    ``(planes, bodies, drifting, gc, pc, fl, v3, tg, ts, forcing)``, where
    ``drifting`` is ``bodies`` with the drift acceleration ``dacc`` and
    ``forcing`` is ``(start_dir, force, free_acc, tfa, cw, fric, rm)``: the
    contact solve's work arrays, friction tables and first room last."""
    nb = pos.shape[0]
    (plane_n, plane_d, inv_m, gc, pc, start_dir, force, free_acc, acc, dacc, v3,
     fl) = S.scratch(nb, scene.wall_n.shape[0] + 1, run.laws)
    tpos, tvel, tacc, tfa, tsamp, ttau, ds, tdva, tdvb, pdir = S.tangent_scratch(
        nb, tan.t_param.shape[0], run.params.shape[0], tan.t_param)
    planes = S.Planes(plane_n, plane_d)
    bodies = S.Bodies(scene.shape, pos, vel, acc, scene.radius, scene.mass, inv_m)
    drifting = S.Bodies(scene.shape, pos, vel, dacc, scene.radius, scene.mass, inv_m)
    tg = S.Tangents(tpos, tvel, tdva, tdvb, ttau, pdir, tan.signal, scene.mat, scene.wall_mat,
                    run.bg_idx, run.bw_idx, run.bb_idx)
    ts = S.Segment(tpos, tvel, tacc, ttau, tsamp, ds)
    if tan.t_param.shape[0] > 0:
        sensitivity.seed(nb, tan.t_vel, tvel)
    _set_up(scene, run, pos, vel, inv_m, planes, gc, pc, fl, tg, v3.nrm)
    cw, fric = contact.work(nb, plane_n.shape[0]), (gc.mu_s, gc.mu_k, pc.pl_mu, pc.b_mu)
    rm = contact.room(2 * nb + contact.FIRST_ROOM)
    return planes, bodies, drifting, gc, pc, fl, v3, tg, ts, (start_dir, force, free_acc, tfa, cw,
                                                              fric, rm)


@jit(inline="always")
def _grid_after(t, t_start, dt):
    """The first grid time ``t_start + k dt`` after ``t`` (for symplectic
    kicks and rotating directions)."""
    kgrid = np.floor((t - t_start) / dt)
    grid_next = t_start + (kgrid + 1.0) * dt
    if grid_next <= t:
        grid_next = t_start + (kgrid + 2.0) * dt
    return grid_next


@jit
def _set_up(scene, run, pos, vel, inv_m, planes, gc, pc, fl, tg, nrm):
    """The planes, the coefficients through the material tables, and the
    contacts present at the start.  The ground is the plane ``z = ground_z +
    params[GROUND_OFFSET]``; a body resting on the nominal plane starts
    resting on that one, its height's tangent ``d z / d ground_offset = 1``."""
    params = run.params
    ground = run.ground_z + params[GROUND_OFFSET]
    S.set_planes(scene.shape, pos, scene.radius, scene.wall_n, scene.wall_d, ground, run.ground_z,
                 planes.n, planes.d)
    S.set_coefficients(scene.mass, scene.mat, scene.wall_mat, params, run.bg_idx, run.bw_idx,
                       run.bb_idx, inv_m, gc, pc)
    S.initial_contacts(scene.shape, pos, vel, scene.radius, planes, gc.v_th, fl,
                       tg.tpos, tg.tvel, tg.signal, tg.pdir[GROUND_OFFSET], nrm)


@jit(address=True)
def _run_one(s, b, out, tan):
    """Scenario ``s`` of a batch: slice its arrays and run it (``b.params``
    holds one row of coefficients for all, or a row per scenario)."""
    nb = b.body_count[s]
    nw = b.wall_count[s]
    c0 = b.ctrl_ptr[s]
    c1 = b.ctrl_ptr[s + 1]
    k0 = b.samp_ptr[s]
    k1 = b.samp_ptr[s + 1]
    prow = s if b.params.shape[0] > 1 else 0
    if out.out_pos.shape[0] == 0:
        # Samples not kept: this scenario's own scratch, not one batch-wide array.
        o_pos = np.empty((k1 - k0, nb, 3))
        o_vel = np.empty((k1 - k0, nb, 3))
    else:
        o_pos = out.out_pos[k0:k1]
        o_vel = out.out_vel[k0:k1]
    scene = Scene(b.body_shape[s, :nb], b.body_radius[s, :nb], b.body_mass[s, :nb],
                  b.body_material[s, :nb], b.wall_normal[s, :nw], b.wall_offset[s, :nw],
                  b.wall_material[s, :nw], b.ctrl_body[c0:c1], b.ctrl_t0[c0:c1], b.ctrl_t1[c0:c1],
                  b.ctrl_force[c0:c1], b.samp_t[k0:k1])
    run = Run(out.time[s], b.scen_t_end[s], b.scen_dt[s], b.gravity, b.ground_z, b.integrator,
              b.params[prow], b.bb_idx, b.bw_idx, b.bg_idx, b.laws)
    ev = EventLog(out.ev_f[s], out.ev_i[s], tan.ev_tt[s], tan.ev_tdva[s], tan.ev_tdvb[s])
    mine = TangentIO(tan.t_param, tan.t_vel, tan.t_ctrl, tan.meas[k0:k1], tan.tr_sse[s:s + 1],
                     tan.tr_grad[s], tan.tr_gn[s], tan.fin_tpos[s], tan.fin_tvel[s],
                     tan.ev_tt[s], tan.ev_tdva[s], tan.ev_tdvb[s], tan.signal[s],
                     tan.nondiff[s:s + 1], tan.t_omega, tan.t_pos, tan.t_rot)
    st, ne, tf = _scenario(scene, run, out.pos[s, :nb], out.vel[s, :nb], o_pos, o_vel, ev, mine)
    out.status[s] = st
    out.ev_count[s] = ne
    out.time[s] = tf


def run(batch, pos, vel, time, cap, parallel, tan, keep=True):
    """Run the scenarios of ``batch`` (:class:`Batch`) with event capacity
    ``cap``: ``pos``, ``vel``, ``time`` are their state, advanced in place;
    ``tan`` the tangent buffers (:class:`TangentIO`).  Returns the
    :class:`simcore.kernel.records.Outputs`."""
    nscen, nbmax = batch.body_radius.shape
    rows = batch.samp_t.shape[0] if keep else 0
    out = outputs(pos, vel, time, rows=rows, cap=cap, zeros=buffers.zeros)
    # ``time`` is both the start time (read first) and the end time (written
    # last) of each scenario.
    drivers.run_each(_run_one, batch, out, tan, parallel)
    return out
