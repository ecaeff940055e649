"""Identification on rigid bodies: synthetic box tosses, the ``state``
nuisance, segments of a long toss and where a body comes to rest."""

from dataclasses import replace

import numpy as np
import pytest

from simcore import engine as E
from simcore import model as M
from simcore.data import dataset as D
from simcore.data import synth
from simcore.geometry.collision import SHAPE_BOX
from simcore.geometry.rigid import (
    integrate_orientation,
    quat_rate,
    window_state,
)
from simcore.geometry.shapes import lowest
from simcore.identify import fit as F
from simcore.identify import nuisance
from simcore.identify.problem import FLIGHT_CLEARANCE, SLOPE_HALF, Problem
from simcore.kernel import sensitivity as T

from .test_rigid import cube


@pytest.fixture(scope="module")
def tosses(tmp_path_factory):
    """Three generated cube tosses, without noise and with the default 1 mm."""
    root = tmp_path_factory.mktemp("tosses")
    out = {}
    for noise in (0.0, 1.0):
        cfg = synth.GeneratorSettings(shape="box", scenarios=3, duration=1.2, rate=148.0,
                                      noise_mm=noise, noise_deg=0.5 * noise)
        out[noise] = synth.generate(root / f"n{noise}", cfg)
    return out


def test_quat_rate_is_the_rotation_over_the_span():
    axis = np.array([0.0, 0.6, 0.8])
    q0 = np.array([np.cos(0.2), *(np.sin(0.2) * np.array([1.0, 0, 0]))])
    turn = np.r_[np.cos(0.15), np.sin(0.15) * axis]  # 0.3 rad about axis, world frame
    w, v = turn[0], turn[1:]
    q1 = np.r_[w * q0[0] - v @ q0[1:], w * q0[1:] + q0[0] * v + np.cross(v, q0[1:])]
    assert np.allclose(quat_rate(q0, q1, 0.5), 0.3 / 0.5 * axis, atol=1e-12)
    assert np.allclose(quat_rate(q0, -q1, 0.5), 0.3 / 0.5 * axis, atol=1e-12)  # same rotation
    assert np.allclose(quat_rate(q0, q0, 0.5), 0.0)


def test_window_state_is_exact_in_free_flight_and_averages_the_noise():
    tt = np.arange(-3, 4) / 148.0
    p0, v0, g = np.array([[0.1, 0.2, 0.3]]), np.array([[1.0, -2.0, 3.0]]), np.array([0, 0, -9.81])
    pos = p0 + v0 * tt[:, None, None] + 0.5 * g * tt[:, None, None] ** 2
    w, q0 = np.array([3.0, -5.0, 7.0]), np.array([0.5, 0.5, 0.5, 0.5])
    quat = np.empty((tt.size, 1, 4))
    for k, t in enumerate(tt):
        quat[k, 0] = q0
        integrate_orientation(quat[k, 0], *w, t)
    a, b, c, d = window_state(tt, pos, quat)
    assert np.allclose(a, p0, atol=1e-14) and np.allclose(b, v0, atol=1e-12)
    assert np.allclose(c[0], q0, atol=1e-14) and np.allclose(d[0], w, atol=1e-12)
    # with noise: the window's estimate beats the single pose (1 mm, 0.5 deg)
    rng = np.random.default_rng(0)
    err_pos, err_one, err_q, err_q_one = [], [], [], []
    for _ in range(200):
        noisy = pos + rng.normal(scale=1e-3, size=pos.shape)
        nq = np.empty_like(quat)
        for k in range(tt.size):
            nq[k, 0] = quat[k, 0]
            integrate_orientation(nq[k, 0], *rng.normal(scale=np.radians(0.5), size=3), 1.0)
        a, _, c, _ = window_state(tt, noisy, nq)
        err_pos.append(np.linalg.norm(a - p0))
        err_one.append(np.linalg.norm(noisy[3] - p0))
        err_q.append(np.linalg.norm(quat_rate(q0, c[0], 1.0)))
        err_q_one.append(np.linalg.norm(quat_rate(q0, nq[3, 0], 1.0)))
    assert np.mean(err_pos) < 0.85 * np.mean(err_one)
    assert np.mean(err_q) < 0.6 * np.mean(err_q_one)


def test_generated_tosses_replay_at_the_truth_to_their_noise(tosses):
    ds = D.read(tosses[1.0])
    assert ds.meta["truth"] == synth.TRUTH_BOX
    prob = Problem.from_dataset(ds)
    assert prob.model.body_shape[0, 0] == 1 and prob.targets.states["quat"].shape[-1] == 4
    model = prob.model.with_params(prob.model.layout.vector(synth.TRUTH_BOX))
    res = E.simulate(model, prob.state, prob.targets.sample_times)
    rms = np.sqrt(np.mean((res.samp_pos - prob.targets.measured) ** 2))
    assert rms == pytest.approx(1e-3, rel=0.1)  # the data's own model: the noise alone
    # the orientations too: within a few times the noise
    q = prob.targets.states["quat"][:, 0]
    dots = np.abs(np.sum(q * res.samp_quat[:, 0], axis=1))
    assert np.degrees(2 * np.arccos(np.clip(dots, -1, 1))).mean() < 2.0


def test_segments_cut_the_tosses_and_start_from_the_measured_states(tosses):
    prob = Problem.from_dataset(tosses[0.0])
    seg = prob.segmented(0.1)
    rest = prob.rest_time()
    assert np.all((rest > 0.3) & (rest < 1.2))  # thrown, tumbled, stopped
    names = list(seg.model.names)
    assert names[0] == "toss0000#0" and seg.ids[1] == "toss0000#1"
    t0, t1 = seg.state.time, seg.model.scen_t_end
    assert seg.nscen >= 2 * prob.nscen  # tosses that fly again after a bounce
    for sid in prob.ids:
        mine = [k for k, n in enumerate(names) if n.startswith(sid + "#")]
        assert np.all(t0[mine[1:]] >= t1[mine[:-1]] - 1e-12)  # in order, no overlap
        assert np.all(t1[mine] - t0[mine] <= 0.3 + 1e-9)  # LONGEST lengths at most
        assert t0[mine[0]] == 0.0
        assert t1[mine[-1]] == pytest.approx(min(rest[prob.ids.index(sid)], t0[mine[-1]] + 0.3))
        assert np.all(np.diff(t0[mine]) >= 0.1 - 1e-9)
    # each segment's samples lie in (start, end]; its start is the measured state
    ptr = np.r_[0, np.cumsum([len(t) for t in prob.targets.sample_times])]
    truth = E.simulate(prob.model.with_params(prob.model.layout.vector(synth.TRUTH_BOX)),
                       prob.state, prob.targets.sample_times)
    for k in range(1, seg.nscen):
        ts = seg.targets.sample_times[k]
        if names[k].endswith("#0"):
            continue
        assert ts[0] > t0[k] and ts[-1] <= t1[k] + 1e-12
        s = prob.ids.index(names[k].split("#")[0])
        j = ptr[s] + int(np.argmin(np.abs(prob.targets.sample_times[s] - t0[k])))
        ext = prob.model.body_ext[s, 0]
        # a start in flight: every sample of its window clear of the table
        for r in range(j - SLOPE_HALF, j + SLOPE_HALF + 1):
            assert lowest(SHAPE_BOX, prob.targets.measured[r, 0],
                          prob.targets.states["quat"][r, 0], ext) >= FLIGHT_CLEARANCE
        assert np.allclose(seg.state.body_quat[k, 0], prob.targets.states["quat"][j, 0],
                           atol=1e-9)
        # noiseless data, a start in smooth motion: its velocity is the truth's
        # (to the half step by which the stepper's velocity leads: g h / 2)
        assert np.linalg.norm(seg.state.body_vel[k, 0] - truth.samp_vel[j, 0]) < 3e-3
    # at the truth, the segments replay the noiseless data closely
    th = seg.model.layout.vector(synth.TRUTH_BOX)
    assert seg.loss_only(th) < 1e-6


def test_state_nuisance_gradient_matches_differences_of_the_loss(tosses):
    prob = Problem.from_dataset(tosses[1.0]).subset([0])
    seg = prob.segmented(0.15, longest=0.15)
    lay = seg.model.layout
    th = lay.vector(synth.TRUTH_BOX)
    free = [lay.index("mu_k"), lay.index("e_bg")]
    nuis = seg.nuisance_start("state", th)
    assert nuis.shape == (seg.nscen, 6)
    assert list(seg.nuisance_columns("state")[1]) == ["vx", "vy", "vz", "wx", "wy", "wz"]
    ev = seg.evaluate(th, free, "state", nuis)
    assert np.all(ev.nondiff == 0)
    k = seg.nscen - 1  # a segment from a measured start (in flight), whose slide is smooth
    for c in range(6):
        h = 1e-6
        up, dn = nuis.copy(), nuis.copy()
        up[k, c] += h
        dn[k, c] -= h
        fd = (seg.loss_only(th, "state", up) - seg.loss_only(th, "state", dn)) / (2 * h)
        assert ev.loss.grad[k, 2 + c] == pytest.approx(fd, rel=1e-4, abs=1e-12)
    with pytest.raises(ValueError, match="nuisance 'state'.*time-stepper"):
        sliding = M.build([M.Scenario(radius=[0.03], mass=[0.2], pos=[(0, 0, 0.03)],
                                      vel=[(1, 0, 0)], t_end=1.0)])
        Problem(*sliding, prob.targets).nuisance_size("state")


def test_pose_nuisance_gradient_matches_differences_of_the_loss(tosses):
    """The whole start of a toss (velocity, spin, position, a turn of the
    orientation) as a nuisance: the loss's gradient along each of its twelve
    columns against central differences, over its flight (a smooth loss),
    with positions alone (exact tangents) and with orientations (whose loss
    has none: the values are differenced, not held)."""
    prob = Problem.from_dataset(tosses[1.0], {"trajectory": 1.0, "orientation": 1.0}).subset([0])
    short = prob.truncated(0.08)
    lay = short.model.layout
    th = lay.vector(synth.TRUTH_BOX)
    free = [lay.index("mu_k")]
    nuis = short.nuisance_start("pose", th)
    cols = list(short.nuisance_columns("pose")[1])
    assert cols == ["vx", "vy", "vz", "wx", "wy", "wz", "x", "y", "z", "rx", "ry", "rz"]
    assert np.array_equal(nuis[0, 6:9], prob.state.body_pos[0, 0]) and not nuis[0, 9:].any()
    for problem in (replace(short, weights={"trajectory": 1.0}), short):
        ev = problem.evaluate(th, free, "pose", nuis)
        assert np.all(ev.nondiff == 0)
        # (in flight the centre's path does not depend on the spin or the turn)
        turning = np.array([c[0] in "wr" for c in cols])
        held = F._nuisance_hold(ev, 1, 12)[0]
        assert np.array_equal(held, turning & (problem.weights["orientation"] == 0.0))
        for c in range(12):
            h = 1e-7
            up, dn = nuis.copy(), nuis.copy()
            up[0, c] += h
            dn[0, c] -= h
            fd = (problem.loss_only(th, "pose", up) - problem.loss_only(th, "pose", dn)) / (2 * h)
            assert ev.loss.grad[0, 1 + c] == pytest.approx(fd, rel=1e-4, abs=1e-10), cols[c]


def test_a_noisy_start_is_refined_by_the_pose_nuisance(tosses):
    """Noiseless tosses whose recorded start is off by 3 mm and 2 degrees
    (a real toss's first sample), over their flight and first touch: the
    ``pose`` nuisance, differenced under the orientation loss, finds the
    true start (the turn back, ``-r``) and the loss falls to rounding."""
    prob = Problem.from_dataset(tosses[0.0], {"trajectory": 1.0, "orientation": 1.0})
    true_state = prob.state.copy()
    st = prob.state.copy()
    turn = np.radians([2.0, -1.0, 1.0])
    st.body_pos[:, 0] += [0.003, -0.002, 0.001]
    st.body_quat[:, 0] = nuisance.turned(st.body_quat[:, 0], turn)
    off = replace(prob, state=st).truncated(0.09)
    th = off.model.layout.vector(synth.TRUTH_BOX)
    assert off.loss_only(th) > 1e-5
    r = F.fit(off, params0=synth.TRUTH_BOX, free=["mu_k"], nuisance="pose", max_iter=40)
    assert r.loss < 1e-14
    assert np.allclose(r.nuisance[:, 6:9], true_state.body_pos[:, 0], atol=1e-7)
    assert np.allclose(r.nuisance[:, 9:12], -turn, atol=1e-6)


def test_segments_of_boxes_need_orientations(tosses):
    prob = Problem.from_dataset(tosses[0.0])
    bare = replace(prob, targets=replace(prob.targets, states=None))
    with pytest.raises(ValueError, match="toss0000.*orientations"):
        bare.segmented(0.1)


def test_blown_up_tangents_are_marked_for_finite_differences(monkeypatch):
    model, state = M.build([cube((0, 0, 0.05), vel=(0.3, 0, 0), t_end=0.1, dt=2e-4)],
                           params={"mu_k": 0.3})
    dirs = E.Directions.build(params=[model.layout.index("mu_k")])
    assert E.simulate(model, state, None, directions=dirs).sens.nondiff[0] == 0
    monkeypatch.setattr(E, "TANGENT_BLOWUP", 1e-9)
    assert E.simulate(model, state, None, directions=dirs).sens.nondiff[0] & T.ND_STIFF


def test_secant_derivatives_are_central_differences_over_the_step(tosses):
    prob = Problem.from_dataset(tosses[1.0]).subset([0, 1])
    lay = prob.model.layout
    th = lay.vector({"mu_k": 0.24, "e_bg": 0.46})
    free = [lay.index("mu_k"), lay.index("e_bg")]
    ev = prob.evaluate(th, free, secant=0.01)
    exact = prob.evaluate(th, free)
    for c, q in enumerate(free):
        h = 0.01 * th[q]
        up, dn = th.copy(), th.copy()
        up[q] += h
        dn[q] -= h
        per = (prob.loss_only(up, per_scenario=True)
               - prob.loss_only(dn, per_scenario=True)) / (2 * h)
        assert ev.loss.grad[:, c] == pytest.approx(per, rel=1e-9, abs=1e-15)
    assert not np.allclose(ev.loss.grad[:, :2], exact.loss.grad[:, :2], rtol=1e-3)
    assert np.all(np.linalg.eigvalsh(ev.loss.gn.sum(0)[:2, :2]) > 0)


def test_secant_fit_recovers_box_coefficients_from_a_chaotic_start(tosses):
    # Noise-free tumbling tosses, the fit started 8 % off: the secant
    # continuation reaches the truth.
    prob = Problem.from_dataset(tosses[0.0])
    start = {"mu_s": 0.3, "mu_k": 0.23, "e_bg": 0.48}
    r = F.fit(prob, params0=start, free=["mu_k", "e_bg"], secant=(0.01, 0.003),
              step_sigma=0.0, max_iter=30)
    assert r.params["mu_k"] == pytest.approx(0.25, rel=5e-3)
    assert r.params["e_bg"] == pytest.approx(0.45, rel=5e-3)
    with pytest.raises(ValueError, match="secant.*decreasing"):
        F.fit(prob, free=["mu_k"], secant=(0.003, 0.01))


def test_orientation_loss_reads_turns_in_metres_and_is_differentiated(tosses):
    from simcore.identify import losses as L
    q0 = np.array([[[1.0, 0, 0, 0]]])
    q1 = np.array([[[np.cos(0.05), 0, np.sin(0.05), 0]]])  # 0.1 rad about y
    assert np.allclose(L.turn_residuals(q1, q0, np.array([[0.05]])), [[[0, 0.005, 0]]])
    assert np.isnan(L.turn_residuals(q1, np.full_like(q0, np.nan), np.array([[0.05]]))).all()
    prob = Problem.from_dataset(tosses[1.0], weights={"orientation": 1.0}).subset([0, 1])
    lay = prob.model.layout
    # at the truth: the orientation noise (0.5 degrees per axis) times the half width
    ev = prob.evaluate(lay.vector(synth.TRUTH_BOX), [lay.index("mu_k")])
    assert ev.loss.components["orientation"] == pytest.approx(
        3 * (synth.CUBE_HALF * np.radians(0.5)) ** 2, rel=0.2)
    # off it: every derivative by central differences (no exact tangents of turns)
    th = lay.vector({"mu_k": 0.24, "e_bg": 0.46})
    free = [lay.index("mu_k"), lay.index("e_bg")]
    ev = prob.evaluate(th, free)
    assert ev.loss.components["orientation"] > 0
    for c, q in enumerate(free):
        h = 1e-6 * th[q]
        up, dn = th.copy(), th.copy()
        up[q] += h
        dn[q] -= h
        fd = (prob.loss_only(up) - prob.loss_only(dn)) / (2 * h)
        assert ev.loss.grad[:, c].sum() == pytest.approx(fd, rel=1e-6)
    gn = prob.evaluate(th, free, secant=0.01).loss.gn.sum(0)[:2, :2]
    assert np.all(np.linalg.eigvalsh(gn) > 0)
    plain = Problem.from_dataset(tosses[1.0]).subset([0, 1]).evaluate(th, free, secant=0.01)
    assert np.all(np.diag(gn) > np.diag(plain.loss.gn.sum(0)[:2, :2]))  # turns add curvature


@pytest.fixture(scope="module")
def far_tosses(tmp_path_factory):
    """Twelve cube tosses with 1 mm noise whose truth (mu_k 0.15, e_bg 0.25)
    lies far from the defaults (0.2, 0.5)."""
    cfg = synth.GeneratorSettings(shape="box", scenarios=12, seed=11, duration=1.2, rate=148.0)
    truth = dict(synth.TRUTH_BOX, mu_k=0.15, e_bg=0.25)
    return Problem.from_dataset(synth.generate(tmp_path_factory.mktemp("far"), cfg, truth))


def test_tumbling_tosses_are_fitted_from_the_defaults_by_segments_first(far_tosses):
    """From the defaults (mu_k 0.2, e_bg 0.5), with nothing but the free
    names: the strategy ``chosen`` for tumbling bodies (segments from
    measured states first, then secant rollouts) lands within 2 % of the
    truth."""
    from flows import settings

    assert far_tosses.tumbling()
    cfg = settings.calibration(fit=["mu_k", "e_bg"]).chosen(far_tosses)
    assert cfg.strategy == "segments" and cfg.secant == list(F.SEGMENT_SECANT)
    assert cfg.step_sigma == F.SEGMENT_STEP_SIGMA
    r = F.fit(far_tosses, free=cfg.fit, **cfg.fit_options())
    assert r.params["mu_k"] == pytest.approx(0.15, rel=0.02), r.params
    assert r.params["e_bg"] == pytest.approx(0.25, rel=0.02), r.params
    assert f"segments of {F.SEGMENT_S:g} s" in r.strategy and r.strategy.startswith("a global phase")


def test_the_strategy_is_chosen_from_the_data_unless_the_config_says(far_tosses):
    from flows import settings

    spheres = Problem.from_dataset("datasets/synthetic-table")
    assert not spheres.tumbling()
    plain = settings.calibration().chosen(spheres)
    assert plain.strategy == "rollouts" and plain.fit_options()["segments"] == 0.0
    assert plain.secant == [] and plain.step_sigma == F.STEP_SIGMA
    own = settings.calibration(secant=[0.02], step_sigma=0.1, segment_s=0.2).chosen(far_tosses)
    assert own.secant == [0.02] and own.step_sigma == 0.1
    assert own.fit_options()["segments"] == 0.2
    # a config passed on (CLI -> flow) keeps telling a default from a choice
    again = settings.calibration(**settings.calibration(secant=[0.02]).as_dict())
    assert again.chosen(far_tosses).step_sigma == F.SEGMENT_STEP_SIGMA
    assert settings.calibration(strategy="rollouts").chosen(far_tosses).strategy == "rollouts"
    # data that declare a model error take the first secant step alone
    real = settings.calibration(gate_floor_m=0.025).chosen(far_tosses)
    assert real.secant == list(F.SEGMENT_SECANT[:1]) and real.strategy == "segments"
    # the body's or the recording's own coefficients free: searched rollouts
    # over their horizons (unless the config sets them), not segments; with a
    # declared model error, segments still
    body = settings.calibration(fit=["mu_k", "com_z@default"]).chosen(far_tosses)
    assert body.strategy == "search" and body.horizons == list(F.SEARCH_HORIZONS)
    assert body.fit_options()["search"] == F.SEARCH_EVALS and body.fit_options()["segments"] == 0
    assert body.secant == list(F.SEGMENT_SECANT) and body.step_sigma == F.SEGMENT_STEP_SIGMA
    mine = settings.calibration(fit=["gravity"], horizons=[0.5, 1.0]).chosen(far_tosses)
    assert mine.strategy == "search" and mine.horizons == [0.5, 1.0]
    assert settings.calibration(fit=["gravity"], gate_floor_m=0.025).chosen(
        far_tosses).strategy == "segments"
    assert settings.calibration(fit=["mu_k", "e_bg"]).fit_options()["search"] == 0
    with pytest.raises(ValueError, match="strategy.*one of"):
        settings.calibration(strategy="shooting")
    with pytest.raises(ValueError, match="strategy segments: the data hold no tumbling"):
        settings.calibration(strategy="segments").chosen(spheres)


def test_generated_boxes_take_their_size_height_and_spin(tmp_path):
    """A flat box's tosses: its extents, an inertia scaled as a uniform box's
    from the cube's (a cube keeps CUBE_INERTIA), released at the height over
    its bounding radius, spinning as asked."""
    half = [0.075, 0.05, 0.02]
    cfg = synth.GeneratorSettings(shape="box", scenarios=3, seed=1, duration=0.3, rate=148.0,
                                  half=half, height=[0.3, 0.3], speed=[0.5, 0.5], spin=0.0)
    prob = Problem.from_dataset(synth.generate(tmp_path / "flat", cfg))
    h = np.array(half)
    uniform = (np.sum(h ** 2) - h ** 2) / 3  # I / m of a uniform box
    cube = 2 * synth.CUBE_HALF ** 2 / 3
    assert np.allclose(prob.model.body_ext[:, 0], h)
    assert np.allclose(prob.model.body_inertia[:, 0], synth.CUBE_INERTIA * uniform / cube)
    assert np.allclose(synth.box_of(synth.GeneratorSettings())[1], synth.CUBE_INERTIA)
    assert np.allclose(prob.state.body_pos[:, 0, 2], 0.3 + np.linalg.norm(h))
    assert np.allclose(np.linalg.norm(prob.state.body_vel[:, 0, :2], axis=1), 0.5)
    assert np.all(prob.state.body_omega == 0.0)


def test_the_global_phase_does_not_depend_on_the_scenarios_order(tosses, monkeypatch):
    """The segments it scores (here 5 of them, as if the data held more than
    ``GLOBAL_SEGMENTS``) are chosen by their names: the tosses in another
    order give the same start; another seed draws other points."""
    monkeypatch.setattr(F, "GLOBAL_SEGMENTS", 5)
    ds = D.read(tosses[1.0])
    ids = sorted(D.split(ds))
    lay = Problem.from_dataset(ds).model.layout
    free = F._free_indices(["mu_k", "e_bg"], lay)
    starts = []
    for order in (ids, ids[::-1]):
        seg = Problem.from_dataset(ds, order=order).segmented(F.SEGMENT_S)
        assert seg.nscen > 5
        starts.append(F._global_phase(seg, lay.vector(), free, 0))
    assert np.array_equal(starts[0][0], starts[1][0]) and starts[0][1] == starts[1][1]
    assert "on 5 segments" in starts[0][1]
    other = F._global_phase(seg, lay.vector(), free, 1)[0]
    assert not np.array_equal(other, starts[0][0]) or "kept the start" in starts[0][1]


@pytest.mark.parametrize("far_first", [False, True])
def test_a_segmented_fit_runs_the_rollouts_from_both_starts_it_is_given(tosses, monkeypatch,
                                                                        far_first):
    """When the rollouts' check gives two starts (its finalists' best and its
    screen's, :func:`_rollout_phase`), the rollouts' stage runs from each and
    the fit keeps the one of lower loss, saying so, whichever comes first;
    every iteration (the segments', then both rollouts') reaches the
    callback numbered on from the last and naming its part, so that a chart
    by step shows each once."""
    prob = Problem.from_dataset(tosses[1.0])
    lay = prob.model.layout
    phase, continued = F._rollout_phase, F._fit_continued
    other = lay.vector({"mu_s": 0.45, "mu_k": 0.45, "e_bg": 0.6})

    def two(problem, start, points, local=(), answer="", scanned=0):
        starts, said = phase(problem, start, points, local, answer, scanned)
        return ([other, starts[0]] if far_first else [starts[0], other]), said

    ends = []

    def spy(problem, theta0, *a, **k):
        r = continued(problem, theta0, *a, **k)
        ends.append(r.loss)
        return r

    monkeypatch.setattr(F, "_rollout_phase", two)
    monkeypatch.setattr(F, "_fit_continued", spy)
    recs = []
    r = F.fit(prob, free=["mu_k", "e_bg"], segments=F.SEGMENT_S, secant=[0.01],
              step_sigma=0.0, max_iter=2, callback=recs.append)
    steps = [rec["iter"] for rec in recs]
    assert steps == list(range(1, len(recs) + 1)) and r.nit == len(recs)
    parts = [rec["part"] for rec in recs]
    first_rollout = parts.index("rollouts")
    assert first_rollout > 0 and set(parts[:first_rollout]) == {"segments"}
    assert set(parts[first_rollout:]) == {"rollouts"}
    assert [rec["part"] for rec in r.history] == [p for p in parts if p == "segments"] + [
        "rollouts"] * (len(r.history) - parts.count("segments"))
    first, second = ends[-2:]  # after the segments' stages, the rollouts from each start
    assert r.loss == min(first, second) and first != second
    assert "the rollouts from both ended at losses" in r.strategy
    assert ("the first kept" if first <= second else "the second kept") in r.strategy


def test_a_segmented_fit_checks_its_scan_at_the_rollouts_answer(tosses, monkeypatch):
    """The scan's grid is the rollouts' answer with every combination of
    the scan's values (the rest of the answer kept), checked after the
    segments' and rollouts' stages; from a point of lower loss the rollouts
    run again and the lower loss is kept; the strategy line says so."""
    prob = Problem.from_dataset(tosses[1.0])
    lay = prob.with_coefficients(["mu_k", "e_bg"]).model.layout
    phase, continued, seen, begun = F._rollout_phase, F._fit_continued, [], []

    def spy(problem, start, points, local=(), answer="", scanned=0):
        seen.append(dict(start=start.copy(), points=[p.copy() for p in points],
                         scanned=scanned, answer=answer, runs_before=len(begun)))
        return phase(problem, start, points, local, answer, scanned)

    def runs(problem, theta0, *a, **k):
        r = continued(problem, theta0, *a, **k)
        begun.append((theta0.copy(), r.loss))
        return r

    monkeypatch.setattr(F, "_rollout_phase", spy)
    monkeypatch.setattr(F, "_fit_continued", runs)
    r = F.fit(prob, free=["mu_k", "e_bg"], segments=F.SEGMENT_S, secant=[0.01],
              step_sigma=0.0, max_iter=2, scan={"e_bg": [0.1, 0.9], "mu_k": [0.25]})
    assert [x["scanned"] for x in seen] == [0, 2]  # the segments' check, then the scan
    last = seen[-1]
    assert last["answer"] == "the rollouts' answer" and len(last["points"]) == 2
    mu_k, e_bg = lay.index("mu_k"), lay.index("e_bg")
    assert [(g[mu_k], g[e_bg]) for g in last["points"]] == [(0.25, 0.1), (0.25, 0.9)]
    for g in last["points"]:
        rest = np.ones(len(g), bool)
        rest[[mu_k, e_bg]] = False
        assert np.array_equal(g[rest], last["start"][rest])
    assert "then a scan: the rollouts' start checked against those points, 2 scanned" \
        in r.strategy
    # both grid points are far from the truth's e_bg (0.45): the answer is kept
    # and the rollouts are not run again
    assert "kept the rollouts' answer" in r.strategy
    assert len(begun) == last["runs_before"]


def _yardstick(ratios):
    """An ``enough`` whose i-th distinct result's residual over the limit is
    ``ratios[i]`` (the last repeated), and the results it has seen."""
    given = {}

    def enough(r):
        given.setdefault(id(r), ratios[min(len(given), len(ratios) - 1)])
        return given[id(r)]
    return enough, given


def test_a_segmented_fit_short_of_the_noise_tries_more_starts(tosses):
    """``enough``: a segmented fit whose first start falls short of the
    caller's yardstick, far from it, tries ``SEGMENT_STARTS`` starts and
    keeps the best; one whose first start meets it is the plain fit, bit
    for bit."""
    prob = Problem.from_dataset(tosses[1.0])
    kw = dict(free=["mu_k", "e_bg"], segments=F.SEGMENT_S, secant=[0.01], step_sigma=0.0,
              max_iter=2)
    far, seen = _yardstick([3.0])
    r = F.fit(prob, enough=far, **kw)
    assert len(r.starts) == F.SEGMENT_STARTS and len(seen) == F.SEGMENT_STARTS
    assert r.loss == min(s.loss for s in r.starts)
    assert f"{F.SEGMENT_STARTS} starts" in r.strategy and "none reached it" in r.strategy
    # each start drew its own global phase
    assert len({tuple(s.params[n] for n in ("mu_k", "e_bg")) for s in r.starts}) > 1
    once = F.fit(prob, enough=lambda r: 1.0, **kw)
    plain = F.fit(prob, **kw)
    assert once.starts == [] and once.loss == plain.loss and once.params == plain.params


@pytest.mark.parametrize("ratios, count, reached", [
    ([1.1] * 4 + [0.9], 5, True),  # near the limit: past SEGMENT_STARTS, to the one that meets it
    ([1.1], 8, False),  # near throughout: SEGMENT_STARTS_NEAR
    ([3.0, 3.0, 1.2, 3.0, 3.0], 8, False),  # one came near: on from there
    ([3.0, 0.8], 2, True),  # met at the second
])
def test_starts_go_on_past_the_first_four_while_the_best_is_near_the_limit(
        tosses, monkeypatch, ratios, count, reached):
    """The starts' budget (``_until_enough``, each start's fit stubbed): up to
    ``SEGMENT_STARTS_NEAR`` while the best start is within ``NEAR`` times
    the limit, ``SEGMENT_STARTS`` otherwise, stopping at the first that
    meets it; the strategy says which."""
    from types import SimpleNamespace

    assert (F.SEGMENT_STARTS, F.SEGMENT_STARTS_NEAR) == (4, 8) and 1.2 < F.NEAR
    prob = Problem.from_dataset(tosses[1.0])
    lay = prob.model.layout
    free_idx = [lay.index("mu_k"), lay.index("e_bg")]
    runs = []

    def one(problem, theta, free_idx, **kw):  # a start's loss: its residual over the limit
        runs.append(theta.copy())
        return SimpleNamespace(loss=ratios[min(len(runs), len(ratios)) - 1],
                               params=lay.as_dict(theta), strategy="", nit=1)

    enough, _ = _yardstick(ratios)
    r = F._until_enough(one, prob, lay.vector(), free_idx, 0, {}, enough)
    assert len(runs) == count and len(r.starts) == (count if count > 1 else 0)
    assert r.loss == min(ratios[:count])  # the best start
    if count > 1:
        assert ("the last reached it" in r.strategy) == reached


def test_intervals_of_tumbling_tosses_cover_the_truth_over_replicates(tmp_path):
    """The smaller check of ``python -m benchmarks.identification``: four
    replicate datasets of eight high cube tosses (truth mu_k 0.15, e_bg
    0.25), each fitted from the defaults as the CLI fits them (the strategy
    chosen from the data, the gate's yardstick): the intervals are the
    explored ones, and each coefficient's holds the truth in at least three
    of the four."""
    from benchmarks.identification import FAMILIES
    from flows import report, settings

    extra, truth = FAMILIES["cube-high-little-spin"]
    held = []
    for seed in range(4):
        cfg = synth.GeneratorSettings(shape="box", scenarios=8, seed=seed, duration=1.2,
                                      rate=148.0, **extra)
        ds = D.read(synth.generate(tmp_path / str(seed), cfg, dict(synth.TRUTH_BOX, **truth)))
        prob = Problem.from_dataset(ds)
        c = settings.calibration(fit=["mu_k", "e_bg"]).chosen(prob)
        limit = report.rms_limit(D.position_noise(ds), c.gate_k, c.gate_floor_m)
        r = F.fit(prob, free=c.fit, enough=report.at_noise(limit, prob.weights),
                  **c.fit_options())
        assert r.interval.startswith("explored"), r.interval
        held.append([r.ci95[n][0] <= truth[n] <= r.ci95[n][1] for n in c.fit])
        # and say something: no interval wider than 10 % of the truth either way
        assert all(r.ci95[n][1] - r.ci95[n][0] < 0.2 * truth[n] for n in c.fit), r.ci95
    assert np.sum(held, axis=0).min() >= 3, held


@pytest.mark.parametrize("free, kind", [(["mu_k", "e_bg"], "state"),
                                        (["mu_k", "com_z"], "pose")])
def test_segments_refine_their_starts_when_the_body_is_fitted(tosses, monkeypatch, free, kind):
    """A segmented fit of contact coefficients holds the segments' starts at
    their measured states; one that frees a coefficient of the body (or of
    the recording) refines every start whole with them (``pose``), and its
    strategy says which."""
    prob = Problem.from_dataset(tosses[1.0]).with_coefficients(free)
    continued, kinds = F._fit_continued, []

    def spy(problem, theta0, *a, **k):
        if k.get("part") == "segments":
            kinds.append(k["nuisance"])
        return continued(problem, theta0, *a, **k)

    monkeypatch.setattr(F, "_fit_continued", spy)
    r = F.fit(prob, free=free, segments=F.SEGMENT_S, secant=[0.01], step_sigma=0.0, max_iter=1)
    assert kinds == [kind]
    assert f"from measured states, {'refined' if kind == 'pose' else 'held'}" in r.strategy
    assert np.isfinite(r.loss)
