"""A calibration problem: scenarios, measurements, loss weights and unknowns.

The unknowns are the free coefficients ``theta`` (a subset of
:data:`simcore.params.NAMES`, the rest fixed) and, optionally, nuisance
unknowns of every scenario: a launch velocity, a spin, a push
(``nuisance="velocity"``, ``"push"``, ``"spin"``, ``"state"``; one class
each in :mod:`simcore.identify.nuisance`, with their layouts).

:meth:`Problem.evaluate` runs the engine with forward-mode sensitivities
along all unknowns and returns the loss, its per-scenario gradient and
Gauss-Newton blocks.  Scenarios whose tangents are not exact (``nondiff``,
see :mod:`simcore.sliding.tangent`) get their coefficient gradient from central
finite differences of their own loss, and their curvature block from the
same runs: the trajectory loss's ``2 J^T W J`` with ``J`` the central
differences of the sampled positions, plus, when other components are
weighted, the rank-one proxy ``g g^T / (2 l)`` of the rest of the gradient
(``l`` the rest's loss share; exact for one residual, and by Cauchy-Schwarz
a lower bound of its ``2 J^T W J``, so the intervals err wide there).  The
rank-one proxy alone, used for the whole block before, underestimated the
curvature of mu_s and v_th in sticking contact so far that the last
Gauss-Newton steps swung by one to two standard errors and were rejected.
Their tangents are not used at all, since in sustained contact they can
blow up.  Their nuisance is held.  The perturbed copies of those scenarios
run as one parallel batch, each with its own coefficients (a per-scenario
``Model.params``); a coefficient that a scenario's run never read is not
perturbed in it (its differences are exactly 0).
"""

import copy
from dataclasses import dataclass, field, replace
from typing import NamedTuple

import numpy as np

from .. import params as P
from ..data import dataset as D
from ..data import targets as measured
from ..engine import NO_DIRECTIONS, Directions, simulate
from ..geometry import shapes as shape_table
from ..geometry.rigid import window_state
from ..kernel import buffers
from ..sliding.integrate import RIGID
from . import losses as L
from .nuisance import KINDS, kind_of

NUISANCE = tuple(KINDS)
#: Rest (:meth:`Problem.rest_time`): the largest move [m] and turn [rad]
#: over the window [s] of a body at rest.
REST_MOVE = 5e-3
REST_TURN = np.radians(3.0)
REST_WINDOW = 0.2
#: A segment's start state is fitted to this many measured samples on
#: either side of its first (:func:`simcore.geometry.rigid.window_state`).
SLOPE_HALF = 3
#: A segment starts only where that quadratic's residual is within this
#: factor of its ``SMOOTH_QUANTILE`` percentile over all samples (the
#: smoothest windows: flight and rest, at the noise): smooth motion, no
#: impact in the window to bend the start's velocity.
SMOOTH_FACTOR = 3.0
SMOOTH_QUANTILE = 20.0
#: On the time-stepper a segment starts only in flight: every body's lowest
#: point at least this [m] above the ground in every sample of the window
#: (well above a tracker's millimetre of noise).  A start in contact would
#: meet its contacts at the depth the pose noise gives them, with no memory
#: of their first-touch speed: a spurious bounce damped as a touch at rest,
#: which biases the restitution.
FLIGHT_CLEARANCE = 5e-3
#: The longest segment, in segment lengths (:meth:`Problem.segmented`).
LONGEST = 3.0
#: A body whose fitted speed somewhere in a push window exceeds this [m/s]
#: moves (:meth:`Problem.push_from_data`); over 10 or more samples the fit's
#: speed error from 1 mm noise is a few mm/s.
PUSH_MOVING = 0.05
#: A stuck push's data-driven start clears the static threshold by this share.
PUSH_MARGIN = 0.05
#: A body within this [m] of resting on the ground in every sample of a
#: window slides on it.
GROUND_TOL = 5e-3
#: The finite differences' batch buffers at most about this many events,
#: and holds at most about this many sample rows in all its copies (beyond
#: them, the copies run in several batches; see :meth:`Problem._fd_grad`).
FD_EVENTS = 1 << 18
FD_ROWS = 1 << 21


@dataclass
class Evaluation:
    """One evaluation: the loss, its per-scenario derivatives and the run."""

    loss: L.LossValue
    sim: object
    signal: np.ndarray       # (NT,) summed over scenarios
    nondiff: np.ndarray      # (nscen,) flags
    nfev: int = 1
    #: (nscen, k) nuisance values the problem holds (see Problem.nuisance_cut), or None.
    cut: np.ndarray = None


class _FdPlan(NamedTuple):
    """What every batch of :meth:`Problem._fd_grad` shares: the (scenario,
    direction) pairs (``coef``, ``which`` into ``scen``), the perturbed
    coefficient rows (up ``rows[c]``, down ``rows[nd + c]`` for ``nd``
    directions) and nuisance offsets (``moves``, the same layout, or None),
    each pair's ``step``, the nuisance, each scenario's event count at
    ``theta`` and the Gauss-Newton factors ``f`` (or None)."""

    coef: np.ndarray
    which: np.ndarray
    scen: np.ndarray
    rows: np.ndarray
    nd: int
    step: np.ndarray
    kind: str
    nuis: object
    events: np.ndarray
    f: object
    moves: object = None


@dataclass
class Problem:
    """Scenarios (``model``, ``state``), measured ``targets`` and loss ``weights``."""

    model: object
    state: object
    targets: L.Targets
    weights: dict = field(default_factory=lambda: dict(L.DEFAULT_WEIGHTS))
    ids: list = None
    name: str = ""
    #: Each scenario's body ids by slot (the dataset's ids), when known.
    body_ids: list = None
    #: The fraction of every scenario's span this problem covers (:meth:`truncated`).
    horizon: float = 1.0
    #: The scenario count its loss is a mean over (0: its own).  A shard of
    #: a larger problem (:meth:`subset` with ``norm``) takes the whole's, so
    #: that every scenario's share is the same bits in any shard.
    norm: int = 0

    def __post_init__(self):
        self.weights = L.check_weights(self.weights)

    @property
    def nscen(self):
        return self.model.nscen

    @property
    def loss_norm(self):
        """The scenario count its loss is a mean over."""
        return self.norm or self.nscen

    def nuisance_size(self, kind):
        """Nuisance values per scenario of ``kind`` (:mod:`.nuisance`)."""
        return kind_of(kind).size(self.model)

    def nuisance_columns(self, kind):
        """``(slot, component)`` of each nuisance column: the body or control
        window it belongs to, and what it is (``x``, ``y`` for a velocity or
        force; ``vx``, ``vy``, ``wx``, ``wy``, ``wz`` for ``spin``)."""
        return kind_of(kind).columns(self.nuisance_size(kind))

    def nuisance_mask(self, kind):
        """``(nscen, k)``: True for the real nuisance values (not the padding of
        scenarios with fewer bodies or control windows than the widest)."""
        slots = self.nuisance_columns(kind)[0]
        return slots[None, :] < kind_of(kind).count(self.model)[:, None]

    def nuisance_cut(self, kind, theta):
        """``(nscen, k)``: push windows that a truncated problem's horizon cuts
        (started before its end, ending after it), or None.

        The few samples of such a window inside the horizon barely inform it,
        and a warm-up stage that moves it anyway can leave the next stage in
        a basin of its own; it is held until a stage covers the whole window.
        """
        if self.horizon >= 1.0:
            return None
        return kind_of(kind).cut(self.model, self.nuisance_size(kind), theta)

    def nuisance_start(self, kind, theta=None):
        """The nuisance values a fit starts from: ``(nscen, k)``.

        The given values (initial velocities, control forces), except, when
        ``theta`` is given, for pushes that cannot move their body although
        the data show it moving: see :meth:`push_from_data`.
        """
        return kind_of(kind).start(self, self.nuisance_size(kind), theta)

    def push_from_data(self, theta, min_samples=6, moving=PUSH_MOVING):
        """Horizontal control forces estimated from the measured motion in
        their windows, and which given forces are stuck.

        Over a window ``[t0, t1)`` a body sliding on the ground obeys
        ``m a = F - mu m g v / |v|`` (the push is the only other horizontal
        force).  A least-squares quadratic over the body's measured samples in
        the window gives ``a`` and, at its middle, ``v``; then ``F = m (a + mu
        g v / |v|)`` with ``mu`` of the speed regime (``mu_k`` at or above
        ``v_th``, else ``mu_s``) from ``theta``.  Exact for a push along the
        motion; where the push turns the motion, ``v`` at the middle stands
        for the turning direction (a start, which the fit then refines).

        A given force is *stuck* when, simulated with ``theta``, it leaves its
        body still through the whole window while the measured motion there
        is faster than ``moving`` [m/s]: the data then do not depend on the
        force, and no local method leaves that plateau.  Only forces at or
        under the static threshold ``mu_s m g`` can hold a free body still,
        so only their scenarios are simulated for the check.  The body did
        move, so the push beat static friction: a stuck window's estimate is
        raised to at least ``(1 + PUSH_MARGIN) mu_s m g`` (the fit over the
        window mixes the static regime below ``v_th`` with the kinetic one
        and can come out under it).  Windows with fewer than ``min_samples``
        samples, off the ground or with a measured or detected event inside
        are never stuck.
        Returns ``(estimate (nctrl, 2), stuck (nctrl,))``; the estimate is
        NaN where it is not made.
        """
        m = self.model
        theta = np.asarray(theta, np.float64)
        nc = m.ctrl_body.shape[0]
        est = np.full((nc, 2), np.nan)
        stuck = np.zeros(nc, bool)
        owner = np.repeat(np.arange(self.nscen), np.diff(m.ctrl_ptr))
        ptr = np.r_[0, np.cumsum([len(t) for t in self.targets.sample_times])]
        ev = self.targets.events or {}
        impacts = {}
        for e in range(len(ev.get("t", ()))):
            impacts.setdefault((int(ev["scen"][e]), int(ev["body"][e])), []).append(ev["t"][e])
        g = m.gravity
        ground = m.ground_z + theta[P.GROUND_OFFSET]  # the plane and windows as
        lag = theta[P.TIME_OFFSET]                     # simulated (params.py)
        moved = {}  # window -> its samples (rows of its scenario), for the still check
        for q in range(nc):
            s, i = int(owner[q]), int(m.ctrl_body[q])
            t0, t1 = m.ctrl_t0[q] + lag, m.ctrl_t1[q] + lag
            ts = self.targets.sample_times[s]
            win = np.flatnonzero((ts >= t0) & (ts < t1))
            p = self.targets.measured[ptr[s] + win, i]
            ok = ~np.isnan(p[:, 0])
            win, p = win[ok], p[ok]
            if win.size < min_samples:
                continue
            radius = m.body_radius[s, i]
            if np.max(np.abs(p[:, 2] - (ground + radius))) > GROUND_TOL:
                continue  # not sliding on the ground throughout
            if any(t0 <= te < t1 for te in impacts.get((s, i), ())):
                continue  # an impact inside: the window's motion is not the push's
            tau = ts[win] - 0.5 * (ts[win[0]] + ts[win[-1]])
            vand = np.stack([np.ones_like(tau), tau, 0.5 * tau * tau], axis=1)
            coef, *_ = np.linalg.lstsq(vand, p[:, :2], rcond=None)
            v, a = coef[1], coef[2]
            speed = float(np.hypot(*v))
            if speed <= 0.0:
                continue
            mat = m.body_material[s, i]
            mu_s, mu_k, v_th = (theta[m.layout.bg[mat, c]] for c in range(3))
            mu = mu_k if speed >= v_th else mu_s
            mass = m.body_mass[s, i]
            est[q] = mass * (a + mu * g * v / speed)
            fastest = max(np.hypot(*(v + a * tau[0])), np.hypot(*(v + a * tau[-1])), speed)
            if fastest > moving and np.hypot(*m.ctrl_force[q, :2]) <= mu_s * mass * g:
                moved[q] = (win, mu_s * mass * g)
        if not moved:
            return est, stuck
        # Where the given forces leave each body still (exactly zero speed):
        # only the scenarios of the candidate windows are simulated.
        scen = np.unique(owner[list(moved)])
        sub = self.subset(scen)
        sim = simulate(sub.model.with_params(theta), sub.state, sub.targets.sample_times)
        local = {int(sc): k for k, sc in enumerate(scen)}
        for q, (win, threshold) in moved.items():
            k = local[int(owner[q])]
            rows = sim.samp_ptr[k] + win
            if np.all(sim.samp_vel[rows, int(m.ctrl_body[q]), :2] == 0.0):
                # It moved, so the push beat static friction.
                size = np.hypot(*est[q])
                est[q] *= max(size, (1.0 + PUSH_MARGIN) * threshold) / size
                stuck[q] = True
        return est, stuck

    def apply(self, theta, kind, nuis):
        """``(model, state)`` with coefficients ``theta`` and the nuisance set."""
        return kind_of(kind).apply(self.model.with_params(theta), self.state, nuis)

    def directions(self, free, kind):
        vel, ctrl, spins, pos, turns = kind_of(kind).directions(
            self.model.body_radius.shape[1], self.nuisance_size("push") // 2)
        return Directions.build(params=free, velocities=vel, controls=ctrl, spins=spins,
                               positions=pos, turns=turns, names=self.model.layout.names)

    def evaluate(self, theta, free, kind="none", nuis=None, want_gn=True, fd_fallback=True,
                 secant=0.0):
        """Loss and derivatives at ``theta`` (full vector), free indices ``free``.

        ``secant > 0``: the free coefficients' derivatives of every scenario
        by central differences over that relative step (a secant Jacobian,
        :meth:`_fd_grad`) instead of the exact tangents: on a chaotic
        rollout the loss is a funnel with micrometre ripples, whose exact
        slope is the ripples' and a secant's the funnel's
        (:func:`simcore.identify.fit.fit`, ``secant``).  A weighed ``orientation``
        loss, which has no exact tangents, takes the same path (with a
        step of 1e-6 when ``secant`` is 0).  On that path the run has no
        tangents and the nuisance is held, unless its kind is differenced
        (``pose``: :attr:`simcore.identify.nuisance.Nuisance.differenced`), whose
        values take central differences there too."""
        model, state = self.apply(theta, kind, nuis)
        dirs = self.directions(free, kind)
        turns = self._turns()
        nf = len(free)
        every = secant > 0.0 or turns  # (no exact tangents of the orientation loss)
        if every:
            # Every derivative by differences: a forward run, no tangents.
            sim, lv = self._forward(theta, kind, nuis, False)
            nt = dirs.count
            lv.grad = np.zeros((self.nscen, nt))
            if want_gn:
                lv.gn = np.zeros((self.nscen, nt, nt))
                lv.data_diag = np.zeros((self.nscen, nt))
            signal = np.zeros((self.nscen, nt), np.int64)
            signal[:, :nf] = 1
            nd = np.zeros(self.nscen, sim.sens.nondiff.dtype)
        else:
            sim = simulate(model, state, self.targets.sample_times, directions=dirs,
                           measured=self.targets.measured, gauss_newton=want_gn,
                           keep_samples=False)
            lv = L.combine(sim, self.targets, model, self.weights, want_gn, self.loss_norm)
            signal = sim.sens.signal
            nd = sim.sens.nondiff
        nfev = 1
        bad = np.flatnonzero((nd != 0) | every)
        if bad.size and (fd_fallback or every):
            lv.grad[bad, nf:] = 0.0  # nuisance of these scenarios is held, unless differenced
            ncols = nf
            if every and kind_of(kind).differenced:
                real = self.nuisance_mask(kind)[bad]
                cut = self.nuisance_cut(kind, theta)
                if cut is not None:
                    real &= ~cut[bad]
                signal[bad, nf:] = real
                ncols = signal.shape[1]
            g, gn, g_traj = self._fd_grad(theta, free, kind, nuis, bad,
                                          np.diff(sim.event_ptr)[bad], signal[bad, :ncols],
                                          want_gn, secant)
            nd_cols = g.shape[1]
            lv.grad[bad, :nd_cols] = g
            if want_gn:
                # Their tangents can blow up (sustained contact): the trajectory
                # loss's 2 J^T W J from the perturbed runs' samples, and for
                # the rest of the gradient (the other components, if weighted)
                # the rank-one proxy g g^T / (2 l), a lower bound of theirs.
                if any(v for k, v in self.weights.items() if k not in ("trajectory",
                                                                        "orientation")):
                    w = self.weights.get("trajectory", 0.0)
                    count = np.maximum(self.targets.sample_count()[bad], 1)
                    rest = (lv.per_scenario[bad]
                            - w * sim.sens.traj_sse[bad] / (self.loss_norm * count))
                    if turns:
                        part = L.orientation(sim, self.targets, model, False)
                        rest -= self.weights["orientation"] * part.sse[bad] / (
                            self.loss_norm * np.maximum(part.count[bad], 1))
                    g_rest = g - g_traj
                    some = rest > 1e-12 * np.maximum(lv.per_scenario[bad], 1e-300)
                    gn[some] += g_rest[some, :, None] * g_rest[some, None, :] / (
                        2.0 * rest[some, None, None])
                lv.gn[bad] = 0.0
                lv.gn[bad, :nd_cols, :nd_cols] = gn
                if every:
                    lv.data_diag[:, :nd_cols] = np.einsum("sii->si", gn)
            nfev += 2 * nd_cols
        return Evaluation(lv, sim, signal.sum(axis=0), nd, nfev,
                          self.nuisance_cut(kind, theta))

    def loss_only(self, theta, kind="none", nuis=None, per_scenario=False, event_capacity=64):
        """The total loss (or each scenario's share of it), without derivatives.
        ``theta``: a full vector, or a row per scenario; ``event_capacity``:
        the engine's events buffered per scenario before a re-run."""
        lv = self._forward(theta, kind, nuis, False, event_capacity)[1]
        return lv.per_scenario if per_scenario else lv.total

    def _forward(self, theta, kind, nuis, keep_samples, event_capacity=64):
        """A forward run (no sensitivities) and its loss: ``(sim, LossValue)``."""
        model, state = self.apply(theta, kind, nuis)
        if model.integrator in RIGID:
            event_capacity = 0  # (no loss reads the time-steppers' contact phases)
        sim = simulate(model, state, self.targets.sample_times, directions=NO_DIRECTIONS,
                       measured=self.targets.measured,
                       keep_samples=keep_samples or self._turns(), event_capacity=event_capacity)
        return sim, L.combine(sim, self.targets, model, self.weights, False, self.loss_norm)

    def _turns(self):
        """Whether the orientation loss is weighed (and measured)."""
        return bool(self.weights.get("orientation", 0.0)) and bool(
            (self.targets.states or {}).get("quat") is not None)

    def _fd_grad(self, theta, free, kind, nuis, scen, events, signal, want_gn=False,
                 secant=0.0):
        """Central differences of the scenarios ``scen``'s loss along each free
        coefficient over a relative step ``secant`` (0: 1e-6, a derivative),
        and, when ``signal`` has a column for each nuisance value too (a
        differenced kind, :attr:`simcore.identify.nuisance.Nuisance.differenced`),
        along each nuisance value over ``secant`` (or 1e-6) times its
        column's scale (``Nuisance.scales``): ``(g, gn, g_traj)``, ``g
        (scen.size, D)`` for the ``D`` columns of ``signal``; with
        ``want_gn``, the trajectory loss's Gauss-Newton blocks ``2 J^T W J``
        and gradients ``2 J^T W r``, with ``J`` the central differences of
        the sampled positions (else None).

        A coefficient that no event or segment of a scenario read at
        ``theta`` (``signal`` 0, the engine's count per scenario and
        coefficient) leaves that scenario's run bit-identical when it alone
        is perturbed: its differences are exactly 0 and are not run.  The
        perturbed copies of the other (scenario, coefficient) pairs run side
        by side, a row of coefficients each, in batches of whole scenarios
        of at most about ``FD_ROWS`` sample rows (the kept samples stay
        bounded), with room for the ``events`` each scenario had at
        ``theta`` and a quarter more, so that few overflow into a re-run.
        ``r`` is taken at the mean of a pair's two runs (``theta`` up to
        O(h^2)).
        """
        nf, ns = len(free), scen.size
        ndir = np.shape(signal)[1]
        out = np.zeros((ns, ndir))
        gn = np.zeros((ns, ndir, ndir)) if want_gn else None
        g_traj = np.zeros((ns, ndir)) if want_gn else None
        coef, which = np.nonzero(np.asarray(signal).T != 0)  # pairs, direction-major
        if not coef.size:
            return out, gn, g_traj
        rows = np.tile(theta, (2 * ndir, 1))
        moves = None
        sizes = np.zeros(ndir)
        for c, q in enumerate(free):
            h = (secant or 1e-6) * max(abs(theta[q]), 1e-2)
            up, dn = theta.copy(), theta.copy()
            up[q] += h
            dn[q] -= h
            rows[c], rows[ndir + c] = (project(up, [q], self.model.layout),
                                        project(dn, [q], self.model.layout))
            sizes[c] = rows[c, q] - rows[ndir + c, q]
        if ndir > nf:
            h = (secant or 1e-6) * kind_of(kind).scales(self.nuisance_columns(kind)[1])
            moves = np.zeros((2 * ndir, ndir - nf))
            moves[nf + np.arange(ndir - nf), np.arange(ndir - nf)] = h
            moves[ndir + nf + np.arange(ndir - nf), np.arange(ndir - nf)] = -h
            sizes[nf:] = 2.0 * h
        step = sizes[coef]
        f = (2.0 * self.weights.get("trajectory", 0.0) / (
            self.loss_norm * np.maximum(self.targets.sample_count()[scen], 1)),
             2.0 * self.weights.get("orientation", 0.0) / (
            self.loss_norm * np.maximum(self.targets.turn_count()[scen], 1))) if want_gn else None
        # Batches of whole scenarios (all their pairs) holding at most about
        # FD_ROWS sample rows in all their copies.
        by = np.argsort(which, kind="stable")
        rows_of = np.array([np.size(self.targets.sample_times[s]) for s in scen])
        cut, total = [0], 0
        for k, j in enumerate(by):
            first = k == 0 or which[j] != which[by[k - 1]]
            if first and total and total + 2 * rows_of[which[j]] > FD_ROWS:
                cut.append(k)
                total = 0
            total += 2 * rows_of[which[j]]
        cut.append(by.size)
        plan = _FdPlan(coef, which, scen, rows, ndir, step, kind, nuis, events, f, moves)
        for lo, hi in zip(cut[:-1], cut[1:]):
            self._fd_batch(by[lo:hi], plan, (out, gn, g_traj))
        return out, gn, g_traj

    def _fd_batch(self, js, plan, into):
        """One batch of :meth:`_fd_grad`: the pairs ``js`` (indices into
        ``plan.coef`` and ``plan.which``) run up and down side by side;
        writes their differences into ``into = (out, gn, g_traj)``'s ``out``
        and, with ``plan.f`` (the trajectory and orientation losses' factors
        per scenario), their ``2 J^T W J`` and ``2 J^T W r`` into ``gn`` and
        ``g_traj``."""
        coef, which, scen, rows, nd, step, kind, nuis, events, f, moves = plan
        out, gn, g_traj = into
        pairs = js.size
        sub = self.subset(np.tile(scen[which[js]], 2), norm=self.loss_norm)
        sub_nuis = np.tile(nuis[scen[which[js]]], (2, 1)) if nuis is not None else None
        if moves is not None:
            sub_nuis = sub_nuis + np.r_[moves[coef[js]], moves[nd + coef[js]]]
        cap = int(min(max(64, 1.25 * int(events[which[js]].max()) + 8),
                      max(64, FD_EVENTS // (2 * pairs))))
        sim, lv = sub._forward(np.r_[rows[coef[js]], rows[nd + coef[js]]], kind, sub_nuis,
                               f is not None, cap)
        per = lv.per_scenario  # each copy's share, a mean over this problem's count
        out[which[js], coef[js]] = (per[:pairs] - per[pairs:]) / step[js]
        if f is None:
            return
        ptr, pos = sim.samp_ptr, sim.samp_pos
        f_pos, f_turn = f
        turns = None
        if self.weights.get("orientation", 0.0) and sim.samp_quat is not None:
            # residuals against the measured orientations: J from the copies' differences
            turns = L.turn_residuals(sim.samp_quat, sub.targets.states["quat"],
                                     L.body_size(sub.model, np.asarray(ptr)))
            turns[np.isnan(turns)] = 0.0
        for i in np.unique(which[js]):
            mine = np.flatnonzero(which[js] == i)  # copies of scenario i in this batch
            meas = sub.targets.measured[ptr[mine[0]]:ptr[mine[0] + 1]]
            ok = ~np.isnan(meas)
            up = [pos[ptr[k]:ptr[k + 1]][ok] for k in mine]
            dn = [pos[ptr[pairs + k]:ptr[pairs + k + 1]][ok] for k in mine]
            J = np.stack([(u - d) / step[js[k]] for u, d, k in zip(up, dn, mine)], axis=1)
            r = 0.5 * (up[0] + dn[0]) - meas[ok]
            c = coef[js[mine]]
            gn[i][np.ix_(c, c)] = f_pos[i] * (J.T @ J)
            g_traj[i, c] = f_pos[i] * (J.T @ r)
            if turns is not None:
                up = [turns[ptr[k]:ptr[k + 1]].ravel() for k in mine]
                dn = [turns[ptr[pairs + k]:ptr[pairs + k + 1]].ravel() for k in mine]
                J = np.stack([(u - d) / step[js[k]] for u, d, k in zip(up, dn, mine)], axis=1)
                r = 0.5 * (up[0] + dn[0])
                gn[i][np.ix_(c, c)] += f_turn[i] * (J.T @ J)
                g_traj[i, c] += f_turn[i] * (J.T @ r)

    @classmethod
    def from_dataset(cls, ds, weights=None, split=None, order=None, coefficients=(),
                     integrator=None):
        """A problem on a dataset's scenarios (``split``: "train", "test" or
        None: all).  ``order``: the scenario ids to build, in that order (a
        subset in its own order; the targets are built for those alone).
        ``coefficients``: per-material entries the layout must have (those
        to be fitted), besides those of the dataset's ``params`` and ``truth``.
        ``integrator``: a registered name (None: the dataset's choice,
        :func:`simcore.data.dataset.scenarios`)."""
        if isinstance(ds, (str,)) or hasattr(ds, "__fspath__"):
            ds = D.read(ds)
        model, state, times, ids = D.scenarios(ds, coefficients=coefficients,
                                               integrator=integrator)
        if split is not None:
            if split not in ("train", "test"):
                raise ValueError(f"split {split!r}: expected 'train', 'test' or None")
            of = D.split(ds)
            order = [sid for sid in (order or [i for i, _ in ids]) if of[sid] == split]
        if order is not None:
            pos = {sid: k for k, (sid, _) in enumerate(ids)}
            unknown = [sid for sid in order if sid not in pos]
            if unknown:
                raise ValueError(f"scenario {unknown[0]!r} is not in the dataset")
            pick = np.array([pos[sid] for sid in order], np.int64)
            model, state = model.subset(pick), state.subset(pick)
            times, ids = [times[k] for k in pick], [ids[k] for k in pick]
        tg = dataset_targets(ds, model, times, ids)
        return cls(model, state, tg, dict(L.DEFAULT_WEIGHTS, **(weights or {})),
                   ids=[sid for sid, _ in ids], name=ds.name, body_ids=[b for _, b in ids])

    def with_coefficients(self, names):
        """This problem with the per-material entries ``names`` in its model's
        layout (see :meth:`simcore.model.Model.with_coefficients`)."""
        model = self.model.with_coefficients(names)
        return self if model is self.model else replace(self, model=model)

    def subset(self, scen, norm=0):
        """The problem on the scenarios ``scen`` (indices, in that order; an
        index may repeat), its loss a mean over ``norm`` scenarios (0: its
        own count).  A contiguous ascending range shares the measured rows
        (a view, no copy)."""
        scen = np.asarray(scen, np.int64)
        model = self.model.subset(scen)
        state = self.state.subset(scen)
        ptr = np.r_[0, np.cumsum([len(t) for t in self.targets.sample_times])]
        if scen.size and np.array_equal(scen, np.arange(scen[0], scen[0] + scen.size)):
            rows = slice(ptr[scen[0]], ptr[scen[-1] + 1])
        else:
            rows = np.concatenate([np.arange(ptr[s], ptr[s + 1]) for s in scen]) if scen.size \
                else np.zeros(0, np.int64)
        ev = self.targets.events
        if ev:
            # Each position of ``scen`` gets its scenario's events (a scenario
            # listed twice has them twice), kept in their order here.
            by = np.argsort(ev["scen"], kind="stable")
            lo = np.searchsorted(ev["scen"][by], scen, "left")
            n = np.searchsorted(ev["scen"][by], scen, "right") - lo
            take = by[np.repeat(lo - np.r_[0, np.cumsum(n)[:-1]], n) + np.arange(n.sum())]
            pos = np.repeat(np.arange(scen.size), n)
            keep = np.argsort(take, kind="stable")
            ev = {k: v[take[keep]] for k, v in ev.items()}
            ev["scen"] = pos[keep]
        nbmax = model.body_radius.shape[1]
        tg = L.Targets([self.targets.sample_times[s] for s in scen],
                       self.targets.measured[rows][:, :nbmax],
                       self.targets.final_pos[scen][:, :nbmax],
                       self.targets.final_vel[scen][:, :nbmax], ev,
                       self.targets.measured_velocity, self.targets.states_at(rows, nbmax))
        return Problem(model, state, tg, self.weights,
                       ids=[self.ids[s] for s in scen] if self.ids else None, name=self.name,
                       body_ids=[self.body_ids[s] for s in scen] if self.body_ids else None,
                       norm=norm)

    def truncated(self, fraction):
        """The problem on the first ``fraction`` of every scenario's time span.

        Scenario ``s`` then ends at ``t0 + fraction (t_end - t0)``; samples and
        measured events after that are dropped, and the final-state targets
        (which belong to the full span) are removed.  ``fraction >= 1`` gives
        the problem itself.  Used for horizon continuation in
        :func:`simcore.identify.fit.fit`.
        """
        if not 0.0 < fraction:
            raise ValueError(f"horizon fraction {fraction}: expected > 0")
        if fraction >= 1.0:
            return self
        t0 = self.state.time
        return replace(self.ended(t0 + fraction * (self.model.scen_t_end - t0)),
                       horizon=fraction)

    def ended(self, end):
        """The problem with scenario ``s`` ending at ``min(end[s], its end)``
        [s]: samples and measured events after it dropped, the final-state
        targets removed."""
        end = np.minimum(np.asarray(end, np.float64), self.model.scen_t_end)
        tg = self.targets
        keep = [t <= end[s] + 1e-12 for s, t in enumerate(tg.sample_times)]
        times = [t[k] for t, k in zip(tg.sample_times, keep)]
        rows = np.concatenate(keep) if keep else np.zeros(0, bool)
        ev = tg.events
        if ev:
            sel = ev["t"] <= end[ev["scen"]]
            ev = {k: v[sel] for k, v in ev.items()}
        none = np.full_like(tg.final_pos, np.nan)
        tg = L.Targets(times, tg.measured[rows], none, none.copy(), ev, tg.measured_velocity,
                       tg.states_at(rows))
        return replace(self, model=replace(self.model, scen_t_end=_reaching(end, times)),
                       targets=tg)

    def tumbling(self):
        """Whether the problem holds tumbling bodies measured with their
        orientations (an oriented shape on the time-stepper, quaternions in
        the targets): rollouts chaotic in their coefficients, which
        :meth:`segmented` cuts into pieces that are not."""
        m = self.model
        real = np.arange(m.body_shape.shape[1])[None, :] < m.body_count[:, None]
        oriented = shape_table.flags(m.body_shape, "oriented") & real
        return bool(m.integrator in RIGID and oriented.any()
                    and (self.targets.states or {}).get("quat") is not None)

    def segmented(self, length, rest=True, theta=None, longest=None):
        """The problem cut into segments of about ``length`` seconds, each a
        scenario of its own (named ``NAME#k``).

        A long rollout of a tumbling body is chaotic: which corner lands
        first flips under a small change of a coefficient, so the loss of a
        whole toss is rugged, with a local minimum at each flip (exact
        gradients see every one of them).  A segment is short enough that
        its loss is smooth in the coefficients, and each contact still lies
        in some segment.  Segment 0 starts from the scenario's initial state;
        segment ``k`` from the state at its first sample fitted to the
        :data:`SLOPE_HALF` measured samples on either side
        (:func:`simcore.geometry.rigid.window_state`: a quadratic through the
        positions, a constant rate through the orientations
        ``targets.states["quat"]``, which a box needs); measured velocities
        are not used (a tracker's are backward differences, half a sample
        late).  The ``state`` nuisance then refines the velocities.  A
        segment ends at the next one's first sample, whose residual it
        keeps; a segment starts only where every body of its scenario is
        measured throughout that window and moves smoothly there
        (:data:`SMOOTH_FACTOR`: a bounce inside the window would bend the
        quadratic's slope by up to half the speed); on the time-stepper, only
        where every body flies throughout the window
        (:data:`FLIGHT_CLEARANCE`), so every contact of a segment begins with
        its impact, as in the whole rollout.  A measured pose below
        the ground (the ground offset of ``theta``; a body's lowest corner)
        is raised onto it: a tracker's noise puts a resting box up to a
        millimetre into the table, and a contact that deep met at rest is
        held by the damping of its slowest touch (it creeps out at
        micrometres a step, its tangents growing without bound) instead of
        its spring.  Final-state targets (of the whole span) are dropped;
        measured events go to the segment that holds them.

        ``rest``: each scenario ends where its bodies have come to rest
        (:meth:`rest_time`); the samples after it carry no contact
        coefficient.  ``longest`` [s] (default ``LONGEST`` lengths): a
        segment that finds no start for longer (a box that lands and rocks
        on without flying again) ends there; the samples up to the next
        start are not fitted, as a long stretch of contact is as chaotic as
        a whole toss.
        """
        if not length > 0.0:
            raise ValueError(f"segment length {length}: expected > 0 seconds")
        longest = LONGEST * length if longest is None else float(longest)
        if not longest >= length:
            raise ValueError(f"longest segment {longest}: expected >= the length {length} s")
        theta = self.model.layout.vector() if theta is None else np.asarray(theta, np.float64)
        ground = self.model.ground_z + theta[P.GROUND_OFFSET]
        stop = self.rest_time() if rest else self.model.scen_t_end
        owner, start_row, t_start, t_stop = self._segment_bounds(length, longest, stop, ground)
        part = np.r_[0, np.cumsum(np.bincount(owner, minlength=self.nscen))]
        piece = np.arange(owner.size) - part[owner]
        sub = self.subset(owner)
        state = sub.state
        state.time[:] = t_start
        self._segment_states(state, owner, start_row, ground)
        targets = self._segment_targets(sub, owner, start_row, t_start, t_stop)
        model = replace(sub.model, scen_t_end=_reaching(t_stop, targets.sample_times),
                        names=tuple(f"{n}#{k}" for n, k in zip(sub.model.names, piece))
                        if sub.model.names else ())
        ids = ([f"{self.ids[s]}#{k}" for s, k in zip(owner, piece)] if self.ids else None)
        return replace(self, model=model, state=state, targets=targets, ids=ids, norm=0,
                       body_ids=[self.body_ids[s] for s in owner] if self.body_ids else None)

    def _segment_bounds(self, length, longest, stop, ground):
        """Where :meth:`segmented` cuts: per segment, its scenario
        (``owner``), the row of its first sample (-1: the scenario's start),
        its start and end times; segments start at samples every body is
        measured and (:data:`SMOOTH_FACTOR`) smooth or (time-stepper) flying
        around, about ``length`` apart, and end at ``stop`` or after
        ``longest``."""
        tg = self.targets
        m = self.model
        states = tg.states or {}
        ptr = np.r_[0, np.cumsum([len(t) for t in tg.sample_times])]
        oriented = shape_table.flags(m.body_shape, "oriented")
        owner, start_row, t_start, t_stop = [], [], [], []
        ext = m.body_ext if m.body_ext is not None else np.repeat(m.body_radius[..., None], 3, -1)
        w = SLOPE_HALF
        stepper = m.integrator in RIGID
        rough = self._roughness(w)
        smooth = (SMOOTH_FACTOR * np.nanpercentile(np.concatenate(rough), SMOOTH_QUANTILE)
                  if rough and not stepper else 0.0)
        for s in range(self.nscen):
            ts = np.asarray(tg.sample_times[s])
            nb = int(m.body_count[s])
            rows = np.arange(ptr[s], ptr[s + 1])
            end = float(min(stop[s], m.scen_t_end[s]))
            seen = np.isfinite(tg.measured[rows, :nb, 0]).all(axis=1)
            if oriented[s, :nb].any():
                if "quat" not in states:
                    raise ValueError(
                        f"scenario {self._name(s)!r}: segments need measured orientations "
                        "(trajectories qw, qx, qy, qz) to start a box's segment")
                seen &= np.isfinite(states["quat"][rows, :nb, 0]).all(axis=1)
            ok = np.zeros(ts.size, bool)
            if stepper:
                q = states["quat"][rows] if "quat" in states else None
                clear = np.array([all(
                    shape_table.lowest(m.body_shape[s, i], tg.measured[r, i],
                                       q[j, i] if q is not None else (1.0, 0, 0, 0), ext[s, i])
                    >= ground + FLIGHT_CLEARANCE for i in range(nb))
                    if seen[j] else False for j, r in enumerate(rows)], bool)
                good = seen & clear
            else:
                good = seen
            if ts.size > 2 * w:
                whole = np.convolve(good, np.ones(2 * w + 1), "valid") == 2 * w + 1
                ok[w:ts.size - w] = whole & (stepper | (rough[s][w:ts.size - w] <= smooth))
            begin, first = float(self.state.time[s]), -1
            nxt = begin + length
            for j in range(ts.size):
                if ts[j] >= nxt - 1e-12 and ok[j] and ts[j] < end - length / 2:
                    owner.append(s)
                    start_row.append(first)
                    t_start.append(begin)
                    t_stop.append(min(ts[j], begin + longest))
                    begin, first, nxt = float(ts[j]), int(rows[j]), ts[j] + length
            owner.append(s)
            start_row.append(first)
            t_start.append(begin)
            t_stop.append(min(end, begin + longest))
        return (np.array(owner, np.int64), np.array(start_row, np.int64), np.array(t_start),
                np.array(t_stop))

    def _segment_states(self, state, owner, start_row, ground):
        """Each segment's initial state (in ``state``, in place) from the
        measured samples around its first one (:func:`window_state`), raised
        onto the ground where a body's lowest point is below it."""
        tg, m, w = self.targets, self.model, SLOPE_HALF
        states = tg.states or {}
        ptr = np.r_[0, np.cumsum([len(t) for t in tg.sample_times])]
        ext = m.body_ext if m.body_ext is not None else np.repeat(m.body_radius[..., None], 3, -1)
        for k in np.flatnonzero(start_row >= 0):
            s, j = int(owner[k]), int(start_row[k])
            nb = int(m.body_count[s])
            win = slice(j - w, j + w + 1)
            tt = np.array([self._sample_time(ptr, s, r) for r in range(j - w, j + w + 1)])
            pos0, vel, quat0, omega = window_state(
                tt - tt[w], tg.measured[win, :nb], states["quat"][win, :nb]
                if "quat" in states else None)
            state.body_pos[k, :nb] = pos0
            state.body_vel[k, :nb] = vel
            if quat0 is not None:
                state.body_quat[k, :nb] = quat0
                state.body_omega[k, :nb] = omega
            for i in range(nb):
                low = shape_table.lowest(m.body_shape[s, i], state.body_pos[k, i],
                                         state.body_quat[k, i], ext[s, i])
                state.body_pos[k, i, 2] += max(ground - low, 0.0)

    def _segment_targets(self, sub, owner, start_row, t_start, t_stop):
        """The segments' targets: each segment's samples after its start
        (the first segment's from its start) up to its end, the measured
        events inside it; no final-state targets."""
        tg = self.targets
        keep = [(tg.sample_times[s] > t_start[k] + 1e-12) | ((start_row[k] < 0)
                                                               & (tg.sample_times[s] >= t_start[k]))
                for k, s in enumerate(owner)]
        keep = [kp & (tg.sample_times[s] <= t_stop[k] + 1e-12) for k, (kp, s) in
                enumerate(zip(keep, owner))]
        times = [np.asarray(tg.sample_times[s])[kp] for s, kp in zip(owner, keep)]
        sub_ptr = np.r_[0, np.cumsum([len(tg.sample_times[s]) for s in owner])]
        rows = np.concatenate([sub_ptr[k] + np.flatnonzero(kp) for k, kp in enumerate(keep)]
                              + [np.zeros(0, np.int64)])
        ev = sub.targets.events
        if ev:
            t = ev["t"]
            sel = (t > t_start[ev["scen"]]) & (t <= t_stop[ev["scen"]])
            ev = {key: v[sel] for key, v in ev.items()}
        none = np.full_like(sub.targets.final_pos, np.nan)
        return L.Targets(times, sub.targets.measured[rows], none, none.copy(), ev,
                         tg.measured_velocity, sub.targets.states_at(rows))

    def rest_time(self, move=REST_MOVE, turn=REST_TURN, window=REST_WINDOW):
        """Per scenario, the first sample time from which every body stays
        within ``move`` [m] of its position and ``turn`` [rad] of its
        orientation (when measured) for ``window`` seconds and to the end:
        where it has come to rest (the scenario's end if it never does).
        The tolerances stand above the measurement noise."""
        tg = self.targets
        m = self.model
        q = (tg.states or {}).get("quat")
        ptr = np.r_[0, np.cumsum([len(t) for t in tg.sample_times])]
        out = m.scen_t_end.astype(np.float64).copy()
        for s in range(self.nscen):
            ts = np.asarray(tg.sample_times[s])
            nb = int(m.body_count[s])
            p = tg.measured[ptr[s]:ptr[s + 1], :nb]
            still = np.ones(ts.size, bool)  # from sample j on, nothing moves
            last = ts.size
            for j in range(ts.size - 1, -1, -1):
                ahead = np.flatnonzero((ts >= ts[j]) & (ts <= ts[j] + window))
                d = np.nanmax(np.linalg.norm(p[ahead] - p[j], axis=-1), initial=0.0)
                ok = d <= move
                if q is not None:
                    qq = q[ptr[s]:ptr[s + 1], :nb]
                    dots = np.abs(np.sum(qq[ahead] * qq[j], axis=-1))
                    ok &= 2.0 * np.arccos(np.clip(np.nanmin(dots, initial=1.0), -1, 1)) <= turn
                if not ok:
                    break
                last = j
            still[:last] = False
            if last < ts.size and ts[-1] - ts[last] >= window:
                out[s] = ts[last]
        return out

    def _roughness(self, w):
        """Per scenario and sample, the RMS residual [m] of the least-squares
        quadratic through the positions of the ``2 w + 1`` samples around it
        (NaN near the ends and where a sample is missing): near the noise
        where the motion is smooth (flight, a slide, rest), far above it
        across an impact."""
        tg = self.targets
        ptr = np.r_[0, np.cumsum([len(t) for t in tg.sample_times])]
        out = []
        for s in range(self.nscen):
            ts = np.asarray(tg.sample_times[s], np.float64)
            nb = int(self.model.body_count[s])
            p = tg.measured[ptr[s]:ptr[s + 1], :nb].reshape(ts.size, -1)
            r = np.full(ts.size, np.nan)
            for j in range(w, ts.size - w):
                tt = ts[j - w:j + w + 1] - ts[j]
                y = p[j - w:j + w + 1]
                if not np.isfinite(y).all():
                    continue
                vand = np.stack([np.ones_like(tt), tt, tt * tt], axis=1)
                coef = np.linalg.lstsq(vand, y, rcond=None)[0]
                r[j] = np.sqrt(np.mean((vand @ coef - y) ** 2))
            out.append(r)
        return out

    def _name(self, s):
        return self.model.names[s] if self.model.names else s

    def _sample_time(self, ptr, s, row):
        return float(self.targets.sample_times[s][row - ptr[s]])


def project(theta, free, layout=None):
    """Project a full vector onto the bounds and ``mu_s >= mu_k``, ``v_th > 0``
    (:meth:`simcore.params.Layout.project`; ``layout`` defaults to the global one)."""
    return (layout or P.GLOBAL).project(theta, free)


def dataset_targets(ds, model, times, ids):
    """:class:`Targets` of a dataset, aligned with ``scenarios(ds)``'s output."""
    nscen = model.nscen
    nbmax = model.body_radius.shape[1]
    ptr = np.r_[0, np.cumsum([len(t) for t in times])]
    measured = buffers.full((ptr[-1], nbmax, 3), np.nan)
    final_pos = np.full((nscen, nbmax, 3), np.nan)
    final_vel = np.full((nscen, nbmax, 3), np.nan)
    tr = ds.tables["trajectories"]
    has_vel = all(c in tr.column_names for c in ("vx", "vy", "vz"))
    # Every body series lands in its scenario's rows, in one merge pass.
    ser = D.series_index(ds)
    _, _, _, _, p = D.body_series(ds)
    scen_of = np.full(len(ds.names), -1, np.int64)
    code_of = {str(n): c for c, n in enumerate(ds.names)}
    scen_of[[code_of[sid] for sid, _ in ids]] = np.arange(nscen)
    q_scen = scen_of[ser["code"]]
    lo = ser["range"][ser["code"], 0]
    q_slot = np.arange(q_scen.size) - lo  # bodies and series correspond (checked by scenarios)
    built = q_scen >= 0  # the other series belong to scenarios not in ``ids``
    row0 = np.where(built, ptr[np.maximum(q_scen, 0)], 0)
    row1 = np.where(built, ptr[np.maximum(q_scen, 0) + 1], 0)
    samp = np.concatenate(times) if times else np.zeros(0)
    D.scatter_series(ser["start"], ser["count"], row0, row1, q_slot, ser["t"], *p.cols, samp,
                      measured)
    # Orientations and velocities, where the trajectories have them (the
    # start of a segment reads them), in the series' order like the positions.
    order = D.body_series(ds)[0]
    states = {}
    for key, cols in (("quat", ("qw", "qx", "qy", "qz")), ("vel", ("vx", "vy", "vz")),
                      ("omega", ("wx", "wy", "wz"))):
        if not all(c in tr.column_names for c in cols):
            continue
        vals = [tr[c].to_numpy() if order is D.IDENTITY else tr[c].to_numpy()[order]
                for c in cols]
        out = np.full((ptr[-1], nbmax, len(cols)), np.nan)
        for k0 in range(0, len(cols), 3):
            part = vals[k0:k0 + 3]
            part += [part[0]] * (3 - len(part))
            buf = np.full((ptr[-1], nbmax, 3), np.nan)
            D.scatter_series(ser["start"], ser["count"], row0, row1, q_slot, ser["t"], *part,
                              samp, buf)
            width = min(3, len(cols) - k0)
            out[..., k0:k0 + width] = buf[..., :width]
        states[key] = out
    fin = D.final_states(ds)
    for s, (sid, body_ids) in enumerate(ids):
        t_end = times[s][-1]
        for i, b in enumerate(body_ids):
            tb, pf, vf = fin[(sid, int(b))]
            if tb == t_end:
                final_pos[s, i] = pf
                final_vel[s, i] = vf if has_vel else 0.0
    return L.Targets(list(times), measured, final_pos, final_vel,
                     _measured_events(ds, ids, nbmax), has_vel, states or None)


def _measured_events(ds, ids, nbmax):
    """The events table, or the detector's events (partner unknown)."""
    index = {sid: (s, {int(b): i for i, b in enumerate(bids)}) for s, (sid, bids) in enumerate(ids)}
    if "events" in ds.tables:
        ev = ds.tables["events"]
        names = ds.names[ds.codes["events"]]
        scen, body, other = [], [], []
        keep = []
        for r, (sid, b, o) in enumerate(zip(names, ev["body_id"].to_numpy(),
                                            ev["other"].to_pylist())):
            if str(sid) not in index:
                continue  # a scenario this problem does not hold
            s, loc = index[str(sid)]
            keep.append(r)
            scen.append(s)
            body.append(loc[int(b)])
            kind, _, ref = str(o).partition(":")
            other.append(loc.get(int(ref), -2) if kind == "body" else -1)
        dv = np.stack([ev[c].to_numpy() for c in ("dvx", "dvy", "dvz")], axis=1)[keep]
        return {"scen": np.array(scen, np.int64), "body": np.array(body, np.int64),
                "other": np.array(other, np.int64), "t": ev["t"].to_numpy()[keep], "dv": dv}
    order, key, counts, t, p = D.body_series(ds)
    det_b, det_t, det_dv = measured.detect_events(t, p, counts)
    tr = ds.tables["trajectories"]
    starts = np.r_[0, np.cumsum(counts)[:-1]]
    code = ds.codes["trajectories"][order[starts]]
    bid = tr["body_id"].to_numpy()[order[starts]]
    mine = np.array([str(ds.names[c]) in index for c in code[det_b]], bool)
    det_b, det_t, det_dv = det_b[mine], det_t[mine], det_dv[mine]
    scen = np.array([index[str(ds.names[c])][0] for c in code[det_b]], np.int64)
    body = np.array([index[str(ds.names[c])][1][int(b)] for c, b in zip(code[det_b], bid[det_b])],
                    np.int64)
    return {"scen": scen, "body": body, "other": np.full(scen.size, -2, np.int64), "t": det_t,
            "dv": det_dv}


def _reaching(end, times):
    """Scenario ends ``end`` moved out to the last of each one's sample
    ``times`` where that lies a rounding past it (samples are kept within
    1e-12 s of a cut, e.g. ``t0 + fraction (t_end - t0)``): the run must
    reach every sample it keeps."""
    last = np.array([t[-1] if len(t) else -np.inf for t in times])
    return np.maximum(end, last)


class ShardedProblem:
    """A :class:`Problem` evaluated shard by shard and merged.

    ``shards``: lists of scenario indices of ``problem`` (disjoint, empty ones
    dropped).  ``runner(calls)`` runs a list of ``(shard, horizon, method,
    kwargs)`` calls, where ``method`` is ``"evaluate"`` or ``"loss_only"`` of
    the shard's problem truncated to ``horizon``, and returns their results
    in order; the default runs them here, one after the other.  An
    orchestrator passes a runner that fans the calls out (threads, Dask);
    this class only splits and merges.  :func:`simcore.identify.fit.fit` takes it in
    place of a Problem, and the merged results equal the whole problem's
    bit for bit: each shard's loss is a mean over the whole problem's
    scenario count (``Problem.subset(..., norm=...)``; a runner that builds
    its own shard problems does the same), its per-scenario shares,
    gradients and curvatures go to their scenarios' rows, and every sum over
    scenarios is :func:`simcore.identify.losses.over_scenarios`.
    """

    def __init__(self, problem, shards, runner=None, horizon=1.0):
        self.problem = problem
        self.shards = [np.asarray(ix, np.int64) for ix in shards if len(ix)]
        every = np.sort(np.concatenate(self.shards)) if self.shards else np.zeros(0, np.int64)
        if not np.array_equal(every, np.arange(problem.nscen)):
            raise ValueError("shards: every scenario must be in exactly one shard")
        self.runner = runner or self._run_here
        self.horizon = horizon
        self._parts = {}

    nscen = property(lambda self: self.problem.nscen)
    tumbling = property(lambda self: self.problem.tumbling)
    model = property(lambda self: self.problem.model)

    def with_coefficients(self, names):
        """This problem if its layout has the per-material entries ``names``
        (the shards' problems are built with their layout, by the runner's
        owner: pass ``coefficients`` to :meth:`Problem.from_dataset`)."""
        if self.problem.model.layout.extend(names) is not self.problem.model.layout:
            raise ValueError(f"coefficients {list(names)}: not all in the sharded problem's "
                             f"layout {list(self.problem.model.layout.names)}; build its "
                             "problem with Problem.from_dataset(..., coefficients=...)")
        return self
    weights = property(lambda self: self.problem.weights)

    def nuisance_size(self, kind):
        return self.problem.nuisance_size(kind)

    def nuisance_start(self, kind, theta=None):
        return self.problem.nuisance_start(kind, theta)

    def nuisance_mask(self, kind):
        return self.problem.nuisance_mask(kind)

    def part(self, k, horizon=1.0):
        """Shard ``k``'s problem, truncated to ``horizon`` (cached)."""
        key = (k, horizon)
        if key not in self._parts:
            base = (self._parts.get((k, 1.0))
                    or self.problem.subset(self.shards[k], norm=self.problem.loss_norm))
            self._parts[(k, 1.0)] = base
            self._parts[key] = base.truncated(horizon)
        return self._parts[key]

    def _run_here(self, calls):
        return [getattr(self.part(k, h), method)(**kw) for k, h, method, kw in calls]

    def truncated(self, fraction):
        out = copy.copy(self)  # shares the shards, the runner and the part cache
        out.horizon = 1.0 if fraction >= 1.0 else fraction
        return out

    def _calls(self, method, nuis, **kw):
        return [(k, self.horizon, method,
                 dict(kw, nuis=nuis[ix] if nuis is not None else None))
                for k, ix in enumerate(self.shards)]

    def evaluate(self, theta, free, kind="none", nuis=None, want_gn=True, fd_fallback=True,
                 secant=0.0):
        evs = self.runner(self._calls("evaluate", nuis, theta=theta, free=free, kind=kind,
                                      want_gn=want_gn, fd_fallback=fd_fallback,
                                      secant=secant))
        return merge_evaluations(evs, self.shards, self.nscen)

    def loss_only(self, theta, kind="none", nuis=None, per_scenario=False):
        parts = self.runner(self._calls("loss_only", nuis, theta=theta, kind=kind,
                                        per_scenario=True))
        shares = np.zeros(self.nscen)
        for ix, p in zip(self.shards, parts):
            shares[ix] = p
        return shares if per_scenario else float(L.over_scenarios(shares))


def merge_evaluations(evs, shards, nscen):
    """One :class:`Evaluation` of the whole problem from its shards' ones
    (each a mean over the whole problem's ``nscen``, see :class:`ShardedProblem`)."""
    nt = evs[0].loss.grad.shape[1]
    per = np.zeros(nscen)
    grad = np.zeros((nscen, nt))
    want_gn = evs[0].loss.gn is not None
    gn = np.zeros((nscen, nt, nt)) if want_gn else None
    nondiff = np.zeros(nscen, evs[0].nondiff.dtype)
    comps, count, unmatched = {}, 0, 0
    signal = np.zeros_like(evs[0].signal)
    for ix, ev in zip(shards, evs):
        lv = ev.loss
        per[ix] = lv.per_scenario
        grad[ix] = lv.grad
        if want_gn:
            gn[ix] = lv.gn
        nondiff[ix] = ev.nondiff
        for name, v in lv.components.items():
            comps.setdefault(name, []).append(v)
        count += lv.count
        unmatched += lv.unmatched
        signal = signal + ev.signal
    # A component's shard sums, in an order of their values (the component
    # totals are reported; the fit reads the per-scenario shares).
    comps = {name: float(L.over_scenarios(v)) for name, v in comps.items()}
    total = float(L.over_scenarios(per))
    diag = None
    if want_gn and evs[0].loss.data_diag is not None:
        diag = np.zeros((nscen, nt))
        for ix, ev in zip(shards, evs):
            diag[ix] = ev.loss.data_diag
    lv = L.LossValue(float(total), comps, per, grad, gn, count, unmatched, diag)
    cut = None
    if evs[0].cut is not None:
        cut = np.zeros((nscen, evs[0].cut.shape[1]), bool)
        for ix, ev in zip(shards, evs):
            cut[ix] = ev.cut
    return Evaluation(lv, None, signal, nondiff, max(ev.nfev for ev in evs), cut)
