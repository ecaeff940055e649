"""Losses between simulation and measurement, each with its gradient.

The source patent (claims 1-3, ``seed-notes.md`` section 000) names four
losses; contactfit adds the one system-identification users expect:

* ``output``:     ``sum_i |p_i(T) - p_i*|^2``, the final positions.  The patent's
  ``d1^2 + d2^2`` with ``d_i`` the distance between where body i stopped and
  where it was measured to stop: we read it as the *squared* distance (the
  other reading, a plain sum of distances, is not differentiable where a body
  lands exactly).  ``p_i*`` is the robust end-state fit of the measured
  trajectory (``dataset.final_states``), compared at the run's end time.
* ``input``:      ``lambda_u sum_n |u_n|^2 dt``, the control effort, for fits
  where the pushes are unknowns (``sum_q |f_q|^2 (t1_q - t0_q)`` over the
  constant-force windows); a regulariser on the nuisance pushes.
* ``velocity``:   ``lambda_v sum_i |v_i(T) - v_i*|^2`` with ``v* = 0`` (bodies
  that should have stopped, the patent's reading) unless the trajectories
  carry measured velocities.
* ``dv``:         ``sum_j |dv_j - dv_j*|^2`` over the measured collision events
  (the dataset's events table, or the detector of :mod:`simcore.data.targets`),
  each matched to the simulated event of the same body (and partner, when
  known) nearest in time within ``match_window``; unmatched measured events
  are counted and reported (``LossValue.unmatched``), never silently dropped.
* ``trajectory``: ``sum_k |p(t_k) - p*(t_k)|^2`` over every measured sample.
* ``orientation``: ``sum_k |h rot(q(t_k) q*(t_k)^-1)|^2`` over every sample
  with a measured orientation: the rotation vector [rad] from the measured
  orientation to the simulated one (world frame, the shorter way round),
  times the body's size ``h`` (a box's mean half extent, a sphere's
  radius), so that it reads in metres: a turn of ``theta`` weighs as a
  corner displaced by ``h theta``, and with weight 1 the two trajectory
  components sum to ``h^2`` times the ``e_q`` of Acosta, Yang and Posa
  (RA-L 2022).  It has no exact tangents (the kernels accumulate positions
  only): a fit that weighs it takes every derivative by central
  differences (:meth:`simcore.identify.problem.Problem.evaluate`).

Normalisation (so that datasets of different sizes weigh alike): each
component of scenario ``s`` is divided by its number of residual terms
``n_cs`` (samples, bodies or events), and the components are averaged over
the ``S`` scenarios::

    L = sum_c w_c (1 / S) sum_s SSE_cs / n_cs

so ``L`` is a mean squared residual per term [m^2 or (m/s)^2], independent
of the number of scenarios and of the sample rate.  ``w_c`` are the weights
(``lambda_u``, ``lambda_v`` included).  Every component is a sum of squares,
so ``grad = 2 J^T W r`` and the Gauss-Newton matrix ``2 J^T W J`` come with
it for the least-squares optimiser.
"""

from dataclasses import dataclass, field

import numpy as np

from ..data import targets as T
from ..kernel.events import EventKind, is_impact

#: Default weights: the trajectory loss carries the data; the patent's
#: losses are there to be switched on (weights from config).
DEFAULT_WEIGHTS = {"trajectory": 1.0, "output": 0.0, "velocity": 0.0, "dv": 0.0,
                   "input": 0.0, "orientation": 0.0}
#: Measured and simulated events further apart than this [s] are not matched.
MATCH_WINDOW = 0.02


@dataclass
class Targets:
    """Measured quantities aligned with a Model's scenarios.

    ``sample_times``: one array per scenario (the simulation's sample times);
    ``measured (M, nbmax, 3)`` the positions at those times (rows in CSR
    order, NaN where a body has no sample); ``final_pos``, ``final_vel
    (nscen, nbmax, 3)`` (NaN: no target); ``events``: measured events as
    arrays ``scen``, ``body``, ``other`` (partner body, -1 for a plane, -2
    unknown), ``t``, ``dv (E, 3)``; ``states``: other measured quantities at
    the sample rows, when the data have them: ``quat (M, nbmax, 4)``
    (orientations), ``vel``, ``omega (M, nbmax, 3)`` (world frame; NaN:
    not measured), read where a segment starts
    (:meth:`simcore.identify.problem.Problem.segmented`).
    """

    sample_times: list
    measured: np.ndarray
    final_pos: np.ndarray
    final_vel: np.ndarray
    events: dict = field(default_factory=dict)
    measured_velocity: bool = False
    states: dict = None
    _sample_count: np.ndarray = field(default=None, init=False, repr=False, compare=False)

    def states_at(self, rows, nbmax=None):
        """``states`` at the sample rows ``rows`` (and the first ``nbmax``
        body slots), or None without them."""
        if not self.states:
            return None
        return {k: v[rows][:, :nbmax] for k, v in self.states.items()}

    def turn_count(self):
        """Measured body orientations per scenario (the orientation loss's
        residual count)."""
        quat = (self.states or {}).get("quat")
        ptr = np.r_[0, np.cumsum([np.size(t) for t in self.sample_times])].astype(np.int64)
        if quat is None:
            return np.zeros(ptr.size - 1, np.int64)
        csum = np.r_[0, np.cumsum(np.isfinite(quat[..., 0]).sum(axis=1))]
        return csum[ptr[1:]] - csum[ptr[:-1]]

    def sample_count(self):
        """Measured body samples per scenario (computed once: the
        trajectory loss's residual count, the same at every evaluation)."""
        if self._sample_count is None:
            per_row = np.isfinite(self.measured).any(axis=2).sum(axis=1)
            csum = np.r_[0, np.cumsum(per_row)]
            ptr = np.r_[0, np.cumsum([np.size(t) for t in self.sample_times])].astype(np.int64)
            self._sample_count = csum[ptr[1:]] - csum[ptr[:-1]]
        return self._sample_count


@dataclass
class Component:
    """One loss component of a batch: per-scenario squared-residual sums and
    their derivatives along the sensitivity directions."""

    sse: np.ndarray        # (nscen,)
    grad: np.ndarray       # (nscen, NT): J^T r
    gn: np.ndarray         # (nscen, NT, NT): J^T J (or None)
    count: np.ndarray      # (nscen,) residual terms
    unmatched: int = 0


def _dense(nscen, nt, want_gn):
    return (np.zeros(nscen), np.zeros((nscen, nt)),
            np.zeros((nscen, nt, nt)) if want_gn else None)


def trajectory(sim, tg, model, want_gn):
    """Sample positions against the measured ones (accumulated in the kernel)."""
    s = sim.sens
    count = tg.sample_count().astype(float)
    return Component(s.traj_sse, s.traj_grad, s.traj_gn if want_gn else None, count)


def _final(res, tres, want_gn):
    """Sum of squares of final-state residuals ``res (nscen, nbmax, 3)``."""
    ok = np.isfinite(res)
    r = np.where(ok, res, 0.0)
    tr = np.where(ok[..., None], tres, 0.0)
    sse = np.einsum("sbd,sbd->s", r, r)
    grad = np.einsum("sbd,sbdp->sp", r, tr)
    gn = np.einsum("sbdp,sbdq->spq", tr, tr) if want_gn else None
    return Component(sse, grad, gn, ok.any(axis=2).sum(axis=1).astype(float))


def output(sim, tg, model, want_gn):
    return _final(sim.final.body_pos - tg.final_pos, sim.sens.final_pos, want_gn)


def velocity(sim, tg, model, want_gn):
    return _final(sim.final.body_vel - tg.final_vel, sim.sens.final_vel, want_gn)


def dv(sim, tg, model, want_gn, window=MATCH_WINDOW):
    """Measured collision velocity jumps against the matched simulated ones."""
    nscen = model.nscen
    nt = sim.sens.directions.count
    sse, grad, gn = _dense(nscen, nt, want_gn)
    count = np.zeros(nscen)
    ev = tg.events
    if not ev or len(ev["t"]) == 0:
        return Component(sse, grad, gn, count)
    # Simulated impacts as (scenario, body, partner, t, dv, tangent) rows, one per body involved.
    kind = sim.event_kind
    imp = np.flatnonzero(is_impact(kind))
    owner = np.repeat(np.arange(nscen), np.diff(sim.event_ptr))[imp]
    a, b = sim.event_a[imp], sim.event_b[imp]
    bb = kind[imp] == EventKind.BODY_BODY
    s_scen = np.r_[owner, owner[bb]]
    s_body = np.r_[a, b[bb]]
    s_other = np.r_[np.where(bb, b, -1), a[bb]]
    s_t = np.r_[sim.event_t[imp], sim.event_t[imp][bb]]
    s_dv = np.r_[sim.event_dva[imp], sim.event_dvb[imp][bb]]
    s_tdv = np.r_[sim.sens.event_dva[imp], sim.sens.event_dvb[imp][bb]]
    # Match within each (scenario, body): the key folds both.
    nbmax = model.body_radius.shape[1]
    m_key = ev["scen"] * nbmax + ev["body"]
    s_key = s_scen * nbmax + s_body
    md, ms = T.match_events(m_key, ev["t"], s_key, s_t, window)
    if md.size:
        known = ev["other"][md] != -2
        agree = ~known | (ev["other"][md] == s_other[ms])
        md, ms = md[agree], ms[agree]
    r = s_dv[ms] - ev["dv"][md]
    tr = s_tdv[ms]
    sc = ev["scen"][md]
    np.add.at(sse, sc, np.einsum("ed,ed->e", r, r))
    np.add.at(grad, sc, np.einsum("ed,edp->ep", r, tr))
    if want_gn:
        np.add.at(gn, sc, np.einsum("edp,edq->epq", tr, tr))
    np.add.at(count, sc, 1.0)
    return Component(sse, grad, gn, count, unmatched=int(len(ev["t"]) - md.size))


def input_effort(sim, tg, model, want_gn):
    """``sum_q |f_q|^2 (t1 - t0)`` per scenario, along the control directions."""
    nscen = model.nscen
    d = sim.sens.directions
    nt = d.count
    sse, grad, gn = _dense(nscen, nt, want_gn)
    ptr = model.ctrl_ptr
    count = np.diff(ptr).astype(float)
    span = model.ctrl_t1 - model.ctrl_t0
    owner = np.repeat(np.arange(nscen), np.diff(ptr))
    np.add.at(sse, owner, span * np.einsum("qd,qd->q", model.ctrl_force, model.ctrl_force))
    # Residual sqrt(span) f_q: its tangent along direction p = 3 q + d is sqrt(span).
    local = np.arange(model.ctrl_body.shape[0]) - ptr[owner]
    for p in np.flatnonzero(d.ctrl >= 0):
        q, dim = divmod(int(d.ctrl[p]), 3)
        rows = np.flatnonzero(local == q)
        np.add.at(grad[:, p], owner[rows], span[rows] * model.ctrl_force[rows, dim])
        if want_gn:
            np.add.at(gn[:, p, p], owner[rows], span[rows])
    return Component(sse, grad, gn, count)


#: The loss registry: name -> function ``(sim, targets, model, want_gn) -> Component``.
def turn_residuals(samp_quat, meas_quat, size):
    """``(M, nbmax, 3)``: ``size (M, nbmax)`` times the rotation vector of
    ``q q*^-1`` (simulated ``samp_quat`` after measured ``meas_quat``, rows
    ``(M, nbmax, 4)``); NaN where the orientation is not measured."""
    from ..geometry.rigid import quat_rate

    nb = meas_quat.shape[1]
    rot = quat_rate(np.nan_to_num(meas_quat), samp_quat[:, :nb], 1.0)
    return np.where(np.isfinite(meas_quat[..., :1]), rot * size[..., None], np.nan)


def body_size(model, ptr):
    """``(M, nbmax)``: per sample row (rows of scenario ``s`` in
    ``ptr[s]:ptr[s + 1]``) each body's size ``h`` of the orientation loss."""
    from ..geometry import shapes as shape_table

    radius = np.nan_to_num(model.body_radius.astype(np.float64))
    ext = (np.repeat(radius[..., None], 3, -1) if model.body_ext is None
           else np.nan_to_num(model.body_ext))
    h = shape_table.by_shape(model.body_shape, "size", ext)
    return np.repeat(h, np.diff(ptr), axis=0)


def orientation(sim, tg, model, want_gn):
    """Sample orientations against the measured ones, as turn residuals
    (``turn_residuals``); no sensitivities (zeros: the caller takes the
    derivatives by differences)."""
    nscen, nt = model.nscen, sim.sens.directions.count
    sse, grad, gn = _dense(nscen, nt, want_gn)
    quat = (tg.states or {}).get("quat")
    if quat is None or sim.samp_quat is None or not sim.samp_quat.shape[0]:
        return Component(sse, grad, gn, np.zeros(nscen))
    ptr = np.asarray(sim.samp_ptr)
    res = turn_residuals(sim.samp_quat, quat, body_size(model, ptr)[:, :quat.shape[1]])
    ok = np.isfinite(res[..., 0])
    per_row = np.where(ok[..., None], res, 0.0)
    row_sse = np.einsum("mbd,mbd->m", per_row, per_row)
    cnt = np.r_[0, np.cumsum(ok.sum(axis=1))]
    return Component(_segment_sums(row_sse, ptr), grad, gn,
                     (cnt[ptr[1:]] - cnt[ptr[:-1]]).astype(float))


def _segment_sums(rows, ptr):
    """Each scenario's sum of ``rows[ptr[s]:ptr[s + 1]]``, over its own rows
    alone (a difference of running sums would carry the rounding of the
    scenarios before it, and differ with their order)."""
    out = np.zeros(ptr.size - 1)
    full = ptr[1:] > ptr[:-1]
    if full.any():
        out[full] = np.add.reduceat(rows, ptr[:-1][full])
    return out


LOSSES = {"trajectory": trajectory, "output": output, "velocity": velocity, "dv": dv,
          "input": input_effort, "orientation": orientation}


@dataclass
class LossValue:
    """The weighted, normalised total and its parts (see the module docstring).

    ``components``: each weighted component's value; ``per_scenario
    (nscen,)``: each scenario's share of ``total``; ``grad (nscen, NT)`` and
    ``gn (nscen, NT, NT)``: per-scenario gradient and Gauss-Newton matrix of
    the total; ``count``: the residual terms (for the residual variance, with
    ``total`` the weighted sum of squares); ``unmatched`` measured events.
    """

    total: float
    components: dict
    per_scenario: np.ndarray
    grad: np.ndarray
    gn: np.ndarray
    count: int
    unmatched: int
    #: ``(nscen, NT)``: the Gauss-Newton diagonal of the measured data alone
    #: (every component but the ``input`` regulariser): zero where the data
    #: say nothing about a direction.
    data_diag: np.ndarray = None


def check_weights(weights):
    """Weights merged over the defaults; names and values checked."""
    out = dict(DEFAULT_WEIGHTS)
    for k, v in (weights or {}).items():
        if k not in LOSSES:
            raise ValueError(f"loss weight {k!r}: unknown loss (expected one of {sorted(LOSSES)})")
        v = float(v)
        if not np.isfinite(v) or v < 0:
            raise ValueError(f"loss weight {k!r} = {v}: expected a finite number >= 0")
        out[k] = v
    if not any(out.values()):
        raise ValueError("every loss weight is 0: nothing to fit")
    return out


def over_scenarios(a):
    """The sum of ``a`` over its first axis (the scenarios) in an order set by
    the values alone (sorted), so that the same scenarios in any order, in
    any shards, give the same bits: a fit does not depend on how the data
    were listed or split."""
    return np.sort(np.asarray(a), axis=0).sum(axis=0)


def combine(sim, tg, model, weights, want_gn, norm=0):
    """Evaluate every weighted component and the normalised total: each
    component's mean over ``norm`` scenarios (0: this batch's count; a
    shard passes its whole problem's, so that every scenario's share is
    the same bits in any shard) of its per-scenario sum over its count of
    terms."""
    nscen = model.nscen
    norm = norm or nscen
    nt = sim.sens.directions.count
    grad = np.zeros((nscen, nt))
    gn = np.zeros((nscen, nt, nt)) if want_gn else None
    comps, count, unmatched = {}, 0, 0
    shares = np.zeros(nscen)
    data_diag = np.zeros((nscen, nt))
    for name, w in weights.items():
        if w == 0.0:
            continue
        c = LOSSES[name](sim, tg, model, want_gn)
        scale = w / (norm * np.maximum(c.count, 1.0))
        shares += scale * c.sse
        comps[name] = float(over_scenarios(scale * c.sse))
        grad += 2.0 * scale[:, None] * c.grad
        if want_gn:
            gn += 2.0 * scale[:, None, None] * c.gn
            if name != "input":
                data_diag += 2.0 * scale[:, None] * np.einsum("sii->si", c.gn)
        count += int(c.count.sum())
        unmatched += c.unmatched
    total = float(over_scenarios(shares))
    return LossValue(total, comps, shares, grad, gn, count, unmatched,
                     data_diag if want_gn else None)
