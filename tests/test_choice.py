"""The integrator follows 002's rule (simcore/choice.py), and the Moreau-Jean
stepper runs the patent's sliding spheres under the impulse law as the
event-exact engine does: the stop of claim 9 in closed form, collisions
converging to the event-exact answer with the step, exact sensitivities."""

import numpy as np
import pytest

from simcore import choice
from simcore import engine as E
from simcore import model as M
from simcore.engine import Directions
from simcore.kernel.events import EVENT_KINDS
from simcore.sliding.integrate import INTEGRATOR_EXACT, INTEGRATOR_MOREAU

R, MASS, G = 0.0286, 0.17, 9.81
P = {"mu_s": 0.3, "mu_k": 0.2, "v_th": 0.05, "e_bb": 0.9, "mu_bb": 0.05, "e_bw": 0.8,
     "mu_w": 0.1, "e_bg": 0.5}
BOX = [[1, 0, 0, -0.5], [-1, 0, 0, -0.5], [0, 1, 0, -0.5], [0, -1, 0, -0.5]]


def _slide(v0, dt, vel_dir=(1.0, 0.0)):
    return M.Scenario(radius=[R], mass=[MASS], pos=[[0, 0, R]],
                      vel=[[v0 * vel_dir[0], v0 * vel_dir[1], 0]], t_end=1.0, dt=dt)


@pytest.mark.parametrize("v0", [0.03, 0.6])
def test_a_sliding_sphere_stops_where_claim_9_says_and_converges_with_the_step(v0):
    """Under the impulse law the stepper's ground friction follows the
    body's speed regime (mu_k at or above v_th, mu_s below), so a sphere
    from v0 stops at (v0^2 - v_th^2) / (2 mu_k g) + v_th^2 / (2 mu_s g)
    (v0 above v_th; v0^2 / (2 mu_s g) below), as the event-exact engine's;
    within v0 dt (first order), 0.5 % at 1 ms from 0.6 m/s, converging with
    the step; it never turns."""
    mu_s, mu_k, v_th = P["mu_s"], P["mu_k"], P["v_th"]
    exact = (v0 ** 2 / (2 * mu_s * G) if v0 < v_th else
             (v0 ** 2 - v_th ** 2) / (2 * mu_k * G) + v_th ** 2 / (2 * mu_s * G))
    d = np.sqrt(0.5)
    errors = []
    for dt in (4e-3, 2e-3, 1e-3, 5e-4):
        model, state = M.build([_slide(v0, dt, (d, d))], params=P, integrator="moreau")
        assert model.integrator == INTEGRATOR_MOREAU and np.all(np.isinf(model.body_inertia))
        sim = E.simulate(model, state)
        travel = np.hypot(*sim.final.body_pos[0, 0, :2])
        errors.append(abs(travel - exact) / exact)
        assert np.all(sim.final.body_omega == 0.0) and np.all(sim.final.body_vel == 0.0)
        assert sim.final.body_pos[0, 0, 2] == pytest.approx(R, abs=1e-12)
    ev = E.simulate(*M.build([_slide(v0, 1e-3, (d, d))], params=P))
    assert np.hypot(*ev.final.body_pos[0, 0, :2]) == pytest.approx(exact, rel=1e-9)
    for err, dt in zip(errors, (4e-3, 2e-3, 1e-3, 5e-4)):
        assert err * exact <= v0 * dt  # first order: the last step's travel
    if v0 > v_th:
        assert errors[2] < 0.005
    assert errors[0] > errors[1] > errors[2] > errors[3]


def _shot(dt):
    return M.Scenario(radius=[R, R], mass=[MASS, MASS], pos=[[0, 0, R], [0.3, 0.01, R]],
                      vel=[[1.2, 0, 0], [0, 0, 0]], t_end=2.0, dt=dt, name="shot",
                      walls=[[-1, 0, 0, -0.4]])


def test_collisions_converge_to_the_event_exact_answer_with_the_step():
    """An oblique collision of two spheres, one of them then off a wall, to
    rest: the stepper's impulses are the impulse law's (Newton restitution,
    Coulomb friction capped at stick, as tests/test_elliptic.py shows for a
    contact alone), smeared over a step, so the final positions approach the
    event-exact engine's at first order: within the shot's speed times the
    step (where in its step an impact falls moves the error within that
    bound, so it does not fall monotonically), from 1 ms to 16 us."""
    exact = E.simulate(*M.build([_shot(1e-3)], params=P))
    assert [EVENT_KINDS[k] for k in exact.event_kind] == ["body-body", "stop", "body-wall",
                                                            "stop"]
    for dt in (1e-3, 2.5e-4, 6.25e-5, 1.5625e-5):
        sim = E.simulate(*M.build([_shot(dt)], params=P, integrator="moreau"))
        err = np.max(np.abs(sim.final.body_pos[0] - exact.final.body_pos[0]))
        assert err <= 1.2 * dt
    assert err < 1e-5


@pytest.mark.parametrize("name", ["mu_k", "mu_s", "e_bg", "e_bw", "mu_w"])
def test_sensitivities_match_central_differences(name):
    """d(final position) of a ball that lands, slides into two walls and
    stops, along each coefficient the stepper reads, against central
    differences of the whole run (v_th moves no step's impulse: the regime
    is chosen at a step's start; the differences' step is small enough not
    to move a contact into another step, as a Zeno bounce's last contacts
    are within 1e-6 of e_bg).  Two balls that touch form an island whose
    steps have no tangents: the run says so (``nondiff``)."""
    sc = M.Scenario(radius=[R], mass=[MASS], pos=[[0, 0, R + 0.02]], vel=[[1.2, 0.5, 0]],
                    t_end=0.8, dt=1e-3, walls=[[-1, 0, 0, -0.3], [0, -1, 0, -0.1]])
    model, state = M.build([sc], params=P, integrator="moreau")
    q = model.layout.names.index(name)
    sim = E.simulate(model, state, directions=Directions.build(params=[q]))
    assert sim.sens.nondiff[0] == 0
    tangent = sim.sens.final_pos[0, 0, :, 0]
    h = 1e-8
    ends = []
    for sign in (1, -1):
        vec = model.params.copy()
        vec[q] += sign * h
        m2, s2 = M.build([sc], params=vec, integrator="moreau")
        ends.append(E.simulate(m2, s2).final.body_pos[0, 0])
    fd = (ends[0] - ends[1]) / (2 * h)
    assert np.max(np.abs(fd)) > 1e-3  # the coefficient moves the run
    assert np.max(np.abs(tangent - fd)) < 1e-5 * np.max(np.abs(fd))
    two = E.simulate(*M.build([_shot(1e-3)], params=P, integrator="moreau"),
                     directions=Directions.build(params=[q]))
    assert two.sens.nondiff[0] != 0


def test_the_patents_other_laws_and_the_spinning_model_stay_event_driven():
    sc = _slide(0.5, 1e-3)
    with pytest.raises(ValueError, match="integrator moreau does not run the spinning model"):
        M.build([sc], integrator="moreau", spin=True)
    with pytest.raises(ValueError, match="body_body: 'frictional_inelastic' has no Moreau-Jean"):
        M.build([sc], integrator="moreau", laws={"body_body": "frictional_inelastic"})


# --- the rule ---------------------------------------------------------------


def _pushed(fy, name):
    """A row of five touching balls, the first pushed along the row by a
    control force with a small sideways part: the balls press into each
    other and into a wall, their contacts opening and closing many times a
    step."""
    n = 5
    return M.Scenario(radius=[R] * n, mass=[MASS] * n,
                      pos=[[-0.3 + 2 * R * k, 0, R] for k in range(n)],
                      vel=[[0.3, 0, 0]] + [[0, 0, 0]] * (n - 1), t_end=1.0, dt=1e-3,
                      walls=BOX, controls=[[0, 0, 1.0, 0.8, fy, 0]], name=name)


def _sparse(k):
    return M.Scenario(radius=[R] * 2, mass=[MASS] * 2, pos=[[0, 0, R], [0.3, 0.02 * k, R]],
                      vel=[[1.0 + 0.1 * k, 0, 0], [0, 0, 0]], t_end=2.0, dt=1e-3, walls=BOX,
                      name=f"s{k}")


def _choose(scenarios, **kw):
    def on(name):
        return M.build(scenarios, params=P, integrator=name, **kw)

    return choice.by_events(*on(None), on)


def test_few_events_run_event_driven_and_dense_ones_time_stepped():
    model, _, line = _choose([_sparse(k) for k in range(5)])
    assert model.integrator == INTEGRATOR_EXACT
    assert line.startswith("integrator exact (event-driven): ") and "below 4" in line
    density = float(line.split(": ")[1].split()[0])
    assert 0 < density < 0.01
    model, state, line = _choose([_pushed(0.05, "p")])
    assert model.integrator == INTEGRATOR_MOREAU
    assert line.startswith("integrator moreau (time-stepping): ") and "or more" in line
    assert float(line.split(": ")[1].split()[0]) >= choice.DENSE
    assert np.all(np.isfinite(E.simulate(model, state).final.body_pos))


def test_the_choice_does_not_depend_on_the_scenarios_order():
    """The pilot's scenarios are picked in the order of their names."""
    batch = [_sparse(k) for k in range(12)] + [_pushed(0.05, "p")]
    lines = {_choose(order)[2] for order in (batch, batch[::-1], batch[5:] + batch[:5])}
    assert len(lines) == 1


def test_boxes_and_the_spinning_model_say_why_they_have_no_choice():
    from .test_rigid import H, cube

    model, _, line = _choose([cube((0, 0, H + 0.1), t_end=0.1)])
    assert line == ("integrator penalty (time-stepping): the first registered that runs box "
                    "under penalty laws (no event-driven integrator does)")
    model, _, line = _choose([_slide(0.5, 1e-3)], spin=True)
    assert model.integrator == INTEGRATOR_EXACT
    assert line == "integrator exact (event-driven): the only kind that runs these shapes and laws"
