"""The body's own coefficients (centre of mass shift, inertia scale) and the
recording's (gravity, ground tilt) on the rigid-body time-steppers: what
they mean in closed form, that they equal the tables they correct, their
exact sensitivities against central differences, and the engines and
addresses that refuse them."""

from dataclasses import replace

import numpy as np
import pytest

from simcore import engine as E
from simcore import model as M
from simcore import params as P
from simcore.identify import nuisance

from .test_rigid import H, _tosses, cube, quat_about
from .test_rigid_tangent import _check

FRICTION = {"mu_s": 0.4, "mu_k": 0.3, "e_bg": 0.5}


def _run(scenes, params, times, **kw):
    model, state = M.build(scenes, params=params, **kw)
    return model, E.simulate(model, state, times, parallel=False)


@pytest.mark.parametrize("integrator", ["penalty", "moreau"])
def test_a_flight_falls_at_the_gravity_coefficient(integrator):
    """A box thrown up far above the ground: ``z(t) = z0 + vz t - g t^2 / 2``
    with the coefficient's g, not the dataset's, up to the semi-implicit
    Euler steps' own ``h g t / 2``."""
    sc = cube((0.0, 0.0, 5.0), vel=(0.3, 0.0, 2.0), omega=(1.0, 2.0, 0.5), t_end=0.5, dt=1e-4)
    t = np.linspace(0.05, 0.5, 10)
    model, res = _run([sc], {"gravity": 9.61}, [t], gravity=9.81, integrator=integrator)
    assert model.gravity == 9.81 and model.layout.as_dict(model.params)["gravity"] == 9.61
    z = res.samp_pos[:, 0, 2]
    err = np.abs(z - (5.0 + 2.0 * t - 0.5 * 9.61 * t * t))
    assert np.all(err <= 0.5 * 1e-4 * 9.61 * t * (1 + 1e-6) + 1e-12), err


def test_the_gravity_coefficient_defaults_to_the_datasets():
    """A layout that holds ``gravity`` without a value takes the dataset's
    (its declared default), not the registry's 9.81."""
    model, _ = M.build([cube((0, 0, 1.0))], params={}, gravity=9.61)
    assert "gravity" not in model.layout.names
    freed = model.with_coefficients(["gravity"])
    assert freed.layout.as_dict(freed.params)["gravity"] == 9.61
    assert freed.layout.vector()[freed.layout.index("gravity")] == 9.61


def test_the_centre_of_mass_and_inertia_coefficients_equal_the_tables_they_correct():
    """A toss with the mass 4 mm off and the inertia 1.3 times the table's,
    given as coefficients, runs bit for bit as the same toss with them in
    the bodies table."""
    sc = _tosses(1, 3, t_end=0.6)[0]
    t = [np.linspace(0.02, 0.6, 30)]
    com = (0.004, -0.001, 0.002)
    plain, _ = M.build([sc], params=FRICTION)
    inertia = plain.body_inertia[0, :1] * 1.3  # the table's moments, scaled as the engine does
    _, table = _run([replace(sc, com=[com], inertia=inertia)], FRICTION, t)
    coef = dict(FRICTION, com_x=com[0], com_y=com[1], com_z=com[2], inertia_scale=1.3)
    _, fitted = _run([sc], coef, t)
    assert np.array_equal(table.samp_pos, fitted.samp_pos)
    assert np.array_equal(table.samp_quat, fitted.samp_quat)


def test_a_box_on_a_tilted_ground_slides_down_at_the_incline_acceleration():
    """The ground tilted by ``tilt_y`` (its +x side down) past the friction
    angle: a box set on it slides down at ``g (sin t - mu cos t)``; tilted
    under it, it stays; ``tilt_x`` (its +y side up) sends it toward -y."""
    mu = 0.3
    for tilt, axis in ((0.35, "tilt_y"), (0.35, "tilt_x"), (0.25, "tilt_y")):
        n = (np.array([np.sin(tilt), 0.0, np.cos(tilt)]) if axis == "tilt_y"
             else np.array([0.0, -np.sin(tilt), np.cos(tilt)]))
        down = np.array([n[2] * n[0], n[2] * n[1], -(1.0 - n[2] * n[2])])
        down /= np.linalg.norm(down)
        turn = quat_about((0, 1, 0), tilt) if axis == "tilt_y" else quat_about((1, 0, 0), tilt)
        sc = cube(tuple((H - 2e-5) * n), quat=tuple(turn), t_end=0.5, dt=2e-4)
        params = {"mu_s": mu, "mu_k": mu, "e_bg": 0.0, axis: tilt, "mu_roll": 0.0}
        _, res = _run([sc], params, [np.array([0.2, 0.5])], integrator="moreau")
        v = res.samp_vel[:, 0] @ down
        if np.tan(tilt) > mu:
            acc = 9.81 * (np.sin(tilt) - mu * np.cos(tilt))
            assert (v[1] - v[0]) / 0.3 == pytest.approx(acc, rel=2e-3), axis
        else:
            assert np.all(np.abs(v) < 1e-9)


NAMES = ["gravity", "com_x", "com_y", "com_z", "inertia_scale"]
VALUES = dict(FRICTION, gravity=9.6, com_x=0.001, com_y=0.0, com_z=0.002, inertia_scale=1.1)


def test_penalty_sensitivities_along_the_body_and_the_recording_match_central_differences():
    """Two tumbling tosses (mass off centre in the table, corrected by the
    coefficients) that land on corners, bounce, slide and settle."""
    scenes = [replace(s, com=[(0.004, -0.002, 0.006)]) for s in _tosses(3, 7, t_end=0.4)[:2]]
    model, state = M.build(scenes, params=VALUES)
    # (penalty contact is stiff: a step small enough to stay in one contact's smooth stretch)
    sens = _check(model, state, [np.linspace(0.05, 0.4, 20)] * 2, NAMES, rel=1e-8)
    assert np.all(sens.nondiff == 0)
    assert np.all(sens.signal[:, :len(NAMES)] > 0)


@pytest.mark.parametrize("kind", ["cube", "flat box with a wall"])
def test_moreau_sensitivities_along_the_body_and_the_recording_match_central_differences(kind):
    scenes = _tosses(3, 7, t_end=0.4)[:2]
    if kind != "cube":
        scenes = [replace(s, extent=[[1.4 * H, H, 0.5 * H]], com=[(0.004, -0.002, 0.003)],
                          inertia=None, walls=np.array([[1.0, 0.0, 0.0, -0.3]]))
                  for s in scenes]
    model, state = M.build(scenes, params=dict(VALUES, com_z=-0.002, inertia_scale=0.9),
                           integrator="moreau")
    sens = _check(model, state, [np.linspace(0.05, 0.4, 20)] * 2, NAMES, [("body_vel", 0, 0)],
                  tol=1e-6)
    assert np.all(sens.nondiff == 0)


def test_penalty_sensitivities_along_the_ground_tilt_match_central_differences():
    """The ground tilted both ways, its height offset too: tumbling tosses
    (rolling resistance on) and a ball rolling and sliding down the slope;
    the normal's tangent enters every stage that reads a ground point's
    directions."""
    scenes = [replace(s, com=[(0.004, -0.002, 0.006)]) for s in _tosses(3, 7, t_end=0.4)[:2]]
    values = dict(FRICTION, tilt_x=0.02, tilt_y=-0.03, ground_offset=0.001, mu_roll=0.002)
    model, state = M.build(scenes, params=values)
    names = ["tilt_x", "tilt_y", "ground_offset"]
    sens = _check(model, state, [np.linspace(0.05, 0.4, 20)] * 2, names, rel=1e-8)
    assert np.all(sens.nondiff == 0)
    tilt = 0.2
    n = np.array([np.sin(tilt), 0.0, np.cos(tilt)])
    ball = M.Scenario(radius=[0.03], mass=[0.2], pos=[tuple((0.03 - 1e-5) * n)],
                      vel=[(0.3, 0.2, 0.0)], omega=[(0.0, 0.0, 2.0)], t_end=0.3, dt=2e-4,
                      shape=("sphere",), extent=[[0.03] * 3])
    model, state = M.build([ball], params={**values, "tilt_x": 0.05, "tilt_y": tilt},
                           laws={"body_ground": "hunt_crossley"})
    sens = _check(model, state, [np.linspace(0.02, 0.3, 15)], names, rel=1e-8)
    assert np.all(sens.nondiff == 0)


@pytest.mark.parametrize("kind", ["cube", "flat box with a wall"])
def test_moreau_sensitivities_along_the_ground_tilt_match_central_differences(kind):
    """The Moreau-Jean stepper's rows (the normal and the friction pyramid's
    edges) turn with the ground: tumbling tosses on a ground tilted both
    ways, its height offset too."""
    scenes = _tosses(3, 7, t_end=0.4)[:2]
    if kind != "cube":
        scenes = [replace(s, extent=[[1.4 * H, H, 0.5 * H]], com=[(0.004, -0.002, 0.003)],
                          inertia=None, walls=np.array([[1.0, 0.0, 0.0, -0.3]]))
                  for s in scenes]
    model, state = M.build(scenes, params=dict(FRICTION, tilt_x=0.02, tilt_y=-0.03,
                                               ground_offset=0.001), integrator="moreau")
    sens = _check(model, state, [np.linspace(0.05, 0.4, 20)] * 2,
                  ["tilt_x", "tilt_y", "ground_offset"], [("body_vel", 0, 0)], tol=1e-6)
    assert np.all(sens.nondiff == 0)


def test_per_material_centres_of_mass_move_only_their_bodies():
    """``com_z@heavy`` shifts the heavy box's centre of mass only; the plain
    ``com_z`` (held beside it, 0) every other material's."""
    a = replace(cube((0, 0, 1.0), omega=(3.0, 1.0, 0.0), t_end=0.3), material=["heavy"])
    b = replace(cube((0, 0, 1.0), omega=(3.0, 1.0, 0.0), t_end=0.3), material=["light"])
    t = [np.linspace(0.05, 0.3, 6)] * 2
    model, res = _run([a, b], {"com_z@heavy": 0.01}, t)
    assert model.layout.named == ("com_z", "com_z@heavy")
    _, plain = _run([a, b], {}, t)
    n = t[0].size
    assert not np.allclose(res.samp_pos[:n], plain.samp_pos[:n], atol=1e-6)
    assert np.array_equal(res.samp_pos[n:], plain.samp_pos[n:])


def test_addresses_and_engines_that_do_not_read_them_refuse():
    with pytest.raises(ValueError, match="body's own coefficient; write com_z@MAT"):
        P.parse("com_z@a+b")
    with pytest.raises(ValueError, match="gravity is a global offset"):
        P.parse("gravity@felt")
    model, _ = M.build([cube((0, 0, 1.0))], params={})
    with pytest.raises(ValueError, match="held only when named"):
        model.layout.index("com_x")
    ball = M.Scenario(radius=[0.03], mass=[0.2], pos=[(0.0, 0.0, 0.03)], vel=[(1.0, 0.0, 0.0)],
                      t_end=0.5, dt=1e-3)
    for integrator in ("penalty", "moreau"):
        with pytest.raises(ValueError, match="a sphere under a centre of mass coefficient"):
            M.build([replace(ball, shape=("sphere",), extent=[[0.03] * 3])],
                    params={"com_z": 0.0}, laws={"body_ground": "hunt_crossley"},
                    integrator=integrator)
    sliding, state = M.build([ball], params={"gravity": 9.7})
    with pytest.raises(ValueError, match="'gravity' has no kernel in the sliding engine"):
        E.simulate(sliding, state)
    assert "gravity" not in P.Layout.build().coefficients
    assert all(n not in P.Layout.build(names=["com_x", "tilt_y"]).coefficients
               for n in ("com_x", "tilt_y"))


@pytest.mark.parametrize("integrator", ["penalty", "moreau"])
def test_initial_position_and_orientation_directions_match_central_differences(integrator):
    """The start's position and a small world-frame turn of its orientation
    (``exp(rot / 2) q``), with the mass off centre: the tangents of the final
    positions and velocities against central differences of the state."""
    scenes = [replace(s, com=[(0.004, -0.002, 0.006)]) for s in _tosses(3, 7, t_end=0.4)[:2]]
    model, state = M.build(scenes, params=FRICTION, integrator=integrator)
    times = [np.linspace(0.05, 0.4, 20)] * 2
    pairs = [(0, 0), (0, 2)]
    dirs = E.Directions.build(positions=pairs, turns=pairs)
    sens = E.simulate(model, state, times, directions=dirs, parallel=False).sens
    assert np.all(sens.nondiff == 0)
    h = 1e-7
    for k, (what, (i, d)) in enumerate([("pos", p) for p in pairs] + [("rot", p) for p in pairs]):
        runs = []
        for sign in (1.0, -1.0):
            st = state.copy()
            if what == "pos":
                st.body_pos[:, i, d] += sign * h
            else:
                st.body_quat[:, i] = nuisance.turned(st.body_quat[:, i], sign * h * np.eye(3)[d])
            runs.append(E.simulate(model, st, times, parallel=False).final)
        for got, a, b in ((sens.final_pos[..., k], runs[0].body_pos, runs[1].body_pos),
                          (sens.final_vel[..., k], runs[0].body_vel, runs[1].body_vel)):
            fd = (a - b) / (2 * h)
            assert np.max(np.abs(got - fd)) <= 1e-4 * np.max(np.abs(fd)) + 1e-14 / h, \
                (what, i, d, got, fd)


def test_a_generated_recording_declares_the_free_fall_of_its_flights(tmp_path):
    """Box tosses generated with a gravity coefficient declare what an import
    measures from their flights (the coefficient's start), those without it
    9.81."""
    import yaml

    from simcore.data import synth

    cfg = synth.GeneratorSettings(shape="box", scenarios=3, duration=0.6, rate=148.0,
                                  noise_mm=0.0, noise_deg=0.0, height=[0.3, 0.4])
    for truth, declared in ((dict(synth.TRUTH_BOX, gravity=9.61), 9.61), (synth.TRUTH_BOX, 9.81)):
        out = synth.generate(tmp_path / str(declared), cfg, truth)
        assert yaml.safe_load((out / "dataset.yaml").read_text())["gravity"] == declared


def test_a_centre_of_mass_no_toss_turns_is_not_fitted_to_noise():
    """Boxes thrown without spin through the air: the centre's path is the
    same parabola wherever the mass sits, so ``com_z`` is held (or reported
    weak), not moved, while ``gravity`` is fitted to its truth."""
    from simcore.identify import fit as F
    from simcore.identify import losses as L
    from simcore.identify.problem import Problem

    rng = np.random.default_rng(2)
    scenes = [cube((0.0, 0.0, 1.0), vel=tuple(rng.uniform(-1, 1, 3)), t_end=0.3, dt=1e-3)
              for _ in range(3)]
    times = [np.linspace(0.01, 0.3, 30)] * 3
    model, state = M.build(scenes, params={"gravity": 9.61, "com_z": 0.0})
    sim = E.simulate(model, state, times)
    noisy = sim.samp_pos + rng.normal(0.0, 1e-4, sim.samp_pos.shape)
    nan = np.full((3, 1, 3), np.nan)
    problem = Problem(model, state, L.Targets(times, noisy, nan, nan), {"trajectory": 1.0})
    r = F.fit(problem, params0={"gravity": 9.81, "com_z": 0.002}, free=["gravity", "com_z"])
    assert r.params["gravity"] == pytest.approx(9.61, abs=0.05)
    com = r.identifiability["com_z"]
    assert r.params["com_z"] == 0.002 and (not com["identifiable"] or com["weak"]), com


def test_a_dataset_simulates_with_the_body_and_recording_coefficients(tmp_path):
    """``contactfit simulate``'s path (:func:`simcore.data.replay.simulate_dataset`)
    takes them from the given values: a slower fall with a lower gravity, the
    same bits with the dataset's own."""
    from simcore.data import replay, synth

    cfg = synth.GeneratorSettings(shape="box", scenarios=2, duration=0.3, rate=148.0,
                                  noise_mm=0.0, noise_deg=0.0, height=[0.3, 0.4])
    out = synth.generate(tmp_path / "d", cfg)
    plain = replay.simulate_dataset(out)["trajectories"]
    same = replay.simulate_dataset(out, {"gravity": 9.81, "com_z": 0.0})["trajectories"]
    slow = replay.simulate_dataset(out, {"gravity": 5.0})["trajectories"]
    assert np.array_equal(plain["z"], same["z"])
    early = (plain["t"] > 0.0) & (plain["t"] < 0.05)  # in flight, before any touch
    assert early.any() and np.all(slow["z"][early] > plain["z"][early])


def test_a_layout_extended_with_them_keeps_its_rows_and_its_declared_gravity():
    """Entries added later (a per-material one, a named one) go after the
    existing ones, which keep their rows, and the dataset's declared gravity
    stays the default of a ``gravity`` added later."""
    lay = P.Layout.build(["felt"], ["mu_s@felt", "com_z@felt"], declared={"gravity": 9.7})
    assert lay.named == ("com_z", "com_z@felt") and lay.mass[1, 2] == lay.index("com_z@felt")
    more = lay.extend(["gravity", "mu_k@felt"])
    assert more.names[:lay.size] == lay.names
    assert more.vector()[more.index("gravity")] == 9.7 and more.scene[0] == more.index("gravity")
    assert lay.extend(["mu_k"]) is lay  # always held: nothing to add
    with pytest.raises(ValueError, match="only a coefficient held when named"):
        P.Layout.build(declared={"mu_k": 0.3})


def _tumbling_cubes(truth, heights, t_end, samples, seed):
    """Cubes released tumbling from ``heights`` [m] at random places,
    velocities and spins (from ``seed``), simulated under ``truth`` for
    ``t_end`` s and sampled ``samples`` times at 148 Hz with 1 mm of noise: the problem of
    fitting their trajectories."""
    from simcore.identify import losses as L
    from simcore.identify.problem import Problem

    rng = np.random.default_rng(seed)
    scenes = []
    for z in heights:
        q = rng.normal(size=4)
        scenes.append(cube((rng.uniform(-0.2, 0.2), rng.uniform(-0.2, 0.2), z),
                           vel=tuple(rng.uniform(-1, 1, 2)) + (0.0,),
                           omega=tuple(rng.uniform(-8, 8, 3)), quat=tuple(q / np.linalg.norm(q)),
                           t_end=t_end, dt=5e-4))
    times = [np.arange(1, samples + 1) / 148.0] * len(heights)
    model, state = M.build(scenes, params=truth)
    sim = E.simulate(model, state, times)
    noisy = sim.samp_pos + rng.normal(0.0, 1e-3, sim.samp_pos.shape)
    nan = np.full(noisy.shape, np.nan)
    return Problem(model, state, L.Targets(times, noisy, nan, nan), {"trajectory": 1.0})


def test_a_warm_up_stage_holds_what_its_span_cannot_see(monkeypatch):
    """Three cubes tumbling through the air and one that lands at the end
    of the warm-up's span: that span pins gravity but barely sees the
    restitution or the table's tilt (relative standard errors in the
    thousands), so the warm-up stage moves gravity to its truth and holds
    them at their start.  Without the hold, the same stage walks the
    restitution down to its bound on noise alone."""
    from simcore.identify import fit as F

    truth = {"gravity": 9.61, "tilt_x": 0.01, "e_bg": 0.4, "mu_k": 0.25, "mu_s": 0.3}
    problem = _tumbling_cubes(truth, (0.9, 0.9, 0.9, 0.25), 0.5, 73, seed=4)
    start = dict(truth, gravity=9.81, tilt_x=0.0, e_bg=0.5)

    def warm_up():
        recs = []
        F.fit(problem, params0=start, free=["gravity", "tilt_x", "e_bg"], horizons=(0.4, 1.0),
              callback=recs.append)
        return [r["theta"] for r in recs if r["horizon"] < 1.0]

    held = warm_up()
    assert held and all(th["e_bg"] == 0.5 and th["tilt_x"] == 0.0 for th in held)
    assert held[-1]["gravity"] == pytest.approx(9.61, abs=0.02)
    monkeypatch.setattr(F, "STAGE_WEAK", np.inf)
    assert min(th["e_bg"] for th in warm_up()) < 0.1


def _rugged(lay):
    """A fake problem whose loss over gravity and com_z, in units ``u, v`` of
    0.01 m/s^2 and 1 mm from (9.61, 5 mm), is a bowl strewn with wells
    (``u^2 + v^2 + 2 (1 - cos 6u) + 2 (1 - cos 6v)``: a local minimum near
    every sixth of a unit... and each whole unit), counting its calls."""
    from types import SimpleNamespace

    calls = []

    def loss_only(theta, kind="none", nuis=None):
        calls.append(1)
        u = (theta[lay.index("gravity")] - 9.61) / 0.01
        v = (theta[lay.index("com_z")] - 0.005) / 0.001
        return u * u + v * v + 2.0 * (2.0 - np.cos(6.0 * u) - np.cos(6.0 * v))

    return SimpleNamespace(model=SimpleNamespace(layout=lay), loss_only=loss_only), calls


def test_a_stage_search_leaves_a_well_for_a_lower_one_within_its_budget():
    """The CMA-ES search of a searched fit's stage, from a local minimum
    three units off on both axes of a rugged bowl (the units are the
    stage's standard errors): it returns a point of lower loss, within half
    a unit of the bowl's bottom, in at most its budget of evaluations (and
    a population); from the bottom itself it returns None (nothing lower)."""
    from types import SimpleNamespace

    from simcore.identify import fit as F

    lay = P.Layout.build(names=["gravity", "com_z"])
    free = [lay.index("gravity"), lay.index("com_z")]
    problem, calls = _rugged(lay)

    def result(g, c):
        th = lay.vector({"gravity": g, "com_z": c})
        return SimpleNamespace(params=lay.as_dict(th), stderr={"gravity": 0.01, "com_z": 0.001},
                               loss=problem.loss_only(th), nuisance=None)

    off = result(9.61 + 0.0305, 0.005 - 0.00305)  # near the wells at u = v = +-3.05
    theta, n = F._cma_search(problem, off, free, 400, 0, "none")
    assert theta is not None and problem.loss_only(theta) < 0.1 * off.loss
    assert abs(theta[free[0]] - 9.61) < 0.005 and abs(theta[free[1]] - 0.005) < 0.0005
    assert n == len(calls) - 2 and n <= 400 + 20
    again, _ = F._cma_search(problem, off, free, 400, 0, "none")
    assert np.array_equal(again, theta)  # seeded: the same search twice
    assert F._cma_search(problem, result(9.61, 0.005), free, 400, 0, "none")[0] is None


def test_a_stage_search_spans_the_previous_stages_errors():
    """A stage's local fit pins its answer in a ripple of a shallow bowl:
    its own standard errors are a sixth of the ripples' spacing, the bowl's
    bottom eight spacings away.  Searched in those errors, the CMA-ES stays
    in the ripple; given the previous (shorter) stage's errors, a spacing
    wide, it moves toward the bottom, within 2.5 spacings of it, on every
    seed (the previous stage's data put the truth within its errors)."""
    from types import SimpleNamespace

    from simcore.identify import fit as F

    lay = P.Layout.build(names=["gravity", "com_z"])
    free = [lay.index("gravity"), lay.index("com_z")]

    def loss_only(theta, kind="none", nuis=None):
        u = (theta[free[0]] - 9.61) / 0.01
        v = (theta[free[1]] - 0.005) / 0.001
        return 0.1 * (u * u + v * v) + 2.0 * (2.0 - np.cos(2 * np.pi * u) - np.cos(2 * np.pi * v))

    problem = SimpleNamespace(model=SimpleNamespace(layout=lay), loss_only=loss_only)
    th = lay.vector({"gravity": 9.61 + 0.08, "com_z": 0.005 - 0.008})
    r = SimpleNamespace(params=lay.as_dict(th), stderr={"gravity": 0.01 / 6, "com_z": 0.001 / 6},
                        loss=loss_only(th), nuisance=None)
    before = {"gravity": 0.01, "com_z": 0.001}
    unit = np.array([0.01, 0.001])
    for seed in range(5):
        pinned, _ = F._cma_search(problem, r, free, 400, seed, "none")
        assert pinned is None or (np.abs(pinned[free] - th[free]) < 0.2 * unit).all()
        moved, _ = F._cma_search(problem, r, free, 400, seed, "none", before)
        u, v = (moved[free] - [9.61, 0.005]) / unit
        assert np.hypot(u, v) < 2.5 and loss_only(moved) < 0.5 * r.loss


def test_a_searched_fit_keeps_gravity_in_the_truths_narrowing_well(monkeypatch):
    """Four cubes dropped tumbling onto a table, recorded falling at 9.61
    with 1 mm noise, fitted for gravity and restitution from 9.81 and 0.6
    over horizons of a half, three quarters and all of the span: over the
    whole span the truth's well is under 0.02 m/s^2 wide (the loss is 17x
    the truth's at 9.63).  The plain continuation ends outside it, at over
    five times the truth's loss; the searched one (three starts at the
    first horizon, a search of 100 evaluations per stage) ends in it:
    gravity within 0.003 and restitution within 0.02 of the truth, the
    loss under twice the truth's.  Its records run 1..n once, its strategy
    line says what ran, and the same fit twice gives the same bits."""
    from simcore.identify import fit as F

    monkeypatch.setattr(F, "SEARCH_STARTS", 3)
    truth = {"gravity": 9.61, "e_bg": 0.4, "mu_k": 0.25, "mu_s": 0.3}
    problem = _tumbling_cubes(truth, (0.3, 0.35, 0.4, 0.45), 0.6, 87, seed=5)
    at_truth = problem.with_coefficients(["gravity"]).loss_only(
        problem.with_coefficients(["gravity"]).model.layout.vector(truth))

    def fitted(**kw):
        recs = []
        r = F.fit(problem, params0=dict(truth, gravity=9.81, e_bg=0.6), free=["gravity", "e_bg"],
                  horizons=(0.5, 0.75, 1.0), secant=(0.01,), callback=recs.append, **kw)
        return r, recs

    plain, _ = fitted()
    assert plain.loss > 5.0 * at_truth
    r, recs = fitted(search=100)
    assert r.params["gravity"] == pytest.approx(9.61, abs=0.003)
    assert r.params["e_bg"] == pytest.approx(0.4, abs=0.02)
    assert r.loss < 2.0 * at_truth
    assert [rec["iter"] for rec in recs] == list(range(1, len(recs) + 1)) and r.nit == len(recs)
    assert "the first from 3 starts" in r.strategy and "CMA-ES" in r.strategy
    again, _ = fitted(search=100)
    assert again.params == r.params and again.loss == r.loss
