"""Sensitivities through the time-stepper (simcore.rigid.rigid_tangent) against
central finite differences of the forward runs."""

from dataclasses import replace

import numpy as np
import pytest

from simcore import engine as E
from simcore import model as M
from simcore.kernel import sensitivity as T
from simcore.laws import hunt_crossley as HC

from .test_rigid import _tosses, bodies, cube

#: Central-difference step, relative to the coefficient (at least FLOOR x it;
#: absolute for a state).
REL_STEP = 1e-6
FLOOR = 0.05


def test_hunt_crossley_alpha_slope_is_the_derivative_of_its_root():
    for e in (0.05, 0.3, 0.6, 0.95):
        a = HC.alpha(e)
        fd = (HC.alpha(e + 1e-7) - HC.alpha(e - 1e-7)) / 2e-7
        assert HC.alpha_slope(e, a) == pytest.approx(fd, rel=1e-5)
    assert HC.alpha_slope(1.0, 0.0) == 0.0 and HC.alpha_slope(5e-4, HC.alpha(5e-4)) == 0.0


def _final(model, state, times, params=None, shift=None):
    m = model if params is None else model.with_params(params)
    st = state.copy()
    if shift is not None:
        field, i, d, h = shift
        getattr(st, field)[:, i, d] += h
    return E.simulate(m, st, times, parallel=False).final


def _check(model, state, times, names, states=(), tol=1e-4, rel=REL_STEP):
    """Final positions and velocities: the tangents along the coefficients
    ``names`` (central differences over ``rel`` of each, at least ``FLOOR``
    x it) and the initial ``(field, body, dim)`` states against central
    differences; returns the tangents."""
    lay = model.layout
    idx = [lay.index(n) for n in names]
    vel = [(i, d) for f, i, d in states if f == "body_vel"]
    spin = [(i, d) for f, i, d in states if f == "body_omega"]
    dirs = E.Directions.build(params=idx, velocities=vel, spins=spin)
    sens = E.simulate(model, state, times, directions=dirs, parallel=False).sens
    ordered = ([("param", q) for q in idx] + [("body_vel",) + s for s in vel]
               + [("body_omega",) + s for s in spin])
    for k, what in enumerate(ordered):
        if what[0] == "param":
            q = what[1]
            h = rel * max(abs(model.params[q]), FLOOR)
            hi, lo = model.params.copy(), model.params.copy()
            hi[q] += h
            lo[q] -= h
            fp, fm = _final(model, state, times, hi), _final(model, state, times, lo)
        else:
            h = REL_STEP
            fp = _final(model, state, times, shift=(what[0], what[1], what[2], h))
            fm = _final(model, state, times, shift=(what[0], what[1], what[2], -h))
        for got, a, b in ((sens.final_pos[..., k], fp.body_pos, fm.body_pos),
                          (sens.final_vel[..., k], fp.body_vel, fm.body_vel)):
            fd = (a - b) / (2 * h)
            rounding = 1e-14 / h  # the differences' own error (a box resting on a stiff spring jitters)
            assert np.max(np.abs(got - fd)) <= tol * np.max(np.abs(fd)) + rounding, (what, got, fd)
    return sens


LAWS = [("hunt_crossley", "elliptic", ["mu_s", "mu_k", "e_bg", "ground_offset", "k_hc", "n_hc",
                                       "k_v", "mu_roll"]),
        ("spring_damper", "pyramidal", ["mu_k", "k_sd", "c_sd", "ground_offset"]),
        ("impact", "elliptic", ["mu_k", "k_imp", "d_max", "p_max"])]
BASE = {"hunt_crossley": {"e_bg": 0.5, "mu_s": 0.35, "mu_k": 0.3, "k_hc": 1e7, "k_v": 0.5,
                          "mu_roll": 1e-3},
        "spring_damper": {"mu_s": 0.35, "mu_k": 0.3, "k_sd": 1e5, "c_sd": 50.0},
        "impact": {"mu_s": 0.35, "mu_k": 0.3, "k_imp": 1e9, "d_max": 300.0, "p_max": 1e-3}}


@pytest.mark.parametrize("law,cone,names", LAWS)
def test_tumbling_box_sensitivities_match_central_differences(law, cone, names):
    """Two tumbling tosses that land on a corner, bounce, slide and settle:
    every coefficient of the law, the ground offset, an initial velocity and
    spin."""
    t_end = 0.4
    model, state = M.build(_tosses(3, 7, t_end=t_end)[:2], params=BASE[law],
                           laws={"body_ground": law}, cone=cone)
    times = [np.linspace(0.05, t_end, 20)] * 2
    sens = _check(model, state, times, names,
                  [("body_vel", 0, 0), ("body_omega", 0, 1)], tol=2e-4)
    assert np.all(sens.nondiff == 0)
    assert np.all(sens.signal[:, :len(names)].sum(axis=0) > 0)


#: A centre of mass off the box's centre (body frame) [m].
COM = (0.004, -0.002, 0.006)


def _off_centre(scenarios):
    return [replace(sc, com=[COM]) for sc in scenarios]


def test_off_centre_mass_sensitivities_match_central_differences():
    """The tumbling tosses with the mass off the centre: the samples and the
    final state are the box centre's (``x - R c``, ``v - w x R c``), a spin
    direction moves the centre of mass's start by ``dw x R c``."""
    t_end = 0.4
    model, state = M.build(_off_centre(_tosses(3, 7, t_end=t_end)[:2]),
                           params=BASE["hunt_crossley"])
    times = [np.linspace(0.05, t_end, 20)] * 2
    sens = _check(model, state, times, ["mu_k", "e_bg", "ground_offset"],
                  [("body_vel", 0, 0), ("body_omega", 0, 1), ("body_omega", 0, 2)], tol=2e-4)
    assert np.all(sens.nondiff == 0)


def test_static_friction_and_stiction_curve_on_a_slow_slide():
    """A box slid slowly enough to stay on the stiction curve's ramp and stop:
    mu_s, mu_k, v_e1, v_e2 all enter."""
    model, state = M.build([cube((0, 0, 0.05), vel=(0.08, 0.02, 0), t_end=0.15, dt=2e-4)],
                           params={"mu_s": 0.5, "mu_k": 0.3, "v_e1": 0.01, "v_e2": 0.1})
    sens = _check(model, state, None, ["mu_s", "mu_k", "v_e1", "v_e2"], [("body_vel", 0, 0)])
    assert np.all(np.abs(sens.final_pos[0, 0, 0, :4]) > 1e-6)


def test_wall_contact_sensitivities():
    """A spinning box thrown against a wall: the wall's restitution and
    friction, the ground's friction."""
    sc = cube((0.0, 0.0, 0.06), vel=(1.0, 0.3, 0.0), omega=(0, 0, 2.0), t_end=0.35, dt=2e-4,
              walls=np.array([[-1.0, 0.0, 0.0, -0.2]]))
    model, state = M.build([sc], params={"e_bw": 0.5, "mu_w": 0.3, "mu_s": 0.35, "mu_k": 0.3,
                                          "e_bg": 0.5})
    sens = _check(model, state, None, ["e_bw", "mu_w", "mu_k"], [("body_vel", 0, 0)])
    assert np.abs(sens.final_pos[0, 0, :2, 0]).max() > 1e-3  # the wall's e moved it


def test_sphere_rolling_under_resistance():
    """A sphere rolling on the ground under rolling resistance (its cap
    binding throughout: the rolling torque ``mu_roll F``)."""
    ball = bodies([{"shape": "sphere", "pos": (0, 0, 0.03), "ext": (0.03, 0.03, 0.03),
                    "vel": (0.5, 0.0, 0.0), "omega": (0.0, 0.5 / 0.03, 0.0)}], t_end=0.3,
                  dt=2e-4)
    model, state = M.build([ball], params={"mu_s": 0.35, "mu_k": 0.3, "mu_roll": 2e-3},
                           laws={"body_ground": "hunt_crossley"})
    sens = _check(model, state, None, ["mu_roll", "mu_k"], [("body_vel", 0, 0),
                                                           ("body_omega", 0, 1)])
    assert sens.final_pos[0, 0, 0, 0] < -1.0  # more resistance, shorter roll


@pytest.mark.parametrize("off_centre", [False, True])
def test_trajectory_residual_gradient_and_gauss_newton_match_the_loss(off_centre):
    """``J^T r`` and ``J^T J`` of the sampled positions' residuals (the box
    centres', wherever the mass): the gradient against central differences
    of half the residual sum."""
    t_end = 0.3
    tosses = _tosses(2, 7, t_end=t_end)
    model, state = M.build(_off_centre(tosses) if off_centre else tosses,
                           params=BASE["hunt_crossley"])
    times = [np.linspace(0.02, t_end, 15)] * 2
    names = ["mu_k", "e_bg", "ground_offset"]
    truth = E.simulate(model.with_params({"mu_k": 0.25, "e_bg": 0.45}), state, times)
    meas = truth.samp_pos + np.random.default_rng(0).normal(scale=1e-3, size=truth.samp_pos.shape)
    idx = [model.layout.index(n) for n in names]
    dirs = E.Directions.build(params=idx)
    sens = E.simulate(model, state, times, directions=dirs, measured=meas, gauss_newton=True,
                      parallel=False).sens

    def half_sse(p):
        res = E.simulate(model.with_params(p), state, times, parallel=False)
        return 0.5 * np.sum((res.samp_pos - meas) ** 2)

    assert sens.traj_sse.sum() == pytest.approx(2 * half_sse(model.params), rel=1e-12)
    for k, q in enumerate(idx):
        h = REL_STEP * max(abs(model.params[q]), FLOOR)
        hi, lo = model.params.copy(), model.params.copy()
        hi[q] += h
        lo[q] -= h
        fd = (half_sse(hi) - half_sse(lo)) / (2 * h)
        assert sens.traj_grad[:, k].sum() == pytest.approx(fd, rel=1e-4)
    gn = sens.traj_gn.sum(axis=0)
    assert np.allclose(gn, gn.T) and np.all(np.linalg.eigvalsh(gn) > 0)


def test_a_control_force_direction_and_body_contacts_are_flagged():
    """A control force's component is a direction like any other; a stack of
    two boxes (body-body contact) is marked for finite differences."""
    push = cube((0, 0, 0.05), t_end=0.3, dt=2e-4,
                controls=np.array([[0, 0.05, 0.2, 2.0, 0.5, 0.0]]))
    model, state = M.build([push], params={"mu_k": 0.2, "mu_s": 0.25})
    dirs = E.Directions.build(controls=[(0, 0)])
    sens = E.simulate(model, state, None, directions=dirs, parallel=False).sens
    h = 1e-6
    moved = [model.ctrl_force.copy() for _ in range(2)]
    moved[0][0, 0] += h
    moved[1][0, 0] -= h
    ends = [E.simulate(replace(model, ctrl_force=f), state, None, parallel=False).final.body_pos
            for f in moved]
    fd = (ends[0] - ends[1]) / (2 * h)
    assert np.allclose(sens.final_pos[..., 0], fd, rtol=0, atol=1e-4 * np.abs(fd).max())
    assert np.abs(fd).max() > 1e-3
    stack = bodies([{"shape": "box", "pos": (0, 0, 0.05), "ext": (0.05, 0.05, 0.05)},
                    {"shape": "box", "pos": (0, 0, 0.1499), "ext": (0.05, 0.05, 0.05)}],
                   t_end=0.05, dt=2e-4)
    model, state = M.build([stack], params={"mu_k": 0.2})
    sens = E.simulate(model, state, None, parallel=False,
                      directions=E.Directions.build(params=[model.layout.index("mu_k")])).sens
    assert sens.nondiff[0] & T.ND_BODY_PENALTY
