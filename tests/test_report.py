"""The registration gate (``flows.report.gate``) on each of its tests."""

from types import SimpleNamespace

import numpy as np
import pytest

from flows import report
from simcore.identify import fit as F


def _result(status=F.STATUS_FTOL, params=None, ci95=None, held=(), losses=(), agree=None):
    """A fit result; ``losses``: those of a multi-start's starts, ``agree`` of
    them at the best."""
    params = params or {"mu_k": 0.19, "e_bb": 0.92}
    ci95 = ci95 or {"mu_k": (0.18, 0.20), "e_bb": (0.91, 0.93)}
    return SimpleNamespace(status=status, message=F.STATUS_MESSAGES[status], params=params,
                           free=tuple(params), ci95=ci95, held=held,
                           starts=[SimpleNamespace(loss=v) for v in losses],
                           spread={} if agree is None else {"agree": agree})


def test_a_converged_fit_within_the_gate_registers():
    ok, reason, limit = report.gate(_result(), 1.7e-3, 1e-3, 10.0, 0.05)
    assert ok and reason == "" and limit == 0.05
    # Noiseless data: the floor lets a tiny residual through.
    assert report.gate(_result(), 1e-9, 1e-12, 10.0, 1e-6)[0]
    # Above the floor, the noise scale sets the limit.
    assert report.gate(_result(), 0.09, 0.01, 10.0, 0.05) == (True, "", pytest.approx(0.1))


def test_a_fit_that_did_not_converge_is_refused():
    ok, reason, _ = report.gate(_result(status=F.STATUS_MAXITER), 1e-3, 1e-3, 10.0, 0.05)
    assert not ok and reason == "the fit did not converge: not converged: max_iter reached"


@pytest.mark.parametrize("rms", [427.0, np.nan, None])
def test_a_residual_the_model_does_not_explain_is_refused(rms):
    ok, reason, limit = report.gate(_result(), rms, 1.0, 10.0, 0.05)
    assert not ok and limit == 10.0
    assert "residual rms" in reason and "gate_k 10 x noise, gate_floor_m 0.05 m" in reason
    assert "units" in reason and "local minimum" in reason and "starts" in reason
    assert report.above(rms, limit)


def test_a_converged_fit_far_above_the_noise_says_how_far():
    """29 mm of residual against 1 mm of noise passes no default gate: the
    reason says 29 times the noise and what to try."""
    ok, reason, limit = report.gate(_result(), 0.029, 1e-3, 5.0, 1e-6)
    assert not ok and limit == pytest.approx(5e-3)
    assert reason.startswith("not at the noise") and "29 times the positions' noise" in reason
    assert "gate_floor_m" in reason  # how to declare a known model error


def test_a_multi_start_says_which_cause_is_likelier():
    """Starts that end apart point at a local minimum; starts that all reach
    the same minimum above the noise point at the model."""
    _, apart, _ = report.gate(_result(losses=(1.0, 2.0, np.nan, 3.0), agree=1), 0.029, 1e-3,
                              10.0, 1e-6)
    assert "Only 1 of 3 starts reached this loss" in apart and "local minimum" in apart
    _, same, _ = report.gate(_result(losses=(1.0, 1.0), agree=2), 0.029, 1e-3, 10.0, 1e-6)
    assert "All 2 starts reached this minimum" in same and "does not explain" in same
    assert "gate_floor_m" in apart and "gate_floor_m" in same


def test_the_fit_is_at_the_noise_when_its_trajectory_residual_is_within_the_limit():
    """``at_noise``: the weighted trajectory component is the mean over
    scenarios of each one's mean squared distance, so its root, unweighted,
    is the gate's rms; the yardstick is that over the limit (at most 1: at
    the noise), infinite without a trajectory residual."""
    enough = report.at_noise(2e-3, {"trajectory": 4.0, "orientation": 1.0})
    assert enough(SimpleNamespace(components={"trajectory": 4.0 * 1.9e-3 ** 2})) == \
        pytest.approx(0.95)
    assert enough(SimpleNamespace(components={"trajectory": 4.0 * 2.1e-3 ** 2})) == \
        pytest.approx(1.05)
    assert enough(SimpleNamespace(components={})) == np.inf
    assert report.at_noise(1.0, {"orientation": 1.0})(
        SimpleNamespace(components={"trajectory": 0.0})) == np.inf


def test_a_residual_with_an_unknown_noise_scale_meets_the_floor():
    ok, reason, limit = report.gate(_result(), 0.06, None, 10.0, 0.05)
    assert not ok and limit == 0.05 and "noise: unknown" in reason


@pytest.mark.parametrize("ci", [(np.nan, np.nan), (-np.inf, 0.3), (0.2, 0.3)])
def test_an_interval_that_is_not_finite_or_misses_its_estimate_is_refused(ci):
    res = _result(ci95={"mu_k": ci, "e_bb": (0.91, 0.93)})
    ok, reason, _ = report.gate(res, 1e-3, 1e-3, 10.0, 0.05)
    assert not ok and reason.startswith("the 95 % interval of mu_k")


def test_a_held_coefficient_has_no_interval_to_check():
    res = _result(ci95={"mu_k": (np.nan, np.nan), "e_bb": (0.91, 0.93)}, held=("mu_k",))
    assert report.gate(res, 1e-3, 1e-3, 10.0, 0.05)[0]


def test_correlations_above_the_threshold_strongest_first_without_held():
    res = _result(params={"mu_s": 0.3, "v_th": 0.04, "e_bb": 0.9, "e_bg": 0.5},
                  ci95={n: (0, 1) for n in ("mu_s", "v_th", "e_bb", "e_bg")}, held=("e_bg",))
    res.corr = np.array([[1.0, -0.93, 0.2, 0.99],
                         [-0.93, 1.0, 0.55, 0.99],
                         [0.2, 0.55, 1.0, 0.99],
                         [0.99, 0.99, 0.99, 1.0]])
    assert report.correlations(res) == [{"a": "mu_s", "b": "v_th", "r": -0.93},
                                        {"a": "v_th", "b": "e_bb", "r": 0.55}]
    # the whole matrix for fit.json: informed coefficients only
    table = report.correlation_table(res, res.corr)
    assert list(table) == ["mu_s", "v_th", "e_bb"] and table["v_th"] == {
        "mu_s": -0.93, "v_th": 1.0, "e_bb": 0.55}
    res.corr[0, 2] = np.nan
    assert report.correlation_table(res, res.corr)["mu_s"]["e_bb"] is None
    assert report.correlation_table(res, None) is None


def test_the_residual_is_read_against_the_noise_of_a_3d_distance():
    """At the noise, the rms of a 3-d distance is sqrt(3) times the per-axis
    noise: 1.73 mm against 1 mm is once the noise, not 1.7 times."""
    words = report.against_noise(np.sqrt(3.0) * 1e-3, 1e-3)
    assert "1.73 mm" in words and "1 mm per axis" in words and "is 1 times that" in words
    assert "is 10 times that" in report.against_noise(np.sqrt(3.0) * 1e-2, 1e-3)
    assert report.against_noise(1e-3, None) == "the positions' noise is unknown"


def test_the_convergence_plot_marks_each_stage_of_the_fit():
    """A segmented fit's history (segments at two secant steps, then robust
    rollouts on a quarter of the span, then the whole span): four stages,
    named, in order; the plot draws them (and twelve coefficients, past the
    ten colours, by marker too)."""
    def rec(it, part, horizon, robust, secant):
        return {"iter": it, "part": part, "horizon": horizon, "robust": robust,
                "secant": secant, "loss": 1e-3 / (it + 1),
                "theta": {f"c{k}": 1.0 + 0.01 * it for k in range(12)}}

    plan = [("segments", 1.0, False, 0.05)] * 3 + [("segments", 1.0, False, 0.02)] * 2 \
        + [("rollouts", 0.25, True, 0.01)] * 2 + [("rollouts", 1.0, False, 0.01)] * 2
    history = [rec(it, *key) for it, key in enumerate(plan)]
    got = report.stages(history)
    assert [(a, b) for a, b, _ in got] == [(0, 2), (3, 4), (5, 6), (7, 8)]
    assert [label for *_, label in got] == [
        "segments, secant 0.05", "segments, secant 0.02",
        "rollouts, 0.25 of the span, robust, secant 0.01", "rollouts, secant 0.01"]
    result = SimpleNamespace(history=history, free=tuple(f"c{k}" for k in range(12)),
                             params={f"c{k}": 1.08 for k in range(12)})
    assert report.convergence_png(result)[:4] == b"\x89PNG"


def test_the_overlays_name_their_panels_and_bodies(monkeypatch):
    """Spheres: the lower panels are x-y residuals, said in the title, and a
    scene's bodies are told apart in the legend."""
    monkeypatch.setattr(report, "_png", lambda fig: fig)
    t = np.linspace(0.0, 1.0, 5)
    cols = {"scenario_id": np.array(["s0"] * 10, dtype=object), "body_id": np.repeat([0, 1], 5),
            "t": np.r_[t, t], "x": np.r_[t, -t], "y": np.r_[t, t]}
    fig = report.overlays_png(cols, {**cols, "x": cols["x"] + 0.001}, ["s0"])
    assert fig._suptitle.get_text() == ("measured and simulated paths, and the x-y residual "
                                        "over time")
    labels = [x.get_text() for x in fig.legends[0].get_texts()]
    assert labels == ["measured", "simulated", "body 1 of a scene", "body 2 of a scene"]


def test_a_residual_twice_the_truths_is_beyond_the_noise_below_the_gate():
    """At the truth the rms of a 3-d distance is about sqrt(3) times the
    per-axis noise: that is not beyond it, nor 1.5 times it; four times the
    noise (2.3 times the truth's, under the default gate of five) is, so a
    registered fit there takes the clustered intervals; an unknown rms is."""
    noise = 1e-3
    assert not report.beyond_noise(np.sqrt(3.0) * noise, noise)
    assert not report.beyond_noise(1.5 * np.sqrt(3.0) * noise * 0.999, noise)
    assert report.beyond_noise(4.0 * noise, noise) and not report.above(4.0 * noise, 5 * noise)
    assert report.beyond_noise(None, noise) and report.beyond_noise(np.nan, noise)
    # a gate tighter than that: a fit it refuses is beyond the noise too
    assert report.beyond_noise(2.2 * noise, noise, gate_k=2.0)
    assert not report.beyond_noise(2.2 * noise, noise)
