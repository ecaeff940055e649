"""The event loop: one scenario at a time, a batch of them in parallel.

:func:`_scenario` is the driver; each pass of its loop is the list of stages
of :mod:`simcore.stages` (forces, sustained contacts, the next event, the
advance to it) and :mod:`simcore.resolve` (the event's impulse or mode
change).  Simultaneous events are resolved one at a time in a fixed order
(lowest body, then plane or partner index), so results are deterministic and
identical between serial and parallel runs.  A sample that falls exactly on
an event time reports the state before that event.

:func:`simulate` is the public entry: it validates, allocates the batch's
buffers, runs the kernels (:func:`_simulate_parallel` over scenarios with
``prange``, or :func:`_simulate_serial`) and packs the ragged results.
"""

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from numba import njit, prange

from . import buffers, events, stages
from .config import JIT_PARALLEL, MAX_LOOP, jit
from .events import EVENT_FIELDS, EVENT_KINDS, scenario_log  # noqa: F401  (re-exported)
from .integrate import INTEGRATOR_SYMPLECTIC
from .records import Scene, Sens, tangent_workspace, workspace
from .resolve import resolve


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


@jit
def _grid_next(t, t_start, dt):
    """The first time of the ``dt`` grid from ``t_start`` after ``t``."""
    kgrid = np.floor((t - t_start) / dt)
    grid_next = t_start + (kgrid + 1.0) * dt
    if grid_next <= t:
        grid_next = t_start + (kgrid + 2.0) * dt
    return grid_next


@jit
def _scenario(sc, pos, vel, out_pos, out_vel, ev, sens):
    """Simulate one scenario in place; returns ``(status, t)``.

    ``sc`` is its :class:`~simcore.records.Scene`; ``pos``, ``vel (nb, 3)``
    the state, advanced in place; ``out_pos``, ``out_vel (ns, nbmax, 3)``
    the samples; ``ev`` its :class:`~simcore.events.EventLog`; ``sens`` its
    :class:`~simcore.records.Sens` (``NT = 0``: only the trajectory loss).
    """
    nb = sc.radius.shape[0]
    nt = sens.t_param.shape[0]
    symplectic = sc.integrator == INTEGRATOR_SYMPLECTIC
    w = workspace(nb, sc.wall_n.shape[0])
    tw = tangent_workspace(nb, nt, sc.params.shape[0])
    nd = stages.setup(sc, w, tw, sens, pos, vel)
    t = sc.t_start
    ks = stages.sample_here(sc, tw, sens, pos, vel, w.acc, out_pos, out_vel, 0, t)

    status = STATUS_OK
    need_solve = True
    horizon = t
    next_edge = sc.t_end
    window_edge = False
    zero_steps = 0
    # Through a run of dt steps where a direction rotates, no event can occur
    # before ``quiet_until`` (stages.quiet_time): the search is skipped there.
    quiet_until = -np.inf
    grid_step = False
    for _loop in range(MAX_LOOP):
        if t >= sc.t_end:
            break
        grid_next = _grid_next(t, sc.t_start, sc.dt)
        if need_solve:
            next_edge, window_edge = stages.forces(sc, w, tw, sens, t)
            rotating, flags = stages.sustained_contacts(sc, w, tw, sens, ev, pos, vel, t,
                                                        grid_next)
            nd |= flags
            if symplectic:
                horizon = min(grid_next, sc.t_end)
                stages.symplectic_kick(sc, w, ev, vel, t, horizon - t)
            else:
                w.dacc[:] = w.acc
                horizon = next_edge
                if rotating and grid_next < horizon:
                    horizon = grid_next
            grid_step = not symplectic and rotating and horizon == grid_next
            for i in range(nb):
                if w.started[i]:
                    grid_step = False
            if not grid_step:
                quiet_until = -np.inf
            need_solve = False

        quiet = grid_step and horizon <= quiet_until
        s, code, ev_i, ev_j = stages.next_event(sc, w, pos, vel, nt, horizon - t, quiet)
        if code == stages.UNSUPPORTED_PAIR:
            return STATUS_UNSUPPORTED_PAIR, t
        if grid_step and not quiet and code == stages.NONE:
            # The bound holds while the forces do: up to the next window edge.
            quiet_until = min(t + stages.quiet_time(sc, w, pos, vel), next_edge)
        elif code != stages.NONE:
            quiet_until = -np.inf
        t_new = horizon if code == stages.NONE else min(t + s, horizon)
        ks, flags = stages.advance(sc, w, tw, sens, pos, vel, out_pos, out_vel, code, ev_i,
                                   ev_j, t, t_new, ks, window_edge and t_new == next_edge)
        nd |= flags
        if t_new == t:
            zero_steps += 1
            if zero_steps > MAX_ZERO_STEPS:
                return STATUS_STALLED, t
        else:
            zero_steps = 0
        t = t_new
        if code == stages.NONE:
            need_solve = True
            continue
        if not symplectic:
            need_solve = True
        nd |= resolve(code, ev_i, ev_j, t, sc, w, tw, sens, ev, pos, vel)
    else:
        status = STATUS_MAX_ITER

    stages.sample_here(sc, tw, sens, pos, vel, w.acc, out_pos, out_vel, ks, np.inf)
    if nt > 0:
        stages.final_tangents(sc, w, tw, sens, vel)
        sens.nondiff[0] = nd
    return status, t


class Batch(NamedTuple):
    """The arrays of a batch of scenarios, as :func:`_run_one` slices them
    (fields named as :class:`simcore.model.Model`'s; ``params (nrow,
    NPARAM)`` one row for all or one per scenario; ``t_start (nscen,)``;
    the sample times ``samp_t`` of scenario ``s`` are rows
    ``samp_ptr[s]:samp_ptr[s+1]``)."""

    body_count: np.ndarray
    body_shape: np.ndarray
    body_radius: np.ndarray
    body_mass: np.ndarray
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
    t_start: np.ndarray
    t_end: np.ndarray
    dt: np.ndarray
    gravity: float
    ground_z: float
    params: np.ndarray
    bb_idx: np.ndarray
    bw_idx: np.ndarray
    bg_idx: np.ndarray
    integrator: int
    samp_ptr: np.ndarray
    samp_t: np.ndarray


class BatchOut(NamedTuple):
    """What a batch run writes: the state ``pos``, ``vel (nscen, nbmax, 3)``
    and ``time (nscen,)`` (start times in, end times out), the samples
    ``out_pos``, ``out_vel (M, nbmax, 3)`` (or ``(0, nbmax, 3)``: not kept)
    and each scenario's ``status``."""

    pos: np.ndarray
    vel: np.ndarray
    time: np.ndarray
    out_pos: np.ndarray
    out_vel: np.ndarray
    status: np.ndarray


@jit
def _run_one(s, b, out, ev, sens):
    """Scenario ``s`` of a batch: slice its arrays into records and run it."""
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
    sc = Scene(b.body_shape[s, :nb], b.body_radius[s, :nb], b.body_mass[s, :nb],
               b.body_material[s, :nb], b.wall_normal[s, :nw], b.wall_offset[s, :nw],
               b.wall_material[s, :nw], b.ctrl_body[c0:c1], b.ctrl_t0[c0:c1], b.ctrl_t1[c0:c1],
               b.ctrl_force[c0:c1], out.time[s], b.t_end[s], b.dt[s], b.gravity, b.ground_z,
               b.params[prow], b.bb_idx, b.bw_idx, b.bg_idx, b.integrator, b.samp_t[k0:k1])
    sn = Sens(sens.t_param, sens.t_vel, sens.t_ctrl, sens.meas[k0:k1], sens.tr_sse[s:s + 1],
              sens.tr_grad[s], sens.tr_gn[s], sens.fin_tpos[s], sens.fin_tvel[s],
              sens.signal[s], sens.nondiff[s:s + 1])
    st, tf = _scenario(sc, out.pos[s, :nb], out.vel[s, :nb], o_pos, o_vel,
                       scenario_log(ev, s), sn)
    out.status[s] = st
    out.time[s] = tf


@njit(**JIT_PARALLEL)
def _simulate_parallel(b, out, ev, sens):
    """All scenarios in parallel (``prange``); each writes only its own slices."""
    for s in prange(b.body_count.shape[0]):
        _run_one(np.int64(s), b, out, ev, sens)  # (prange indices are unsigned)


@jit
def _simulate_serial(b, out, ev, sens):
    """All scenarios one after the other (the reference for bit-identity)."""
    for s in range(b.body_count.shape[0]):
        _run_one(s, b, out, ev, sens)


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
    def build(cls, params=(), velocities=(), controls=()):
        """From parameter indices, ``(body, dim)`` and ``(control, dim)`` pairs."""
        from . import params as P

        rows = ([(int(q), -1, -1, P.NAMES[q] if q < len(P.NAMES) else f"param{q}")
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


def _sens_buffers(model, scen, directions, measured, gauss_newton):
    """A batch :class:`~simcore.records.Sens` for the scenarios ``scen``."""
    nscen = scen.shape[0]
    nbmax = model.body_radius.shape[1]
    nt = directions.count
    meas = np.zeros((0, nbmax, 3)) if measured is None else measured
    ng = nt if gauss_newton else 0
    return Sens(directions.param, directions.vel, directions.ctrl, meas,
                np.zeros(nscen), np.zeros((nscen, nt)), np.zeros((nscen, ng, ng)),
                np.zeros((nscen, nbmax, 3, nt)), np.zeros((nscen, nbmax, 3, nt)),
                np.zeros((nscen, nt), np.int64), np.zeros(nscen, np.int64))


def scenario_records(model, state, s=0, sample_times=(), directions=None, cap=64):
    """Scenario ``s``'s kernel records, for running the stages one by one
    (tests, debugging): ``(scene, pos, vel, log, sens, work, tangent work)``.

    ``pos``, ``vel`` are copies of its state; ``sample_times`` its sample
    times; ``directions`` (:class:`Directions`) the sensitivity directions.
    ``work`` and ``tangent work`` are fresh; :func:`simcore.stages.setup`
    fills them.
    """
    nb, nw = int(model.body_count[s]), int(model.wall_count[s])
    c = slice(model.ctrl_ptr[s], model.ctrl_ptr[s + 1])
    prm = model.params[s] if model.params.ndim == 2 else model.params
    sc = Scene(model.body_shape[s, :nb].copy(), model.body_radius[s, :nb].copy(),
               model.body_mass[s, :nb].copy(), model.body_material[s, :nb].copy(),
               model.wall_normal[s, :nw].copy(), model.wall_offset[s, :nw].copy(),
               model.wall_material[s, :nw].copy(), model.ctrl_body[c].copy(),
               model.ctrl_t0[c].copy(), model.ctrl_t1[c].copy(), model.ctrl_force[c].copy(),
               float(state.time[s]), float(model.scen_t_end[s]), float(model.scen_dt[s]),
               float(model.gravity), float(model.ground_z), prm.copy(), model.tables.bb,
               model.tables.bw, model.tables.bg, int(model.integrator),
               np.asarray(sample_times, np.float64).copy())
    directions = NO_DIRECTIONS if directions is None else directions
    b = _sens_buffers(model, np.array([s]), directions, None, False)
    sens = Sens(b.t_param, b.t_vel, b.t_ctrl, b.meas, b.tr_sse, b.tr_grad[0], b.tr_gn[0],
                b.fin_tpos[0], b.fin_tvel[0], b.signal[0], b.nondiff)
    log = scenario_log(events.buffers(1, cap, directions.count), 0)
    return (sc, state.body_pos[s, :nb].copy(), state.body_vel[s, :nb].copy(), log, sens,
            workspace(nb, nw), tangent_workspace(nb, directions.count, prm.shape[0]))


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


def _run(model, scen, pos, vel, time, samp_ptr, samp_t, cap, parallel, sens, keep=True):
    """Run the scenarios ``scen`` (indices into ``model``) with event capacity ``cap``.

    ``pos``, ``vel``, ``time`` are that subset's state, advanced in place;
    ``sens`` its :class:`~simcore.records.Sens` buffers (:func:`_sens_buffers`).
    Returns ``(out_pos, out_vel, events, status)``: the samples (empty when
    not ``keep``), the :class:`~simcore.events.EventLog` buffers (``count``
    may exceed ``cap``) and each scenario's status.
    """
    m = model
    nscen = scen.shape[0]
    nbmax = m.body_radius.shape[1]
    rows = samp_t.shape[0] if keep else 0
    out = BatchOut(pos, vel, time, buffers.zeros((rows, nbmax, 3)),
                   buffers.zeros((rows, nbmax, 3)), np.zeros(nscen, np.int64))
    ev = events.buffers(nscen, cap, sens.t_param.shape[0])
    ctrl_ptr = m.ctrl_ptr
    every = nscen == m.nscen and bool(np.all(scen == np.arange(nscen)))
    ctrl_rows = np.arange(m.ctrl_body.shape[0]) if every else np.concatenate(
        [np.arange(ctrl_ptr[s], ctrl_ptr[s + 1]) for s in scen] + [np.zeros(0, np.int64)]
    ).astype(np.int64)
    sub_ptr = np.zeros(nscen + 1, np.int64)
    sub_ptr[1:] = np.cumsum(ctrl_ptr[scen + 1] - ctrl_ptr[scen])
    b = Batch(m.body_count[scen], m.body_shape[scen], m.body_radius[scen], m.body_mass[scen],
              m.body_material[scen], m.wall_count[scen], m.wall_normal[scen],
              m.wall_offset[scen], m.wall_material[scen], sub_ptr, m.ctrl_body[ctrl_rows],
              m.ctrl_t0[ctrl_rows], m.ctrl_t1[ctrl_rows], m.ctrl_force[ctrl_rows], time,
              m.scen_t_end[scen], m.scen_dt[scen], float(m.gravity), float(m.ground_z),
              m.params[scen] if m.params.ndim == 2 else m.params[None, :],
              m.tables.bb, m.tables.bw, m.tables.bg, int(m.integrator), samp_ptr, samp_t)
    (_simulate_parallel if parallel else _simulate_serial)(b, out, ev, sens)
    return out.out_pos, out.out_vel, ev, out.status


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
    from . import params as P

    P.validate_rows(model.params, model.nscen)
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
    sens = _sens_buffers(model, every, directions, measured, gauss_newton)
    out_pos, out_vel, ev, status = _run(
        model, every, final.body_pos, final.body_vel, final.time, samp_ptr, samp_t, cap,
        parallel, sens, keep_samples)
    bad = np.flatnonzero(status != STATUS_OK)
    if bad.size:
        s = int(bad[0])
        name = model.names[s] if model.names else s
        raise RuntimeError(
            f"scenario {name!r}: {STATUS_MESSAGES[status[s]]} "
            f"(stopped at t = {final.time[s]}); {bad.size} scenario(s) failed")
    ptr, flat = _pack_events(model, state, ev, cap, directions, parallel)
    result_sens = None
    if want:
        gn = sens.tr_gn
        if gn.shape[1]:
            gn = np.triu(gn) + np.transpose(np.triu(gn, 1), (0, 2, 1))
        result_sens = Sensitivities(directions, sens.fin_tpos, sens.fin_tvel, flat.tt,
                                    flat.tdva, flat.tdvb, sens.tr_sse, sens.tr_grad, gn,
                                    sens.signal, sens.nondiff)
    return SimResult(samp_ptr, samp_t, out_pos, out_vel, final, ptr, *flat[:10],
                     sens=result_sens)


def _pack_events(model, state, ev, cap, directions, parallel):
    """The batch's events in CSR form: ``(ptr, EventLog of flat rows)``.

    Row-major order of the buffers is CSR order.  Scenarios that overflowed
    their buffer are run again from ``state``, in batches of like event
    counts (each batch's buffer holds at most ``RERUN_EVENTS`` events), in
    parallel, with room for all their events.
    """
    ev_count = ev.count
    nscen = ev_count.shape[0]
    fields = ev[:-1]
    ptr = np.zeros(nscen + 1, np.int64)
    ptr[1:] = np.cumsum(ev_count)
    keep = ev_count <= cap
    mask = (np.arange(cap)[None, :] < ev_count[:, None]) & keep[:, None]
    if keep.all():
        flat = [b[mask] for b in fields]
    else:
        rows = (ptr[:-1, None] + np.arange(cap)[None, :])[mask]
        flat = [np.zeros((int(ptr[-1]),) + b.shape[2:], b.dtype) for b in fields]
        for f, b in zip(flat, fields):
            f[rows] = b[mask]
    over = np.flatnonzero(~keep)
    over = over[np.argsort(ev_count[over], kind="stable")]
    i = 0
    while i < over.size:
        j = i + 1
        while j < over.size and (j + 1 - i) * ev_count[over[j]] <= RERUN_EVENTS:
            j += 1
        idx = over[i:j]
        cap_b = int(ev_count[idx[-1]])
        sens_b = _sens_buffers(model, idx, directions, None, False)
        # ``state[idx]`` is a copy: the re-run advances it, never ``state``.
        _, _, ev_b, _ = _run(model, idx, state.body_pos[idx], state.body_vel[idx],
                             state.time[idx], np.zeros(idx.size + 1, np.int64), np.zeros(0),
                             cap_b, parallel, sens_b)
        for f, b in zip(flat, ev_b[:-1]):
            for k, s in enumerate(idx):
                f[ptr[s]:ptr[s + 1]] = b[k, :ev_b.count[k]]
        i = j
    return ptr, events.EventLog(*flat, count=ev_count)
