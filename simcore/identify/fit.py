"""Coefficient identification: one ``fit(...) -> FitResult`` over three optimisers.

* ``"lm"`` (default): bounded Levenberg-Marquardt on the stacked residuals.
  The Gauss-Newton matrix ``2 J^T W J`` comes from the kernel's sensitivities
  per scenario; nuisance unknowns of each scenario are eliminated by their
  Schur complement (block-arrow structure), so the step costs ``O(S k^3)``
  for ``S`` scenarios with ``k`` nuisance values each.  A step is accepted
  only if the loss falls (the damping grows otherwise).
* ``"gd"``: the source patent's update ``theta_{k+1} = theta_k - eta P grad L``
  with the learning rate ``eta`` from the caller and a preconditioner ``P``
  (``precondition``): by default the inverse Gauss-Newton matrix (the
  natural gradient: each step is ``eta`` times the Gauss-Newton step, so the
  correlated coefficients of a contact model, which a diagonal scaling leaves
  ill-conditioned, converge in tens of steps), ``"jacobi"`` its diagonal,
  ``False`` none (the patent's raw update); a step that raises the loss or
  gives NaN is retried with ``eta / 2`` (backtracking), and after an accepted
  step ``eta`` grows by ``lr_growth`` (1.0: the patent's fixed rate).
* ``"adam"``: Adam (Kingma & Ba) with the same NaN/rise rejection.

Horizon continuation (``horizons``, default ``HORIZONS``): the loss of a
contact trajectory is only piecewise smooth in the coefficients (each change
of the event sequence leaves a crease), and the creases multiply with the
time span: a fit over the whole span from a far start stalls on one (on a
100-scenario table from the defaults, ``v_th`` ended 35-73 % off).  So the
fit runs first on the first quarter of every scenario, then on the first
half, then on all of it, each stage starting from the last
(:meth:`simcore.identify.problem.Problem.truncated`).  Short spans hold few events,
so their loss is nearly smooth and its minimum is near the truth; each
longer stage starts inside the basin of its own minimum.  These warm-up
stages minimise a robust objective, ``sum_s a log(1 + l_s / a)`` over the
scenarios' loss shares ``l_s`` with ``a = ROBUST x`` their median at the
stage start (Cauchy, by IRLS), so that a scenario whose event sequence still
differs (a missed collision: hundreds of times the noise level) cannot hold
the others back; they end at a loose ``STAGE_FTOL`` (patience 1).  A last plain
least-squares stage on the full span gives the estimate.  ``nit``, ``nfev``
and ``history`` (each record tagged with its ``horizon``) cover all stages;
the uncertainty and the report come from the full-span stage.

Searched continuation (``search``, :func:`_fit_searched`): for tumbling
bodies whose own coefficients are fitted, the rollouts over finer horizons,
the first from many starts and each stage followed by a CMA-ES search of
its loss (:func:`_cma_search`), so that the answer moves to the lowest well
near it before the next horizon narrows them.

Nuisance rescue (with ``nuisance``): each scenario's nuisance values are its
own small non-convex problem, and a scenario can end in a local minimum of
its own (a push that drives its body along another path of impacts).  After
the full-span stage, a scenario whose loss share exceeds ``RESCUE`` times the
median share (the noise floor) has its nuisance refitted alone, the
coefficients fixed, from other starts: the data-driven push estimates
(:meth:`simcore.identify.problem.Problem.push_from_data`), each (x, y) pair 30 %
smaller and larger with the others kept, and at least ``RESCUE_STARTS`` in
all with the current values scaled and turned at random (seeded).  If any
scenario improves, the full-span stage runs again from there and is kept if
its loss is lower.  The truncated warm-up stages hold push windows that their horizon
cuts (:meth:`simcore.identify.problem.Problem.nuisance_cut`), and the free
coefficients their span informs only weakly (:data:`STAGE_WEAK`).

Every iterate is projected onto the bounds (:func:`simcore.identify.problem.project`:
``mu >= 0``, ``0 <= e <= 1``, ``v_th > 0``, ``mu_s >= mu_k``).  Convergence:
the relative loss change stays below ``ftol`` for ``patience`` iterations
(``"lm"``: or its Gauss-Newton model predicts a relative decrease below
``ftol`` for the next step, which is then not tried, or that step moves
every free coefficient by less than ``step_sigma`` of its standard error
(the undamped step before the first trial, the damped one after trials
that raised the loss):
the estimate is then settled to a twentieth of its own uncertainty, and
the 95 % intervals keep their coverage; on millions of samples the last
relative loss changes are 1e-10, decided by the kinks of the few
sustained-contact scenarios, and each rejected trial costs a full
evaluation), or
the scaled projected gradient ``|g * max(|theta|, 0.1)| / L`` falls below
``gtol``, or ``max_iter`` ends the run (not converged).

Uncertainty at the optimum, from the Gauss-Newton matrix and the residual
variance: ``cov = (L / (N - P)) (J^T W J)^-1`` for the free coefficients
(the nuisance marginalised through the Schur complement), ``N`` scalar
residuals and ``P`` unknowns; the 95 % interval is ``theta +- 1.96 stderr``.
The weights ``W`` are the loss normalisation, so this is exact for uniform
weights and the usual weighted-least-squares estimate otherwise.  A secant
fit (a chaotic loss) takes its intervals at the scales its loss was
explored at instead (:func:`_explored`: the delete-one jackknife over
scenarios at relative steps ``EXPLORED``, Student's t); ``FitResult.interval``
says which.

Identifiability: a free coefficient that entered no event or segment of any
scenario (``signal == 0``: e.g. no wall impact slipped) gets no gradient from
the data; it is held at its start value and named in ``FitResult.held``
and in the message beside the optimiser's status, with the reason (the fit
of the others can still converge).  A coefficient with a relative standard
error above ``WEAK_REL`` is reported as weakly identified.
"""

import itertools
from dataclasses import dataclass, field, replace
from typing import NamedTuple

import numpy as np

from .. import params as P
from ..data import dataset as D
from .losses import over_scenarios as _over
from .problem import NUISANCE, project

METHODS = ("lm", "gd", "adam")


class Status(NamedTuple):
    """How a fit ended: its code, the word ``fit.json``, MLflow and the
    report show, the message, and whether the optimiser converged."""

    code: int
    word: str
    message: str
    converged: bool


STATUS_FTOL, STATUS_GTOL, STATUS_MAXITER, STATUS_NOSTEP, STATUS_NONFINITE, STATUS_STEP = range(6)
#: The one table of fit statuses, by code.
STATUSES = (
    Status(STATUS_FTOL, "converged_ftol", "converged: relative loss change below ftol", True),
    Status(STATUS_GTOL, "converged_gtol", "converged: scaled gradient below gtol", True),
    Status(STATUS_MAXITER, "max_iter", "not converged: max_iter reached", False),
    Status(STATUS_NOSTEP, "no_step", "not converged: no trial step lowered the loss", False),
    Status(STATUS_NONFINITE, "nonfinite", "failed: the loss is not finite at the start", False),
    Status(STATUS_STEP, "converged_step",
           "converged: the next step is below step_sigma standard errors", True),
)
assert all(st.code == k for k, st in enumerate(STATUSES))
STATUS_MESSAGES = tuple(st.message for st in STATUSES)
#: Statuses of a converged optimiser.
CONVERGED = tuple(st.code for st in STATUSES if st.converged)
#: Default iteration limits per method: Adam's fixed-size steps need a few
#: hundred iterations to settle correlated coefficients (311 on the shipped set).
MAX_ITER = {"lm": 100, "gd": 100, "adam": 1000}
#: Horizon continuation: the fractions of each scenario's span fitted in turn.
HORIZONS = (0.25, 0.5, 1.0)
#: Cauchy scale of the continuation stages, in medians of the scenarios' losses.
ROBUST = 10.0
#: Nuisance rescue: loss share over the median share that marks a scenario
#: stuck in a local minimum of its own, and the extra starts it gets.
RESCUE = 1.25
RESCUE_STARTS = 8
#: The nuisance kinds rescued: a stuck push or a guessed velocity or spin can
#: start far from its value; a segment's state (``state``) starts from the
#: measurements.
RESCUED = ("velocity", "push", "spin")
#: The multiple-shooting segments' length [s] for tumbling bodies, and the
#: secant steps and ``step_sigma`` their rollout fit takes by default (the
#: whole rollout's exact slope is its ripples'; see :func:`fit`).
SEGMENT_S = 0.15
SEGMENT_SECANT = (0.01, 0.003)
SEGMENT_STEP_SIGMA = 0.0
#: The secant steps of the segments' own fit (coarser: see ``segments`` of
#: :func:`fit`).
SEGMENT_STAGE_SECANT = (0.05, 0.02)
#: The segments' starts: held at their measured states (``state``, held on
#: the secant path), or refined with the coefficients (``pose``: position,
#: turn, velocity and spin of every segment's start, differenced) when the
#: fit frees one of the body's or the recording's own coefficients (see
#: :func:`_segment_nuisance`).
SEGMENT_HELD, SEGMENT_REFINED = "state", "pose"
#: At most this many starts for a segmented fit that falls short of the
#: caller's yardstick (``enough`` of :func:`fit`), and up to
#: ``SEGMENT_STARTS_NEAR`` while the best of them is within ``NEAR`` times
#: it: a tumbling body's fit that ends just above the limit sits beside the
#: truth's narrow well, which more starts find; one far above it is a model
#: error or a far basin, where more starts rarely help.
SEGMENT_STARTS = 4
SEGMENT_STARTS_NEAR = 8
NEAR = 1.25
#: The relative steps at which a secant fit's intervals look at its loss
#: (:func:`_explored`).
EXPLORED = (0.003, 0.01, 0.03)
#: The global phase of a segmented fit (:func:`_global_phase`): points of its
#: Latin hypercube per free coefficient, and the most segments it looks at.
GLOBAL_POINTS = 16
GLOBAL_SEGMENTS = 96
#: The rollouts' check (:func:`_rollout_phase`): the candidates of least loss
#: on its ``GLOBAL_SEGMENTS`` rollouts scored again on every rollout.
FINALISTS = 4
#: At most this many points in a fit's ``scan`` grid.
MAX_SCAN = 200
#: The rollouts' local phase (:func:`_local_points`): points of its Latin
#: hypercube per free coefficient, within this relative span of the
#: segments' answer (an offset: this share of its scale).
LOCAL_POINTS = 32
LOCAL_SPAN = 0.15
#: Relative loss change that ends a warm-up stage.
STAGE_FTOL = 1e-6
#: A searched fit (``search`` of :func:`fit`): its horizons, from just after
#: a toss's first impacts (0.15 of its span: its first tenth is flight)
#: in twentieths, then in tenths and more of the span, where the wells
#: have narrowed.
SEARCH_HORIZONS = (0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.85, 1.0)
#: The starts of a searched fit's first stage (its start and a Latin hypercube).
SEARCH_STARTS = 48
#: The CMA-ES search's first step, in each coefficient's standard error at
#: the stage's end or at the previous stage's, the wider.
SEARCH_SIGMA = 2.0
#: The evaluations of each stage's search when a config asks for one.
SEARCH_EVALS = 1000
#: A warm-up stage holds each free coefficient whose relative standard error
#: at the stage's start (:func:`_relative_stderr`) is above this: the
#: truncated data do not pin it within its own size (a table's tilt or a
#: restitution before most first impacts), and a Gauss-Newton step along
#: such a flat direction moves it by whatever the noise says, far out of the
#: next stage's basin, where the coefficients the stage does inform follow it.
STAGE_WEAK = 1.0
#: Largest relative change of a coefficient in one step.
MAX_REL_STEP = 0.2
#: Relative standard error above which a coefficient is weakly identified.
WEAK_REL = 0.1
#: LM stops when its next step moves every free coefficient by less than
#: this many of its standard errors (``step_sigma``).
STEP_SIGMA = 0.05


@dataclass
class FitResult:
    """Outcome of :func:`fit` (shaped like scipy's ``OptimizeResult``).

    ``params``: all coefficients (fixed ones included); ``free``: the fitted
    names; ``stderr``, ``ci95`` (name -> (lo, hi)) and ``corr (nfree, nfree)``
    for the free ones; ``loss`` and ``components``; ``grad`` (free);
    ``nit``, ``nfev``; ``status`` (a code of :data:`STATUSES`), ``message``,
    ``success`` (the optimiser converged), ``held``: the free coefficients
    the data do not inform, held at their start; ``history``: one
    dict per iteration (``loss``, ``components``, ``theta``, ``grad_norm``,
    ``step``); ``identifiability``: name -> ``{"signal", "identifiable",
    "weak", "reason"}``; ``nuisance (nscen, k)`` when fitted; ``unmatched``
    measured events; ``nondiff`` scenarios (gradient by finite differences);
    ``nuisance_held (nscen, k)``: nuisance values held at their start (no
    data curvature: e.g. a push that never moves its body);
    ``nuisance_stderr (nscen, k)``: their standard errors (``inf`` where held);
    ``starts``: the per-start results of a multi-start, and ``spread``;
    ``stderr_cluster``, ``corr_cluster (nfree, nfree)``: standard errors
    and correlations that allow the residuals of a scenario to be
    correlated (:func:`_cluster_cov`; None with a nuisance or fewer than
    two scenarios per free coefficient); ``strategy``: how the fit went
    (whole rollouts, or segments first: ``segments`` of :func:`fit`);
    ``interval``: how ``stderr`` and ``ci95`` were computed (the Gauss-Newton
    curvature, or for a secant fit the scale its loss was explored at:
    :func:`_explored`).
    """

    params: dict
    free: tuple
    stderr: dict
    ci95: dict
    corr: np.ndarray
    loss: float
    components: dict
    grad: np.ndarray
    nit: int
    nfev: int
    status: int
    message: str
    success: bool
    history: list
    identifiability: dict
    method: str = "lm"
    nuisance: np.ndarray = None
    unmatched: int = 0
    nondiff: int = 0
    nuisance_held: np.ndarray = None
    nuisance_stderr: np.ndarray = None
    fd_check: float = None
    starts: list = field(default_factory=list)
    spread: dict = field(default_factory=dict)
    held: tuple = ()
    stderr_cluster: dict = None
    corr_cluster: np.ndarray = None
    strategy: str = "whole rollouts"
    interval: str = "Gauss-Newton: theta +- 1.96 stderr"


def _free_indices(free, layout):
    names = layout.coefficients if free is None else tuple(free)
    out = []
    for n in names:
        try:
            out.append(layout.index(n))
        except ValueError as exc:
            raise ValueError(f"free parameter {n!r}: {exc}") from None
    if not out:
        raise ValueError("no free parameter: give at least one name in free")
    return sorted(set(out))


def _schur(H, g, nf, k, scen_hold, lam=0.0):
    """Eliminate each scenario's nuisance block from ``(H + lam D) x = -g``.

    ``H (S, NT, NT)``, ``g (S, NT)`` per scenario, the first ``nf`` entries
    the shared coefficients.  Returns ``(A, b, X)``: the reduced matrix and
    right side of the coefficients, and ``X (S, k, nf + 1) = Hnn^-1 [Hng, g_n]``
    for the back substitution (None without nuisance).  The nuisance damping
    is ``lam diag(Hnn)``; nuisance values without curvature, or held by
    ``scen_hold`` (``(S,)``: whole scenarios; ``(S, k)``: single values), are
    pinned (unit diagonal, no coupling).
    """
    A = _over(H[:, :nf, :nf])
    b = _over(g[:, :nf])
    if not k:
        return A, b, None
    Hnn = H[:, nf:, nf:].copy()
    gn = g[:, nf:].copy()
    diag = np.einsum("sii->si", H[:, nf:, nf:])
    held = scen_hold if scen_hold.ndim == 2 else scen_hold[:, None]
    dead = (diag <= 1e-14 * max(diag.max(initial=0.0), 1e-300)) | held
    idx = np.arange(k)
    Hnn[:, idx, idx] += lam * np.where(dead, 1.0, diag) + dead
    gn[dead] = 0.0
    Hgn = np.where(dead[:, None, :], 0.0, H[:, :nf, nf:])
    rhs = np.concatenate([np.transpose(Hgn, (0, 2, 1)), gn[..., None]], axis=2)
    try:
        X = np.linalg.solve(Hnn, rhs)
    except np.linalg.LinAlgError:
        # A combination of nuisance values the data leave free (a body's
        # spin about a line its samples cannot see): the minimum-norm step.
        X = np.linalg.pinv(Hnn, rcond=1e-12, hermitian=True) @ rhs
    A = A - _over(np.einsum("sfn,sng->sfg", Hgn, X[:, :, :nf]))
    b = b - _over(np.einsum("sfn,sn->sf", Hgn, X[:, :, nf]))
    return A, b, X


def _lm_step(H, g, nf, k, lam, hold, scen_hold):
    """Damped Gauss-Newton step ``(H + lam D) d = -g`` with nuisance eliminated.

    ``D`` is the diagonal of ``H``; ``hold``: free coefficients held (no
    signal); ``scen_hold``: scenarios whose nuisance is held.  Returns
    ``(d_global (nf,), d_nuis (S, k) or None)``.
    """
    dg_scale = np.maximum(np.diag(_over(H[:, :nf, :nf])), 1e-30)
    A, b, X = _schur(H, g, nf, k, scen_hold, lam)
    A[np.diag_indices(nf)] += lam * dg_scale
    for c in hold:
        A[c, :] = 0.0
        A[:, c] = 0.0
        A[c, c] = 1.0
        b[c] = 0.0
    d = np.linalg.solve(A, -b)
    dn = None
    if k:
        dn = -(X[:, :, nf] + np.einsum("snf,f->sn", X[:, :, :nf], d))
    return d, dn


def _ev_covariance(ev, nf, k, hold):
    """:func:`_covariance` at the evaluation ``ev``, its nuisance held as the
    fit holds it (:func:`_nuisance_hold`) and counted where it has a gradient."""
    lv = ev.loss
    nuis_count = int(np.count_nonzero(np.abs(lv.grad[:, nf:]) > 0)) if k else 0
    return _covariance(lv.gn, nf, k, _nuisance_hold(ev, nf, k), lv.total, 3 * lv.count,
                       nuis_count, hold)


def _nuisance_stderr(ev, nf, k, hold, cov):
    """Standard errors ``(S, k)`` of the nuisance values at the evaluation ``ev``.

    The nuisance block of ``sigma^2 (J^T W J)^-1`` for the block-arrow matrix
    is, scenario by scenario, ``sigma^2 Hnn^-1 + X cov X^T`` with ``X =
    Hnn^-1 Hng`` and ``cov`` the coefficients' covariance (its ``sigma^2``
    included; held coefficients are fixed, so they add nothing).  Values the
    fit holds (:func:`_nuisance_hold`) get ``inf``.
    """
    lv = ev.loss
    H = lv.gn[:, nf:, nf:] / 2.0
    held = _nuisance_hold(ev, nf, k)
    idx = np.arange(k)
    H = np.where(held[:, :, None] | held[:, None, :], 0.0, H)
    H[:, idx, idx] += held  # pinned: unit diagonal, no coupling
    # (A pseudo-inverse: values that move the data only together, such as a
    # ball's velocity and spin where only their slip is seen, leave H singular.)
    inv = np.linalg.pinv(H)
    Hng = np.where(held[:, :, None], 0.0, np.transpose(lv.gn[:, :nf, nf:], (0, 2, 1)) / 2.0)
    X = inv @ Hng
    nuis_count = int(np.count_nonzero(np.abs(lv.grad[:, nf:]) > 0))
    sigma2 = lv.total / max(3 * lv.count - nf - nuis_count, 1)
    c = np.where(np.isfinite(cov), cov, 0.0)
    c[hold, :] = 0.0
    c[:, hold] = 0.0
    var = sigma2 * np.einsum("sii->si", inv) + np.einsum("snf,fg,sng->sn", X, c, X)
    return np.where(held, np.inf, np.sqrt(np.maximum(var, 0.0)))


def _cluster_cov(ev, nf, hold):
    """Scenario-clustered (sandwich) covariance of the free
    coefficients: ``H^-1 (sum_s g_s g_s^T) H^-1`` with ``g_s`` each
    scenario's gradient of its loss share and ``H`` the Gauss-Newton matrix
    of the total.  The plain standard errors take every residual term as
    independent noise; under model error (a real toss its model does not
    quite reproduce) a scenario's residuals move together, and its share
    of the loss varies from scenario to scenario far beyond the noise: this
    estimate lets it (scenarios independent of one another).  Held
    coefficients' rows and columns are NaN, their variance ``inf``."""
    lv = ev.loss
    keep = [c for c in range(nf) if c not in hold]
    out = np.full((nf, nf), np.nan)
    out[hold, hold] = np.inf
    if not keep:
        return out
    H = _over(lv.gn[:, keep][:, :, keep])
    g = lv.grad[:, keep]
    try:
        inv = np.linalg.inv(H)
    except np.linalg.LinAlgError:
        inv = np.linalg.pinv(H)
    out[np.ix_(keep, keep)] = inv @ _over(g[:, :, None] * g[:, None, :]) @ inv
    return out


def _correlation(cov):
    """The correlation matrix of a covariance (NaN where a variance is 0,
    infinite or unknown)."""
    std = np.sqrt(np.maximum(np.diag(cov), 0.0))
    with np.errstate(all="ignore"):
        corr = cov / np.outer(std, std)
    corr[~np.isfinite(corr)] = np.nan
    return corr


def _covariance(H, nf, k, scen_hold, loss, count, nuis_count, hold):
    """``(L / (N - P)) (J^T W J)^-1`` of the free coefficients (nuisance
    marginalised); held coefficients (no signal) get an infinite variance."""
    A, _, _ = _schur(H / 2.0, np.zeros(H.shape[:2]), nf, k, scen_hold)
    dof = max(count - nf - nuis_count, 1)
    keep = np.array([c for c in range(nf) if c not in hold], np.int64)
    cov = np.full((nf, nf), np.nan)
    cov[hold, hold] = np.inf
    if keep.size:
        try:
            cov[np.ix_(keep, keep)] = np.linalg.inv(A[np.ix_(keep, keep)]) * (loss / dof)
        except np.linalg.LinAlgError:
            cov[keep, keep] = np.inf
    return cov


def fit(problem, params0=None, free=None, *, method="lm", nuisance="none", lr=None,
        lr_growth=1.0, precondition=True, ftol=1e-10, gtol=1e-8, patience=3, max_iter=None,
        starts=1, seed=0, fd_check=False, callback=None, horizons=HORIZONS, robust=ROBUST,
        step_sigma=STEP_SIGMA, secant=(), segments=0.0, enough=None, search=0, spread=None,
        scan=None):
    """Fit the free coefficients of ``problem`` (see the module docstring).

    ``params0``: start values (mapping; defaults fill the rest, and fix the
    coefficients not in ``free``); ``free``: names to fit (None: the contact
    coefficients of the model's layout, ``Layout.coefficients``; the global
    offsets ``ground_offset`` and ``time_offset`` are fitted only when named);
    ``nuisance``: "none", "velocity", "push", "spin" or "state" (see :mod:`simcore.identify.problem`;
    the start is :meth:`~simcore.identify.problem.Problem.nuisance_start` at
    ``params0``, where a push stuck on the static plateau restarts from its
    window's measured motion);
    ``starts > 1``: multi-start, the extra starts drawn uniformly within
    ``[0.5, 2] x`` the start values (restitutions within [0.05, 1], offsets
    within ``+-2 OFFSET_SCALE`` of theirs) from
    ``seed``; the best is returned with the others in ``starts``.
    ``fd_check``: compare the gradient with central finite differences at the
    start (``FitResult.fd_check``: the largest relative gap; at the optimum
    the gradient vanishes and the comparison would be rounding), for data
    whose event sequence changes under small perturbations.
    ``callback(record)`` sees each iteration's history record.
    ``horizons``: increasing fractions of every scenario's time span for
    horizon continuation, and ``robust`` the Cauchy scale of its warm-up
    stages (see the module docstring; ``0``: no robust stage);
    ``horizons=(1.0,)`` is one plain fit of the whole span.
    ``secant``: decreasing relative steps (e.g. ``(0.01, 0.003)``; empty:
    exact sensitivities).  The continuation runs with the derivatives of
    the free coefficients by central differences over the first step (a
    secant Jacobian), then one more fit of the whole span per further step;
    the nuisance is held at its start.  For chaotic rollouts (a tumbling
    box): there the loss is a funnel around the truth carrying micrometre
    ripples (contacts chattering as a box rocks and slides on a face), so
    the exact slope is the ripples' and far above the funnel's; a secant
    over the coefficients' present uncertainty follows the funnel, and
    shrinking it resolves the bottom.  The standard errors are then the
    last secant's.
    ``segments`` [s] (0: off): multiple shooting before the rollouts.  Each
    start is first fitted on the problem cut into segments of about this
    length, each from the measured state at its start
    (:meth:`~simcore.identify.problem.Problem.segmented`; held there, or
    refined with the body's own coefficients: :func:`_segment_nuisance`):
    a segment holds one or two impacts, so its loss has the funnel without
    the chaos of a whole tumble, and its minimum lies in the truth's basin,
    a little off it (held starts carry the positions' noise).  Its fit starts from
    the best point of a global phase (:func:`_global_phase`) and takes
    coarse secants (``SEGMENT_STAGE_SECANT``, relative steps of 5 % then 2 %:
    the segments' loss still carries bumps at the scale of a few per cent,
    where 1 % secants stall) over whole segments (no horizon stages: a
    quarter of a segment holds no impact).  The rollout fit then starts
    there, or at a point of lower rollout loss, global or around the
    answer (:func:`_rollout_phase`), and gives the estimate.
    ``search`` (0: off): the rollouts searched at every horizon
    (:func:`_fit_searched`: the first horizon from ``SEARCH_STARTS``
    starts drawn within ``spread`` (name -> half-width, e.g. what the
    flights show; else the multi-start's ranges) of the start, each stage
    followed by a CMA-ES search of at most ``search`` evaluations), for
    tumbling bodies whose own coefficients are fitted too.
    ``enough(result) -> float``: the fit's residual over the caller's limit
    (e.g. the registration gate's; at most 1: at the noise).  A segmented
    fit from one start that falls short of it is not trusted: up to
    ``SEGMENT_STARTS`` starts are tried (drawn as for ``starts``, each with
    a global phase of its own; up to ``SEGMENT_STARTS_NEAR`` while the best
    is within ``NEAR`` times the limit), stopping at the first that meets
    it, the best returned with the others in ``starts``; a chaotic loss
    holds wells far from the truth that one start cannot tell from it (flat
    boxes tossed high and slow can end 10 % off from one start, ten times
    the noise).
    ``scan`` (``{name: values}``): a grid checked at the fit's answer, the
    rollouts run again from a point of lower loss (:func:`_fit_then_scan`),
    for coefficients known only to their order of magnitude, whose wells a
    local fit does not cross (one not free: a model chosen by the loss).

    Learning rate ``lr`` (gd, adam; default 0.5 and 3e-3): with
    ``precondition`` (gd): ``True`` or ``"gauss-newton"`` (default), the step
    is ``lr`` times the Gauss-Newton step ``-(2 J^T W J)^-1 g`` (nuisance
    eliminated as in ``lm``); ``"jacobi"``, ``-lr g / diag(2 J^T W J)``, so
    that ``lr`` is dimensionless and coefficients of very different
    sensitivity move alike; ``False``, the raw patent update ``-lr g``
    (``lr`` then in units of theta^2 / loss).
    """
    if lr is None:
        lr = 3e-3 if method == "adam" else 0.5
    if max_iter is None:
        max_iter = MAX_ITER.get(method, 100)
    _check_options(method, nuisance, free, params0, robust, segments, lr=lr, ftol=ftol,
                   gtol=gtol, max_iter=max_iter, starts=starts, lr_growth=lr_growth,
                   step_sigma=step_sigma, search=search)
    if precondition not in (True, False, "gauss-newton", "jacobi"):
        raise ValueError(f"precondition = {precondition!r}: expected 'gauss-newton', 'jacobi', "
                         "True (gauss-newton) or False")
    horizons = check_horizons(horizons)
    secant = check_secant(secant)
    scan = check_scan(scan)
    problem = problem.with_coefficients([*(free or ()), *(params0 or {}), *scan])
    lay = problem.model.layout
    free_idx = _free_indices(free, lay)
    theta0 = lay.vector(params0 or {})
    kw = dict(method=method, nuisance=nuisance, lr=lr, lr_growth=lr_growth,
              precondition=precondition, ftol=ftol,
              gtol=gtol, patience=patience, max_iter=max_iter, fd_check=fd_check,
              callback=callback, horizons=horizons, robust=robust, step_sigma=step_sigma,
              secant=secant)
    if segments:
        kw.update(segments=float(segments), global_seed=seed)
    elif search:
        kw.update(search=int(search), global_seed=seed, spread=dict(spread or {}))
    run = _fit_segments_first if segments else _fit_searched if search else _fit_continued
    if scan:  # the fit, then its answer checked against the grid
        run, kw = _fit_then_scan, dict(kw, scan=scan, inner=run)
    if starts == 1 and not (segments and enough is not None):
        r = run(problem, theta0, free_idx, **kw)
    elif starts == 1:
        r = _until_enough(run, problem, theta0, free_idx, seed, kw, enough)
    else:
        r = _multi_start(run, problem, theta0, free_idx, starts, seed, kw)
    return _explored(problem, r, free_idx) if secant and np.isfinite(r.loss) else r


def check_scan(scan):
    """``scan`` as ``{name: tuple of floats}``, or ``ValueError`` naming the
    entry: coefficient names, lists of finite numbers within their bounds,
    at most :data:`MAX_SCAN` points."""
    out = {}
    if not isinstance(scan or {}, dict):
        raise ValueError(f"scan {scan!r}: expected a mapping of coefficients to lists of values")
    for name, values in (scan or {}).items():
        P.parse(name)  # an unknown name: a ValueError that says so
        lo, hi = P.BOUNDS[P.base(name)]
        bad = not isinstance(values, (list, tuple)) or any(
            isinstance(x, bool) or not isinstance(x, (int, float)) for x in values)
        v = np.zeros(0) if bad else np.asarray(values, dtype=np.float64)
        if v.size == 0 or not np.all(np.isfinite(v)) or np.any(v < lo) or np.any(v > hi):
            raise ValueError(f"scan {name!r}: {values!r}: expected a list of finite numbers "
                             f"within [{lo}, {hi}]")
        out[name] = tuple(float(x) for x in v)
    size = int(np.prod([len(v) for v in out.values()])) if out else 0
    if size > MAX_SCAN:
        raise ValueError(f"scan: {size} points; at most {MAX_SCAN}")
    return out


def _scanned(theta, lay, scan):
    """``theta`` with the coefficients of ``scan`` at each combination of
    their values, projected onto the bounds by moving the scanned ones
    alone (a static friction scanned below the kinetic one rises to it)."""
    q = [lay.index(n) for n in scan]
    points = []
    for values in itertools.product(*scan.values()):
        th = theta.copy()
        th[q] = values
        points.append(project(th, q, lay))
    return points


def _fit_then_scan(problem, theta0, free_idx, scan, inner, it0=0, **kw):
    """``inner``'s fit (segments first, searched or plain rollouts), then
    its answer checked against its ``scan`` grid (:func:`_scanned`, the
    candidates of :func:`_rollout_phase`); from a grid point of lower
    loss the rollouts run again (:func:`_fit_continued`), the lower loss
    kept.  At the answer, not at the start: the grid's other coefficients
    are then the data's, and a scanned value's well shows (the real square
    drops: at the five-coefficient fit's answer, k_hc 3e6 against its
    1.1e8 and no static friction surplus lower the training loss 12 %; at
    the segments' answer no grid point beat it).  A scanned coefficient
    that is not free stays at its grid value in the second run: a discrete
    choice of model by the training loss, with the free ones fitted to it
    (the fit's intervals are the free ones', given that choice)."""
    r = inner(problem, theta0, free_idx, it0=it0, **kw)
    if not np.isfinite(r.loss):
        return r
    lay = problem.model.layout
    theta = lay.vector(r.params)
    grid = _scanned(theta, lay, scan)
    starts, checked = _rollout_phase(getattr(problem, "problem", problem), theta, grid, (),
                                     "the rollouts' answer", len(grid))
    rollouts = {k: v for k, v in kw.items()
                if k not in ("segments", "global_seed", "search", "spread")}
    runs, nit = [r], r.nit
    for s in starts:
        if not np.array_equal(s, theta):
            runs.append(_fit_continued(problem, s, free_idx, it0=it0 + nit, **rollouts))
            nit += runs[-1].nit
    best = min(runs, key=lambda x: x.loss if np.isfinite(x.loss) else np.inf)
    if best is not r:
        best.history = r.history + best.history
        best.strategy = r.strategy
    best.nit = nit
    best.nfev += len(grid) + 1 + sum(x.nfev for x in runs if x is not best)
    ended = "" if len(runs) == 1 else (
        f"; the rollouts again from there ended at {min(x.loss for x in runs[1:]):.4g} against "
        f"{r.loss:.4g}: {'kept' if best is not r else 'not kept'}")
    best.strategy = f"{best.strategy}; then a scan: {checked}{ended}"
    return best


def _check_options(method, nuisance, free, params0, robust, segments, **values):
    """``ValueError`` naming the first of :func:`fit`'s options out of range."""
    if not (np.isfinite(robust) and robust >= 0):
        raise ValueError(f"robust = {robust}: expected a finite number >= 0 (0: off)")
    for what, names in (("free parameter", free or ()), ("params0", params0 or {})):
        for n in names:
            try:
                P.parse(n)
            except ValueError as exc:
                raise ValueError(f"{what} {n!r}: {exc}") from None
    if not (np.isfinite(segments) and segments >= 0):
        raise ValueError(f"segments = {segments}: expected a length >= 0 s (0: off)")
    if method not in METHODS:
        raise ValueError(f"method {method!r}: expected one of {list(METHODS)}")
    if nuisance not in NUISANCE:
        raise ValueError(f"nuisance {nuisance!r}: expected one of {list(NUISANCE)}")
    lower = dict(lr=0.0, ftol=0.0, gtol=0.0, max_iter=0.0, starts=1.0, lr_growth=1.0,
                 step_sigma=0.0, search=0.0)
    for name, v in values.items():
        if not (np.isfinite(v) and (v > 0 if name == "lr" else v >= lower[name])):
            raise ValueError(f"{name} = {v}: out of range")


def _until_enough(run, problem, theta0, free_idx, seed, kw, enough):
    """A segmented fit (``run``) from up to ``SEGMENT_STARTS`` starts (up to
    ``SEGMENT_STARTS_NEAR`` while the best is within ``NEAR`` of the limit),
    until one meets ``enough`` (see :func:`fit`); the first alone when it
    does."""
    def go_on(results):
        best = min((enough(r) for r in results if np.isfinite(r.loss)), default=np.inf)
        return best > 1.0 and (len(results) < SEGMENT_STARTS or best <= NEAR)

    r = _multi_start(run, problem, theta0, free_idx, SEGMENT_STARTS_NEAR, seed, kw, go_on)
    if len(r.starts) == 1:  # the first was enough: a plain fit
        r.starts, r.spread = [], {}
    else:
        r.strategy += (f"; {len(r.starts)} starts (at most {SEGMENT_STARTS}, "
                       f"{SEGMENT_STARTS_NEAR} while the best is within {NEAR:g} x the "
                       "limit: the first fell short of the noise; "
                       f"{'the last' if enough(r) <= 1.0 else 'none'} reached it)")
    return r


def _on_bound(lay, theta, q):
    """The bound row ``q`` of ``theta`` sits on, as text (``"mu_s >= mu_k"``,
    ``"e_bg <= 1"``), or ``""``: a free coefficient the fit left there."""
    name = lay.names[q]
    lo, hi = lay.bounds(q)
    if theta[q] <= lo:
        return f"{name} >= {lo:g}"
    if theta[q] >= hi:
        return f"{name} <= {hi:g}"
    for qs, qk in lay.static_kinetic:
        if q in (qs, qk) and theta[qs] <= theta[qk]:
            return f"{lay.names[qs]} >= {lay.names[qk]}"
    return ""


def _explored(problem, r, free_idx, steps=EXPLORED):
    """``r`` with the intervals of a secant fit: at the scale at which its
    loss is explored, not at its last step's curvature.

    A chaotic loss (tumbling boxes) is a funnel strewn with narrow wells: the
    truth sits in one, and the fit ends in the lowest well it reached, a
    few per cent off when the data are few (flat boxes tossed high and slow,
    12 tosses: 2.4 % off, its last secant's intervals 0.3 % wide).  How far
    the estimate can lie is what the scenarios disagree on at the scales
    the fit looked at: for each relative step of ``steps`` (``EXPLORED``),
    each scenario's secant gradient and Gauss-Newton matrix give the
    estimate without it, ``theta - (H - H_s)^-1 (g - g_s)`` (one Newton
    step: the delete-one jackknife, which also counts a scenario that
    alone holds a coefficient in place), and their spread
    ``(S - 1) / S sum (theta_-s - mean)(theta_-s - mean)^T`` its covariance.
    The standard error is the largest of these and the Gauss-Newton one,
    and the 95 % interval takes Student's t with ``S - 1`` degrees of
    freedom (``S`` scenarios, the clusters).  It needs ``S > n`` for ``n``
    coefficients: the ``S`` estimates without one scenario span at most
    ``S - 1`` directions, so with no more scenarios than coefficients some
    combination of them would get no width (each coefficient's own interval is a t interval
    with ``S - 1`` degrees of freedom however many there are).  Coverage
    over replicate datasets: ``python -m benchmarks.identification``."""
    lay = problem.model.layout
    theta = lay.vector(r.params)
    keep = [c for c, n in enumerate(r.free) if n not in r.held]
    S = problem.nscen
    if not keep:
        return r
    if S <= len(keep):
        r.interval = (f"Gauss-Newton at the last secant step: {S} scenarios are too few to "
                      f"explore the intervals of {len(keep)} coefficients (the jackknife needs "
                      f"{len(keep) + 1}); on a chaotic loss these understate the uncertainty")
        return r
    se = np.array([r.stderr[n] for n in r.free], dtype=np.float64)
    for h in steps:
        ev = problem.evaluate(theta, free_idx, secant=h)
        r.nfev += ev.nfev
        g = ev.loss.grad[:, keep]
        Hs = ev.loss.gn[:, keep][:, :, keep]
        se[keep] = np.maximum(se[keep], np.sqrt(np.diag(_jackknife(g, Hs))))
    return _t_intervals(r, dict(zip(r.free, map(float, se))), S, (
        f"explored: the larger of the Gauss-Newton error and the jackknife over {S} scenarios "
        "at relative steps " + ", ".join(f"{100 * h:g} %" for h in steps)))


def _t_intervals(r, se, nscen, how):
    """``r`` with standard errors ``se`` (name -> value) and 95 % intervals
    ``estimate +- t se``, Student's t with ``nscen - 1`` degrees of freedom
    (the scenarios are the clusters); ``interval`` says ``how``."""
    from scipy import stats

    q = float(stats.t.ppf(0.975, nscen - 1))
    r.stderr = se
    r.ci95 = {n: (r.params[n] - q * se[n], r.params[n] + q * se[n]) for n in r.free}
    r.interval = f"{how}; Student's t with {nscen - 1} degrees of freedom"
    return r


def widened(r, nscen):
    """``r`` with its intervals widened to the errors clustered by scenario
    (the larger of the plain and clustered standard errors, Student's t
    with ``nscen - 1`` degrees of freedom), for a fit whose residual is
    above the data's noise: a model error moves each scenario's residuals
    together, and the plain errors, which take them as independent,
    understate the real ones.  A fit without clustered errors, or whose
    intervals are already the explored ones (:func:`_explored`), is
    returned as it is."""
    if not r.stderr_cluster or r.interval.startswith("explored") or nscen < 2:
        return r
    se = {n: max(r.stderr[n], r.stderr_cluster.get(n) or 0.0) for n in r.free}
    return _t_intervals(r, se, nscen, "clustered by scenario (the residual is above the noise): "
                        "the larger of the plain and clustered errors")


def _jackknife(g, Hs):
    """The delete-one jackknife covariance of a least-squares estimate from
    each scenario's gradient ``g (S, n)`` and Gauss-Newton matrix ``Hs (S, n,
    n)`` at it (see :func:`_explored`); ``inf`` on the diagonal where leaving
    a scenario out leaves the matrix singular."""
    S = g.shape[0]
    H, G = _over(Hs), _over(g)
    moved = np.empty_like(g)
    for s in range(S):
        try:
            moved[s] = -np.linalg.solve(H - Hs[s], G - g[s])
        except np.linalg.LinAlgError:
            return np.diag(np.full(g.shape[1], np.inf))
    d = moved - _over(moved) / S
    return (S - 1) / S * _over(d[:, :, None] * d[:, None, :])


def _multi_start(run, problem, theta0, free_idx, starts, seed, kw, go_on=None):
    """``starts`` runs of ``run``: from ``theta0``, then from starts drawn
    from ``seed`` (see :func:`fit`), while ``go_on(results so far)`` when
    given; the best, with the others in ``starts`` and their ``spread``.
    Each start's iterations are numbered on from the last start's, so that
    the callback's records (a calibration's chart by step) show each once."""
    lay = problem.model.layout
    rng = np.random.default_rng(seed)
    results = [run(problem, theta0, free_idx, **kw)]
    done = results[0].nit
    for k in range(1, starts):
        if go_on is not None and not go_on(results):
            break
        th = _drawn(theta0, free_idx, lay, rng.random(len(free_idx)))
        if "global_seed" in kw:  # each start's global phase draws its own points
            kw = dict(kw, global_seed=seed + k)
        results.append(run(problem, th, free_idx, it0=done, **kw))
        done += results[-1].nit
    finite = [r for r in results if np.isfinite(r.loss)]
    best = min(finite, key=lambda r: r.loss) if finite else results[0]
    names = [lay.names[q] for q in free_idx]
    sol = np.array([[r.params[n] for n in names] for r in finite]).reshape(len(finite), -1)
    best.spread = {n: {"min": float(sol[:, c].min()), "max": float(sol[:, c].max()),
                       "std": float(sol[:, c].std())} for c, n in enumerate(names)} if finite \
        else {}
    best.spread["agree"] = int(sum(abs(r.loss - best.loss) <= 1e-6 * abs(best.loss) + 1e-300
                                   for r in finite))
    best.starts = results
    return best


def _hypercube(rng, n, nf):
    """``n`` points in ``[0, 1)^nf``, one per stratum of every coordinate,
    the strata paired at random (a Latin hypercube)."""
    return (np.stack([rng.permutation(n) for _ in range(nf)], axis=1) + rng.random((n, nf))) / n


def _local_points(theta, free_idx, lay, seed):
    """A Latin hypercube of :data:`LOCAL_POINTS` points per free coefficient
    around ``theta``: each free coefficient within ``+-LOCAL_SPAN`` of its
    value (an offset within ``+-LOCAL_SPAN`` of its scale), projected onto
    the bounds."""
    nf = len(free_idx)
    pts = []
    for x in _hypercube(np.random.default_rng(seed), LOCAL_POINTS * nf, nf):
        th = theta.copy()
        for q, xi in zip(free_idx, x):
            root = P.base(lay.names[q])
            step = LOCAL_SPAN * (2.0 * xi - 1.0)
            th[q] = theta[q] + P.OFFSET_SCALE[root] * step if root in P.OFFSET_SCALE \
                else theta[q] * (1.0 + step)
        pts.append(project(th, free_idx, lay))
    return pts


def _drawn(theta0, free_idx, lay, u, spread=None):
    """``theta0`` with its free coefficients at ``u`` (in [0, 1) each) of
    their start ranges: within ``+-spread[name]`` of its start where
    ``spread`` gives one, else a restitution in [0.05, 1], an offset within
    ``+-2 OFFSET_SCALE`` of its start, any other coefficient within
    ``[0.5, 2] x`` its start; projected onto the bounds."""
    th = theta0.copy()
    for q, x in zip(free_idx, u):
        root = P.base(lay.names[q])
        if lay.names[q] in (spread or {}):
            th[q] = theta0[q] + spread[lay.names[q]] * (2.0 * x - 1.0)
        elif root.startswith("e_"):
            th[q] = 0.05 + 0.95 * x
        elif root in P.OFFSET_SCALE:
            th[q] = theta0[q] + P.OFFSET_SCALE[root] * (4.0 * x - 2.0)
        else:
            th[q] = theta0[q] * (0.5 + 1.5 * x)
    return project(th, free_idx, lay)


def _global_phase(seg, theta0, free_idx, seed):
    """The start of a segmented fit: the best of ``theta0`` and a Latin
    hypercube of ``GLOBAL_POINTS`` points per free coefficient over the
    multi-start's ranges (:func:`_drawn`, from ``seed``), each scored by the
    loss of the segments from their measured states (the ``state``
    nuisance at its start, no fit) on at most ``GLOBAL_SEGMENTS`` segments
    (the first by :func:`~simcore.data.dataset.stable_hash` of their names,
    so that the scenarios' order does not matter).  At this scale the
    segments' loss is one smooth bowl around the truth, while a local fit
    from a far start can end in a valley of its own (flat boxes tossed high
    and slow, from e_bg 0.5 against 0.3: mu_k 25 % off).  Returns the start
    and a line saying what the phase did."""
    lay = seg.model.layout
    rng = np.random.default_rng(seed)
    nf = len(free_idx)
    n = GLOBAL_POINTS * nf
    u = _hypercube(rng, n, nf)
    sub = _hashed(seg, GLOBAL_SEGMENTS)
    points = [theta0] + [_drawn(theta0, free_idx, lay, x) for x in u]
    measured = sub.nuisance_start("state")  # the measured states: the same for every point
    best = _best(points, lambda th: sub.loss_only(th, "state", measured))
    said = (f"a global phase over {n} points on {sub.nscen} segments "
            f"({'kept the start' if best == 0 else 'moved the start'})")
    return points[best], said, points[1:]


def _hashed(problem, most):
    """At most ``most`` of ``problem``'s scenarios, the first by
    :func:`~simcore.data.dataset.stable_hash` of their names (so that their
    order does not matter)."""
    if problem.nscen <= most:
        return problem
    names = problem.ids or [str(k) for k in range(problem.nscen)]
    order = sorted(range(problem.nscen), key=lambda k: (D.stable_hash(names[k]), names[k]))
    return problem.subset(np.sort(order[:most]))


def _losses(points, loss):
    """``loss`` at each point, a non-finite one as infinity."""
    losses = np.array([loss(th) for th in points], dtype=np.float64)
    losses[~np.isfinite(losses)] = np.inf
    return losses


def _best(points, loss):
    """The index of the point of least ``loss`` (the first on a tie; a
    non-finite loss never wins)."""
    return int(np.argmin(_losses(points, loss)))


def _rollout_phase(problem, start, points, local=(), answer="the segments' answer", scanned=0):
    """The rollouts' start after the segments: their answer ``start`` (or,
    when their fit failed, the fit's own start; ``answer`` names which), or
    the point of lower whole-rollout loss (on at most
    :data:`GLOBAL_SEGMENTS` scenarios, :func:`_hashed`) among the global
    phase's ``points`` and the ``local`` ones around the answer
    (:func:`_local_points`).  Two reasons, both measured: the segments'
    loss and the rollouts' can have their least values in different basins
    (the real square drops: the segments' e_bg 0.42, the rollouts' loss 30 %
    lower at 0.15); and the rollouts' basin around the truth narrows as
    tumbling bodies' paths part, to a few per cent of mu_k on flat boxes
    tossed high and slow, while the segments' answer, started from noisy
    measured states, can lie 10-15 % off: a local stage from there ends in
    a neighbouring well.  The rollouts' stage is local.  Past
    ``GLOBAL_SEGMENTS`` rollouts the candidates are screened on that many,
    and the :data:`FINALISTS` of least loss there scored again on all of
    them: on chaotic rollouts a subset's loss is a noisy proxy.  Neither
    choice is the better start every time (a local stage on a rugged loss
    from a lower start can end higher), so both are returned when they
    differ, and the rollouts' stage runs from each (the real square drops:
    the screen's best, e_bg 0.09, ended at a loss 4 % above the finalists'
    best, e_bg 0.19).  The last ``scanned`` of ``points`` are a declared
    grid (``scan`` of :func:`fit`).  Returns the starts (the finalists' best
    first) and a line saying what the phase did (naming ``answer``)."""
    sub = _hashed(problem, GLOBAL_SEGMENTS)
    local = list(local)
    candidates = [start] + list(points) + local
    losses = _losses(candidates, sub.loss_only)
    screened = int(np.argmin(losses))
    rescored = ""
    if sub.nscen < problem.nscen:
        final = np.argsort(losses, kind="stable")[:FINALISTS]
        final = final[np.isfinite(losses[final])]
        whole = _losses([candidates[k] for k in final], problem.loss_only)
        losses = np.full(len(candidates), np.inf)
        losses[final] = whole
        rescored = f", the best {final.size} of them on all {problem.nscen}"
    best = int(np.argmin(losses))

    def what(k):
        return (f"kept {answer}" if k == 0 else "moved it to a point around it"
                if k > len(points) else "moved it to a scanned point"
                if k > len(points) - scanned else "moved it")

    around = f", {scanned} scanned" if scanned else ""
    around += f" and {len(local)} around {answer}" if local else ""
    both = screened != best and np.isfinite(losses[screened])
    also = f"; also from the screen's best: {what(screened)}" if both else ""
    said = (f"the rollouts' start checked against those points{around} on {sub.nscen} whole "
            f"rollouts{rescored} ({what(best)}{also})")
    return [candidates[best]] + ([candidates[screened]] if both else []), said


def check_horizons(horizons):
    """``horizons`` as a tuple of floats, or ``ValueError``: increasing
    fractions in (0, 1] ending with 1.0."""
    h = np.atleast_1d(np.asarray(horizons, dtype=np.float64))
    if h.size == 0 or not np.all(np.isfinite(h)) or np.any(h <= 0) or np.any(h > 1) \
            or np.any(np.diff(h) <= 0) or h[-1] != 1.0:
        raise ValueError(f"horizons {list(h)}: expected increasing fractions in (0, 1] "
                         "ending with 1.0")
    return tuple(float(x) for x in h)


def check_secant(secant):
    """``secant`` as a tuple of floats, or ``ValueError``: decreasing
    relative steps in (0, 0.1] (empty: exact sensitivities)."""
    s = np.atleast_1d(np.asarray(secant if secant is not None else (), dtype=np.float64))
    if not np.all(np.isfinite(s)) or np.any(s <= 0) or np.any(s > 0.1) \
            or np.any(np.diff(s) >= 0):
        raise ValueError(f"secant {s.tolist()}: expected decreasing relative steps in (0, 0.1]")
    return tuple(float(x) for x in s)


def _segment_nuisance(layout, free_idx):
    """The segments' nuisance (:data:`SEGMENT_REFINED` or
    :data:`SEGMENT_HELD`): refined when a free coefficient is the body's or
    the recording's own (centre of mass, inertia, gravity, the table's
    tilt; :attr:`simcore.kernel.parameter.Parameter.named`).  Those are read
    in the flights that segments start in, where a held start's noise (a
    quadratic through seven noisy samples) aliases straight into them (the
    README's *Segments first* gives the figures).  The refinement costs a
    central difference per start value (12 per body): with contact
    coefficients alone free, the starts stay held."""
    return SEGMENT_REFINED if any(P.named(layout.names[q]) for q in free_idx) else SEGMENT_HELD


def _fit_segments_first(problem, theta0, free_idx, segments, global_seed, it0=0, **kw):
    """Multiple shooting, then the rollouts (``segments`` of :func:`fit`):
    the segmented problem with its starts' nuisance (:func:`_segment_nuisance`)
    from the best start of a global phase (:func:`_global_phase`, from
    ``global_seed``), then :func:`_fit_continued` on ``problem`` from its
    coefficients (from
    ``theta0`` if the segments' fit failed), or from the point of least
    whole-rollout loss among the global phase's points and a hypercube
    around the segments' answer where that is lower (:func:`_rollout_phase`;
    from each of its starts when it gives two, the lower loss kept);
    history, iterations and evaluations cover all three, the iterations
    numbered on from ``it0``."""
    whole = getattr(problem, "problem", problem)  # a ShardedProblem's whole problem
    seg = whole.segmented(segments, theta=theta0)
    begin, said, points = _global_phase(seg, theta0, free_idx, global_seed)
    lay = problem.model.layout
    kind = _segment_nuisance(lay, free_idx)
    first = _fit_continued(seg, begin, free_idx, it0=it0, part="segments", **dict(
        kw, nuisance=kind, horizons=(1.0,), secant=SEGMENT_STAGE_SECANT,
        ftol=max(kw["ftol"], STAGE_FTOL)))
    failed = not np.isfinite(first.loss)
    start = theta0 if failed else lay.vector(first.params)
    local = _local_points(start, free_idx, lay, global_seed + 1)
    answer = "the fit's start (the segments' fit failed)" if failed else "the segments' answer"
    starts, checked = _rollout_phase(whole, start, points, local, answer)
    runs, nit = [], first.nit
    for s in starts:  # numbered on, so that each iteration has a step of its own
        runs.append(_fit_continued(problem, s, free_idx, it0=it0 + nit, **kw))
        nit += runs[-1].nit
    r = min(runs, key=lambda x: x.loss if np.isfinite(x.loss) else np.inf)
    if len(runs) > 1:
        checked += (f"; the rollouts from both ended at losses {runs[0].loss:.4g} and "
                    f"{runs[1].loss:.4g}: the {'first' if r is runs[0] else 'second'} kept")
    r.history = first.history + r.history
    r.nit = nit  # every iteration run, as nfev counts every evaluation
    r.nfev += first.nfev + len(points) + len(local) + 1 + sum(x.nfev for x in runs
                                                               if x is not r)
    how = "refined" if kind == SEGMENT_REFINED else "held"
    r.strategy = (f"{said}, segments of {segments:g} s from measured states, {how} "
                  f"({seg.nscen}, {STATUSES[first.status].word}), {checked}, then whole "
                  "rollouts")
    return r


def _fit_continued(problem, theta0, free_idx, horizons, robust, callback, fd_check, secant,
                   it0=0, part="rollouts", **kw):
    """Horizon continuation: fit the first part of every scenario, then warm-start
    on longer spans (robust stages), then the plain loss on the whole span;
    with ``secant``, one more fit of the whole span per further step; the
    last gives the result.  Its iterations are numbered on from ``it0`` and
    their records name ``part`` (what the callback shows)."""
    if len(secant) > 1:
        r = _fit_continued(problem, theta0, free_idx, horizons, robust, callback, fd_check,
                           secant[:-1], it0, part, **kw)
        if not np.isfinite(r.loss):
            return r
        last = _fit_one(problem, problem.model.layout.vector(r.params), free_idx,
                        callback=callback, fd_check=fd_check, horizon=1.0, it0=it0 + r.nit,
                        nuis0=r.nuisance, secant=secant[-1], part=part, **kw)
        last.history = r.history + last.history
        last.nit += r.nit
        last.nfev += r.nfev
        return last
    kw["secant"] = secant[0] if secant else 0.0
    theta = theta0
    # The nuisance start comes from the whole span: a truncated stage has no
    # data on the later push windows.
    nuis = problem.nuisance_start(kw["nuisance"], theta0) if problem.nuisance_size(
        kw["nuisance"]) else None
    history, nit, nfev = [], 0, 0
    stages = [(h, robust) for h in horizons[:-1]]  # horizons end with 1.0
    ftol = kw.pop("ftol")
    for h, c2 in stages:
        # A warm-up stage need only reach the basin: a loose ftol.
        r = _fit_one(problem.truncated(h), theta, free_idx, callback=callback,
                     fd_check=False, horizon=h, it0=it0 + nit, nuis0=nuis, robust=c2, part=part,
                     ftol=max(ftol, STAGE_FTOL), **dict(kw, patience=1))
        nfev += r.nfev
        if not np.isfinite(r.loss):
            continue
        theta, nuis = problem.model.layout.vector(r.params), r.nuisance
        history += r.history
        nit += r.nit
    r = _fit_one(problem, theta, free_idx, callback=callback, fd_check=fd_check,
                 horizon=1.0, it0=it0 + nit, nuis0=nuis, ftol=ftol, part=part, **kw)
    if nuis is not None and np.isfinite(r.loss):
        theta = problem.model.layout.vector(r.params)
        better, cost = _rescue(problem, theta, r.nuisance, ftol=ftol, **kw)
        nfev += cost
        if better is not None:
            r2 = _fit_one(problem, theta, free_idx, callback=callback, fd_check=fd_check,
                          horizon=1.0, it0=it0 + nit + r.nit, nuis0=better, ftol=ftol,
                          part=part, **kw)
            if r2.loss < r.loss:
                r2.history = r.history + r2.history
                r2.nit += r.nit
                r2.nfev += r.nfev
                r = r2
            else:
                nfev += r2.nfev
    r.history = history + r.history
    r.nit += nit
    r.nfev += nfev
    return r


def _fit_searched(problem, theta0, free_idx, horizons, secant, search, global_seed, it0=0,
                  spread=None, **kw):
    """Horizon continuation searched at every stage (``search`` of
    :func:`fit`): the first horizon fitted from ``SEARCH_STARTS`` starts
    (``theta0`` and a Latin hypercube from ``global_seed`` within
    ``spread`` of it, :func:`_drawn`), the one whose answer has the least
    loss over the next horizon kept; then at each
    horizon a local fit (the first ``secant`` step; at the whole span every
    step) and a CMA-ES search of at most ``search`` evaluations around its
    answer (:func:`_cma_search`, over the wider of this stage's and the
    previous stage's standard errors), which moves it when it finds a
    lower loss; a last local fit from there gives the result.

    Why: a tumbling body's rollout loss is a funnel strewn with wells, and
    the well around the truth narrows as the horizon grows, faster than a
    fit at the last horizon pins it.  A local fit from the last answer
    then stops in a neighbouring well, a few standard errors off, and
    every later stage carries it further.  The first stage (a toss's first
    impacts) holds few wells, but still more than one: its fit from a
    single start ends in one off the truth on about one dataset in three,
    and its lowest well can lie off the truth (the noise of a few
    impacts), so its starts' answers are ranked by the next horizon's loss.
    The stages minimise the plain loss (no robust scale: the search
    compares losses at different points).  Returns the last fit, its
    history, iterations and evaluations over every stage, and a
    ``strategy`` line."""
    lay = problem.model.layout
    # Losses alone (the ranking, the searches) run on the whole problem in
    # this process: a ShardedProblem would send each of thousands to its
    # task runner.
    whole = getattr(problem, "problem", problem)
    steps = tuple(secant) or (0.0,)
    stage = dict(kw, robust=0.0, fd_check=False, ftol=max(kw["ftol"], STAGE_FTOL), patience=1)
    kw = dict(kw, robust=0.0)
    runs, moved = [], 0
    rng = np.random.default_rng(global_seed)
    first = problem.truncated(horizons[0]) if horizons[0] < 1.0 else problem
    points = [theta0] + [_drawn(theta0, free_idx, lay, u, spread)
                         for u in _hypercube(rng, SEARCH_STARTS - 1, len(free_idx))]
    for th in points:
        runs.append(_fit_one(first, th, free_idx, horizon=horizons[0], secant=steps[0],
                             it0=it0 + sum(r.nit for r in runs),
                             **(stage if horizons[0] < 1.0 else kw)))
    # Ranked by the next horizon's loss, data their fits did not see: at the
    # first the noise of a few impacts can put a minimum off the truth
    # below the truth's own.
    ahead = whole.truncated(horizons[1]) if len(horizons) > 1 else whole
    best = runs[_best(runs, lambda r: ahead.loss_only(lay.vector(r.params), kw["nuisance"],
                                                      r.nuisance) if np.isfinite(r.loss)
                      else np.inf)]
    history, nit = list(best.history), sum(r.nit for r in runs)
    nfev = sum(r.nfev for r in runs) + len(runs)
    if not np.isfinite(best.loss):
        return replace(best, history=history, nit=nit, nfev=nfev)
    r = best
    for k, h in enumerate(horizons):
        part = problem.truncated(h) if h < 1.0 else problem
        before = r.stderr
        for step in (steps if h == 1.0 else steps[:1]) if k else ():
            nxt = _fit_one(part, lay.vector(r.params), free_idx, horizon=h, secant=step,
                           it0=it0 + nit, nuis0=r.nuisance, **(kw if h == 1.0 else stage))
            nit, nfev, history = nit + nxt.nit, nfev + nxt.nfev, history + nxt.history
            if np.isfinite(nxt.loss):
                r = nxt
        searched = part if whole is problem else whole.truncated(h)
        theta, cost = _cma_search(searched, r, free_idx, search, global_seed + k,
                                  kw["nuisance"], before)
        nfev += cost
        if theta is not None:
            moved += 1
            r = _fit_one(part, theta, free_idx, horizon=h, secant=steps[-1] if h == 1.0
                         else steps[0], it0=it0 + nit, nuis0=r.nuisance,
                         **(kw if h == 1.0 else stage))
            nit, nfev, history = nit + r.nit, nfev + r.nfev, history + r.history
    r = replace(r, history=history, nit=nit, nfev=nfev)
    r.strategy = (f"whole rollouts over {len(horizons)} horizons from {horizons[0]:g} of the "
                  f"span, the first from {len(points)} starts, each followed by a CMA-ES "
                  f"search of at most {search} evaluations (it moved {moved} of them)")
    return r


def _cma_search(problem, r, free_idx, evals, seed, nuisance, before=None):
    """A CMA-ES search (Hansen's ``cma``) of ``problem``'s loss around the
    fit ``r``'s estimate: over the free coefficients with a finite standard
    error (at least two), in units of those errors (or of ``before``'s, the
    previous stage's, where they are wider), from a step of
    ``SEARCH_SIGMA``, at most ``evals`` evaluations (the nuisance held at
    ``r``'s).  The previous stage's errors because its data put the truth
    within them, while this stage's, from its local fit, measure only the
    width of the well that fit stopped in: a horizon's data narrow the
    truth's well faster than they narrow where it can be, so searched in
    its own errors a stage that stopped a well off stays there.  CMA-ES
    ranks its samples by their loss alone, so the micrometre ripples and
    the creases of a chaotic loss do not stall it as they stall a local
    fit, and its sampling adapts to the wells' correlated shape.  Returns
    ``(the best point, or None when it is not lower than r's loss,
    evaluations)``."""
    import cma  # noqa: PLC0415 (only a searched fit needs it)

    lay = problem.model.layout
    theta = lay.vector(r.params)
    se = np.array([r.stderr.get(lay.names[q], np.nan) for q in free_idx], dtype=np.float64)
    if before:
        wide = np.array([before.get(lay.names[q], np.nan) for q in free_idx], dtype=np.float64)
        se = np.where(np.isfinite(wide) & (wide > se), wide, se)
    move = np.flatnonzero(np.isfinite(se) & (se > 0))
    if move.size < 2 or evals < 1 or not np.isfinite(r.loss):
        return None, 0
    idx = np.asarray(free_idx)[move]

    def at(x):
        th = theta.copy()
        th[idx] += np.asarray(x) * se[move]
        return project(th, free_idx, lay)

    def loss(x):
        v = problem.loss_only(at(x), nuisance, r.nuisance)
        return float(v) if np.isfinite(v) else 1e300

    es = cma.CMAEvolutionStrategy(np.zeros(move.size), SEARCH_SIGMA, {
        "maxfevals": evals, "seed": seed + 1, "tolfun": 1e-3 * r.loss, "verbose": -9,
        "verb_log": 0, "verb_disp": 0})
    n = 0
    while not es.stop():
        xs = es.ask()
        es.tell(xs, [loss(x) for x in xs])
        n += len(xs)
    best = es.result
    return (at(best.xbest) if best.fbest < r.loss else None), n


def _rescue(problem, theta, nuis, nuisance, **kw):
    """Refit alone, from other starts, the nuisance of every scenario whose
    loss share is over ``RESCUE`` times the median (see the module
    docstring).  Returns ``(nuisance with the improved scenarios, or None if
    none improved, evaluations spent)``."""
    if nuisance not in RESCUED:
        return None, 0
    per = problem.loss_only(theta, nuisance, nuis, per_scenario=True)
    bad = np.flatnonzero(per > RESCUE * np.median(per))
    if not bad.size:
        return None, 1
    base = getattr(problem, "problem", problem)  # a ShardedProblem's whole problem
    est = None
    if nuisance == "push":
        est, _ = base.push_from_data(theta)
        m = base.model
        owner = np.repeat(np.arange(base.nscen), np.diff(m.ctrl_ptr))
    out, nfev, improved = nuis.copy(), 1, False
    for s in bad:
        sub = base.subset([s])
        k = sub.nuisance_size(nuisance)  # its own width (fewer bodies or windows)
        now = nuis[s, :k]
        starts = []
        if est is not None:
            rows = np.flatnonzero(owner == s)
            guess = now.copy()
            pick = rows[np.isfinite(est[rows, 0])]
            guess[2 * (pick - rows[0])] = est[pick, 0]
            guess[2 * (pick - rows[0]) + 1] = est[pick, 1]
            if not np.array_equal(guess, now):
                starts.append(guess)
        rng = np.random.default_rng(int(s))
        pairs = now.reshape(-1, 2)
        for j in range(len(pairs)):
            # One pair at a time 30 % smaller and larger, the others kept.
            for f in (0.7, 1.3):
                one = now.copy()
                one[2 * j:2 * j + 2] *= f
                starts.append(one)
        while len(starts) < RESCUE_STARTS:
            # The current values, each pair scaled by [0.5, 1.5] and turned by
            # up to 0.5 rad.
            a = rng.uniform(-0.5, 0.5, len(pairs))
            c, sn = np.cos(a), np.sin(a)
            f = rng.uniform(0.5, 1.5, len(pairs))
            starts.append((f[:, None] * np.stack([c * pairs[:, 0] - sn * pairs[:, 1],
                                                  sn * pairs[:, 0] + c * pairs[:, 1]], 1)).ravel())
        best = per[s]  # the subset's loss is its share times the scenario count
        for start in starts:
            r = _fit_one(sub, theta, [], nuisance=nuisance, fd_check=False, callback=None,
                         nuis0=start[None, :], **dict(kw, patience=1))
            nfev += r.nfev
            share = r.loss / problem.nscen
            if np.isfinite(share) and share < best:
                best = share
                out[s, :k] = r.nuisance[0]
                improved = True
    return (out if improved else None), nfev


#: Trial steps per iteration before it gives up (``STATUS_NOSTEP``).
MAX_TRIALS = 40


@dataclass
class _Walk:
    """One stage's current point and the trial step every method shares:
    a candidate step is bounded (:func:`_trust_region`), projected onto the
    bounds, evaluated (with sensitivities, or screened by its loss alone)
    and, when the method accepts it, becomes the current point."""

    problem: object
    free_idx: list
    nuisance: str
    k: int                  # nuisance values per scenario
    names: tuple            # the free coefficients' names
    size_floor: np.ndarray  # the trust region's floor of each free value's size
    secant: float
    cauchy_a: object        # the robust objective's scale, or None
    theta: np.ndarray
    nuis: object
    ev: object
    loss: float
    nfev: int
    hold: list              # free coefficients no data inform
    lam: float = 1e-3       # lm's damping
    eta: float = 0.0        # gd's and Adam's rate
    step: float = 0.0       # the last accepted step's length
    rel: float = 0.0        # and its relative loss change

    @property
    def nf(self):
        return len(self.free_idx)

    def bounded(self, d, dn):
        return _trust_region(d, dn, self.theta[self.free_idx], self.size_floor)

    def candidate(self, d, dn):
        """The point ``(theta, nuis)`` one step ``(d, dn)`` away, projected."""
        cand = self.theta.copy()
        cand[self.free_idx] += d
        return project(cand, self.free_idx, self.problem.model.layout), (
            self.nuis + dn if self.k else None)

    def screen(self, cand, cand_nuis):
        """The loss at a candidate from a forward run alone."""
        self.nfev += 1
        return _screen(self.problem, cand, self.nuisance, cand_nuis, self.cauchy_a)

    def evaluate(self, cand, cand_nuis):
        """``(loss, evaluation)`` at a candidate, with sensitivities (NaN
        loss when the run fails)."""
        try:
            ev = self.problem.evaluate(cand, self.free_idx, self.nuisance, cand_nuis,
                                       want_gn=True, secant=self.secant)
        except RuntimeError:
            return np.nan, None
        if self.cauchy_a is not None:
            ev = _cauchy(ev, self.cauchy_a)
        self.nfev += ev.nfev
        return ev.loss.total, ev

    def accept(self, cand, cand_nuis, ev, loss):
        self.step = float(np.linalg.norm(cand[self.free_idx] - self.theta[self.free_idx]))
        self.rel = abs(self.loss - loss) / max(abs(self.loss), 1e-300)
        self.theta, self.nuis, self.ev, self.loss = cand, cand_nuis, ev, loss

    def settled(self, scen_hold, step_sigma, d=None):
        return _settled(self.ev, self.nf, self.k, scen_hold, self.hold, step_sigma, d)


class _Options(NamedTuple):
    """What an iteration of each method reads besides the walk."""

    precondition: object
    ftol: float
    step_sigma: float       # 0: no settled-step test
    lr_growth: float
    robust: bool


def _lm_iteration(w, grads, scen_hold, opt, it):
    """One Levenberg-Marquardt iteration: damped Gauss-Newton trials until
    one lowers the loss.  Returns ``(status or None, trial index)``.

    A trial stops the fit as converged when its step is statistically
    nothing (``step_sigma``) or when the Gauss-Newton model promises less
    than ``ftol`` (no trial is paid for that rounding decides).  After a
    rejected trial the next is screened by its loss alone (most fail too).
    The damping is relative to the curvature's diagonal, so a step only
    shrinks once ``lam`` nears 1: a rejected trial goes there at once.  A
    failed run (NaN) says nothing of the Gauss-Newton model: the damping it
    forced is not carried into the next iteration (where a run fails at
    every other evaluation it would grow without bound)."""
    lam_start, rose, saw_nan = w.lam, False, False
    for trial in range(MAX_TRIALS):
        d, dn = _step("lm", opt.precondition, w.ev, grads, (w.nf, w.k), (w.lam, w.eta),
                      (w.hold, scen_hold), None)
        if not np.all(np.isfinite(d)) or (w.k and not np.all(np.isfinite(dn))):
            saw_nan = True  # a singular or overflowing step: damp harder
            w.lam *= 4.0
            continue
        d, dn = w.bounded(d, dn)
        if opt.step_sigma and w.nf and not opt.robust and not saw_nan and \
                w.settled(scen_hold, opt.step_sigma, None if trial == 0 else d):
            return STATUS_STEP, trial
        if not saw_nan and _predicted(w.ev.loss.gn, grads[0], d, dn, w.nf) <= \
                opt.ftol * abs(w.loss):
            return STATUS_FTOL, trial
        cand, cand_nuis = w.candidate(d, dn)
        if trial > 0:
            new = w.screen(cand, cand_nuis)
            if not (np.isfinite(new) and new <= w.loss):
                saw_nan = saw_nan or not np.isfinite(new)
                rose = rose or bool(np.isfinite(new))
                w.lam = max(4.0 * w.lam, 1.0)
                continue
        new, ev = w.evaluate(cand, cand_nuis)
        saw_nan = saw_nan or not np.isfinite(new)
        if np.isfinite(new) and new <= w.loss:
            w.accept(cand, cand_nuis, ev, new)
            w.lam = max((w.lam if rose else lam_start) / 3.0, 1e-12)
            return None, trial
        rose = rose or bool(np.isfinite(new))
        w.lam = max(4.0 * w.lam, 1.0)
    return STATUS_NOSTEP, trial


def _gd_iteration(w, grads, scen_hold, opt, it):
    """One gradient-descent iteration: the rate halves until a step lowers
    the loss, and grows by ``lr_growth`` after an accepted one."""
    status, trial = _rate_iteration(w, "gd", grads, scen_hold, opt, None,
                                    lambda new: new <= w.loss)
    if status is None:
        w.eta *= opt.lr_growth
    return status, trial


def _adam_iteration(w, grads, scen_hold, opt, it, moments):
    """One Adam iteration (``moments`` ``(m1, m2)`` updated in place by each
    trial): Adam may climb a little, as it is not a descent method, never
    diverge (a step is taken while the loss stays under 1.5 times its last)."""
    return _rate_iteration(w, "adam", grads, scen_hold, opt, moments + (it,),
                           lambda new: new <= w.loss or new < 1.5 * w.loss)


def _rate_iteration(w, method, grads, scen_hold, opt, adam, accepts):
    """The trials of a rate method (gd, Adam): the rate halves after a step
    that fails or is not accepted.  The first trial's Gauss-Newton step from
    here (never taken) decides the settled-step test, as these methods
    approach the optimum too slowly for ``ftol``."""
    saw_nan = False
    for trial in range(MAX_TRIALS):
        d, dn = _step(method, opt.precondition, w.ev, grads, (w.nf, w.k), (w.lam, w.eta),
                      (w.hold, scen_hold), adam)
        if not np.all(np.isfinite(d)) or (w.k and not np.all(np.isfinite(dn))):
            saw_nan = True
            w.eta *= 0.5
            continue
        d, dn = w.bounded(d, dn)
        if opt.step_sigma and w.nf and not opt.robust and not saw_nan and trial == 0 and \
                w.settled(scen_hold, opt.step_sigma):
            return STATUS_STEP, trial
        cand, cand_nuis = w.candidate(d, dn)
        new, ev = w.evaluate(cand, cand_nuis)
        saw_nan = saw_nan or not np.isfinite(new)
        if np.isfinite(new) and accepts(new):
            w.accept(cand, cand_nuis, ev, new)
            return None, trial
        w.eta *= 0.5
    return STATUS_NOSTEP, trial


def _start(problem, theta0, free_idx, nuisance, nuis0, robust, secant, lr, warm_up=False):
    """The walk at a stage's start: the first evaluation (with the robust
    objective's scale fixed from it, so that the stage's objective is one
    function).  Held: the free coefficients without signal and, in a
    ``warm_up`` stage, those it informs only weakly (:data:`STAGE_WEAK`)."""
    k = problem.nuisance_size(nuisance)
    lay = problem.model.layout
    names = tuple(lay.names[q] for q in free_idx)
    # The trust region's floor of each free value's size: 1e-2 for a
    # coefficient, 5 OFFSET_SCALE for an offset (whose value may be 0).
    size_floor = np.array([5.0 * P.OFFSET_SCALE[P.base(n)] if P.base(n) in P.OFFSET_SCALE else 1e-2
                           for n in names])
    theta = project(theta0, free_idx, lay)
    nuis = (problem.nuisance_start(nuisance, theta) if nuis0 is None else nuis0.copy()) \
        if k else None
    ev = problem.evaluate(theta, free_idx, nuisance, nuis, want_gn=True, secant=secant)
    cauchy_a = None
    if robust:
        cauchy_a = robust * max(float(np.median(ev.loss.per_scenario)), 1e-300)
        ev = _cauchy(ev, cauchy_a)
    hold = [c for c in range(len(free_idx)) if ev.signal[c] == 0]
    if warm_up:
        rel = _relative_stderr(_ev_covariance(ev, len(free_idx), k, hold), theta, free_idx, lay)
        hold += [c for c in range(len(free_idx)) if c not in hold and not rel[c] <= STAGE_WEAK]
    return _Walk(problem, list(free_idx), nuisance, k, names, size_floor, secant, cauchy_a,
                 theta, nuis, ev, ev.loss.total, ev.nfev, hold, eta=lr)


def _fit_one(problem, theta0, free_idx, *, method, nuisance, lr, lr_growth, precondition, ftol,
             gtol, patience, max_iter, fd_check, callback, horizon=1.0, it0=0, nuis0=None,
             robust=0.0, step_sigma=0.0, secant=0.0, part="rollouts"):
    """One stage: iterations of ``method`` from ``theta0`` until a
    convergence test, ``max_iter`` or a failed iteration ends it; each
    iteration's record is numbered ``it0`` on and names ``part``."""
    try:
        w = _start(problem, theta0, free_idx, nuisance, nuis0, robust, secant, lr,
                   warm_up=horizon < 1.0)
    except RuntimeError as exc:  # the engine failed a scenario at this start
        return _failed_start(problem, theta0, free_idx, method, nuis0, exc)
    if not np.isfinite(w.loss):
        return _result(w, method, 0, STATUS_NONFINITE, [], None)
    fd_gap = _fd_check(problem, w.theta, free_idx, nuisance, w.nuis, w.ev) if fd_check else None
    opt = _Options(precondition, ftol, step_sigma, lr_growth, bool(robust))
    moments = np.zeros(w.nf + (problem.nscen * w.k if w.k else 0))
    moments = (moments, np.zeros_like(moments))
    history, status, quiet, nit = [], STATUS_MAXITER, 0, 0
    for it in range(1, max_iter + 1):
        scen_hold = _nuisance_hold(w.ev, w.nf, w.k)
        grads = (w.ev.loss.grad,) + _gradients(w.ev, w.nf, w.k, w.hold, scen_hold, precondition)
        scale = np.maximum(np.abs(w.theta[free_idx]), 0.1)
        gnorm = float(np.linalg.norm(grads[1] * scale)) / max(w.loss, 1e-300)
        if w.nf and gnorm < gtol:  # (nuisance alone: the loss tests decide)
            status = STATUS_GTOL
            break
        if method == "lm":
            stop, trial = _lm_iteration(w, grads, scen_hold, opt, it)
        elif method == "gd":
            stop, trial = _gd_iteration(w, grads, scen_hold, opt, it)
        else:
            stop, trial = _adam_iteration(w, grads, scen_hold, opt, it, moments)
        if stop is not None:
            status = stop
            break
        nit = it
        rec = {"iter": it0 + it, "horizon": horizon, "robust": bool(robust),
               "secant": float(secant), "part": part, "loss": w.loss,
               "components": dict(w.ev.loss.components),
               "theta": {n: float(w.theta[q]) for n, q in zip(w.names, free_idx)},
               "grad_norm": gnorm, "step": w.step}
        history.append(rec)
        if callback is not None:
            callback(rec)
        # A step shrunk by backtracking says nothing about convergence.
        quiet = quiet + 1 if w.rel < ftol and (trial == 0 or method == "lm") else 0
        if quiet >= patience:
            status = STATUS_FTOL
            break
    return _result(w, method, nit, status, history, fd_gap)


def _step(method, precondition, ev, grads, sizes, rates, holds, adam):
    """The trial step ``(d, dn)`` of ``method`` (``d`` NaN where the solve
    fails): ``lm``, the damped Gauss-Newton step (damping ``lam``); ``gd``,
    ``eta`` times the Gauss-Newton step or the Jacobi-scaled (or raw)
    gradient step (``precondition``); ``adam``, Adam's step from its moments
    ``adam = (m1, m2, it)``.  ``grads`` are :func:`_gradients`' and the full
    gradient, ``sizes`` ``(nf, k)``, ``rates`` ``(lam, eta)``."""
    g_full, gg, gnuis, pre_g, pre_n = grads
    (nf, k), (lam, eta), (hold, scen_hold) = sizes, rates, holds
    if method == "lm" or (method == "gd" and precondition in (True, "gauss-newton")):
        try:
            d, dn = _lm_step(ev.loss.gn, g_full, nf, k, lam if method == "lm" else 0.0, hold,
                             scen_hold)
        except np.linalg.LinAlgError:
            return np.full(nf, np.nan), None
        return (d, dn) if method == "lm" else (eta * d, eta * dn if k else None)
    if method == "gd":
        return -eta * gg / pre_g, (-eta * gnuis / pre_n if k else None)
    m1, m2, it = adam
    return _adam(m1, m2, gg, gnuis, it, eta)


def _gradients(ev, nf, k, hold, scen_hold, precondition):
    """``(gg, gnuis, pre_g, pre_n)``: the free coefficients' gradient (held
    ones zeroed), the nuisance gradient (held values zeroed; None without
    nuisance) and gd's Jacobi preconditioners, the Gauss-Newton diagonal,
    so that its learning rate is dimensionless (1 without ``precondition``)."""
    g_full = ev.loss.grad
    gg = _over(g_full[:, :nf])
    gg[hold] = 0.0
    gnuis = g_full[:, nf:].copy() if k else None
    if k:
        gnuis[scen_hold] = 0.0
    if precondition is False:
        return gg, gnuis, 1.0, 1.0
    diag = np.einsum("sii->si", ev.loss.gn)
    pre_g = np.maximum(_over(diag[:, :nf]), 1e-300)
    pre_n = np.maximum(diag[:, nf:], 1e-300) if k else None
    return gg, gnuis, pre_g, pre_n


def _trust_region(d, dn, free_values, size_floor):
    """The step scaled so that no coefficient moves by more than
    ``MAX_REL_STEP`` of its size (at least ``size_floor``) in one step:
    event sequences change under big steps."""
    room = MAX_REL_STEP * np.maximum(np.abs(free_values), size_floor)
    over = float(np.max(np.abs(d) / room, initial=0.0))
    if over > 1.0:
        d = d / over
        dn = dn / over if dn is not None else None
    return d, dn


def _nuisance_hold(ev, nf, k):
    """Nuisance values held at an evaluation, ``(S, k)``: all of a scenario
    outside the exact tangents, and each value the measured data do not
    depend on (no data curvature: a push window after the horizon, or one
    that never moves its body), which the input regulariser alone would take
    to zero; and the push windows that a warm-up stage's horizon cuts
    (:meth:`simcore.identify.problem.Problem.nuisance_cut`)."""
    held = np.repeat((ev.nondiff != 0)[:, None], k, axis=1)
    if k and ev.cut is not None:
        held |= ev.cut
    diag = ev.loss.data_diag
    if k and diag is not None:
        held |= diag[:, nf:] <= 1e-14 * max(float(diag.max(initial=0.0)), 1e-300)
    return held


def _settled(ev, nf, k, scen_hold, hold, step_sigma, d=None):
    """The step ``d`` (None: the undamped Gauss-Newton step) moves every free
    coefficient the data inform by less than ``step_sigma`` of its standard
    error at this evaluation.  Before any trial it must be the undamped step:
    a damped one can be small only because the damping is large, which says
    nothing about convergence; after a rejected trial the damped step is the
    only one left to try."""
    lv = ev.loss
    if d is None:
        try:
            d, _ = _lm_step(lv.gn, lv.grad, nf, k, 0.0, hold, scen_hold)
        except np.linalg.LinAlgError:
            return False
    cov = _ev_covariance(ev, nf, k, hold)
    keep = [c for c in range(nf) if c not in hold]
    std = np.sqrt(np.maximum(np.diag(cov)[keep], 0.0))
    return bool(keep) and bool(np.all(np.isfinite(std)) and np.all(np.isfinite(d))) and \
        bool(np.all(np.abs(d[keep]) < step_sigma * std))


def _predicted(H, g, d, dn, nf):
    """Decrease of the loss that the Gauss-Newton model predicts for the step
    ``(d, dn)``: ``-(g . delta + delta^T H delta / 2)`` summed over scenarios."""
    delta = np.zeros_like(g)
    delta[:, :nf] = d
    if dn is not None:
        delta[:, nf:] = dn
    lin = float(_over(np.einsum("sp,sp->s", g, delta)))
    quad = float(_over(np.einsum("sp,spq,sq->s", delta, H, delta)))
    return -(lin + 0.5 * quad)


def _screen(problem, theta, nuisance, nuis, cauchy_a):
    """The loss at ``theta`` (and ``nuis``) from a forward run alone (the
    robust objective when ``cauchy_a`` is set); NaN if the run fails."""
    try:
        per = problem.loss_only(theta, nuisance, nuis, per_scenario=True)
    except RuntimeError:
        return np.nan
    return float(_over(per)) if cauchy_a is None else float(
        _over(cauchy_a * np.log1p(per / cauchy_a)))


def _cauchy(ev, a):
    """The evaluation with the robust objective ``sum_s a log(1 + l_s / a)`` over
    the scenarios' loss shares ``l_s``: gradients and Gauss-Newton blocks of
    each scenario scaled by ``1 / (1 + l_s / a)`` (IRLS)."""
    lv = ev.loss
    w = 1.0 / (1.0 + lv.per_scenario / a)
    rho = a * np.log1p(lv.per_scenario / a)
    total = float(_over(rho)) if np.isfinite(lv.total) else lv.total
    lv = replace(lv, total=total, per_scenario=rho, grad=lv.grad * w[:, None],
                 gn=lv.gn * w[:, None, None] if lv.gn is not None else None)
    return replace(ev, loss=lv)


def _adam(m1, m2, gg, gnuis, it, eta, b1=0.9, b2=0.999, eps=1e-12):
    """One Adam step on the joint vector (state ``m1``, ``m2`` updated in place)."""
    g = gg if gnuis is None else np.concatenate([gg, gnuis.ravel()])
    m1[:] = b1 * m1 + (1 - b1) * g
    m2[:] = b2 * m2 + (1 - b2) * g * g
    step = -eta * (m1 / (1 - b1 ** it)) / (np.sqrt(m2 / (1 - b2 ** it)) + eps)
    nf = gg.shape[0]
    return step[:nf], (step[nf:].reshape(gnuis.shape) if gnuis is not None else None)


def _fd_check(problem, theta, free_idx, nuisance, nuis, ev):
    """Largest relative gap between the gradient and central differences."""
    g = _over(ev.loss.grad[:, :len(free_idx)])
    worst = 0.0
    # Gaps below this are rounding: 1e-7 of the loss per unit of the coefficient.
    floor = 1e-7 * abs(ev.loss.total) / max(1e-2, float(np.abs(theta[free_idx]).max()))
    for c, q in enumerate(free_idx):
        if ev.signal[c] == 0:
            continue
        h = 1e-6 * max(abs(theta[q]), 1e-2)
        up, dn = theta.copy(), theta.copy()
        up[q] += h
        dn[q] -= h
        lay = problem.model.layout
        up, dn = project(up, free_idx, lay), project(dn, free_idx, lay)
        fd = (problem.loss_only(up, nuisance, nuis) - problem.loss_only(dn, nuisance, nuis)) / (
            up[q] - dn[q])
        worst = max(worst, abs(fd - g[c]) / max(abs(fd), abs(g[c]), floor, 1e-300))
    return worst


def _failed_start(problem, theta0, free_idx, method, nuis0, exc):
    """The stage's :class:`FitResult` when the simulation fails at its start
    (``exc``, the engine's error naming the scenario): an infinite loss and
    unknown intervals, so that a multi-start drops this start and a single
    start reports why it could not begin."""
    lay = problem.model.layout
    theta = project(theta0, free_idx, lay)
    names = tuple(lay.names[q] for q in free_idx)
    nf = len(names)
    unknown = {"signal": 0, "identifiable": False, "weak": False,
               "reason": "unknown: the simulation failed at the start"}
    return FitResult(
        params=lay.as_dict(theta), free=names, stderr=dict.fromkeys(names, np.inf),
        ci95={n: (-np.inf, np.inf) for n in names}, corr=np.full((nf, nf), np.nan),
        loss=np.inf, components={}, grad=np.full(nf, np.nan), nit=0, nfev=1,
        status=STATUS_NONFINITE, message=f"{STATUS_MESSAGES[STATUS_NONFINITE]}: {exc}",
        success=False, history=[], identifiability={n: dict(unknown) for n in names},
        method=method, nuisance=nuis0)


def _relative_stderr(cov, theta, free_idx, lay):
    """Each free coefficient's standard error over its size: its value, or
    for an offset (which may be 0) at least its scale
    (:data:`simcore.params.OFFSET_SCALE`); ``inf`` where the covariance
    gives none."""
    std = np.sqrt(np.maximum(np.diag(cov), 0.0))
    size = np.array([max(abs(theta[q]), P.OFFSET_SCALE.get(P.base(lay.names[q]), 1e-300))
                     for q in free_idx])
    rel = std / size
    rel[~np.isfinite(rel)] = np.inf
    return rel


def _result(w, method, nit, status, history, fd_gap):
    """The stage's :class:`FitResult` at the walk's point: intervals,
    correlations, identifiability and the message beside the status."""
    problem, theta, nuis, ev, free_idx = w.problem, w.theta, w.nuis, w.ev, w.free_idx
    k, nuisance, nfev = w.k, w.nuisance, w.nfev
    nf = len(free_idx)
    lay = problem.model.layout
    names = tuple(lay.names[q] for q in free_idx)
    lv = ev.loss
    scen_hold = ev.nondiff != 0
    hold = [c for c in range(nf) if ev.signal[c] == 0]
    if k:
        real_held = _nuisance_hold(ev, nf, k) & problem.nuisance_mask(nuisance)
    cov = _ev_covariance(ev, nf, k, hold)
    std = np.sqrt(np.maximum(np.diag(cov), 0.0))
    corr = _correlation(cov)
    rels = _relative_stderr(cov, theta, free_idx, lay)
    ident = {}
    weak_names = []
    for c, (n, q) in enumerate(zip(names, free_idx)):
        sig = int(ev.signal[c])
        if sig == 0:
            reason = f"{n}: no {P.SIGNAL_OF[P.base(n)]} in any of {problem.nscen} scenarios"
            std[c] = np.inf
        else:
            reason = f"{n}: {sig} events or segments carried signal"
        rel = rels[c]
        weak = sig > 0 and not rel <= WEAK_REL
        if weak:
            reason += f"; weakly identified (relative stderr {rel:.2g})"
            weak_names.append(n)
        bound = _on_bound(lay, theta, q) if sig > 0 else ""
        if bound:
            reason += f"; on its bound {bound}: the data would take it past (its interval is "\
                      "one-sided)"
        ident[n] = {"signal": sig, "identifiable": sig > 0, "weak": bool(weak), "reason": reason,
                    "bound": bound}
    message = STATUS_MESSAGES[status]
    unident = [n for n in names if not ident[n]["identifiable"]]
    if unident:
        message += ("; held at their start (not identifiable from this data): "
                    + "; ".join(ident[n]["reason"] for n in unident))
    if weak_names:
        message += "; weakly identified: " + ", ".join(weak_names)
    bounded = [f"{n} ({ident[n]['bound']})" for n in names if ident[n].get("bound")]
    if bounded:
        message += "; on a bound (one-sided interval): " + ", ".join(bounded)
    if k and real_held.any():
        message += (f"; {int(real_held.sum())} nuisance value(s) held at their start: "
                    "the data do not depend on them there")
    if scen_hold.any():
        message += (f"; {int(scen_hold.sum())} scenario(s) outside the exact tangents "
                    "(gradient by finite differences)")
    if fd_gap is not None and fd_gap > 1e-4:
        message += f"; gradient differs from finite differences by {fd_gap:.1e} (relative)"
    grad = _over(lv.grad[:, :nf])
    cluster = corr_cluster = None
    if not k and lv.gn is not None and problem.nscen >= 2 * max(nf, 1):
        ccov = _cluster_cov(ev, nf, hold)
        cluster = dict(zip(names, map(float, np.sqrt(np.maximum(np.diag(ccov), 0.0)))))
        corr_cluster = _correlation(ccov)
    return FitResult(stderr_cluster=cluster, corr_cluster=corr_cluster,
        params=lay.as_dict(theta), free=names,
        stderr={n: float(std[c]) for c, n in enumerate(names)},
        ci95={n: (float(theta[q] - 1.96 * std[c]), float(theta[q] + 1.96 * std[c]))
              for c, (n, q) in enumerate(zip(names, free_idx))},
        corr=corr, loss=float(lv.total), components=dict(lv.components), grad=grad, nit=nit,
        nfev=nfev, status=status, message=message,
        success=status in CONVERGED, history=history, held=tuple(unident),
        identifiability=ident, method=method, nuisance=nuis, unmatched=lv.unmatched,
        nondiff=int(scen_hold.sum()), fd_check=fd_gap,
        nuisance_held=real_held if k else None,
        nuisance_stderr=_nuisance_stderr(ev, nf, k, hold, cov) if k else None)
