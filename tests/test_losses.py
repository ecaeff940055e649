"""The patent's losses (output, velocity, Δv, input) against closed forms and
central differences, each through the public ``Problem`` / ``fit`` path.

The scenes are chosen so every quantity has a closed form: a ball sliding on
the ground (stop distance, speed at a fixed time), a head-on impact of two
equal balls (velocity jumps), a push (control effort).  With ``S``
scenarios and ``n_s`` residual terms each, a component is
``w (1/S) sum_s SSE_s / n_s`` (``simcore.identify.losses``).
"""

import numpy as np
import pytest

import simcore
from simcore import params as P
from simcore.identify import fit as F
from simcore.identify import losses as L
from simcore.identify.problem import Problem

G = 9.81
R = 0.03
M = 0.17
NONE = {"trajectory": 0.0, "output": 0.0, "velocity": 0.0, "dv": 0.0, "input": 0.0}


def _problem(scenes, params, weights, final_pos=None, final_vel=None, events=None):
    """A problem with only the given targets (one NaN trajectory sample each)."""
    model, state = simcore.build(scenes, params=params)
    nscen, nbmax = model.nscen, model.body_radius.shape[1]
    nan = np.full((nscen, nbmax, 3), np.nan)
    tg = L.Targets([np.array([sc.t_end]) for sc in scenes], nan.copy(),
                   nan.copy() if final_pos is None else final_pos,
                   nan.copy() if final_vel is None else final_vel, events or {})
    return Problem(model, state, tg, dict(NONE, **weights))


def _slide(v0=1.2, t_end=1.0, push=None):
    ctrl = np.zeros((0, 6)) if push is None else np.array([push], float)
    return simcore.Scenario(radius=[R], mass=[M], pos=[[0.0, 0.0, R]], vel=[[v0, 0.0, 0.0]],
                            t_end=t_end, controls=ctrl, name="slide")


def _evaluate(problem, names, theta, kind="none", nuis=None):
    """The total loss and its gradient along the named coefficients (and the nuisance)."""
    free = [P.NAMES.index(n) for n in names]
    ev = problem.evaluate(theta, free, kind=kind, nuis=nuis)
    return ev.loss.total, ev.loss.grad.sum(axis=0)


def _central(problem, theta, name, h=1e-6):
    i = P.NAMES.index(name)
    up, dn = theta.copy(), theta.copy()
    up[i] += h
    dn[i] -= h
    return (problem.loss_only(up) - problem.loss_only(dn)) / (2 * h)


PRM = {"mu_s": 0.3, "mu_k": 0.2, "v_th": 0.05}


def _stop_distance(v0, mu_k, mu_s, v_th):
    """Decelerating at mu_k g down to v_th, then at mu_s g to rest."""
    return (v0 ** 2 - v_th ** 2) / (2 * mu_k * G) + v_th ** 2 / (2 * mu_s * G)


def test_output_loss_is_the_squared_rest_position_error():
    """L_out = |p(T) - p*|^2 for one ball; its gradient along mu_k, mu_s and
    v_th is the closed form's and the central differences'."""
    v0, target = 1.2, np.array([0.30, 0.01, R])
    pb = _problem([_slide(v0)], PRM, {"output": 1.0}, final_pos=target[None, None, :])
    theta = P.vector(PRM)
    d = _stop_distance(v0, 0.2, 0.3, 0.05)
    loss, grad = _evaluate(pb, ["mu_k", "mu_s", "v_th"], theta)
    assert loss == pytest.approx((d - 0.30) ** 2 + 0.01 ** 2, rel=1e-12)
    dd = np.array([-(v0 ** 2 - 0.05 ** 2) / (2 * 0.2 ** 2 * G),
                   -(0.05 ** 2) / (2 * 0.3 ** 2 * G),
                   -0.05 / (0.2 * G) + 0.05 / (0.3 * G)])
    assert grad == pytest.approx(2 * (d - 0.30) * dd, rel=1e-9)
    for k, name in enumerate(["mu_k", "mu_s", "v_th"]):
        assert grad[k] == pytest.approx(_central(pb, theta, name), rel=1e-6)


def test_velocity_loss_is_the_squared_final_velocity_error():
    """A ball still sliding at T: v(T) = v0 - mu_k g T, L_v = |v(T) - v*|^2."""
    v0, t_end, target = 2.0, 0.5, np.array([0.9, 0.05, 0.0])
    pb = _problem([_slide(v0, t_end)], PRM, {"velocity": 1.0}, final_vel=target[None, None, :])
    theta = P.vector(PRM)
    vt = v0 - 0.2 * G * t_end
    loss, grad = _evaluate(pb, ["mu_k", "mu_s"], theta)
    assert loss == pytest.approx((vt - 0.9) ** 2 + 0.05 ** 2, rel=1e-12)
    assert grad[0] == pytest.approx(2 * (vt - 0.9) * (-G * t_end), rel=1e-10)
    assert grad[1] == 0.0  # mu_s never acts above v_th
    assert grad[0] == pytest.approx(_central(pb, theta, "mu_k"), rel=1e-6)


def _head_on(v0=1.5, gap=0.24):
    """Ball 0 slides into ball 1 (at rest, same mass) ``gap`` away."""
    return simcore.Scenario(radius=[R, R], mass=[M, M], pos=[[0.0, 0.0, R], [gap + 2 * R, 0.0, R]],
                            vel=[[v0, 0.0, 0.0], [0.0, 0.0, 0.0]], t_end=0.6, name="head-on")


def test_dv_loss_matches_both_velocity_jumps_of_an_impact():
    """Equal masses, head on: dv_1 = -dv_0 = (1 + e)/2 v_imp x with
    v_imp = sqrt(v0^2 - 2 mu_k g gap); both measured jumps are matched, so
    L_dv = (|dv_0 - dv_0*|^2 + |dv_1 - dv_1*|^2) / 2."""
    v0, gap, e = 1.5, 0.24, 0.9
    prm = dict(PRM, e_bb=e)
    v_imp = np.sqrt(v0 ** 2 - 2 * 0.2 * G * gap)
    t_imp = (v0 - v_imp) / (0.2 * G)
    meas = {"scen": np.array([0, 0]), "body": np.array([0, 1]), "other": np.array([1, 0]),
            "t": np.array([t_imp + 0.005, t_imp - 0.004]),
            "dv": np.array([[-0.8, 0.02, 0.0], [0.85, 0.0, 0.0]])}
    pb = _problem([_head_on(v0, gap)], prm, {"dv": 1.0}, events=meas)
    theta = P.vector(prm)
    loss, grad = _evaluate(pb, ["e_bb", "mu_k"], theta)
    jump = (1 + e) / 2 * v_imp
    r0, r1 = -jump + 0.8, jump - 0.85
    assert loss == pytest.approx((r0 ** 2 + 0.02 ** 2 + r1 ** 2) / 2, rel=1e-10)
    djump_de = v_imp / 2
    djump_dmu = (1 + e) / 2 * (-G * gap / v_imp)
    assert grad[0] == pytest.approx(r0 * -djump_de + r1 * djump_de, rel=1e-9)
    assert grad[1] == pytest.approx(r0 * -djump_dmu + r1 * djump_dmu, rel=1e-9)
    for k, name in enumerate(["e_bb", "mu_k"]):
        assert grad[k] == pytest.approx(_central(pb, theta, name), rel=1e-6)
    # A measured impact of a body with no simulated impact is counted, not dropped.
    meas2 = {k: np.r_[v, v[:1]] for k, v in meas.items()}
    meas2["t"][-1] = 0.55
    pb2 = _problem([_head_on(v0, gap)], prm, {"dv": 1.0}, events=meas2)
    assert pb2.evaluate(theta, [P.NAMES.index("e_bb")]).loss.unmatched == 1


def test_dv_loss_matches_a_ground_impact():
    """A ball dropped from height h hits the ground at v = sqrt(2 g h) and
    bounces: dv = (1 + e_bg) v z.  A ground impact is an impact too."""
    h, e = 0.2, 0.5
    drop = simcore.Scenario(radius=[R], mass=[M], pos=[[0.0, 0.0, R + h]], vel=[[0.0, 0.0, 0.0]],
                            t_end=0.3, name="drop")
    v = np.sqrt(2 * G * h)
    meas = {"scen": np.array([0]), "body": np.array([0]), "other": np.array([-1]),
            "t": np.array([np.sqrt(2 * h / G)]), "dv": np.array([[0.01, 0.0, 1.4]])}
    prm = dict(PRM, e_bg=e)
    pb = _problem([drop], prm, {"dv": 1.0}, events=meas)
    theta = P.vector(prm)
    loss, grad = _evaluate(pb, ["e_bg"], theta)
    r = (1 + e) * v - 1.4
    assert loss == pytest.approx(r ** 2 + 0.01 ** 2, rel=1e-10)
    assert grad[0] == pytest.approx(2 * r * v, rel=1e-9)
    assert grad[0] == pytest.approx(_central(pb, theta, "e_bg"), rel=1e-6)


def test_input_loss_is_the_control_effort_and_its_gradient_along_the_pushes():
    """lambda_u sum_q |f_q|^2 (t1 - t0): value and gradient along the pushes
    (nuisance 'push') against the closed form and central differences."""
    lam, f, t0, t1 = 0.7, np.array([0.5, 0.2]), 0.1, 0.3
    pb = _problem([_slide(0.0, 0.5, push=[0, t0, t1, f[0], f[1], 0.0])], PRM, {"input": lam})
    theta = P.vector(PRM)
    nuis = pb.nuisance_start("push")
    loss, grad = _evaluate(pb, [], theta, kind="push", nuis=nuis)
    assert loss == pytest.approx(lam * (t1 - t0) * f @ f, rel=1e-12)
    assert grad == pytest.approx(2 * lam * (t1 - t0) * f, rel=1e-12)
    for d in range(2):
        up, dn = nuis.copy(), nuis.copy()
        up[0, d] += 1e-6
        dn[0, d] -= 1e-6
        fd = (pb.loss_only(theta, "push", up) - pb.loss_only(theta, "push", dn)) / 2e-6
        assert grad[d] == pytest.approx(fd, rel=1e-6)


def test_weights_scale_components_and_scenarios_are_averaged():
    """Two scenarios, output and velocity weighted: the total is the weighted
    mean over scenarios of each component per residual term."""
    v0s, t_end = (1.2, 2.0), 0.5
    scenes = [_slide(v, t_end) for v in v0s]
    fp = np.array([[[0.2, 0.0, R]], [[0.7, 0.0, R]]])
    fv = np.zeros((2, 1, 3))
    pb = _problem(scenes, PRM, {"output": 2.0, "velocity": 0.5}, final_pos=fp, final_vel=fv)
    lv = pb.evaluate(P.vector(PRM), [P.NAMES.index("mu_k")]).loss
    out = vel = 0.0
    for s, v0 in enumerate(v0s):
        v = v0 - 0.2 * G * t_end
        assert v > 0.05  # still sliding at mu_k at T
        x = v0 * t_end - 0.5 * 0.2 * G * t_end ** 2
        out += (x - fp[s, 0, 0]) ** 2
        vel += v ** 2
    assert lv.components["output"] == pytest.approx(2.0 * out / 2, rel=1e-10)
    assert lv.components["velocity"] == pytest.approx(0.5 * vel / 2, rel=1e-10)
    assert lv.total == pytest.approx(lv.components["output"] + lv.components["velocity"])


@pytest.mark.parametrize("component", ["output", "velocity", "dv"])
def test_fit_recovers_a_coefficient_from_each_patent_loss(component):
    """Through ``fit``: data made with known coefficients, fitted from the
    defaults with one patent loss alone, give them back."""
    truth = {"mu_k": 0.17, "e_bb": 0.8}
    if component == "dv":
        sim_truth = simcore.simulate(*simcore.build([_head_on()], params=dict(PRM, **truth)))
        k = np.flatnonzero(sim_truth.event_kind == simcore.EventKind.BODY_BODY)[0]
        ev = {"scen": np.array([0, 0]), "body": np.array([0, 1]), "other": np.array([1, 0]),
              "t": np.full(2, sim_truth.event_t[k]),
              "dv": np.stack([sim_truth.event_dva[k], sim_truth.event_dvb[k]])}
        start = dict(PRM, mu_k=truth["mu_k"])
        pb = _problem([_head_on()], start, {"dv": 1.0}, events=ev)
        name = "e_bb"
    else:
        sc = _slide(1.2 if component == "output" else 2.0, 1.0 if component == "output" else 0.5)
        fin = simcore.simulate(*simcore.build([sc], params=dict(PRM, **truth))).final
        pb = _problem([sc], PRM, {component: 1.0}, final_pos=fin.body_pos,
                      final_vel=fin.body_vel)
        start, name = PRM, "mu_k"
    r = F.fit(pb, params0=start, free=[name], horizons=(1.0,))
    assert r.success, r.message
    assert r.params[name] == pytest.approx(truth[name], rel=1e-6)
    assert r.loss < 1e-16
