"""The global offsets of the measurement set-up: ground height and control lag.

``ground_offset`` raises the ground plane (bodies resting on the nominal
ground ride along), ``time_offset`` delays every control window (see
:mod:`simcore.params`).  Checked against closed forms, against the engine
run on the equivalently shifted inputs, against central differences (in
``test_gradients``), and by recovery from synthetic data.
"""

import numpy as np
import pytest

import simcore
from simcore import params as P
from simcore.data import synth
from simcore.engine import Directions, simulate
from simcore.identify.fit import fit
from simcore.identify.problem import Problem

from .scenes import random_params, random_scenario

G = 9.81
R = 0.03


def _ball(pos, vel, params, controls=(), t_end=1.0):
    sc = simcore.Scenario(radius=np.array([R]), mass=np.array([0.2]),
                          pos=np.array([pos], float), vel=np.array([vel], float), t_end=t_end,
                          walls=np.zeros((0, 4)), controls=np.array(controls, float).reshape(-1, 6))
    return simcore.build([sc], params)


OFFSETS = Directions.build(params=[P.GROUND_OFFSET, P.TIME_OFFSET])


def test_dropped_ball_lands_on_the_offset_ground():
    """Dropped from z0: it hits z = r + delta at t* = sqrt(2 (z0 - r - delta) / g),
    so d t* / d delta = -1 / (g t*), and rests there with d z / d delta = 1."""
    z0, delta = 0.5, 2e-3
    model, state = _ball([0, 0, z0], [0, 0, 0], {"ground_offset": delta, "e_bg": 0.0})
    r = simulate(model, state, directions=OFFSETS)
    t_hit = np.sqrt(2 * (z0 - R - delta) / G)
    hit = r.events(0)["t"][0]
    assert hit == pytest.approx(t_hit, rel=1e-12)
    assert r.sens.event_t[0, 0] == pytest.approx(-1.0 / (G * t_hit), rel=1e-9)
    assert r.final.body_pos[0, 0, 2] == pytest.approx(R + delta, abs=1e-15)
    assert r.sens.final_pos[0, 0, 2, 0] == pytest.approx(1.0, rel=1e-12)
    # The controls' lag plays no part here: zero tangent, no signal.
    assert r.sens.final_pos[0, 0, :, 1].tolist() == [0.0, 0.0, 0.0]
    assert r.sens.signal[0].tolist() == [1, 0]


def test_resting_start_rides_on_the_offset_ground():
    """A ball resting on the nominal ground slides on the offset one: its
    height is r + delta throughout, its slide unchanged (stop distance
    v0^2 / (2 mu g))."""
    v0, mu, delta = 0.9, 0.2, -1.2e-3
    model, state = _ball([0, 0, R], [v0, 0, 0], {"ground_offset": delta, "mu_s": mu,
                                                 "mu_k": mu})
    times = [np.linspace(0.0, 1.0, 11)]
    r = simulate(model, state, times, directions=OFFSETS)
    assert np.all(r.samp_pos[:, 0, 2] == R + delta)
    assert r.final.body_pos[0, 0, 0] == pytest.approx(v0 ** 2 / (2 * mu * G), rel=1e-12)
    assert r.sens.final_pos[0, 0, :, 0].tolist() == [0.0, 0.0, 1.0]


def test_delayed_push_shifts_the_motion_in_time():
    """A push from rest over [t0 + tau, t1 + tau): the motion is the undelayed
    one shifted by tau, so before the stop d x(T) / d tau = -v(T) and
    d v(T) / d tau = -a(T) = mu g."""
    mu, f, t0, t1, tau, T = 0.2, 1.2, 0.1, 0.4, 0.025, 0.6
    prm = {"mu_s": mu, "mu_k": mu, "time_offset": tau}
    model, state = _ball([0, 0, R], [0, 0, 0], prm, [[0, t0, t1, f, 0, 0]], t_end=T)
    r = simulate(model, state, directions=OFFSETS)
    a1 = f / 0.2 - mu * G
    v1 = a1 * (t1 - t0)
    s = T - t1 - tau  # time since the push ended
    v_T = v1 - mu * G * s
    x_T = 0.5 * a1 * (t1 - t0) ** 2 + v1 * s - 0.5 * mu * G * s ** 2
    assert v_T > 0
    assert r.final.body_pos[0, 0, 0] == pytest.approx(x_T, rel=1e-12)
    assert r.sens.final_pos[0, 0, 0, 1] == pytest.approx(-v_T, rel=1e-10)
    assert r.sens.final_vel[0, 0, 0, 1] == pytest.approx(mu * G, rel=1e-10)
    assert r.sens.signal[0, 1] == 2  # the window's two edges


def test_offsets_equal_the_shifted_inputs_bit_for_bit():
    """The engine with the offsets gives exactly what it gives with the ground
    raised, the resting bodies lifted and the windows delayed by hand."""
    rng = np.random.default_rng(5)
    scenes = [random_scenario(rng, name=f"o{s}") for s in range(120)]
    prm = random_params(rng)
    delta, tau = 1.7e-3, -0.031
    model, state = simcore.build(scenes, dict(prm, ground_offset=delta, time_offset=tau))
    times = [np.linspace(sc.t0, sc.t_end, 30) for sc in scenes]
    got = simulate(model, state, times)

    shifted = []
    for sc in scenes:
        pos = sc.pos.copy()
        resting = np.abs(pos[:, 2] - sc.radius) <= 1e-12
        pos[resting, 2] += delta
        ctrl = sc.controls.copy()
        ctrl[:, 1:3] += tau
        shifted.append(simcore.Scenario(radius=sc.radius, mass=sc.mass, pos=pos, vel=sc.vel,
                                        t_end=sc.t_end, dt=sc.dt, walls=sc.walls,
                                        controls=ctrl, name=sc.name))
    model2, state2 = simcore.build(shifted, prm, ground_z=0.0 + delta)
    want = simulate(model2, state2, times)
    assert np.array_equal(got.samp_pos, want.samp_pos)
    assert np.array_equal(got.samp_vel, want.samp_vel)
    assert np.array_equal(got.event_count, want.event_count)
    assert (got.event_count > 0).mean() > 0.9


@pytest.fixture(scope="module")
def offset_table(tmp_path_factory):
    """The shipped table's generator with the ground 1.5 mm up and the
    controls 20 ms late."""
    out = tmp_path_factory.mktemp("offsets")
    truth = dict(synth.TRUTH, ground_offset=1.5e-3, time_offset=0.02)
    synth.generate(out, synth.GeneratorSettings(scenarios=40, seed=7), truth=truth)
    return Problem.from_dataset(out), truth


def test_offsets_recovered_with_the_coefficients(offset_table):
    """Fitted from zero with the coefficients from their defaults: both
    offsets and every informed coefficient recovered inside their 95 %
    intervals; leaving the offsets out biases the coefficients."""
    problem, truth = offset_table
    free = ["mu_s", "mu_k", "v_th", "mu_bb", "e_bb", "mu_w", "e_bw", "ground_offset",
            "time_offset"]
    r = fit(problem, free=free)
    assert r.success, r.message
    for n in free:
        lo, hi = r.ci95[n]
        assert lo <= truth[n] <= hi, (n, r.params[n], r.ci95[n])
    assert r.params["ground_offset"] == pytest.approx(1.5e-3, abs=2e-5)
    assert r.params["time_offset"] == pytest.approx(0.02, abs=5e-4)
    assert r.params["mu_k"] == pytest.approx(truth["mu_k"], rel=5e-3)
    ident = r.identifiability
    assert ident["ground_offset"]["identifiable"] and not ident["ground_offset"]["weak"]
    assert ident["time_offset"]["identifiable"] and not ident["time_offset"]["weak"]
    # Without the offsets the same data fit far worse, and the coefficients
    # absorb the offsets (v_th and mu_bb tens of per cent off).
    r0 = fit(problem, free=free[:-2])
    assert r0.loss > 5 * r.loss
    assert max(abs(r0.params[n] / truth[n] - 1) for n in free[:-2]) > 0.1
