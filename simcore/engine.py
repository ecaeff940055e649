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

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from .kernel import buffers, drivers
from .rigid import rigid_engine
from .sliding import contact, tangent
from .spin import spin_engine
from .sliding import stages as S
from .kernel.config import MAX_LOOP, jit
from .kernel.events import EVENT_FIELDS, EVENT_KINDS, FIELD_COLUMNS, EVF_WIDTH, EVI_WIDTH
from .sliding.integrate import INTEGRATOR_PENALTY, INTEGRATOR_SYMPLECTIC, drift
from .kernel.parameter import GROUND_OFFSET, TIME_OFFSET, Parameter

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

#: Events at one instant after which a scenario is declared stalled.
MAX_ZERO_STEPS = 100_000


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


class TangentIO(NamedTuple):
    """Sensitivity inputs and outputs (see :mod:`simcore.sliding.tangent`): the
    directions ``t_param``, ``t_vel``, ``t_ctrl (NT,)``; the measured
    positions ``meas (ns, nbmax, 3)`` at the sample times (NaN: missing; no
    rows: no trajectory loss) and the residual sums ``tr_sse``, ``tr_grad
    (NT,)``, ``tr_gn (NT, NT)`` (or ``(0, 0)``); the final-state tangents
    ``fin_tpos``, ``fin_tvel (nbmax, 3, NT)``; the event tangents ``ev_tt
    (cap, NT)``, ``ev_tdva``, ``ev_tdvb (cap, 3, NT)``; ``signal (NT,)`` and
    ``nondiff``; ``t_omega (NT,)`` the initial-spin directions (read by the
    spinning model only).  Per batch, every array but the directions and
    ``meas`` has a leading scenario axis."""

    t_param: np.ndarray
    t_vel: np.ndarray
    t_ctrl: np.ndarray
    meas: np.ndarray
    tr_sse: np.ndarray
    tr_grad: np.ndarray
    tr_gn: np.ndarray
    fin_tpos: np.ndarray
    fin_tvel: np.ndarray
    ev_tt: np.ndarray
    ev_tdva: np.ndarray
    ev_tdvb: np.ndarray
    signal: np.ndarray
    nondiff: np.ndarray
    t_omega: np.ndarray


class Batch(NamedTuple):
    """A batch's constants as the kernels see them (a :class:`Model`'s arrays
    in scenario order, controls in CSR form, sample times in CSR form), for
    both loops (the spinning one reads ``wall_height`` and ignores the
    controls, dt and integrator)."""

    body_count: np.ndarray
    body_shape: np.ndarray
    body_radius: np.ndarray
    body_mass: np.ndarray
    body_mat: np.ndarray
    wall_count: np.ndarray
    wall_normal: np.ndarray
    wall_offset: np.ndarray
    wall_mat: np.ndarray
    ctrl_ptr: np.ndarray
    ctrl_body: np.ndarray
    ctrl_t0: np.ndarray
    ctrl_t1: np.ndarray
    ctrl_force: np.ndarray
    scen_t_end: np.ndarray
    scen_dt: np.ndarray
    samp_ptr: np.ndarray
    samp_t: np.ndarray
    params: np.ndarray
    bb_idx: np.ndarray
    bw_idx: np.ndarray
    bg_idx: np.ndarray
    laws: np.ndarray
    gravity: float
    ground_z: float
    integrator: int
    wall_height: np.ndarray
    ctrl_torque: np.ndarray


class Outputs(NamedTuple):
    """What a batch run writes: the state ``pos``, ``vel (nscen, nbmax, 3)``
    and ``time (nscen,)`` (start times in, end times out), the samples
    ``out_pos``, ``out_vel (M, nbmax, 3)`` (or no rows: not kept), the event
    logs ``ev_f (nscen, cap, EVF_WIDTH)``, ``ev_i (nscen, cap, EVI_WIDTH)``,
    each scenario's ``status`` and event count ``ev_count``."""

    pos: np.ndarray
    vel: np.ndarray
    time: np.ndarray
    out_pos: np.ndarray
    out_vel: np.ndarray
    ev_f: np.ndarray
    ev_i: np.ndarray
    status: np.ndarray
    ev_count: np.ndarray


# Inlined into _run_one, which as a kernel's caller would re-optimise it all once more.
@jit(inline="always")
def _scenario(scene, run, pos, vel, out_pos, out_vel, ev, tan):
    """Simulate one scenario in place; returns ``(status, event_count, t)``.

    ``scene``, ``run``: its constants; the state ``pos``, ``vel (nb, 3)`` is
    advanced in place; samples go to ``out_pos``, ``out_vel``, events to ``ev``
    (:class:`simcore.sliding.stages.EventLog`), sensitivities to ``tan`` (:class:`TangentIO`).
    The loop is the list of stages of :mod:`simcore.sliding.stages`; the record fields
    it reads are unpacked before it (a field read in the loop costs a reference
    count per pass).  A window logged as ``[t0, t1)`` acts over ``[t0 + lag,
    t1 + lag)``, ``lag = params[TIME_OFFSET]``; its edges move with the lag.
    """
    nb = pos.shape[0]
    shape, radius, mass, samp_t = scene.shape, scene.radius, scene.mass, scene.samp_t
    c_body, c_t0, c_t1, c_force = scene.c_body, scene.c_t0, scene.c_t1, scene.c_force
    t_start, t_end, dt, params = run.t_start, run.t_end, run.dt, run.params
    t_param, t_ctrl, meas, signal = tan.t_param, tan.t_ctrl, tan.meas, tan.signal
    ev_f, ev_i, ev_tt, ev_tdva, ev_tdvb = ev.f, ev.i, ev.tt, ev.tdva, ev.tdvb
    nt, ns, symplectic = t_param.shape[0], samp_t.shape[0], run.integrator == INTEGRATOR_SYMPLECTIC
    has_meas = ns > 0 and meas.shape[0] == ns
    (plane_n, plane_d, inv_m, gc, pc, start_dir, force, free_acc, acc, dacc, v3,
     fl) = S.scratch(nb, scene.wall_n.shape[0] + 1, run.laws)
    tpos, tvel, tacc, tfa, tsamp, ttau, ds, tdva, tdvb, pdir = S.tangent_scratch(
        nb, nt, params.shape[0], t_param)
    g_mu_s, g_mu_k, g_vth, pl_mu, b_mu = gc.mu_s, gc.mu_k, gc.v_th, pc.pl_mu, pc.b_mu
    plane_contact, body_contact, modes = fl.plane_contact, fl.body_contact, fl.modes
    nrm, dva, zero3, rel, at = v3.nrm, v3.dva, v3.zero3, v3.rel, v3.at
    planes = S.Planes(plane_n, plane_d)
    bodies = S.Bodies(shape, pos, vel, acc, radius, mass, inv_m)
    tg = S.Tangents(tpos, tvel, tdva, tdvb, ttau, pdir, signal, scene.mat, scene.wall_mat,
                    run.bg_idx, run.bw_idx, run.bb_idx)
    ts = S.Segment(tpos, tvel, tacc, ttau, tsamp, ds)
    sums = S.Sums(tan.tr_sse, tan.tr_grad, tan.tr_gn)
    lag, p_ground, p_lag = params[TIME_OFFSET], pdir[GROUND_OFFSET], pdir[TIME_OFFSET]
    pbody = S.body_directions(pdir, run.bg_idx, scene.mat)
    nd = tangent.ND_SYMPLECTIC if nt > 0 and symplectic else 0
    if nt > 0:
        tangent.seed(nb, tan.t_vel, tvel)
    _set_up(scene, run, pos, vel, inv_m, planes, gc, pc, fl, tg, nrm)
    t = t_start
    ks = S.samples_now(np.int64(0), np.searchsorted(samp_t, t, "right"), pos, vel, acc, out_pos,
                       out_vel, meas, ts, sums)
    # int64 from the start (a literal 0 would compile the callees once more for it)
    n_ev, status, zero_steps = np.int64(0), STATUS_OK, 0
    need_solve, rotating, grid_step, window_edge, started = True, False, False, False, False
    horizon, next_edge = t, t_end
    # Through a run of dt steps where a direction rotates, no event can occur
    # before ``quiet_until`` (stages.quiet_time): the search is skipped there.
    quiet_until = -np.inf
    for _loop in range(MAX_LOOP):
        if t >= t_end:
            break
        # Grid time after t (for symplectic kicks and rotating directions).
        kgrid = np.floor((t - t_start) / dt)
        grid_next = t_start + (kgrid + 1.0) * dt
        if grid_next <= t:
            grid_next = t_start + (kgrid + 2.0) * dt
        if need_solve:
            # Stages 1-3: forces, sustained contacts, (symplectic) kick.
            next_edge, window_edge = S.forces(t, lag, t_end, run.gravity, inv_m, c_body, c_t0,
                                              c_t1, c_force, force, free_acc)
            if nt > 0:
                tangent.free_acc(nb, t, lag, inv_m, c_body, c_t0, c_t1, t_ctrl, tfa)
                nd |= S.general_contacts(plane_contact, body_contact)
            h_dir = 0.0
            for _attempt in range(2):
                rotating = contact.solve(mass, pos, vel, free_acc, plane_n, pl_mu, g_mu_s, g_mu_k,
                                         plane_contact, body_contact, b_mu, modes, start_dir,
                                         acc, h_dir)
                n_ev, started = S.log_starts(n_ev, t, modes, start_dir, ev_f, ev_i, ev_tt,
                                             ev_tdva, ev_tdvb, ttau, tdva, zero3)
                if not rotating or symplectic:
                    break
                # Directions rotate: step dt with the implicit direction.
                h_dir = min(grid_next, t_end) - t
            if nt > 0:
                S.acc_tangent(vel, free_acc, g_mu_s, g_mu_k, pbody, plane_contact, modes, h_dir,
                              tvel, tfa, ttau, tacc, signal)
            if symplectic:
                horizon = min(grid_next, t_end)
                n_ev = S.kick(horizon - t, n_ev, t, vel, acc, dacc, g_vth, plane_contact, modes,
                              ev_f, ev_i, dva, zero3)
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
                                                          nrm, rel, at)
            code, ev_a, ev_b, s_best = S.impact_events(s_best, code, ev_a, ev_b, shape, pos, vel,
                                                       dacc, radius, plane_n, plane_d,
                                                       plane_contact, body_contact, nrm)
            if code == S.UNSUPPORTED_PAIR:
                return STATUS_UNSUPPORTED_PAIR, n_ev, t
            if grid_step and code == S.NONE:
                # The bound holds while the forces do: up to the next window edge.
                quiet_until = min(t + S.quiet_time(shape, pos, vel, dacc, free_acc, radius,
                                                   plane_n, plane_d, plane_contact, body_contact,
                                                   modes, g_mu_s, g_mu_k, g_vth), next_edge)
        if code != S.NONE:
            quiet_until = -np.inf
        # Stage 5: advance to the event, writing the samples passed.
        t_new = horizon if code == S.NONE else min(t + s_best, horizon)
        if nt > 0:
            nd |= S.event_time_tangent(code, ev_a, ev_b, t_new - t, pos, vel, dacc, plane_n,
                                       g_vth, p_ground, pbody, ts, signal)
            if code == S.NONE and window_edge and t_new == next_edge and p_lag >= 0:
                ds[p_lag] += 1.0
                signal[p_lag] += 1
        k0 = ks
        ks = S.sample_segment(t, t_new, ks, pos, vel, dacc, samp_t, out_pos, out_vel)
        if has_meas and ks > k0:
            S.residuals(k0, ks, t, vel, dacc, samp_t, out_pos, meas, ts, sums)
        drift(nb, pos, vel, dacc, t_new - t)
        if nt > 0:
            tangent.drift(nb, vel, dacc, t_new - t, ds, tpos, tvel, tacc, ttau)
        zero_steps = zero_steps + 1 if t_new == t else 0
        if zero_steps > MAX_ZERO_STEPS:
            return STATUS_STALLED, n_ev, t
        t = t_new

        # Stage 6: resolve the event.
        if code == S.NONE or not symplectic:
            need_solve = True
        if code != S.NONE:
            n_ev, flags = S.resolve(code, ev_a, ev_b, n_ev, t, bodies, planes, gc, pc, fl, v3, ev,
                                    tg)
            nd |= flags
    else:
        status = STATUS_MAX_ITER

    S.samples_now(ks, ns, pos, vel, acc, out_pos, out_vel, meas, ts, sums)
    if nt > 0:
        S.final_tangents(vel, acc, tpos, tvel, ttau, tan.fin_tpos, tan.fin_tvel)
        tan.nondiff[0] = nd
    return status, n_ev, t


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
    S.initial_contacts(scene.shape, pos, vel, scene.radius, planes.n, planes.d, gc.v_th, fl,
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
                  b.body_mat[s, :nb], b.wall_normal[s, :nw], b.wall_offset[s, :nw],
                  b.wall_mat[s, :nw], b.ctrl_body[c0:c1], b.ctrl_t0[c0:c1], b.ctrl_t1[c0:c1],
                  b.ctrl_force[c0:c1], b.samp_t[k0:k1])
    run = Run(out.time[s], b.scen_t_end[s], b.scen_dt[s], b.gravity, b.ground_z, b.integrator,
              b.params[prow], b.bb_idx, b.bw_idx, b.bg_idx, b.laws)
    ev = S.EventLog(out.ev_f[s], out.ev_i[s], tan.ev_tt[s], tan.ev_tdva[s], tan.ev_tdvb[s])
    mine = TangentIO(tan.t_param, tan.t_vel, tan.t_ctrl, tan.meas[k0:k1], tan.tr_sse[s:s + 1],
                     tan.tr_grad[s], tan.tr_gn[s], tan.fin_tpos[s], tan.fin_tvel[s],
                     tan.ev_tt[s], tan.ev_tdva[s], tan.ev_tdvb[s], tan.signal[s],
                     tan.nondiff[s:s + 1], tan.t_omega)
    st, ne, tf = _scenario(scene, run, out.pos[s, :nb], out.vel[s, :nb], o_pos, o_vel, ev, mine)
    out.status[s] = st
    out.ev_count[s] = ne
    out.time[s] = tf


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
    ``samp_omega (M, nbody, 3)``: the sampled angular velocities [rad/s] of a
    spinning model (:mod:`simcore.spin.spin`) or of rigid bodies (None for the
    sliding one, whose bodies do not turn); ``final.body_omega`` holds the
    final ones.  Rigid bodies (the time-stepper, :mod:`simcore.rigid.rigid_engine`)
    also have ``samp_quat (M, nbody, 4)`` and ``final.body_quat``, the
    orientations, and ``steps (nscen,)``, the steps each scenario took; the
    time-stepper logs no events (its contacts are forces, not impacts).
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
    samp_omega: np.ndarray | None = None
    samp_quat: np.ndarray | None = None
    steps: np.ndarray | None = None

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
    the ``q``-th control window of each scenario; the initial angular velocity
    component ``omega[p] = 3 i + d`` of body ``i`` (the spinning model; the
    sliding one has no spin to move).  Unused entries are -1.
    """

    param: np.ndarray
    vel: np.ndarray
    ctrl: np.ndarray
    labels: tuple
    omega: np.ndarray = None

    def __post_init__(self):
        if self.omega is None:
            object.__setattr__(self, "omega", np.full(self.param.shape[0], -1, np.int64))

    @property
    def count(self):
        return self.param.shape[0]

    @classmethod
    def build(cls, params=(), velocities=(), controls=(), names=None, spins=()):
        """From parameter indices, ``(body, dim)`` pairs of initial velocities,
        ``(control, dim)`` pairs and ``(body, dim)`` pairs of initial spins;
        ``names``: the coefficient vector's names (default the global ones)."""
        if names is None:
            from .params import NAMES as names
        rows = ([(int(q), -1, -1, -1, names[q] if q < len(names) else f"param{q}")
                 for q in params]
                + [(-1, 3 * int(i) + int(d), -1, -1, f"v0[{i}].{'xyz'[d]}")
                   for i, d in velocities]
                + [(-1, -1, 3 * int(q) + int(d), -1, f"u[{q}].{'xyz'[d]}") for q, d in controls]
                + [(-1, -1, -1, 3 * int(i) + int(d), f"w0[{i}].{'xyz'[d]}") for i, d in spins])
        col = [np.array([r[k] for r in rows], np.int64).reshape(-1) for k in range(4)]
        return cls(col[0], col[1], col[2], tuple(r[4] for r in rows), col[3])


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


def _sensitivities(directions, tan, event_t, event_dva, event_dvb):
    """The :class:`Sensitivities` of a run's tangent buffers (``tan``) and
    its packed event tangents; ``J^T J`` mirrored from the upper triangle
    the kernels fill."""
    gn = tan.tr_gn
    if gn.shape[1]:
        gn = np.triu(gn) + np.transpose(np.triu(gn, 1), (0, 2, 1))
    return Sensitivities(directions, tan.fin_tpos, tan.fin_tvel, event_t, event_dva, event_dvb,
                         tan.tr_sse, tan.tr_grad, gn, tan.signal, tan.nondiff)


def _tangent_buffers(model, scen, directions, measured, gauss_newton, cap):
    nscen = scen.shape[0]
    nbmax = model.body_radius.shape[1]
    nt = directions.count
    meas = np.zeros((0, nbmax, 3)) if measured is None else measured
    ng = nt if gauss_newton else 0
    return TangentIO(directions.param, directions.vel, directions.ctrl, meas,
                     np.zeros(nscen), np.zeros((nscen, nt)), np.zeros((nscen, ng, ng)),
                     np.zeros((nscen, nbmax, 3, nt)), np.zeros((nscen, nbmax, 3, nt)),
                     np.zeros((nscen, cap, nt)), np.zeros((nscen, cap, 3, nt)),
                     np.zeros((nscen, cap, 3, nt)), np.zeros((nscen, nt), np.int64),
                     np.zeros(nscen, np.int64), directions.omega)


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


def _batch(model, scen, samp_ptr, samp_t):
    """The :class:`Batch` of the scenarios ``scen`` (indices into ``model``)
    with their sample times in CSR form."""
    m = model
    nscen = scen.shape[0]
    ctrl_ptr = m.ctrl_ptr
    every = nscen == m.nscen and bool(np.all(scen == np.arange(nscen)))
    ctrl_rows = np.arange(m.ctrl_body.shape[0]) if every else np.concatenate(
        [np.arange(ctrl_ptr[s], ctrl_ptr[s + 1]) for s in scen] + [np.zeros(0, np.int64)]
    ).astype(np.int64)
    sub_ptr = np.zeros(nscen + 1, np.int64)
    sub_ptr[1:] = np.cumsum(ctrl_ptr[scen + 1] - ctrl_ptr[scen])
    height = (m.wall_height[scen] if m.wall_height is not None
              else np.full(m.wall_offset[scen].shape, np.nan))
    return Batch(m.body_count[scen], m.body_shape[scen], m.body_radius[scen], m.body_mass[scen],
                 m.body_material[scen], m.wall_count[scen], m.wall_normal[scen],
                 m.wall_offset[scen], m.wall_material[scen], sub_ptr, m.ctrl_body[ctrl_rows],
                 m.ctrl_t0[ctrl_rows], m.ctrl_t1[ctrl_rows], m.ctrl_force[ctrl_rows],
                 m.scen_t_end[scen], m.scen_dt[scen], samp_ptr, samp_t,
                 m.params[scen] if m.params.ndim == 2 else m.params[None, :],
                 m.layout.bb, m.layout.bw, m.layout.bg, m.layout.law_codes, float(m.gravity),
                 float(m.ground_z), int(m.integrator), height, m.ctrl_torque[ctrl_rows])


def _run(batch, pos, vel, time, cap, parallel, tan, keep=True):
    """Run the scenarios of ``batch`` (:class:`Batch`) with event capacity
    ``cap``: ``pos``, ``vel``, ``time`` are their state, advanced in place;
    ``tan`` the tangent buffers (:class:`TangentIO`).  Returns the
    :class:`Outputs`."""
    nscen, nbmax = batch.body_radius.shape
    rows = batch.samp_t.shape[0] if keep else 0
    out = Outputs(pos, vel, time, buffers.zeros((rows, nbmax, 3)),
                  buffers.zeros((rows, nbmax, 3)), np.empty((nscen, cap, EVF_WIDTH)),
                  np.empty((nscen, cap, EVI_WIDTH), np.int64), np.zeros(nscen, np.int64),
                  np.zeros(nscen, np.int64))
    # ``time`` is both the start time (read first) and the end time (written
    # last) of each scenario.
    drivers.run_each(_run_one, batch, out, tan, parallel)
    return out


def _dispatch(model, scen, st, samp_ptr, samp_t, cap, parallel, tan, keep=True):
    """Run the scenarios ``scen`` from the state ``st`` (their subset,
    advanced in place) under the model's motion: the spinning model's loop
    (:mod:`simcore.spin.spin_engine`) or the sliding one (:func:`_run`)."""
    batch = _batch(model, scen, samp_ptr, samp_t)
    if model.spin:
        return spin_engine.run(batch, st.body_pos, st.body_vel, st.body_omega, st.time, cap,
                               parallel, tan, keep)
    return _run(batch, st.body_pos, st.body_vel, st.time, cap, parallel, tan, keep)


def _rigid_batch(model, samp_ptr, samp_t):
    """The time-stepper's :class:`simcore.rigid.rigid_engine.Batch` of ``model``."""
    m = model
    rows_g, rows_b, rows_w = m.layout.penalty_rows()
    return rigid_engine.Batch(
        m.body_count, m.body_shape, m.body_ext, m.body_mass, m.body_inertia,
        np.zeros_like(m.body_ext) if m.body_com is None else m.body_com, m.body_fixed,
        m.body_material, m.wall_count, m.wall_normal, m.wall_offset, m.wall_material,
        m.ctrl_ptr, m.ctrl_body, m.ctrl_t0, m.ctrl_t1, m.ctrl_force, m.ctrl_torque,
        m.scen_t_end, m.scen_dt,
        samp_ptr, samp_t, m.params if m.params.ndim == 2 else m.params[None, :], rows_g,
        rows_b, rows_w, m.layout.law_codes, int(m.cone), float(m.gravity), float(m.ground_z))


def contacts(model, state, s):
    """The contact points of scenario ``s`` of a time-stepped ``model`` at
    ``state``, with the forces of one step there (per point, as the document
    ``003_*`` lists them: contact flag, normal, friction and total force,
    penetration; see :func:`simcore.rigid.rigid_engine.report`)."""
    if model.integrator != INTEGRATOR_PENALTY:
        raise ValueError("contacts(): the model is not time-stepped (boxes or penalty laws)")
    st = state.copy()
    return rigid_engine.report(_rigid_batch(model, np.zeros(model.nscen + 1, np.int64),
                                            np.zeros(0)),
                               st.body_pos, st.body_vel, st.body_omega, st.body_quat, st.time,
                               int(s))


def _simulate_rigid(model, state, samp_ptr, samp_t, parallel, keep, directions, measured,
                    gauss_newton):
    """:func:`simulate` on the time-stepper (:mod:`simcore.rigid.rigid_engine`),
    with the sensitivities of :mod:`simcore.rigid.rigid_tangent` when asked."""
    m = model
    batch = _rigid_batch(model, samp_ptr, samp_t)
    final = state.copy()
    want = directions is not None or measured is not None
    tan = None
    if want:
        directions = NO_DIRECTIONS if directions is None else directions
        tan = _tangent_buffers(model, np.arange(m.nscen), directions, measured, gauss_newton, 0)
    out = rigid_engine.run(batch, final.body_pos, final.body_vel, final.body_omega,
                           final.body_quat, final.time, parallel, keep, tan)
    bad = np.flatnonzero(out.status != rigid_engine.STATUS_OK)
    if bad.size:
        s = int(bad[0])
        raise RuntimeError(f"scenario {m.names[s] if m.names else s!r}: "
                           f"{rigid_engine.STATUS_MESSAGES[out.status[s]]} (stopped at t = "
                           f"{final.time[s]}); {bad.size} scenario(s) failed")
    events = {f: np.zeros((0, 3) if f in ("normal", "dva", "dvb") else 0,
                          np.int64 if f in ("kind", "a", "b", "slip") else np.float64)
              for f in EVENT_FIELDS}
    sens = None
    if want:
        nt = directions.count
        _mark_blown(m, directions, tan)
        sens = _sensitivities(directions, tan, np.zeros((0, nt)), np.zeros((0, 3, nt)),
                              np.zeros((0, 3, nt)))
    return SimResult(samp_ptr, samp_t, out.out_pos, out.out_vel, final,
                     np.zeros(m.nscen + 1, np.int64),
                     **{"event_" + f: v for f, v in events.items()}, sens=sens,
                     samp_omega=out.out_omega, samp_quat=out.out_quat, steps=out.steps)


#: A time-stepped scenario whose final-state tangents exceed this, in metres
#: (or m/s) per relative change of a coefficient (per m/s of an initial
#: state, per metre of the ground offset), is marked ``ND_STIFF``.
TANGENT_BLOWUP = 1e6


def _mark_blown(model, directions, tan):
    """Mark the time-stepped scenarios whose tangents blew up (non-finite,
    or above :data:`TANGENT_BLOWUP`): where the step's derivative is
    expanding, exact and useless (a box started a millimetre into the
    ground creeps out under the damping of a zero-speed touch, its tangents
    growing tenfold every few dozen steps while finite perturbations stay
    small); the fitter takes their gradient by finite differences."""
    if not directions.count:
        return
    params = model.params if model.params.ndim == 2 else model.params[None, :]
    q = directions.param
    scale = np.where(q >= 0, np.abs(params[:, np.maximum(q, 0)]), 1.0)
    scale = np.where(scale > 0, scale, 1.0)  # (an offset at 0: per metre)
    size = np.maximum(np.abs(tan.fin_tpos).max(axis=(1, 2), initial=0.0),
                      np.abs(tan.fin_tvel).max(axis=(1, 2), initial=0.0)) * scale
    bad = ~np.isfinite(size).all(axis=1) | (np.nan_to_num(size, nan=np.inf).max(axis=1)
                                            > TANGENT_BLOWUP)
    bad |= ~np.isfinite(tan.tr_grad).all(axis=1)
    tan.nondiff[bad] |= tangent.ND_STIFF


def _events(out, tan):
    """The named event fields (:data:`EVENT_FIELDS`) and their tangents
    (``t``, ``dva``, ``dvb``) of a run's logs, per scenario and slot."""
    logs = {"f": out.ev_f, "i": out.ev_i}
    fields = {}
    for name, (which, col, width) in FIELD_COLUMNS.items():
        log = logs[which]
        fields[name] = log[..., col] if width == 1 else log[..., col:col + width]
    fields.update(tan_t=tan.ev_tt, tan_dva=tan.ev_tdva, tan_dvb=tan.ev_tdvb)
    return fields


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
    if measured is not None:
        measured = np.ascontiguousarray(measured, dtype=np.float64)
        if measured.shape != (samp_t.shape[0], model.body_radius.shape[1], 3):
            raise ValueError(f"measured has shape {measured.shape}; expected "
                             f"{(samp_t.shape[0], model.body_radius.shape[1], 3)} "
                             "(one row per sample time)")
    if model.integrator == INTEGRATOR_PENALTY:
        return _simulate_rigid(model, state, samp_ptr, samp_t, parallel, keep_samples,
                               directions, measured, gauss_newton)
    nscen = model.nscen
    cap = max(1, int(event_capacity))
    final = state.copy()
    every = np.arange(nscen)
    want = directions is not None or measured is not None
    directions = NO_DIRECTIONS if directions is None else directions
    tan = _tangent_buffers(model, every, directions, measured, gauss_newton, cap)
    out = _dispatch(model, every, final, samp_ptr, samp_t, cap, parallel, tan, keep_samples)
    status, ev_count = out.status, out.ev_count
    bad = np.flatnonzero(status != STATUS_OK)
    if bad.size:
        s = int(bad[0])
        name = model.names[s] if model.names else s
        raise RuntimeError(
            f"scenario {name!r}: {STATUS_MESSAGES[status[s]]} "
            f"(stopped at t = {final.time[s]}); {bad.size} scenario(s) failed")
    # Pack the events (row-major order of the buffers is CSR order),
    # re-running the scenarios that overflowed their buffer.
    logs = _events(out, tan)
    ptr = np.zeros(nscen + 1, np.int64)
    ptr[1:] = np.cumsum(ev_count)
    keep = ev_count <= cap
    mask = (np.arange(cap)[None, :] < ev_count[:, None]) & keep[:, None]
    if keep.all():
        flat = {k: b[mask] for k, b in logs.items()}
    else:
        rows = (ptr[:-1, None] + np.arange(cap)[None, :])[mask]
        flat = {k: np.zeros((int(ptr[-1]),) + b.shape[2:], b.dtype) for k, b in logs.items()}
        for k, b in logs.items():
            flat[k][rows] = b[mask]
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
        out_b = _dispatch(model, idx, state.subset(idx), np.zeros(idx.size + 1, np.int64),
                          np.zeros(0), cap_b, parallel, tan_b)
        for k, b in _events(out_b, tan_b).items():
            for q, s in enumerate(idx):
                flat[k][ptr[s]:ptr[s + 1]] = b[q, :out_b.ev_count[q]]
        i = j
    sens = None
    if want:
        sens = _sensitivities(directions, tan, flat["tan_t"], flat["tan_dva"], flat["tan_dvb"])
    return SimResult(samp_ptr, samp_t, out.out_pos, out.out_vel, final, ptr,
                     **{"event_" + f: flat[f] for f in EVENT_FIELDS}, sens=sens,
                     samp_omega=out.out_omega if model.spin else None)
