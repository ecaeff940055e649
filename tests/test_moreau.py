"""The Moreau-Jean time-stepper (simcore/rigid/moreau.py) against closed forms:
restitution at the velocity level, a sliding stop, the stick-slip threshold
on an incline, energy, and the refusals; its quiet steps taken at once and
its sleeping bodies against the same scenes stepped one step at a time."""

from dataclasses import replace

import numpy as np
import pytest

from simcore import engine as E
from simcore import model as M

from .test_rigid import MASS, G, H, bodies, cube, quat_about


def run(scenarios, params=None, samples=None, **kw):
    model, state = M.build(scenarios, params=params, integrator="moreau", **kw)
    return model, E.simulate(model, state, samples)


def test_it_is_a_registered_integrator_chosen_by_name_only():
    model, _ = M.build([cube((0, 0, H + 0.1), t_end=0.1)])
    assert model.integrator == 2  # boxes: penalty unless moreau is named
    model, _ = M.build([cube((0, 0, H + 0.1), t_end=0.1)], integrator="moreau")
    assert model.integrator == 3 and not model.notes  # no stability guard


@pytest.mark.parametrize("e", [0.0, 0.3, 0.8])
def test_a_flat_drop_rebounds_at_e_at_the_velocity_level(e):
    """Sampled every step: the step in which the face touches turns the
    approach velocity of its start into e times it, upward (gravity acts on
    the impulse, not on the rebound)."""
    dt = 1e-3
    sc = cube((0, 0, H + 0.05), t_end=0.3, dt=dt)
    times = np.arange(1, 300) * dt
    _, sim = run([sc], {"e_bg": e, "mu_k": 0.3}, [times])
    vz = sim.samp_vel[:, 0, 2]
    k = int(np.argmax(np.diff(vz) > 0)) + 1  # the impact step
    assert vz[k] == pytest.approx(-e * vz[k - 1], abs=1e-12)
    if e > 0:
        # then a free flight: up at e v, down under g
        assert vz[k + 5] == pytest.approx(vz[k] - 5 * dt * G, abs=1e-9)
    # straight down, straight up (to the ridge the degenerate face contact is solved with)
    assert np.all(np.abs(sim.samp_vel[:, 0, :2]) < 1e-9)


def _slide(dt, mu=0.3, v0=1.0):
    sc = cube((0, 0, H), vel=(v0, 0, 0), t_end=0.6, dt=dt)
    _, sim = run([sc], {"mu_k": mu, "e_bg": 0.0})
    return sim.final.body_pos[0, 0, 0]


def test_a_sliding_box_stops_at_the_coulomb_distance_and_converges_with_the_step():
    exact = 1.0 / (2 * 0.3 * G)
    errors = [abs(_slide(dt) - exact) / exact for dt in (4e-3, 2e-3, 1e-3, 5e-4)]
    assert errors[2] < 0.005
    assert errors[0] > errors[1] > errors[2] > errors[3]


def _incline(theta, mu, dt=1e-3):
    """A cube set on a plane tilted by ``theta`` about y (a wall, the ground
    far below): its velocity down the slope at 0.1 s and 0.5 s (it settles
    in the first steps: a contact is active once it penetrates)."""
    n = np.array([-np.sin(theta), 0.0, np.cos(theta)])
    down = -np.array([np.cos(theta), 0.0, np.sin(theta)])
    sc = cube(H * n, quat=quat_about((0, 1, 0), -theta), t_end=0.5, dt=dt,
              walls=np.array([[*n, 0.0]]))
    _, sim = run([sc], {"mu_w": mu, "e_bw": 0.0}, [np.array([0.1, 0.5])], ground_z=-1.0)
    return sim.samp_vel[:, 0] @ down


def test_on_an_incline_it_sticks_below_tan_theta_mu_and_slides_above():
    """tan theta 1e-3 under mu: it holds still; 1e-3 over: it slides down
    at g (sin theta - mu cos theta), 8.8e-3 m/s^2."""
    mu = 0.5
    held = _incline(np.arctan(mu - 1e-3), mu)
    assert np.all(np.abs(held) < 1e-9)
    th = np.arctan(mu + 1e-3)
    v = _incline(th, mu)
    assert (v[1] - v[0]) / 0.4 == pytest.approx(G * (np.sin(th) - mu * np.cos(th)), rel=1e-3)


def test_energy_never_increases_in_inelastic_tumbling_drops():
    """Tumbling cubes dropped with e = 0 (Newton's restitution with friction
    can create energy on an eccentric impact; without restitution it
    cannot): kinetic plus potential energy never grows from one sample to
    the next."""
    rng = np.random.default_rng(3)
    scenes = []
    for _ in range(6):
        q = rng.normal(size=4)
        scenes.append(cube((0, 0, 0.3), vel=rng.normal(size=3), omega=rng.normal(size=3) * 10,
                           quat=q / np.linalg.norm(q), t_end=0.6, dt=5e-4))
    times = [np.arange(1, 600) * 1e-3] * len(scenes)
    _, sim = run(scenes, {"e_bg": 0.0, "mu_k": 0.4, "mu_s": 0.4}, times)
    inertia = MASS * (2 * H) ** 2 / 6
    for s in range(len(scenes)):
        rows = slice(sim.samp_ptr[s], sim.samp_ptr[s + 1])
        v, w, z = sim.samp_vel[rows, 0], sim.samp_omega[rows, 0], sim.samp_pos[rows, 0, 2]
        energy = 0.5 * MASS * (v * v).sum(1) + 0.5 * inertia * (w * w).sum(1) + MASS * G * z
        assert np.all(np.diff(energy) <= 1e-9 * energy.max())


def test_a_step_is_refused_without_its_dt():
    with pytest.raises(ValueError, match="needs its dt"):
        M.build([cube((0, 0, H), dt=None)], integrator="moreau")


@pytest.mark.parametrize("e", [0.0, 0.5, 1.0])
def test_boxes_collide_head_on_as_newton_says(e):
    """Two boxes on frictionless ground, the first at 1 m/s into the second
    (twice its mass) at rest: after the impact ``v1 = (m1 - e m2) / (m1 +
    m2)``, ``v2 = (1 + e) m1 / (m1 + m2)``; momentum is kept; they neither
    lift nor turn."""
    sc = bodies([dict(shape="box", ext=[H] * 3, pos=(0.0, 0, H), vel=(1.0, 0, 0)),
                 dict(shape="box", ext=[H] * 3, mass=2 * MASS, pos=(0.3, 0, H))],
                t_end=0.5, dt=1e-3)
    free = {"mu_s": 0.0, "mu_k": 0.0, "mu_bb_s": 0.0, "mu_bb": 0.0, "e_bg": 0.0, "e_bb": e}
    _, sim = run([sc], free, [np.array([0.4])])
    v = sim.samp_vel[0, :, 0]
    assert v == pytest.approx([(1 - 2 * e) / 3, (1 + e) / 3], abs=1e-6)
    assert v[0] + 2 * v[1] == pytest.approx(1.0, abs=1e-6)
    assert np.abs(sim.samp_vel[0, :, 1:]).max() < 1e-9 and np.abs(sim.samp_omega).max() < 1e-6


@pytest.mark.parametrize("awake", [False, True])
def test_a_stack_of_five_boxes_rests(awake):
    """Five cubes set on each other: they rest, drifting under 0.1 mm, for
    10 s as the stepper runs them (asleep once still), and for 1 s kept
    awake (a control of no force on the bottom box wakes the island every
    step: each step's problem solved by the sweeps)."""
    t_end = 1.0 if awake else 10.0
    sc = bodies([dict(shape="box", ext=[H] * 3, pos=(0.0, 0.0, H + 2 * H * k))
                 for k in range(5)], t_end=t_end, dt=1e-3)
    if awake:
        sc = _stepped(sc)
    model, state = M.build([sc], {"mu_s": 0.5, "mu_k": 0.5, "e_bg": 0.3, "e_bb": 0.3},
                           integrator="moreau")
    sim = E.simulate(model, state, [np.linspace(0.1, t_end, 10)])
    assert np.abs(sim.samp_pos - state.body_pos[0]).max() < 1e-4
    assert np.abs(sim.samp_omega).max() < 1e-4
    if not awake:
        assert np.all(sim.final.body_vel == 0.0)


def test_a_dataset_names_the_integrator_and_its_loss_gradient_is_exact(tmp_path):
    """``model: {integrator: moreau}`` in dataset.yaml runs its scenarios on
    the Moreau-Jean stepper; a problem on it takes its loss gradient from
    the stepper's tangents (no scenario flagged), equal to central
    differences of its own loss."""
    import yaml

    from simcore.data import dataset as D
    from simcore.data import synth
    from simcore.identify.problem import Problem

    out = synth.generate(tmp_path / "b", synth.GeneratorSettings(scenarios=3, seed=1,
                                                               shape="box", duration=0.4,
                                                               rate=148.0))
    meta = yaml.safe_load((out / "dataset.yaml").read_text())
    meta["model"] = dict(meta.get("model") or {}, integrator="moreau")
    (out / "dataset.yaml").write_text(yaml.safe_dump(meta))
    ds = D.read(out)
    prob = Problem.from_dataset(ds)
    assert prob.model.integrator == 3
    lay = prob.model.layout
    theta = lay.vector({"mu_k": 0.25, "e_bg": 0.4})
    free = [lay.index("mu_k"), lay.index("e_bg")]
    ev = prob.evaluate(theta, free)
    assert np.all(ev.nondiff == 0)
    g = ev.loss.grad.sum(axis=0)[:2]
    for c, i in enumerate(free):
        h = 1e-6 * abs(theta[i])
        up, down = theta.copy(), theta.copy()
        up[i] += h
        down[i] -= h
        fd = (prob.loss_only(up) - prob.loss_only(down)) / (2 * h)
        assert g[c] == pytest.approx(fd, rel=1e-4, abs=1e-12)
    meta["model"]["integrator"] = "leapfrog"
    (out / "dataset.yaml").write_text(yaml.safe_dump(meta))
    with pytest.raises(D.DatasetError, match="model.integrator = 'leapfrog'"):
        D.read(out)


@pytest.mark.parametrize("kind", ["cube", "flat box, centre of mass off centre, a wall"])
def test_sensitivities_match_central_differences(kind):
    """Exact tangents through the steps (each step's LCP differentiated on
    its basis, the rows and the inverse inertia moving with the body):
    tumbling tosses that land on corners and edges, bounce and slide,
    against central differences of the forward runs, along the friction
    and restitution coefficients, an initial velocity and an initial spin.
    (A box sliding flat on a face has four coplanar contacts whose problem
    has many solutions; differences jump between them there.)"""
    from .test_rigid import _tosses
    from .test_rigid_tangent import _check

    scenes = _tosses(3, 7, t_end=0.4)[:2]
    names = ["mu_k", "e_bg"]
    params = {"mu_s": 0.4, "mu_k": 0.3, "e_bg": 0.5}
    if kind != "cube":
        wall = np.array([[1.0, 0.0, 0.0, -0.3]])  # x >= -0.3: the first toss hits it
        scenes = [replace(s, extent=[[1.4 * H, H, 0.5 * H]], com=[(0.004, -0.002, 0.003)],
                          inertia=None, walls=wall) for s in scenes]
        names += ["mu_w", "e_bw"]
        params.update(mu_w=0.25, e_bw=0.3)
    model, state = M.build(scenes, params=params, integrator="moreau")
    times = [np.linspace(0.05, 0.4, 20)] * len(scenes)
    sens = _check(model, state, times, names, [("body_vel", 0, 0), ("body_omega", 0, 1)],
                  tol=1e-6)
    assert np.all(sens.nondiff == 0)
    assert np.all(sens.signal[:, :len(names)].sum(axis=0) > 0)


def _stepped(scenario):
    """The scenario with a control of no force over its whole run: a control
    acting keeps every body awake and every step a step of its own (the
    stepper takes quiet steps at once only while no control acts)."""
    none = np.array([[0, -1.0, scenario.t_end + 1.0, 0.0, 0.0, 0.0]])
    return replace(scenario, controls=none)


def _tosses():
    rng = np.random.default_rng(5)
    scenes = []
    for k in range(4):
        q = rng.normal(size=4)
        ext = [H, H, H] if k % 2 == 0 else [1.5 * H, H, 0.4 * H]  # a flat box: anisotropic
        scenes.append(bodies([dict(shape="box", ext=ext, pos=(0, 0, 0.25 + 0.1 * k),
                                   vel=(1.0, 0.3 * k, 0.5), omega=rng.normal(size=3) * 4,
                                   quat=q / np.linalg.norm(q))], t_end=2.0, dt=5e-4))
    return scenes


def _balls():
    """Spinning balls bouncing between the ground and two walls (one contact
    at a time: each step's problem has one solution)."""
    rng = np.random.default_rng(4)
    walls = np.array([[1.0, 0.0, 0.0, -0.3], [-1.0, 0.0, 0.0, -0.3]])
    return [bodies([dict(shape="sphere", ext=[0.04] * 3, pos=(0, 0, 0.2 + 0.1 * k),
                         vel=(2.0 - k, 0.2, 0.0), omega=rng.normal(size=3) * 5)],
                   t_end=1.2, dt=5e-4) for k in range(3)], walls


def _compare(scenes, params, until=None, **kw):
    """The scenes (of one duration) run as they are and stepped one step at a
    time, sampled at 250 Hz: ``(fast, slow, mask)``, ``mask`` the samples before ``until``
    (per scene; None: all)."""
    t_end = scenes[0].t_end
    times = [np.arange(1, round(t_end / 4e-3)) * 4e-3] * len(scenes)
    _, fast = run(scenes, params, times, **kw)
    _, slow = run([_stepped(s) for s in scenes], params, times, **kw)
    assert np.array_equal(fast.steps, slow.steps)
    assert np.all(fast.steps == round(t_end / scenes[0].dt))
    t = np.concatenate(times)
    scene = np.repeat(np.arange(len(scenes)), times[0].size)
    mask = np.ones(t.size, bool) if until is None else t < np.asarray(until)[scene]
    return fast, slow, mask


def test_quiet_steps_and_sleep_change_nothing_but_the_cost():
    """Taken at once, the quiet steps (flights) and the steps a sleeping body
    skips change nothing but the cost: balls bouncing and rolling between
    walls, and tumbling tosses of a cube and a flat box (whose flight the
    gyroscopic term turns), match the same scenes stepped one step at a time
    and count as many steps.  The boxes are compared until they land flat
    on a face: there four coplanar contacts make the pyramid's problem
    degenerate, its solutions many (each its own friction), and rounding
    picks among them; both runs end at rest, the fast one asleep."""
    scenes, walls = _balls()
    scenes = [replace(s, walls=walls) for s in scenes]
    fast, slow, _ = _compare(scenes, {"mu_k": 0.3, "mu_w": 0.3, "e_bg": 0.6, "e_bw": 0.5},
                             laws={"body_ground": "hunt_crossley", "body_wall": "hunt_crossley"})
    # the flights were taken at once: the same motion by other arithmetic
    assert not np.array_equal(fast.samp_pos, slow.samp_pos)
    assert np.abs(fast.samp_pos - slow.samp_pos).max() < 1e-9
    assert np.abs(fast.samp_omega - slow.samp_omega).max() < 1e-6
    scenes = _tosses()
    probe, _, _ = _compare(scenes, {"mu_k": 0.3, "e_bg": 0.4})
    flat = []
    for s in range(len(scenes)):
        r = slice(probe.samp_ptr[s], probe.samp_ptr[s + 1])
        still = (np.abs(probe.samp_omega[r, 0, :2]).max(1) < 1e-9) & (
            np.abs(probe.samp_vel[r, 0, 2]) < 1e-9)
        flat.append(probe.samp_t[r][np.argmax(still)] if still.any() else np.inf)
    assert np.isfinite(flat).all() and min(flat) > 0.3  # each lands flat, after tumbling
    fast, slow, before = _compare(scenes, {"mu_k": 0.3, "e_bg": 0.4}, until=flat)
    assert np.abs(fast.samp_pos - slow.samp_pos)[before].max() < 1e-9
    assert np.abs(fast.samp_quat - slow.samp_quat)[before].max() < 1e-7  # (bounces amplify)
    assert np.abs(slow.final.body_vel).max() < 1e-6
    assert np.all(fast.final.body_vel == 0.0) and np.all(fast.final.body_omega == 0.0)


def test_the_flight_is_the_steps_ballistic_parabola():
    """Taken at once, a flight is the steps' own parabola: after n steps
    ``x = x0 + n h v0 - g h^2 n (n + 1) / 2``, ``v = v0 - n h g``; a cube's
    spin is kept (isotropic inertia), its orientation turned by ``n h w``."""
    dt, n = 1e-3, 150
    w = np.array([3.0, -2.0, 5.0])
    sc = cube((0, 0, 2.0), vel=(0.5, -0.2, 1.0), omega=w, t_end=n * dt, dt=dt)
    _, sim = run([sc], {"e_bg": 0.5}, [np.array([n * dt])])
    x = np.array([0, 0, 2.0]) + n * dt * np.array([0.5, -0.2, 1.0])
    x[2] -= G * dt * dt * n * (n + 1) / 2
    assert sim.samp_pos[0, 0] == pytest.approx(x, abs=1e-12)
    assert sim.samp_vel[0, 0] == pytest.approx([0.5, -0.2, 1.0 - n * dt * G], abs=1e-12)
    assert sim.samp_omega[0, 0] == pytest.approx(w, abs=1e-12)
    angle = n * dt * np.linalg.norm(w)
    q = np.r_[np.cos(angle / 2), np.sin(angle / 2) * w / np.linalg.norm(w)]
    assert sim.samp_quat[0, 0] == pytest.approx(q, abs=1e-12)


def test_a_control_wakes_a_sleeping_box_and_coulomb_holds_after():
    """A cube at rest falls asleep; a horizontal push from 0.5 s of 1.5 mu m g
    wakes it and it slides at ``(F - mu m g) / m``; a push under ``mu m g``
    leaves it still."""
    mu = 0.4
    for ratio, accel in ((1.5, 0.5 * mu * G), (0.8, 0.0)):
        f = ratio * mu * MASS * G
        sc = cube((0, 0, H), t_end=1.0, dt=1e-3,
                  controls=np.array([[0, 0.5, 2.0, f, 0.0, 0.0]]))
        _, sim = run([sc], {"mu_s": mu, "mu_k": mu, "e_bg": 0.0}, [np.array([0.45, 0.7, 0.9])])
        assert np.all(sim.samp_vel[0, 0] == 0.0)  # asleep before the push
        v = sim.samp_vel[1:, 0, 0]
        assert (v[1] - v[0]) / 0.2 == pytest.approx(accel, abs=1e-9)
        assert v[0] == pytest.approx(accel * 0.2, abs=1e-3 * max(accel, 1.0))


def test_a_bouncing_ball_converges_to_the_event_exact_answer_with_the_step():
    """A ball dropped on the ground (e 0.7) against the event-exact impulse
    law over its first bounces: the Moreau-Jean stepper's impact is exact at
    the velocity level and smeared over a step in time, so its error is
    first order: within twice the approach speed times the step (the
    penetration a landing step keeps, and the impact's time, each off by at
    most that), from 1 ms down to 31 microseconds (where it is under 0.1 mm).
    (The penalty stepper's, beside it, shrinks with its compliance:
    tests/test_rigid.py.)"""
    from .test_rigid import _sphere

    times = np.linspace(0.05, 0.5, 46)
    exact = E.simulate(*M.build([_sphere((0, 0, 0.25))], params={"e_bg": 0.7}), [times])
    approach = np.sqrt(2 * G * (0.25 - 0.05))
    for dt in (1e-3, 2.5e-4, 6.25e-5, 3.125e-5):
        _, sim = run([_sphere((0, 0, 0.25), dt=dt)], {"e_bg": 0.7}, [times],
                     laws={"body_ground": "hunt_crossley"})
        err = np.max(np.abs(sim.samp_pos[:, 0, 2] - exact.samp_pos[:, 0, 2]))
        assert err <= 2 * approach * dt
    assert err < 1e-4
