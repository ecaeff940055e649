"""The Moreau-Jean time-stepper (simcore/rigid/moreau.py) against closed forms:
restitution at the velocity level, a sliding stop, the stick-slip threshold
on an incline, energy, and the refusals."""

import numpy as np
import pytest

from simcore import engine as E
from simcore import model as M

from .test_rigid import MASS, G, H, cube, quat_about


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


def test_two_moving_bodies_in_contact_are_refused():
    two = M.Scenario(radius=[np.nan, np.nan], mass=[MASS, MASS], pos=[(0, 0, H), (0, 0, 3 * H)],
                     vel=[(0, 0, 0)] * 2, omega=[(0, 0, 0)] * 2, quat=[(1, 0, 0, 0)] * 2,
                     extent=[[H, H, H]] * 2, shape=("box", "box"), t_end=0.3, dt=1e-3)
    with pytest.raises(RuntimeError, match="pair of shapes"):
        run([two])
    with pytest.raises(ValueError, match="needs its dt"):
        M.build([cube((0, 0, H), dt=None)], integrator="moreau")


def test_a_dataset_names_the_integrator_and_fits_on_it_by_differences(tmp_path):
    """``model: {integrator: moreau}`` in dataset.yaml runs its scenarios on
    the Moreau-Jean stepper; a problem on it takes every derivative by
    central differences (flagged ND_MOREAU), which match its own loss's."""
    import yaml

    from simcore.data import dataset as D
    from simcore.data import synth
    from simcore.identify.problem import Problem
    from simcore.kernel.sensitivity import ND_MOREAU

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
    assert np.all(ev.nondiff == ND_MOREAU)
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
