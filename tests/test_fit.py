"""Identification: recovery of known coefficients, optimisers, reports, failures."""

import re
from dataclasses import replace

import numpy as np
import pytest
import yaml

from simcore import params as P
from simcore.identify import fit as F
from simcore.identify.problem import Problem, project

TABLE = "datasets/synthetic-table"
INFORMED = ["mu_s", "mu_k", "v_th", "mu_bb", "e_bb", "mu_w", "e_bw"]


@pytest.fixture(scope="module")
def table():
    return Problem.from_dataset(TABLE)


@pytest.fixture(scope="module")
def table_lm(table):
    return F.fit(table, free=INFORMED)


def test_recovers_known_coefficients_within_half_a_percent(table):
    """40 generated scenarios (pushes, collisions, walls, stops), 1 mm noise,
    fitted from the defaults: every identifiable coefficient within 0.5 % of
    truth and inside its 95 % interval."""
    with open(f"{TABLE}/dataset.yaml") as f:
        truth = yaml.safe_load(f)["truth"]
    r = F.fit(table)
    ident = [n for n in r.free if r.identifiability[n]["identifiable"]]
    assert ident == INFORMED
    for n in ident:
        assert abs(r.params[n] / truth[n] - 1) <= 5e-3, (n, r.params[n], truth[n])
        lo, hi = r.ci95[n]
        assert lo <= truth[n] <= hi, (n, lo, truth[n], hi)
    assert r.nit <= 30
    # Each iteration is recorded for tracking, and within each continuation
    # stage (its own objective) the loss never rose.
    assert len(r.history) == r.nit
    assert [h["iter"] for h in r.history] == list(range(1, r.nit + 1))
    stages = {}
    for h in r.history:
        stages.setdefault((h["horizon"], h["robust"]), []).append(h["loss"])
    assert list(stages) == [(0.25, True), (0.5, True), (1.0, False)]
    assert all(np.all(np.diff(v) <= 0) for v in stages.values())
    assert stages[(1.0, False)][-1] == r.loss
    assert set(r.history[0]) >= {"loss", "components", "theta", "grad_norm", "step", "horizon"}


def _generated(tmp_path_factory, seed):
    from simcore.data import synth

    out = tmp_path_factory.mktemp(f"gen{seed}")
    synth.generate(out, synth.GeneratorSettings(scenarios=100, seed=seed))
    with open(out / "dataset.yaml") as f:
        truth = yaml.safe_load(f)["truth"]
    return Problem.from_dataset(out), truth


def test_recovers_100_generated_scenarios_from_the_defaults(tmp_path_factory):
    """The issue's recovery problem: 100 scenarios (pushes, collisions, walls,
    stops), 1 mm noise, from the defaults.  A single fit over the whole span
    stalls here on a crease (v_th ends 35-73 % off); horizon continuation with
    robust warm-up stages reaches a loss at or below the truth's."""
    prob, truth = _generated(tmp_path_factory, 3)
    r = F.fit(prob)
    assert r.loss <= prob.loss_only(F.P.vector(truth)) * (1 + 1e-6)
    for n in INFORMED:
        assert r.identifiability[n]["identifiable"]
        assert abs(r.params[n] / truth[n] - 1) <= 5e-3, (n, r.params[n], truth[n])
        lo, hi = r.ci95[n]
        assert lo <= truth[n] <= hi, (n, lo, truth[n], hi)
    single = F.fit(prob, horizons=(1.0,), robust=0)
    assert single.loss > 2 * r.loss  # the stall the continuation is for


def test_scenarios_without_exact_tangents_get_finite_difference_curvature(tmp_path_factory):
    """Sustained-contact scenarios take finite-difference gradients, and
    their Gauss-Newton block (whose tangents can blow up) is 2 J^T W J of
    the trajectory loss with J the central differences of the sampled
    positions, computed here one scenario and one coefficient at a time.
    It bounds the old rank-one proxy g g^T / (2 l) from above."""
    from simcore.engine import simulate

    prob, truth = _generated(tmp_path_factory, 5)
    free = list(range(7))
    theta = F.P.vector(truth)
    ev = prob.evaluate(theta, free)
    bad = np.flatnonzero(ev.nondiff)
    assert bad.size >= 1
    lv = ev.loss
    assert np.all(np.isfinite(lv.gn))
    count = prob.targets.sample_count()
    for s in bad:
        sub = prob.subset([s])
        meas = sub.targets.measured
        ok = ~np.isnan(meas)
        cols = []
        for q in free:
            h = 1e-6 * max(abs(theta[q]), 1e-2)
            up, dn = theta.copy(), theta.copy()
            up[q] += h
            dn[q] -= h
            up, dn = project(up, [q]), project(dn, [q])
            pu = simulate(sub.model.with_params(up), sub.state, sub.targets.sample_times).samp_pos
            pd = simulate(sub.model.with_params(dn), sub.state, sub.targets.sample_times).samp_pos
            cols.append((pu[ok] - pd[ok]) / (up[q] - dn[q]))
        J = np.stack(cols, axis=1)
        want = 2.0 / (prob.nscen * count[s]) * J.T @ J
        assert np.allclose(lv.gn[s], want, rtol=1e-9, atol=1e-12 * np.abs(want).max())
        g = lv.grad[s, :7]
        gap = np.linalg.eigvalsh(lv.gn[s] - np.outer(g, g) / (2 * lv.per_scenario[s]))
        assert gap.min() >= -1e-6 * np.abs(want).max()


def test_other_weighted_losses_add_a_rank_one_curvature_of_their_gradient(tmp_path_factory):
    """With the output and velocity losses weighted too, a sustained-contact
    scenario's block is the trajectory loss's 2 J^T W J plus the rank-one
    proxy of the rest of its gradient: positive semi-definite, rank one."""
    prob, truth = _generated(tmp_path_factory, 5)
    free = list(range(7))
    theta = F.P.vector(truth)
    traj = prob.evaluate(theta, free)
    mixed = replace(prob, weights=dict(prob.weights, output=1.0, velocity=0.5)).evaluate(
        theta, free)
    bad = np.flatnonzero(mixed.nondiff)
    assert bad.size >= 1 and np.array_equal(bad, np.flatnonzero(traj.nondiff))
    for s in bad:
        eig = np.linalg.eigvalsh(mixed.loss.gn[s] - traj.loss.gn[s])
        assert eig[-1] > 0 and eig.min() >= -1e-9 * eig[-1] and eig[-2] <= 1e-9 * eig[-1]


def test_batched_finite_differences_match_one_coefficient_at_a_time(tmp_path_factory,
                                                                    monkeypatch):
    """The perturbed copies run as one batch with a row of coefficients each,
    skipping the coefficients a scenario's run never read: the same central
    differences as running each perturbation alone on every scenario, and a
    subset that lists a scenario twice scores both copies alike."""
    prob, truth = _generated(tmp_path_factory, 5)
    free = list(range(8))
    theta = F.P.vector(truth)
    ev = prob.evaluate(theta, free)
    bad = np.flatnonzero(ev.nondiff)
    unread = ev.sim.sens.signal[bad, :8] == 0
    assert unread.any() and not unread.all()  # some pairs are skipped, not all
    sub = prob.subset(bad)
    for c, q in enumerate(free):
        h = 1e-6 * max(abs(theta[q]), 1e-2)
        up, dn = theta.copy(), theta.copy()
        up[q] += h
        dn[q] -= h
        up, dn = project(up, [q]), project(dn, [q])
        ref = bad.size / prob.nscen * (sub.loss_only(up, per_scenario=True)
                                       - sub.loss_only(dn, per_scenario=True)) / (up[q] - dn[q])
        assert np.allclose(ev.loss.grad[bad, c], ref, rtol=1e-7, atol=1e-9 * np.abs(ref).max())
    # Split into one batch per scenario (a tiny sample-row budget): the same.
    import simcore.identify.problem as PR

    both = prob.subset(np.r_[np.arange(prob.nscen), bad])  # each of ``bad`` twice
    one = both.evaluate(theta, free)
    monkeypatch.setattr(PR, "FD_ROWS", 1)
    batches = []
    raw = Problem._fd_batch
    monkeypatch.setattr(Problem, "_fd_batch", lambda self, js, *a: (batches.append(js),
                                                                    raw(self, js, *a)))
    split = both.evaluate(theta, free)
    assert len(batches) == 2 * bad.size
    assert np.allclose(split.loss.grad, one.loss.grad, rtol=1e-7, atol=1e-12)
    assert np.allclose(split.loss.gn, one.loss.gn, rtol=1e-7,
                       atol=1e-12 * np.abs(one.loss.gn).max())
    twice = prob.subset(np.r_[bad, bad])
    assert len(twice.targets.events["t"]) == 2 * len(sub.targets.events["t"]) > 0
    per = twice.loss_only(theta, per_scenario=True)
    assert np.allclose(per[:bad.size], per[bad.size:], rtol=1e-14)
    assert np.allclose(2 * per[:bad.size], sub.loss_only(theta, per_scenario=True), rtol=1e-12)


def test_truncated_problem_keeps_the_first_part_of_each_scenario(table):
    half = table.truncated(0.5)
    assert table.truncated(1.0) is table
    t0, t1 = table.state.time, table.model.scen_t_end
    assert np.allclose(half.model.scen_t_end, t0 + 0.5 * (t1 - t0))
    for s, (full, cut) in enumerate(zip(table.targets.sample_times, half.targets.sample_times)):
        assert np.array_equal(cut, full[full <= half.model.scen_t_end[s] + 1e-12])
    assert half.targets.measured.shape[0] == sum(len(t) for t in half.targets.sample_times)
    assert np.isnan(half.targets.final_pos).all()
    ev = half.targets.events
    assert np.all(ev["t"] <= half.model.scen_t_end[ev["scen"]])
    assert 0 < len(ev["t"]) < len(table.targets.events["t"])
    with pytest.raises(ValueError, match="horizon fraction"):
        table.truncated(0.0)


def test_uninformed_parameter_is_held_and_named_beside_the_verdict(table):
    """The shipped table has no ground bounce: e_bg gets no signal.  It is
    held and named; the fit of the informed ones converges, and says so."""
    r = F.fit(table, max_iter=30)
    assert not r.identifiability["e_bg"]["identifiable"]
    assert r.held == ("e_bg",)
    assert r.message.startswith("converged: ")
    assert ("held at their start (not identifiable from this data): "
            "e_bg: no ground bounce in any of 40 scenarios") in r.message
    assert r.status in F.CONVERGED and r.success
    assert r.params["e_bg"] == 0.5 and np.isinf(r.stderr["e_bg"])
    assert all(np.isfinite(v) for v in r.params.values())


def test_learning_rate_mode_and_adam_reach_the_same_answer(table, table_lm):
    assert table_lm.success
    for method in ("gd", "adam"):
        r = F.fit(table, free=INFORMED, method=method, max_iter=2000)
        assert r.success, r.message
        assert r.nit > table_lm.nit
        for n in INFORMED:
            assert r.params[n] == pytest.approx(table_lm.params[n], rel=1e-3), (method, n)


class _Flaky(Problem):
    """Returns a NaN loss for every other evaluation after the first."""

    calls = 0

    def evaluate(self, *a, **kw):
        ev = super().evaluate(*a, **kw)
        type(self).calls += 1
        if self.calls > 1 and self.calls % 2 == 0:
            ev.loss.total = np.nan
        return ev


@pytest.mark.parametrize("method", ["lm", "gd"])
def test_nan_steps_are_rejected(table, method):
    _Flaky.calls = 0
    flaky = _Flaky(table.model, table.state, table.targets, table.weights, table.ids)
    start = {"mu_k": 0.17}
    one = dict(horizons=(1.0,), robust=0)  # one optimiser loop, no continuation stages
    r = F.fit(flaky, params0=start, free=["mu_k", "e_bw"], method=method, max_iter=40, **one)
    assert all(np.isfinite(v) for v in r.params.values())
    assert np.isfinite(r.loss) and r.loss < table.loss_only(
        F.P.vector(dict(start)))
    if method == "lm":  # (gd halves its rate at each NaN, so it gets less far in 40 steps)
        clean = F.fit(table, params0=start, free=["mu_k", "e_bw"], method=method, max_iter=40,
                      **one)
        assert r.params["mu_k"] == pytest.approx(clean.params["mu_k"], rel=2e-3)


def test_a_loss_that_is_nan_everywhere_stops_without_nan(table):
    class Dead(Problem):
        n = 0

        def evaluate(self, *a, **kw):
            ev = super().evaluate(*a, **kw)
            Dead.n += 1
            if Dead.n > 1:
                ev.loss.total = np.nan
            return ev

    dead = Dead(table.model, table.state, table.targets, table.weights, table.ids)
    r = F.fit(dead, params0={"mu_k": 0.17}, free=["mu_k"], max_iter=5, horizons=(1.0,),
              robust=0)
    assert r.status == F.STATUS_NOSTEP and not r.success
    assert r.params["mu_k"] == 0.17


def test_unknown_pushes_recovered_with_mu_k(table):
    """Pushes 15 % off and mu_k 10 % off, fitted jointly (input loss as the
    regulariser).  A push under the static threshold mu_s m g that never moves
    its body leaves the data independent of it: it is held at its start and
    reported.  A start under the threshold for a body the data show moving
    (a plateau no local method leaves) is restarted from the window's
    measured motion and comes back within 1 %, as the bulk of the others do;
    scenarios caught in a local minimum of their own are rescued (see
    simcore.identify.fit).  Every push is reported with its standard error."""
    truth = table.model.ctrl_force.copy()
    wrong = replace(table.model, ctrl_force=truth * 0.85)
    prob = Problem(wrong, table.state, table.targets,
                   dict(table.weights, input=1e-9), table.ids)
    with open(f"{TABLE}/dataset.yaml") as f:
        truth_params = yaml.safe_load(f)["truth"]
    start = dict(truth_params, mu_k=0.171)
    _, stuck = prob.push_from_data(F.P.vector(start))
    r = F.fit(prob, params0=start, free=["mu_k"], nuisance="push", max_iter=60)
    assert r.params["mu_k"] == pytest.approx(0.19, rel=1e-3)
    got = prob.apply(F.P.vector(r.params), "push", r.nuisance)[0].ctrl_force
    size = np.linalg.norm(truth[:, :2], axis=1)
    err = np.linalg.norm(got[:, :2] - truth[:, :2], axis=1) / size
    # Held values, window by window (two per window: fx, fy).
    m = table.model
    owner = np.repeat(np.arange(m.nscen), np.diff(m.ctrl_ptr))
    local = np.arange(owner.size) - m.ctrl_ptr[owner]
    held = r.nuisance_held[owner, 2 * local] & r.nuisance_held[owner, 2 * local + 1]
    mass = m.body_mass[owner, m.ctrl_body]
    start_below = 0.85 * size < truth_params["mu_s"] * mass * 9.81
    assert held.any() and np.all(start_below[held])  # only pushes under the threshold
    assert f"{int(r.nuisance_held.sum())} nuisance value(s) held" in r.message
    assert np.allclose(got[held, :2], 0.85 * truth[held, :2])  # untouched, not zeroed
    # Only pushes that truly stay under the threshold, but one that a contact blocks.
    assert np.sum(size[held] >= truth_params["mu_s"] * mass[held] * 9.81) <= 1
    assert stuck.sum() >= 2 and np.all(err[stuck] < 1e-2)  # off the plateau, recovered
    free_err = err[~held]
    # Measured: 52 of 56 within 1 %, median 5e-4.
    assert np.median(free_err) < 1e-3 and np.mean(free_err < 1e-2) >= 0.9, np.sort(free_err)
    # Standard errors per value: infinite where held.  The pushes the data
    # inform to 1 % come back within 1 % (51 of 52: one sits in a shallow
    # local minimum, 0.2 % of its scenario's loss above the truth's); the
    # weakly informed ones within their 95 % intervals.
    se = np.stack([r.nuisance_stderr[owner, 2 * local], r.nuisance_stderr[owner, 2 * local + 1]],
                  axis=1)
    assert np.all(np.isinf(se[held])) and np.all(np.isfinite(se[~held]))
    assert np.all(r.nuisance_stderr[~prob.nuisance_mask("push")] == np.inf)
    rel_se = np.linalg.norm(se, axis=1) / size
    informed = ~held & (rel_se <= 1e-2)
    assert informed.sum() >= 50 and np.mean(err[informed] < 1e-2) >= 0.95, err[informed]
    weak = ~held & ~informed
    z = np.abs(got[weak, :2] - truth[weak, :2]) / se[weak]
    assert np.all(z <= 1.96), z


def test_unknown_initial_velocities_recovered_with_mu_k(table):
    """Every body's initial velocity 10 % low and mu_k 10 % off, fitted jointly
    (Schur-eliminated nuisance).  A body that stops within a few millimetres,
    or whose scenario ends in a local minimum of its own, can stay off: the
    bulk must be within 1 %."""
    true_v = table.state.body_vel[:, :, :2].copy()
    state = table.state.copy()
    state.body_vel[:, :, :2] *= 0.9
    prob = Problem(table.model, state, table.targets, table.weights, table.ids)
    with open(f"{TABLE}/dataset.yaml") as f:
        truth = yaml.safe_load(f)["truth"]
    r = F.fit(prob, params0=dict(truth, mu_k=0.171), free=["mu_k"], nuisance="velocity")
    assert r.success, r.message
    assert r.params["mu_k"] == pytest.approx(0.19, rel=1e-3)
    got = r.nuisance.reshape(true_v.shape)
    speed = np.linalg.norm(true_v, axis=2)
    moving = speed > 0
    err = np.linalg.norm(got - true_v, axis=2)[moving] / speed[moving]
    assert np.median(err) < 1e-3 and np.mean(err < 1e-2) >= 0.9, np.sort(err)


def test_multi_start_returns_the_best_and_the_spread(table):
    r = F.fit(table, free=["mu_k", "e_bw"], starts=3, seed=1, max_iter=40)
    assert len(r.starts) == 3
    assert r.loss == min(s.loss for s in r.starts)
    assert set(r.spread) == {"mu_k", "e_bw", "agree"} and r.spread["agree"] >= 2
    again = F.fit(table, free=["mu_k", "e_bw"], starts=3, seed=1, max_iter=40)
    assert [s.params for s in again.starts] == [s.params for s in r.starts]


def test_a_scan_grid_puts_every_combination_in_place_and_projects_it():
    """Every combination of the scan's values, in their places, the rest of
    the start kept; a static friction below the kinetic one rises to it."""
    lay = P.Layout.build(laws={"body_ground": "hunt_crossley"})
    theta = lay.vector({"mu_k": 0.15, "mu_s": 0.3, "e_bg": 0.2})
    grid = F._scanned(theta, lay, {"k_hc": (1e6, 1e7), "mu_s": (0.1, 0.2, 0.3)})
    got = sorted((g[lay.index("k_hc")], g[lay.index("mu_s")]) for g in grid)
    assert got == [(1e6, 0.15), (1e6, 0.2), (1e6, 0.3), (1e7, 0.15), (1e7, 0.2), (1e7, 0.3)]
    for g in grid:
        assert g[lay.index("mu_k")] == 0.15 and g[lay.index("e_bg")] == 0.2


@pytest.mark.parametrize("scan, says", [
    ({"k_hc": [1e7]}, "k_hc is read by the contact law 'hunt_crossley', which this model"),
    ({"mu_k": []}, "scan 'mu_k': []: expected a list of finite numbers within [0.0, inf]"),
    ({"mu_k": [0.1, -1.0]}, "within [0.0, inf]"),
    ({"mu_k": [0.1, "x"]}, "expected a list of finite numbers"),
    ({"mu_k": list(np.linspace(0.1, 0.5, 201))}, "scan: 201 points; at most 200"),
    ({"mu_x": [0.1]}, "unknown coefficient 'mu_x'"),
])
def test_a_bad_scan_is_refused_naming_the_entry(table, scan, says):
    with pytest.raises(ValueError, match=re.escape(says)):
        F.fit(table, free=["mu_k"], scan=scan, max_iter=1)


def test_a_scan_runs_the_rollouts_again_from_a_grid_point_of_lower_loss(table, monkeypatch):
    """A fit stopped short (one iteration from mu_k 0.6, truth 0.19) is
    checked against its scan grid at its answer: the rollouts run again
    from the grid point of least loss (0.19 of 0.05, 0.19, 0.4) and the
    lower loss is kept, the strategy line saying so; an answer that no grid
    point beats is kept without another run."""
    continued, begun = F._fit_continued, []

    def spy(problem, theta0, *a, **k):
        begun.append(theta0.copy())
        return continued(problem, theta0, *a, **k)

    monkeypatch.setattr(F, "_fit_continued", spy)
    lay = table.with_coefficients(["mu_k", "mu_s"]).model.layout
    kw = dict(free=["mu_k"], max_iter=1, horizons=(1.0,))
    short = F.fit(table, params0={"mu_k": 0.6, "mu_s": 0.7}, **kw)
    begun.clear()
    r = F.fit(table, params0={"mu_k": 0.6, "mu_s": 0.7}, scan={"mu_k": [0.05, 0.19, 0.4]}, **kw)
    assert len(begun) == 2 and begun[1][lay.index("mu_k")] == 0.19
    assert r.loss < short.loss and abs(r.params["mu_k"] - 0.19) < abs(short.params["mu_k"] - 0.19)
    assert ", 3 scanned on" in r.strategy and "(moved it to a scanned point)" in r.strategy
    assert "the rollouts again from there ended at" in r.strategy and ": kept" in r.strategy
    begun.clear()
    r = F.fit(table, params0={"mu_k": 0.19, "mu_s": 0.7}, scan={"mu_k": [0.05, 0.4]}, **kw)
    assert len(begun) == 1 and "(kept the rollouts' answer)" in r.strategy


def test_a_scanned_coefficient_that_is_not_free_is_a_model_chosen_by_the_loss(table):
    """``e_bw`` held at 0.4 (the truth 0.7) and scanned over 0.4, 0.7, 0.95
    while ``mu_k`` is fitted: the grid point of least loss at the answer is
    the truth's, the rollouts fit ``mu_k`` again with ``e_bw`` held there,
    and the result carries it (not free: no interval), its loss lower than
    the fit's at 0.4."""
    kw = dict(params0={"e_bw": 0.4}, free=["mu_k"], max_iter=20)
    held = F.fit(table, **kw)
    r = F.fit(table, scan={"e_bw": [0.4, 0.7, 0.95]}, **kw)
    assert r.params["e_bw"] == 0.7 and list(r.free) == ["mu_k"] and "e_bw" not in r.stderr
    assert r.loss < held.loss and "(moved it to a scanned point)" in r.strategy
    assert abs(r.params["mu_k"] - 0.19) < abs(held.params["mu_k"] - 0.19)


def test_the_benchmarks_report_a_scanned_choice_beside_the_fitted_values(table):
    """``benchmarks.cube_toss.fit_or_read`` (the fit of both rigid
    benchmarks) reports the grid point a scan held (``scanned_e_bw``, the
    truth's 0.7) beside the free coefficients' ``fitted_*``, and nothing
    ``scanned_`` for a free one."""
    from benchmarks.cube_toss import fit_or_read
    from flows import settings
    from simcore.data import dataset as D

    cfg = settings.calibration(fit=["mu_k"], start={"e_bw": 0.4}, max_iter=20,
                               scan={"e_bw": [0.4, 0.7, 0.95], "mu_k": [0.19]})
    theta, figures = fit_or_read(table, table.nscen, cfg, ds=D.read(TABLE))
    assert figures["scanned_e_bw"] == 0.7 == theta[table.model.layout.index("e_bw")]
    assert "fitted_mu_k" in figures and "scanned_mu_k" not in figures


def test_multi_start_numbers_every_start_on_from_the_last(table):
    """The callback sees each start's iterations numbered on from the
    previous start's (a calibration's chart by step shows each once), and
    each start's history carries those numbers."""
    recs = []
    r = F.fit(table, free=["mu_k", "e_bw"], starts=3, seed=1, max_iter=40, callback=recs.append)
    assert [rec["iter"] for rec in recs] == list(range(1, len(recs) + 1))
    assert [h["iter"] for s in r.starts for h in s.history] == list(range(1, len(recs) + 1))
    assert sum(s.nit for s in r.starts) == len(recs) and all(s.nit for s in r.starts)


def test_fd_cross_check_agrees_on_smooth_data(table):
    r = F.fit(table, free=["mu_w", "e_bw"], max_iter=3, fd_check=True)
    assert r.fd_check is not None and r.fd_check < 1e-5


@pytest.mark.parametrize("kw, words", [
    ({"free": ["mu_x"]}, "free parameter 'mu_x'"),
    ({"method": "newton"}, "method 'newton'"),
    ({"nuisance": "spin"}, "nuisance 'spin'"),
    ({"lr": -1.0, "method": "gd"}, "lr = -1.0"),
    ({"segments": -0.1}, "segments = -0.1"),
])
def test_bad_options_name_the_option(table, kw, words):
    with pytest.raises(ValueError, match=words.replace("(", r"\(")):
        F.fit(table, **kw)


def test_push_from_data_closed_form_and_plateau():
    """Along the motion the window's quadratic gives ``F = m (a + mu_k g)``
    exactly; a given push that leaves the body at rest while the data show
    it moving is flagged stuck, with a start over the static threshold."""
    from simcore import simulate
    from simcore.identify import losses as L
    from simcore.model import Scenario, build

    truth = F.P.vector({})
    r, mass = 0.028575, 0.17
    moving = Scenario(radius=np.array([r]), mass=np.array([mass]),
                      pos=np.array([[0.0, 0.0, r]]), vel=np.array([[1.0, 0.0, 0.0]]), t_end=1.0,
                      controls=np.array([[0, 0.2, 0.5, 0.4, 0.0, 0.0]]), name="moving")
    f_start = 0.6  # from rest, over mu_s m g = 0.47 N
    resting = Scenario(radius=np.array([r]), mass=np.array([mass]),
                       pos=np.array([[0.0, 0.0, r]]), vel=np.zeros((1, 3)), t_end=1.0,
                       controls=np.array([[0, 0.2, 0.5, 0.0, f_start, 0.0]]), name="resting")
    model, state = build([moving, resting], params=truth)
    ts = np.round(np.arange(0.0, 1.0 + 5e-4, 1e-3), 12)
    sim = simulate(model, state, [ts, ts])
    none = np.full((2, 1, 3), np.nan)
    tg = L.Targets([ts, ts], sim.samp_pos.copy(), none, none.copy())
    given = replace(model, ctrl_force=model.ctrl_force * np.array([[1.0], [0.5]]))
    prob = Problem(given, state, tg, ids=["moving", "resting"])
    est, stuck = prob.push_from_data(truth)
    np.testing.assert_allclose(est[0], [0.4, 0.0], rtol=0, atol=1e-9)
    assert not stuck[0]
    threshold = F.P.DEFAULTS["mu_s"] * mass * 9.81
    assert stuck[1] and 1.05 * threshold <= est[1, 1] and abs(est[1, 0]) < 1e-6
    start = prob.nuisance_start("push", truth)
    np.testing.assert_allclose(start[1, :2], est[1])  # the stuck one restarts from the data
    np.testing.assert_allclose(start[0, :2], given.ctrl_force[0, :2])  # the other as given


def test_step_sigma_stops_within_a_fraction_of_the_uncertainty(table):
    """Stopping once the undamped Gauss-Newton step is under 0.05 standard
    errors leaves every coefficient within a tenth of a standard error of the
    strictly converged fit, for no more evaluations."""
    loose = F.fit(table, free=INFORMED, step_sigma=0.05)
    strict = F.fit(table, free=INFORMED, step_sigma=0.0)
    assert loose.success and strict.success
    assert loose.status == F.STATUS_STEP and strict.status != F.STATUS_STEP  # it fired
    for n in loose.free:
        if np.isfinite(strict.stderr[n]):
            assert abs(loose.params[n] - strict.params[n]) <= 0.1 * strict.stderr[n], n
    assert loose.nfev <= strict.nfev
    with pytest.raises(ValueError, match="step_sigma"):
        F.fit(table, step_sigma=-1.0)


@pytest.mark.parametrize("method", ["gd", "adam"])
def test_gd_and_adam_converge_with_their_defaults_on_the_shipped_set(method):
    """gd (Gauss-Newton-preconditioned steps) and Adam (its default iteration
    limit) reach LM's estimates to a tenth of their standard errors and stop
    by the step_sigma rule: converged."""
    prob = Problem.from_dataset(TABLE, split="train")
    lm = F.fit(prob)
    r = F.fit(prob, method=method)
    assert r.status == F.STATUS_STEP, r.message
    for n in lm.free:
        if n not in lm.held:
            assert abs(r.params[n] - lm.params[n]) <= 0.1 * lm.stderr[n], (n, method)
    with pytest.raises(ValueError, match="precondition = 'newton'"):
        F.fit(prob, method=method, precondition="newton")


def test_clustered_stderr_agrees_with_the_plain_one_unless_the_model_is_wrong():
    from simcore.data import synth
    prob = Problem.from_dataset("datasets/synthetic-table")
    informed = ["mu_s", "mu_k", "v_th", "mu_bb", "e_bb", "mu_w", "e_bw"]
    r = F.fit(prob, free=informed)
    for n in informed:  # the data's model: both estimates of the same spread
        assert 0.4 < r.stderr_cluster[n] / r.stderr[n] < 2.5, n
    # Four free, the others at their (wrong) defaults: the residuals of a
    # scenario move together. The plain errors claim 13-160 sigma of
    # precision the estimates do not have; the clustered ones hold them.
    some = ["mu_s", "mu_k", "v_th", "e_bb"]
    r = F.fit(prob, free=some)
    err = {n: abs(r.params[n] - synth.TRUTH[n]) for n in some}
    assert max(err[n] / r.stderr[n] for n in some) > 10
    assert all(err[n] < 3 * r.stderr_cluster[n] for n in some)
    # its correlations: a correlation matrix (symmetric, unit diagonal), the
    # sandwich's own, not the plain one's
    c = r.corr_cluster
    assert np.allclose(c, c.T) and np.allclose(np.diag(c), 1.0) and np.all(np.abs(c) <= 1 + 1e-12)
    assert np.abs(c - r.corr).max() > 0.05


def test_the_same_tosses_in_any_order_or_shards_give_the_same_fit_bit_for_bit():
    """Real cube tosses (chaotic: a last bit grows into another local minimum
    within a few iterations), fitted by secants with the orientation loss: in
    file order, shuffled, and shuffled in three shards, the coefficients and
    the loss are the same bits (each scenario's share is its own rows' sum,
    every shard a mean over the whole count, every sum over scenarios in an
    order of its values)."""
    from simcore.data import dataset as D
    from simcore.identify.problem import Problem, ShardedProblem

    ds = D.read("datasets/cube-toss")
    ids = sorted(D.split(ds))[:16]
    perm = np.random.default_rng(3).permutation(len(ids))
    weights = {"trajectory": 1.0, "orientation": 1.0}
    listed = Problem.from_dataset(ds, weights, order=ids)
    shuffled = Problem.from_dataset(ds, weights, order=[ids[k] for k in perm])
    sharded = ShardedProblem(shuffled, np.array_split(np.random.default_rng(4).permutation(16), 3))
    fits = [F.fit(p, free=["mu_k", "e_bg"], secant=[0.01], step_sigma=0.0, max_iter=4)
            for p in (listed, shuffled, sharded)]
    for r in fits[1:]:
        assert r.loss == fits[0].loss and r.nit == fits[0].nit
        assert all(r.params[n] == fits[0].params[n] for n in ("mu_k", "e_bg"))
    assert fits[0].params["mu_k"] != 0.2  # it moved


def test_a_sphere_sliding_pressed_to_a_wall_carries_the_wall_friction():
    """Balls pushed into a wall while they slide along it: no impact slips
    there, but the sustained contact's friction slows them.  That counts as
    signal for ``mu_w`` (not held at its start), and the fit recovers it."""
    import simcore
    from simcore import params as P
    from simcore.identify import losses as L

    r, m = 0.03, 0.2
    scenes = []
    for k, (vx, push) in enumerate([(0.6, 0.5), (0.4, 0.8), (0.8, 0.3)]):
        scenes.append(simcore.Scenario(
            radius=np.array([r]), mass=np.array([m]), pos=np.array([[-0.3, 0.5 - r, r]]),
            vel=np.array([[vx, 0.0, 0.0]]), t_end=0.6, dt=1e-3,
            walls=np.array([[0.0, -1.0, 0.0, -0.5]]),
            controls=np.array([[0, 0.0, 0.6, 0.0, push, 0.0]]), name=f"w{k}"))
    truth = {"mu_w": 0.35, "mu_k": 0.2, "mu_s": 0.3}
    times = [np.linspace(0.0, 0.6, 61)] * len(scenes)
    model, state = simcore.build(scenes, params=truth)
    sim = simcore.simulate(model, state, times)
    nan = np.full((len(scenes), 1, 3), np.nan)
    problem = Problem(model, state, L.Targets(times, sim.samp_pos.copy(), nan, nan),
                      {"trajectory": 1.0})
    r_fit = F.fit(problem, params0={"mu_k": 0.2, "mu_s": 0.3}, free=["mu_w"])
    assert r_fit.identifiability["mu_w"]["identifiable"], r_fit.message
    assert r_fit.params["mu_w"] == pytest.approx(0.35, rel=1e-6)
    assert P.DEFAULTS["mu_w"] != pytest.approx(0.35, rel=0.05)  # it moved from its start


#: Coefficients at which scenario s0032 of the shipped table chatters: a pushed
#: ball presses another into a wall, and the two start and stop nanoseconds
#: apart (``mu_s == mu_k``; the 138th start of a 400-start fit drew them).
CHATTER = dict(mu_s=0.3694703066066617, mu_k=0.3694703066066617, v_th=0.04841501131761801,
               mu_bb=0.09808322962521768, e_bb=0.3214202180561519, mu_w=0.24776373044455902,
               e_bw=0.06671807765343964, e_bg=0.17332993248350442)


def test_a_chattering_scenario_fails_fast_and_names_itself(table):
    """The engine ends a stick-slip cycle it cannot resolve within two blocks
    of passes (it used to run 50 million passes, minutes), naming the scenario."""
    sub = table.subset([list(table.ids).index("s0032")])
    with pytest.raises(RuntimeError, match="'s0032': contact chatter"):
        sub.loss_only(sub.model.layout.vector(CHATTER))


def test_a_start_that_cannot_be_simulated_fails_alone(table):
    """A fit whose start chatters reports it (not finite, why, nothing raised);
    in a multi-start that start drops out and the others give the fit."""
    sub = table.subset([list(table.ids).index(s) for s in ("s0032", "s0001", "s0002")])
    free = ["mu_k", "e_bw"]
    r = F.fit(sub, params0=CHATTER, free=free, horizons=(1.0,))
    assert r.status == F.STATUS_NONFINITE and not r.success and not np.isfinite(r.loss)
    assert "contact chatter" in r.message and "'s0032'" in r.message
    assert r.params["mu_k"] == CHATTER["mu_k"] and r.stderr["mu_k"] == np.inf
    m = F.fit(sub, params0=CHATTER, free=free, horizons=(1.0,), starts=3, seed=2, max_iter=15)
    assert not np.isfinite(m.starts[0].loss)
    assert np.isfinite(m.loss) and m is not m.starts[0]
    assert m.spread["agree"] >= 1


def test_a_cut_a_rounding_before_a_sample_keeps_it_and_runs_to_it(table):
    """A sample kept within 1e-12 s past a cut (``t0 + fraction (t_end -
    t0)`` rounds) is reached by the run: the scenario ends at it."""
    sub = table.subset([0])
    t = float(sub.targets.sample_times[0][5])
    cut = sub.ended(np.array([t - 1e-13]))
    assert cut.targets.sample_times[0][-1] == t and cut.model.scen_t_end[0] == t
    assert np.isfinite(cut.loss_only(cut.model.layout.vector()))
    exact = sub.ended(np.array([t + 1e-3]))
    assert exact.model.scen_t_end[0] == t + 1e-3  # a cut past the sample stays


def test_the_jackknife_is_the_spread_of_the_estimates_without_each_scenario():
    """On a linear least-squares problem one Newton step is the refit, so
    :func:`simcore.identify.fit._jackknife` is the delete-one jackknife of
    the refits themselves: ``(S - 1) / S sum (theta_-s - mean)(...)^T``."""
    rng = np.random.default_rng(5)
    S, m, n = 9, 7, 2
    A = rng.normal(size=(S, m, n))
    y = A @ np.array([0.3, -1.2]) + rng.normal(scale=0.1, size=(S, m)) \
        + rng.normal(scale=0.5, size=(S, 1))  # a shared error per scenario
    theta = np.linalg.lstsq(A.reshape(-1, n), y.ravel(), rcond=None)[0]
    r = A @ theta - y
    g = 2 * np.einsum("smn,sm->sn", A, r)  # each scenario's gradient and Gauss-Newton matrix
    Hs = 2 * np.einsum("smn,smk->snk", A, A)
    refits = np.array([np.linalg.lstsq(np.delete(A, s, 0).reshape(-1, n),
                                       np.delete(y, s, 0).ravel(), rcond=None)[0]
                       for s in range(S)])
    d = refits - refits.mean(axis=0)
    assert np.allclose(F._jackknife(g, Hs), (S - 1) / S * d.T @ d, rtol=1e-10, atol=0)
    # a scenario that alone holds a coefficient: without it the matrix is singular
    Hs[:, 1, :] = Hs[:, :, 1] = 0.0
    Hs[0, 1, 1] = 1.0
    assert np.isinf(np.diag(F._jackknife(g, Hs))).all()


def test_a_coefficient_the_fit_leaves_on_its_bound_is_flagged(table):
    """mu_k wants 0.19, but a fixed mu_s of 0.15 caps it (mu_s >= mu_k): the
    report says it sits on that bound, its interval one-sided."""
    r = F.fit(table, params0={"mu_s": 0.15, "mu_k": 0.14}, free=["mu_k", "e_bb"])
    assert r.params["mu_k"] == 0.15
    assert r.identifiability["mu_k"]["bound"] == "mu_s >= mu_k"
    assert "on its bound mu_s >= mu_k" in r.identifiability["mu_k"]["reason"]
    assert r.identifiability["e_bb"]["bound"] == ""
    assert "on a bound (one-sided interval): mu_k (mu_s >= mu_k)" in r.message


class _Bowl:
    """A problem whose whole rollouts' loss is a bowl at ``at`` (the rollouts'
    basin), for the rollouts' check of a segmented fit."""

    def __init__(self, at, nscen=3):
        self.at, self.nscen, self.ids = at, nscen, [f"s{k}" for k in range(nscen)]

    def subset(self, idx):
        return _Bowl(self.at, len(idx))

    def loss_only(self, theta):
        return float(np.sum((np.asarray(theta) - self.at) ** 2))


def test_the_rollouts_start_where_their_own_loss_is_least():
    """The segments' answer (e 0.42) against the global phase's points: the
    rollouts start from the point of least rollout loss (their basin at
    0.15, as on the real square drops), and keep the segments' answer when
    no point beats it."""
    points = [np.array([0.6]), np.array([0.12]), np.array([0.3])]
    [start], said = F._rollout_phase(_Bowl(0.15), np.array([0.42]), points)
    assert start[0] == 0.12 and "moved it" in said and "on 3 whole rollouts" in said
    [start], said = F._rollout_phase(_Bowl(0.40), np.array([0.42]), points)
    assert start[0] == 0.42 and "kept the segments' answer" in said


def test_the_rollouts_start_may_be_a_local_point_around_the_segments_answer():
    """A rollouts' basin narrower than the segments' error (the truth 0.2,
    the segments' answer 0.23, the global points far): a point of the local
    hypercube inside it wins, and the line says so. The hypercube spans
    +-LOCAL_SPAN around the answer, one point per stratum of each
    coefficient."""
    lay = P.Layout.build()
    theta = lay.vector({"mu_s": 0.5, "mu_k": 0.23, "e_bg": 0.3})
    free = [lay.index("mu_k"), lay.index("e_bg")]
    local = F._local_points(theta, free, lay, 1)
    rel = np.array([p[free] / theta[free] - 1 for p in local])
    n = F.LOCAL_POINTS * 2
    assert len(local) == n and np.abs(rel).max() <= F.LOCAL_SPAN
    for c in range(2):  # one point in each of n strata
        strata = np.floor((rel[:, c] / F.LOCAL_SPAN + 1) / 2 * n).astype(int)
        assert sorted(strata) == list(range(n))

    class Needle(_Bowl):
        def loss_only(self, theta):
            return 1.0 - np.exp(-(((theta[free[0]] - 0.2) / 0.006) ** 2))

    far = [lay.vector({"mu_k": 0.12, "e_bg": 0.3}), lay.vector({"mu_s": 0.5, "mu_k": 0.4})]
    [start], said = F._rollout_phase(Needle(0.2), theta, far, local)
    assert abs(start[free[0]] - 0.2) < 0.006
    assert "moved it to a point around it" in said and f"{n} around the segments' answer" in said
    [start], said = F._rollout_phase(Needle(0.2), theta, far)
    assert start[free[0]] == 0.23 and "around" not in said
    # a failed segments' fit: the points surround the fit's start, and the line says so
    failed = "the fit's start (the segments' fit failed)"
    [start], said = F._rollout_phase(_Bowl(theta), theta, far, local, failed)
    assert start[free[0]] == 0.23 and f"kept {failed}" in said and f"around {failed}" in said


def test_the_rollouts_check_scores_at_most_global_segments_scenarios():
    """Past ``GLOBAL_SEGMENTS`` scenarios the check scores that many of them
    (chosen by name as the global phase's: ``_hashed``, whose order test is
    in ``tests/test_rigid_identification.py``)."""
    [start], said = F._rollout_phase(_Bowl(0.15, nscen=F.GLOBAL_SEGMENTS + 40),
                                     np.array([0.42]),
                                     [np.array([0.2])])
    assert f"on {F.GLOBAL_SEGMENTS} whole rollouts" in said


def test_the_rollouts_check_scores_its_finalists_on_every_rollout():
    """Past ``GLOBAL_SEGMENTS`` rollouts the check screens the candidates on
    that many and scores its ``FINALISTS`` best on all of them: a subset
    whose loss is least at 0.1 (a noisy proxy, as on chaotic drops) against
    the whole's least at 0.3; 0.3, fourth on the subset, comes first, and
    the subset's own best second."""

    class Proxy(_Bowl):
        def subset(self, idx):
            return _Bowl(0.1, len(idx))

    many = F.GLOBAL_SEGMENTS + 40
    points = [np.array([x]) for x in (0.1, 0.12, 0.05, 0.3, 0.31, 0.6)]
    starts, said = F._rollout_phase(Proxy(0.3, nscen=many), np.array([0.42]), points)
    # the finalists' best first, then the screen's own (a rugged loss: either can end lower)
    assert [s[0] for s in starts] == [0.3, 0.1] and "moved it" in said
    assert f"on {F.GLOBAL_SEGMENTS} whole rollouts, the best {F.FINALISTS} of them on all " \
        f"{many}" in said and "also from the screen's best" in said
    # where both agree, one start
    [start], said = F._rollout_phase(_Bowl(0.3, nscen=many), np.array([0.42]), points)
    assert start[0] == 0.3 and "also" not in said
    # at most GLOBAL_SEGMENTS rollouts, the subset is the whole: no second scoring
    [start], said = F._rollout_phase(Proxy(0.3, nscen=3), np.array([0.42]), points)
    assert "the best" not in said


def _secant_problem(nscen, seed=0):
    """A stand-in problem on ``gravity, com_z`` whose secant evaluation at
    every step gives each of ``nscen`` scenarios a random gradient and a
    random positive definite Gauss-Newton matrix; a fit result at the
    defaults with Gauss-Newton errors."""
    from types import SimpleNamespace

    rng = np.random.default_rng(seed)
    g = rng.normal(size=(nscen, 2))
    A = rng.normal(size=(nscen, 2, 2))
    Hs = A @ A.transpose(0, 2, 1) + 0.1 * np.eye(2)
    lay = P.Layout.build(names=["gravity", "com_z"])
    ev = SimpleNamespace(nfev=2 * nscen, loss=SimpleNamespace(grad=g, gn=Hs))
    problem = SimpleNamespace(model=SimpleNamespace(layout=lay), nscen=nscen,
                              evaluate=lambda theta, free, secant: ev)
    r = SimpleNamespace(params=lay.as_dict(lay.vector()), free=("gravity", "com_z"), held=(),
                        stderr={"gravity": 1e-4, "com_z": 1e-6}, interval="Gauss-Newton",
                        nfev=0)
    return problem, r, [lay.index("gravity"), lay.index("com_z")], (g, Hs)


def test_a_secant_fit_on_too_few_scenarios_says_its_intervals_are_not_explored():
    """Two scenarios cannot jackknife two coefficients (three needed: the
    estimates without one scenario span one direction): the intervals stay
    the last secant's Gauss-Newton ones, and ``interval`` says that on a
    chaotic loss they understate the uncertainty."""
    problem, r, free_idx, _ = _secant_problem(2)
    out = F._explored(problem, r, free_idx)
    assert out.stderr == {"gravity": 1e-4, "com_z": 1e-6}
    assert "2 scenarios are too few" in out.interval and "needs 3" in out.interval
    assert out.interval.startswith("Gauss-Newton")  # the clustered ones may still widen it


def test_one_scenario_more_than_coefficients_explores_the_intervals():
    """Three scenarios jackknife two coefficients: each standard error is
    the larger of the Gauss-Newton one and the jackknife's, and the 95 %
    interval takes Student's t with 2 degrees of freedom (4.303)."""
    problem, r, free_idx, (g, Hs) = _secant_problem(3)
    out = F._explored(problem, r, free_idx)
    jk = np.sqrt(np.diag(F._jackknife(g, Hs)))
    assert out.interval.startswith("explored") and "3 scenarios" in out.interval
    assert "2 degrees of freedom" in out.interval
    for k, n in enumerate(("gravity", "com_z")):
        se = max(jk[k], {"gravity": 1e-4, "com_z": 1e-6}[n])
        assert out.stderr[n] == pytest.approx(se, rel=1e-12)
        lo, hi = out.ci95[n]
        assert (hi - lo) / 2 == pytest.approx(4.302652729911275 * se, rel=1e-9)
