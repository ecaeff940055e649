"""Simulate a batch of scenarios: the one entry point of every engine.

:func:`simulate` validates the sample times and measurements, builds the
batch record of the model's engine and runs it: the sliding spheres' event
loop (:mod:`simcore.sliding.sliding_engine`), the spinning balls'
(:mod:`simcore.spin.spin_engine`) or the rigid bodies' time-stepper
(:mod:`simcore.rigid.rigid_engine`).  It packs the ragged samples and
events into a :class:`SimResult` and the tangents into
:class:`Sensitivities`; :class:`Directions` names the directions
sensitivities are taken along.
"""

from dataclasses import dataclass

import numpy as np

from .geometry import collision
from .kernel import sensitivity, status
from .kernel.events import EVENT_FIELDS, FIELD_COLUMNS
from .kernel.records import Batch, TangentIO
from .laws import registry
from .params import NAMES, base
from .rigid import rigid_engine
from .sliding import sliding_engine
from .sliding.integrate import INTEGRATOR_MOREAU, RIGID
from .spin import spin_engine


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
    time-steppers log contact phases (their starts and ends,
    :mod:`simcore.rigid.phases`), not instantaneous impacts, and only with
    the samples.
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
    component ``omega[p] = 3 i + d`` of body ``i`` (the spinning model and the
    time-stepper; the sliding one has no spin to move); the initial position
    component ``pos[p] = 3 i + d`` and the turn of the initial orientation
    about world axis d, ``rot[p] = 3 i + d`` (the time-stepper only: the
    turned start is ``exp(rot / 2) q``).  Unused entries are -1.
    """

    param: np.ndarray
    vel: np.ndarray
    ctrl: np.ndarray
    labels: tuple
    omega: np.ndarray = None
    pos: np.ndarray = None
    rot: np.ndarray = None

    def __post_init__(self):
        for name in ("omega", "pos", "rot"):
            if getattr(self, name) is None:
                object.__setattr__(self, name, np.full(self.param.shape[0], -1, np.int64))

    @property
    def count(self):
        return self.param.shape[0]

    @classmethod
    def build(cls, params=(), velocities=(), controls=(), names=None, spins=(), positions=(),
              turns=()):
        """From parameter indices, ``(body, dim)`` pairs of initial velocities,
        ``(control, dim)`` pairs, ``(body, dim)`` pairs of initial spins,
        positions and turns, in that order; ``names``: the coefficient
        vector's names (default the global ones)."""
        if names is None:
            names = NAMES

        def state(kind, pairs, label):
            return [tuple(3 * int(i) + int(d) if k == kind else -1 for k in range(5))
                    + (f"{label}[{i}].{'xyz'[d]}",) for i, d in pairs]

        rows = ([(int(q), -1, -1, -1, -1, -1, names[q] if q < len(names) else f"param{q}")
                 for q in params]
                + [(-1,) + r for r in state(0, velocities, "v0")]
                + [(-1,) + r for r in state(1, controls, "u")]
                + [(-1,) + r for r in state(2, spins, "w0")]
                + [(-1,) + r for r in state(3, positions, "x0")]
                + [(-1,) + r for r in state(4, turns, "r0")])
        col = [np.array([r[k] for r in rows], np.int64).reshape(-1) for k in range(6)]
        return cls(col[0], col[1], col[2], tuple(r[6] for r in rows), col[3], col[4], col[5])


NO_DIRECTIONS = Directions(np.zeros(0, np.int64), np.zeros(0, np.int64),
                           np.zeros(0, np.int64), ())


@dataclass(frozen=True)
class Sensitivities:
    """Forward-mode sensitivities of a batch (``NT`` directions, see :mod:`tangent`).

    ``final_pos``, ``final_vel (nscen, nbmax, 3, NT)``: d(state at the end
    time); ``event_t (E, NT)``, ``event_dva``, ``event_dvb (E, 3, NT)``: d of
    each logged event's time and velocity changes (rows as in ``SimResult``;
    NaN for the time-steppers' contact phases, which have none);
    ``traj_sse (nscen,)``: the sum of squared position residuals against the
    measured samples, ``traj_grad (nscen, NT)`` = ``J^T r`` and ``traj_gn
    (nscen, NT, NT)`` = ``J^T J`` (symmetric; empty when not asked for);
    ``signal (nscen, NT)``: the events and segments in which each coefficient
    entered directly; ``nondiff (nscen,)``: flags of ``sensitivity.NONDIFF_REASONS``
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
    return TangentIO(
        t_param=directions.param, t_vel=directions.vel, t_ctrl=directions.ctrl, meas=meas,
        tr_sse=np.zeros(nscen), tr_grad=np.zeros((nscen, nt)), tr_gn=np.zeros((nscen, ng, ng)),
        fin_tpos=np.zeros((nscen, nbmax, 3, nt)), fin_tvel=np.zeros((nscen, nbmax, 3, nt)),
        ev_tt=np.zeros((nscen, cap, nt)), ev_tdva=np.zeros((nscen, cap, 3, nt)),
        ev_tdvb=np.zeros((nscen, cap, 3, nt)), signal=np.zeros((nscen, nt), np.int64),
        nondiff=np.zeros(nscen, np.int64), t_omega=directions.omega, t_pos=directions.pos,
        t_rot=directions.rot)


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
    return Batch(
        body_count=m.body_count[scen], body_shape=m.body_shape[scen],
        body_radius=m.body_radius[scen], body_mass=m.body_mass[scen],
        body_material=m.body_material[scen], wall_count=m.wall_count[scen],
        wall_normal=m.wall_normal[scen], wall_offset=m.wall_offset[scen],
        wall_material=m.wall_material[scen], ctrl_ptr=sub_ptr, ctrl_body=m.ctrl_body[ctrl_rows],
        ctrl_t0=m.ctrl_t0[ctrl_rows], ctrl_t1=m.ctrl_t1[ctrl_rows],
        ctrl_force=m.ctrl_force[ctrl_rows], scen_t_end=m.scen_t_end[scen],
        scen_dt=m.scen_dt[scen], samp_ptr=samp_ptr, samp_t=samp_t,
        params=m.params[scen] if m.params.ndim == 2 else m.params[None, :],
        bb_idx=m.layout.bb, bw_idx=m.layout.bw, bg_idx=m.layout.bg, laws=m.layout.law_codes,
        gravity=float(m.gravity), ground_z=float(m.ground_z), integrator=int(m.integrator),
        wall_height=height, ctrl_torque=m.ctrl_torque[ctrl_rows])


def _dispatch(model, scen, st, samp_ptr, samp_t, cap, parallel, tan, keep=True):
    """Run the scenarios ``scen`` from the state ``st`` (their subset,
    advanced in place) under the model's motion: the spinning model's loop
    (:mod:`simcore.spin.spin_engine`) or the sliding one (:mod:`simcore.sliding.sliding_engine`)."""
    batch = _batch(model, scen, samp_ptr, samp_t)
    if model.spin:
        return spin_engine.run(batch, st.body_pos, st.body_vel, st.body_omega, st.time, cap,
                               parallel, tan, keep)
    return sliding_engine.run(batch, st.body_pos, st.body_vel, st.time, cap, parallel, tan, keep)


def shape_codes(model):
    """The shape codes of the bodies ``model``'s scenarios hold (not their
    padding), once each."""
    count = model.body_count[:, None] > np.arange(model.body_shape.shape[1])[None, :]
    return np.unique(model.body_shape[count])


def _refuse_unknown(model, engine):
    """Refuse a model whose contact laws or body shapes the kernels of
    ``engine`` (an engine module: its ``LAWS`` per contact kind, the
    Moreau-Jean stepper's ``MOREAU_LAWS``, and its ``SHAPES``) do not run,
    naming the law or shape, the contact kind and the engine: a law or shape
    registered without a kernel there must never run as another one."""
    which = engine.__name__.rpartition(".")[2].replace("_", " ")
    laws = (engine.MOREAU_LAWS if engine is rigid_engine and model.integrator == INTEGRATOR_MOREAU
            else engine.LAWS)
    for kind, code, runs in zip(registry.KINDS, model.layout.law_codes.tolist(), laws):
        if code not in runs:
            names = {law.code: law.name for law in registry.REGISTRY}
            raise ValueError(f"contact law {names.get(code, f'code {code}')!r} "
                             f"({kind}) has no kernel in the {which}; it runs "
                             f"{[names.get(c, c) for c in runs]} there")
    for name in model.layout.named:
        if base(name) not in engine.READS:
            raise ValueError(f"coefficient {name!r} has no kernel in the {which}: only the "
                             "rigid-body time-steppers (boxes, or a penalty law) read the "
                             "body's own coefficients and the recording's")
    # A one-scenario run costs 0.2 ms: the common case is two reductions (the
    # padding of short scenarios is a sphere, which every engine runs).
    shape = model.body_shape
    if shape.size and set(range(int(shape.min()), int(shape.max()) + 1)) <= set(engine.SHAPES):
        return
    for code in shape_codes(model):
        if int(code) not in engine.SHAPES:
            shapes = collision.SHAPE_NAMES
            name = shapes[code] if 0 <= code < len(shapes) else f"code {int(code)}"
            raise ValueError(f"shape {name!r} has no kernel in the {which}; it runs "
                             f"{[shapes[c] for c in engine.SHAPES]}")


def _rigid_batch(model, samp_ptr, samp_t):
    """The time-stepper's :class:`simcore.rigid.rigid_engine.Batch` of ``model``."""
    m = model
    rows_g, rows_b, rows_w = m.layout.penalty_rows()
    return rigid_engine.Batch(
        body_count=m.body_count, body_shape=m.body_shape, body_ext=m.body_ext,
        body_mass=m.body_mass, body_inertia=m.body_inertia,
        body_com=np.zeros_like(m.body_ext) if m.body_com is None else m.body_com,
        body_fixed=m.body_fixed, body_material=m.body_material, wall_count=m.wall_count,
        wall_normal=m.wall_normal, wall_offset=m.wall_offset, wall_material=m.wall_material,
        ctrl_ptr=m.ctrl_ptr, ctrl_body=m.ctrl_body, ctrl_t0=m.ctrl_t0, ctrl_t1=m.ctrl_t1,
        ctrl_force=m.ctrl_force, ctrl_torque=m.ctrl_torque, scen_t_end=m.scen_t_end,
        scen_h=m.scen_dt, samp_ptr=samp_ptr, samp_t=samp_t,
        params=m.params if m.params.ndim == 2 else m.params[None, :], rows_g=rows_g,
        rows_b=rows_b, rows_w=rows_w, rows_m=m.layout.mass, rows_s=m.layout.scene,
        laws=m.layout.law_codes, cone=int(m.cone),
        gravity=float(m.gravity), ground_z=float(m.ground_z))


def contacts(model, state, s):
    """The contact points of scenario ``s`` of a time-stepped ``model`` at
    ``state``, with the forces of one step there (per point, as the document
    ``003_*`` lists them: contact flag, normal, friction and total force,
    penetration; see :func:`simcore.rigid.rigid_engine.report`)."""
    if model.integrator not in RIGID:
        raise ValueError("contacts(): the model is not time-stepped (boxes or penalty laws)")
    _refuse_unknown(model, rigid_engine)
    st = state.copy()
    return rigid_engine.report(_rigid_batch(model, np.zeros(model.nscen + 1, np.int64),
                                            np.zeros(0)),
                               st.body_pos, st.body_vel, st.body_omega, st.body_quat, st.time,
                               int(s))


def _simulate_rigid(model, state, samples, parallel, keep, directions, measured,
                    gauss_newton, event_capacity):
    """:func:`simulate` on the time-stepper (:mod:`simcore.rigid.rigid_engine`),
    with the sensitivities of :mod:`simcore.rigid.rigid_tangent` when asked
    and, with the samples (``keep``) and an ``event_capacity`` (0: none),
    its contact phases as events (:mod:`simcore.rigid.phases`; the
    scenarios whose log overflowed run again with room for their events)."""
    m = model
    samp_ptr, samp_t = samples
    batch = _rigid_batch(model, samp_ptr, samp_t)
    cap = max(0, int(event_capacity)) if keep else 0
    final = state.copy()
    want = directions is not None or measured is not None
    tan = None
    if want:
        directions = NO_DIRECTIONS if directions is None else directions
        tan = _tangent_buffers(model, np.arange(m.nscen), directions, measured, gauss_newton, 0)
    out = rigid_engine.run(batch, final.body_pos, final.body_vel, final.body_omega,
                           final.body_quat, final.time, parallel, keep, tan,
                           "moreau" if m.integrator == INTEGRATOR_MOREAU else "penalty", cap)
    status.check(out.status, final.time, m.names)
    logs = {"f": out.ev_f, "i": out.ev_i}
    ptr, events = _pack({name: logs[which][..., col] if width == 1
                         else logs[which][..., col:col + width]
                         for name, (which, col, width) in FIELD_COLUMNS.items()},
                        out.ev_count if cap else np.zeros(m.nscen, np.int64), cap)
    over = np.flatnonzero(out.ev_count > cap) if cap else np.zeros(0, np.int64)
    if over.size:  # those scenarios again, with room for their events
        rows = np.concatenate([np.arange(samp_ptr[s], samp_ptr[s + 1]) for s in over])
        again = _simulate_rigid(
            m.subset(over), state.subset(over),
            (np.r_[0, np.cumsum(np.diff(samp_ptr)[over])].astype(np.int64), samp_t[rows]),
            parallel, keep, directions, None if measured is None else measured[rows],
            gauss_newton, int(out.ev_count[over].max()))
        for q, s in enumerate(over):
            for name, ev in again.events(q).items():
                events[name][ptr[s]:ptr[s + 1]] = ev
    sens = None
    if want:
        nt = directions.count
        _mark_blown(m, directions, tan)
        ne = events["t"].shape[0]  # (contact phases have no tangents: NaN)
        sens = _sensitivities(directions, tan, np.full((ne, nt), np.nan),
                              np.full((ne, 3, nt), np.nan), np.full((ne, 3, nt), np.nan))
    return SimResult(samp_ptr, samp_t, out.out_pos, out.out_vel, final, ptr,
                     **{"event_" + f: events[f] for f in EVENT_FIELDS}, sens=sens,
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
    tan.nondiff[bad] |= sensitivity.ND_STIFF


def _pack(logs, ev_count, cap):
    """``(ptr, flat)``: the CSR pointers of ``ev_count`` events per scenario
    and each log of ``logs`` (``(nscen, cap, ...)`` arrays) packed in that
    order; the rows of a scenario that overflowed its ``cap`` are left zero
    (for its re-run to fill)."""
    ptr = np.zeros(ev_count.shape[0] + 1, np.int64)
    ptr[1:] = np.cumsum(ev_count)
    keep = ev_count <= cap
    mask = (np.arange(cap)[None, :] < ev_count[:, None]) & keep[:, None]
    if keep.all():
        return ptr, {k: b[mask] for k, b in logs.items()}
    rows = (ptr[:-1, None] + np.arange(cap)[None, :])[mask]
    flat = {k: np.zeros((int(ptr[-1]),) + b.shape[2:], b.dtype) for k, b in logs.items()}
    for k, b in logs.items():
        flat[k][rows] = b[mask]
    return ptr, flat


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
    events that occur.  The time-steppers log their contact phases
    (:mod:`simcore.rigid.phases`) with the samples only, and none at an
    ``event_capacity`` of 0.

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
    _refuse_unknown(model, rigid_engine if model.integrator in RIGID
                    else spin_engine if model.spin else sliding_engine)
    if model.integrator in RIGID:
        return _simulate_rigid(model, state, (samp_ptr, samp_t), parallel, keep_samples,
                               directions, measured, gauss_newton, event_capacity)
    nscen = model.nscen
    cap = max(1, int(event_capacity))
    final = state.copy()
    every = np.arange(nscen)
    want = directions is not None or measured is not None
    directions = NO_DIRECTIONS if directions is None else directions
    tan = _tangent_buffers(model, every, directions, measured, gauss_newton, cap)
    out = _dispatch(model, every, final, samp_ptr, samp_t, cap, parallel, tan, keep_samples)
    ev_count = out.ev_count
    status.check(out.status, final.time, model.names)
    # Pack the events (row-major order of the buffers is CSR order),
    # re-running the scenarios that overflowed their buffer.
    ptr, flat = _pack(_events(out, tan), ev_count, cap)
    # The overflowed scenarios again, in batches of like event counts (each
    # batch's buffer holds at most RERUN_EVENTS events), in parallel.
    over = np.flatnonzero(ev_count > cap)
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
