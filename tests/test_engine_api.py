"""Batch API behaviour: validation, determinism, dt-independence, outputs."""

import numpy as np
import pytest

import simcore
from simcore import params as P

from .scenes import box_walls, random_params, random_scenario

R = 0.03


def one(**kw):
    base = dict(radius=[R, R], mass=[0.17, 0.17], pos=[[0, 0, R], [0.2, 0, R]],
                vel=[[1, 0, 0], [0, 0, 0]], t_end=1.0, name="s1")
    base.update(kw)
    return simcore.Scenario(**base)


# --- bad input --------------------------------------------------------------


@pytest.mark.parametrize("kw, words", [
    (dict(mass=[0.17, -1.0]), ["'s1'", "body 1", "mass", "> 0"]),
    (dict(radius=[0.0, R]), ["'s1'", "body 0", "radius", "> 0"]),
    (dict(dt=0.0), ["'s1'", "dt", "> 0"]),
    (dict(pos=[[0, 0, R], [np.nan, 0, R]]), ["'s1'", "pos", "finite"]),
    (dict(vel=[[np.inf, 0, 0], [0, 0, 0]]), ["'s1'", "vel", "finite"]),
    (dict(pos=[[0, 0, R], [0.05, 0, R]]), ["'s1'", "bodies 0 and 1", "overlap"]),
    (dict(pos=[[0, 0, R / 2], [0.2, 0, R]]), ["'s1'", "body 0", "below the ground"]),
    (dict(walls=[[1, 0, 0, 0.01]]), ["'s1'", "body 0", "wall 0"]),
    (dict(walls=[[0, 0, 0, 1.0]]), ["'s1'", "wall 0", "normal"]),
    (dict(controls=[[5, 0, 1, 1, 0, 0]]), ["'s1'", "control 0", "body"]),
    (dict(t_end=-1.0), ["'s1'", "t_end"]),
])
def test_bad_scenario_names_scenario_body_field(kw, words):
    with pytest.raises(ValueError) as info:
        simcore.build([one(**kw)])
    for w in words:
        assert w in str(info.value), (w, str(info.value))


@pytest.mark.parametrize("values, words", [
    ({"mu_k": -0.1}, ["mu_k", "-0.1"]),
    ({"e_bb": 1.2}, ["e_bb", "<= 1.0"]),
    ({"e_bw": -0.2}, ["e_bw"]),
    ({"v_th": 0.0}, ["v_th", "> 0"]),
    ({"mu_s": 0.1, "mu_k": 0.2}, ["mu_s", "mu_k", ">="]),
    ({"mu_x": 0.1}, ["unknown", "mu_x"]),
    ({"mu_w": np.nan}, ["mu_w", "finite"]),
])
def test_bad_parameters_are_named(values, words):
    with pytest.raises(ValueError) as info:
        P.vector(values)
    for w in words:
        assert w in str(info.value), (w, str(info.value))


def test_bad_sample_times_are_named():
    model, state = simcore.build([one()])
    with pytest.raises(ValueError, match=r"'s1'.*sample time 2 .*decreases"):
        simcore.simulate(model, state, [[0.0, 0.5, 0.4]])
    with pytest.raises(ValueError, match=r"'s1'.*outside the run"):
        simcore.simulate(model, state, [[0.0, 2.0]])


def test_too_many_bodies():
    n = 33
    sc = simcore.Scenario(radius=[0.01] * n, mass=[1.0] * n,
                          pos=[[0.03 * i, 0, 0.01] for i in range(n)], vel=np.zeros((n, 3)),
                          t_end=1.0, name="big")
    with pytest.raises(ValueError, match="33 bodies, expected at most 32"):
        simcore.build([sc])


# --- determinism -------------------------------------------------------------


def _random_batch(seed, n=200, **kw):
    rng = np.random.default_rng(seed)
    scenes = [random_scenario(rng, name=f"d{s}", **kw) for s in range(n)]
    return scenes, random_params(rng)


def _all_arrays(res):
    return [res.samp_pos, res.samp_vel, res.final.body_pos, res.final.body_vel, res.event_ptr,
            res.event_t, res.event_normal, res.event_dva, res.event_dvb, res.event_jn]


def test_serial_parallel_and_reruns_bit_identical():
    scenes, params = _random_batch(5)
    model, state = simcore.build(scenes, params=params)
    times = [np.linspace(sc.t0, sc.t_end, 13) for sc in scenes]
    a = simcore.simulate(model, state, times, parallel=True)
    b = simcore.simulate(model, state, times, parallel=False)
    c = simcore.simulate(model, state, times, parallel=True)
    for x, y, z in zip(_all_arrays(a), _all_arrays(b), _all_arrays(c)):
        assert np.array_equal(x, y) and np.array_equal(x, z)
    # The input state is left untouched.
    assert np.array_equal(state.body_pos[0, :len(scenes[0].radius)], scenes[0].pos)


@pytest.mark.parametrize("rerun_events", [None, 3])
def test_event_buffer_overflow_rerun_matches(monkeypatch, rerun_events):
    """Scenarios that overflow their event buffer are run again, in batches
    of like event counts (one batch, or, with a budget of 3 events, many),
    with the result of one run with room for every event."""
    if rerun_events:
        monkeypatch.setattr(simcore.engine, "RERUN_EVENTS", rerun_events)
    scenes, params = _random_batch(6, n=40)
    model, state = simcore.build(scenes, params=params)
    small = simcore.simulate(model, state, event_capacity=1)
    big = simcore.simulate(model, state, event_capacity=10_000)
    assert small.event_count.max() > 1
    for x, y in zip(_all_arrays(small), _all_arrays(big)):
        assert np.array_equal(x, y)


@pytest.mark.parametrize("capacity", [64, 1])
def test_a_row_of_coefficients_per_scenario_runs_each_as_alone(capacity):
    """``Model.params (nscen, NPARAM)``: each scenario runs with its own row,
    bit-identical to a batch of that scenario alone with those coefficients
    (also when it overflows its buffer and is re-run)."""
    scenes, _ = _random_batch(9, n=12)
    rng = np.random.default_rng(10)
    rows = np.array([P.vector(random_params(rng)) for _ in scenes])
    model, state = simcore.build(scenes)
    times = [np.linspace(sc.t0, sc.t_end, 13) for sc in scenes]
    both = simcore.simulate(model.with_params(rows), state, times, event_capacity=capacity)
    assert both.event_count.max() > capacity
    for s, sc in enumerate(scenes):
        m1, s1 = simcore.build([sc], params=P.as_dict(rows[s]))
        alone = simcore.simulate(m1, s1, times[s:s + 1], event_capacity=capacity)
        e = slice(both.event_ptr[s], both.event_ptr[s + 1])
        nb = len(sc.radius)
        assert np.array_equal(both.samp_pos[both.samp_ptr[s]:both.samp_ptr[s + 1], :nb],
                              alone.samp_pos[:, :nb])
        assert np.array_equal(both.final.body_vel[s, :nb], alone.final.body_vel[0, :nb])
        assert np.array_equal(both.event_t[e], alone.event_t)
        assert np.array_equal(both.event_dva[e], alone.event_dva)
    # A row per scenario, valid each.
    with pytest.raises(ValueError, match="parameter rows: 2 for 12 scenarios"):
        model.with_params(rows[:2])
    bad = rows.copy()
    bad[3, P.NAMES.index("e_bb")] = 1.5
    with pytest.raises(ValueError, match="e_bb = 1.5"):
        model.with_params(bad)


# --- dt independence of the exact integrator --------------------------------


def test_exact_integrator_does_not_depend_on_dt():
    # Without pushes every friction direction stays put, so dt plays no part.
    rng = np.random.default_rng(8)
    scenes = []
    for s in range(60):
        sc = random_scenario(rng, name=f"t{s}")
        sc.controls = np.zeros((0, 6))
        scenes.append(sc)
    params = random_params(rng)
    finals = []
    for dt in (1e-3, 1e-2):
        for sc in scenes:
            sc.dt = dt
        model, state = simcore.build(scenes, params=params)
        finals.append(simcore.simulate(model, state).final)
    # Compare the well-conditioned scenes (no amplification of rounding).
    nudged = simcore.build(scenes, params=params)
    nudged[1].body_pos[:, :, :2] += 1e-15
    ref = simcore.simulate(*nudged).final
    ok = np.abs(ref.body_pos - finals[1].body_pos).max(axis=(1, 2)) < 1e-13
    assert ok.sum() >= 50
    np.testing.assert_allclose(finals[0].body_pos[ok], finals[1].body_pos[ok], atol=1e-12)


# --- outputs -----------------------------------------------------------------


def test_result_layout_and_event_fields():
    walls = box_walls(0.5)
    sc = simcore.Scenario(radius=[R, R], mass=[0.17, 0.2], pos=[[0, 0, R], [0.3, 0.01, R]],
                          vel=[[2.0, 0, 0], [0, 0, 0]], t_end=2.0, walls=walls, name="x")
    model, state = simcore.build([sc])
    ts = np.linspace(0, 2, 21)
    res = simcore.simulate(model, state, [ts])
    t, pos, vel = res.samples(0)
    assert np.array_equal(t, ts) and pos.shape == (21, 2, 3) and vel.shape == (21, 2, 3)
    ev = res.events(0)
    kinds = [simcore.EVENT_KINDS[k] for k in ev["kind"]]
    assert kinds[0] == "body-body" and "stop" in kinds and "body-wall" in kinds
    assert np.all(np.diff(ev["t"]) >= 0)
    k = kinds.index("body-body")
    # Momentum balance of the logged velocity changes.
    np.testing.assert_allclose(0.17 * ev["dva"][k] + 0.2 * ev["dvb"][k], 0, atol=1e-15)
    assert np.all(res.final.time == 2.0)


def test_sensitivities_never_change_the_forward_result():
    """Asking for sensitivities (and trajectory residuals) leaves samples,
    events and final states bit-identical, on 200 random scenes, with
    mu_s == mu_k (where a v_th crossing changes no force) and without."""
    rng = np.random.default_rng(21)
    scenes = [random_scenario(rng, name=f"b{s}") for s in range(200)]
    times = [np.linspace(sc.t0, sc.t_end, 25) for sc in scenes]
    dirs = simcore.engine.Directions.build(params=range(P.NPARAM), velocities=[(0, 0), (1, 1)],
                                           controls=[(0, 0)])
    for prm in (dict(random_params(rng), mu_s=0.2, mu_k=0.2), random_params(rng)):
        model, state = simcore.build(scenes, params=prm)
        plain = simcore.simulate(model, state, times)
        meas = plain.samp_pos + 1e-3
        sens = simcore.simulate(model, state, times, directions=dirs, measured=meas,
                                gauss_newton=True)
        assert plain.event_count.sum() > 200
        for x, y in zip(_all_arrays(plain), _all_arrays(sens)):
            assert np.array_equal(x, y)
        assert np.array_equal(plain.event_kind, sens.event_kind)


def test_integrator_is_chosen_by_capability():
    """The registry picks the first integrator that runs the batch's shapes;
    a named one is checked; an unknown name is an error."""
    from simcore.sliding import integrate

    assert integrate.choose({"sphere"}).name == "exact"
    assert integrate.choose({"sphere"}, "symplectic").code == integrate.INTEGRATOR_SYMPLECTIC
    with pytest.raises(ValueError, match=r"integrator = 'rk4': expected one of"):
        integrate.choose({"sphere"}, "rk4")
    with pytest.raises(ValueError, match=r"integrator 'exact' cannot run shapes \['box'\]"):
        integrate.choose({"sphere", "box"}, "exact")
    assert integrate.choose({"box"}).name == "penalty"
    assert integrate.choose({"sphere"}, family="penalty").name == "penalty"
    with pytest.raises(ValueError, match=r"no integrator runs shapes \['box'\] with impulse"):
        integrate.choose({"box"}, family="impulse")
    with pytest.raises(ValueError, match=r"integrator 'exact' runs sphere under impulse laws; this model's laws are penalty"):
        integrate.choose({"sphere"}, "exact", family="penalty")
    model, _ = simcore.build([one()])
    assert model.integrator == integrate.INTEGRATOR_EXACT
    with pytest.raises(ValueError, match="integrator = 'rk4'"):
        simcore.build([one()], integrator="rk4")
