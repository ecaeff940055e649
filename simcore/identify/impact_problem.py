"""A calibration problem of measured impacts: the patent's Δv loss over
impact events, each simulated from its measured state just before through
the impact maps (:mod:`simcore.data.impacts`).

Each event is a scenario of the problem.  Its residual is the predicted
minus the measured post-impact velocity (the same pre-impact state enters
both, so it is the velocity jump's residual, the ``dv`` loss), weighed in
the kinetic-energy metric of the body::

    r = (v+ - v+*,  L (w+ - w+*)),     L = R diag(sqrt(I / m)) R^T

so a turn rate's error counts as the speed of a point at the body's radius
of gyration about that axis [m/s]; or, with ``lever`` [m] given, ``L =
lever I`` (``lever = 1`` weighs m/s and rad/s alike, as the metric of
Fazeli et al. does).  With ``relative``, each event's residual is divided
by the size of its measured post-impact velocity in the same metric (every
impact weighs alike, whatever its speed: with ``lever = 1`` the loss is the
mean square of Fazeli et al.'s per-event error).  The loss is the mean of
``|r|^2`` over the events
[(m/s)^2]; its gradient and Gauss-Newton matrix come from the impact maps'
exact sensitivities.  The interface is :class:`simcore.identify.problem.Problem`'s
(``evaluate``, ``loss_only``, ``model.layout``, no nuisance), so
:func:`simcore.identify.fit.fit` fits it unchanged.
"""

from dataclasses import dataclass, replace
from functools import cached_property

import numpy as np

from ..geometry.rigid import quat_matrix
from ..impacts import impact_engine
from ..kernel.status import STATUS_MESSAGES
from . import losses as L
from .problem import Evaluation


@dataclass(frozen=True)
class _Model:
    """What :func:`~simcore.identify.fit.fit` reads of a problem's model."""

    layout: object
    nscen: int


@dataclass
class ImpactProblem:
    """The events ``rows`` of ``data`` (:class:`~simcore.data.impacts.ImpactData`)."""

    data: object
    rows: np.ndarray
    model: _Model
    lever: float | None = None
    relative: bool = False
    name: str = ""

    @classmethod
    def from_data(cls, data, rows=None, coefficients=(), lever=None, relative=False):
        """The problem of ``rows`` (None: the unflagged events with a measured
        post-impact state)."""
        if rows is None:
            rows = np.flatnonzero(~data.flagged & np.isfinite(data.post).all(axis=1))
        rows = np.asarray(rows, np.int64)
        missing = rows[~np.isfinite(data.post[rows]).all(axis=1)]
        if missing.size:
            raise ValueError(f"event {data.ids[missing[0]]!r}: no measured post-impact state "
                             f"(post_vx .. post_wz); {missing.size} such event(s)")
        if lever is not None and not (np.isfinite(lever) and lever > 0):
            raise ValueError(f"lever = {lever}: expected a length > 0 [m] (None: the radius "
                             "of gyration)")
        layout = data.layout(coefficients)
        return cls(data, rows, _Model(layout, int(rows.size)), lever, bool(relative), data.name)

    @property
    def nscen(self):
        return self.model.nscen

    @property
    def ids(self):
        return [self.data.ids[r] for r in self.rows]

    def with_coefficients(self, names):
        return replace(self, model=_Model(self.data.layout(
            [*self.model.layout.per_material, *names]), self.nscen))

    def subset(self, idx):
        return replace(self, rows=self.rows[np.asarray(idx, np.int64)],
                       model=_Model(self.model.layout, int(np.size(idx))))

    def truncated(self, fraction):
        return self  # an impact has no horizon

    def nuisance_size(self, kind):
        if kind != "none":
            raise ValueError(f"nuisance {kind!r}: impacts have no nuisance unknowns")
        return 0

    def nuisance_start(self, kind, theta=None):
        return np.zeros((self.nscen, 0))

    def nuisance_mask(self, kind):
        return np.zeros((self.nscen, 0), bool)

    @cached_property
    def _events(self):
        return self.data.events(self.model.layout, self.rows)

    @cached_property
    def _weights(self):
        """The metric (:meth:`metric`), relative to each event's measured
        post-impact velocity with ``relative``."""
        W = self.metric()
        if self.relative:
            meas = self.data.post[self.rows]
            W = W / np.linalg.norm(np.einsum("eij,ej->ei", W, meas), axis=1)[:, None, None]
        return W

    def metric(self):
        """``(E, 6, 6)``: each event's residual weighting (module docstring)."""
        d = self.data
        out = np.zeros((self.nscen, 6, 6))
        out[:, :3, :3] = np.eye(3)
        for k, r in enumerate(self.rows):
            if self.lever is not None:
                out[k, 3:, 3:] = self.lever * np.eye(3)
            else:
                R = quat_matrix(d.quat[r])
                out[k, 3:, 3:] = R @ np.diag(np.sqrt(d.inertia[r] / d.mass[r])) @ R.T
        return out

    def _run(self, theta, dirs):
        post, dpost, status = impact_engine.run(self._events, theta, dirs, strict=False)
        bad = np.flatnonzero(status != 0)
        if bad.size:
            k = int(bad[0])
            raise RuntimeError(f"event {self.data.ids[self.rows[k]]!r}: "
                               f"{STATUS_MESSAGES[status[k]]}; {bad.size} event(s) failed")
        return post, dpost

    def residuals(self, theta, dirs=None):
        """``(r (E, 6), J (E, 6, nt))`` at ``theta``."""
        post, dpost = self._run(np.asarray(theta, np.float64), dirs)
        W = self._weights
        r = np.einsum("eij,ej->ei", W, post - self.data.post[self.rows])
        return r, np.einsum("eij,ejt->eit", W, dpost)

    def evaluate(self, theta, free, kind="none", nuis=None, want_gn=True, fd_fallback=True,
                 secant=0.0):
        """Loss and exact derivatives along the free coefficients ``free``."""
        self.nuisance_size(kind)
        theta = np.asarray(theta, np.float64)
        free = np.asarray(free, np.int64)
        dirs = np.zeros((theta.size, free.size))
        dirs[free, np.arange(free.size)] = 1.0
        r, J = self.residuals(theta, dirs)
        n = self.nscen
        shares = np.einsum("ei,ei->e", r, r) / n
        grad = 2.0 * np.einsum("eit,ei->et", J, r) / n
        gn = 2.0 * np.einsum("eit,eiu->etu", J, J) / n if want_gn else None
        total = float(L.over_scenarios(shares))
        lv = L.LossValue(total, {"dv": total}, shares, grad, gn, n, 0,
                         np.einsum("ett->et", gn) if want_gn else None)
        signal = (np.abs(J).max(axis=1) > 0).sum(axis=0).astype(np.int64)
        return Evaluation(lv, None, signal, np.zeros(n, np.int64), 1, None)

    def loss_only(self, theta, kind="none", nuis=None, per_scenario=False, event_capacity=64):
        r, _ = self.residuals(theta)
        shares = np.einsum("ei,ei->e", r, r) / self.nscen
        return shares if per_scenario else float(L.over_scenarios(shares))

    def predict(self, theta):
        """The predicted post-impact velocities ``(E, 6)`` at ``theta``."""
        return self._run(np.asarray(theta, np.float64), None)[0]


def fazeli_error(pred, measured, planar=(0, 2, 4)):
    """Fazeli et al.'s per-event error ``||v*+ - v+|| / ||v*+||`` on the planar
    components ``(vx, vz, w_y)`` (their ``vth`` up to its sign, which the
    norm ignores)."""
    a = np.asarray(measured)[:, planar]
    b = np.asarray(pred)[:, planar]
    return np.linalg.norm(a - b, axis=1) / np.linalg.norm(a, axis=1)

