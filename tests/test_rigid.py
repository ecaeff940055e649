"""Rigid boxes on the time-stepper: the penalty laws, the face contact, the
stability guard, and the motions with closed forms (simcore/rigid_engine.py)."""

import numpy as np
import pytest

from simcore import engine as E
from simcore import model as M
from simcore.geometry.rigid import quat_angle, quat_matrix
from simcore.laws import hunt_crossley as HC
from simcore.laws import penalty as PN

from . import rigid_oracle as O

G = 9.81
H = 0.05  # half width of the test cube [m]
MASS = 0.37


def quat_about(axis, angle):
    axis = np.asarray(axis, float) / np.linalg.norm(axis)
    return np.r_[np.cos(angle / 2), np.sin(angle / 2) * axis]


def cube(pos, vel=(0, 0, 0), omega=(0, 0, 0), quat=(1, 0, 0, 0), t_end=1.0, dt=1e-3, **kw):
    return M.Scenario(radius=[np.nan], mass=[MASS], pos=[pos], vel=[vel], omega=[omega],
                      quat=[quat], t_end=t_end, dt=dt, shape=("box",), extent=[[H, H, H]], **kw)


def bodies(specs, t_end=1.0, dt=1e-3):
    """A scenario of several bodies: dicts of shape, pos, ext, mass, and optional quat,
    vel, omega, fixed, com."""
    def get(key, default):
        return [s.get(key, default) for s in specs]

    return M.Scenario(radius=[s["ext"][0] if s["shape"] == "sphere" else np.nan for s in specs],
                      mass=get("mass", MASS), pos=get("pos", None), vel=get("vel", (0, 0, 0)),
                      omega=get("omega", (0, 0, 0)), quat=get("quat", (1, 0, 0, 0)),
                      extent=[s["ext"] for s in specs], fixed=get("fixed", False),
                      com=get("com", (0.0, 0.0, 0.0)), shape=tuple(get("shape", "box")),
                      t_end=t_end, dt=dt)


def simulate(scenarios, params=None, samples=None, **kw):
    model, state = M.build(scenarios, params=params, **kw)
    return model, state, E.simulate(model, state, samples)


# --- the laws in closed form --------------------------------------------------

def _rebound(e, n=1.5, k=1e6, m=1.0, v=1.0, steps=200000):
    """The restitution of one Hunt-Crossley impact, integrated by RK4 (no gravity)."""
    chi = HC.alpha(e) / v

    def acc(x, xd):
        return -k * x ** n * (1 + chi * xd) / m if x > 0 else 0.0

    x, xd = 0.0, v
    t_c = 3.0 * (m * v * v / k) ** 0.4 / v  # a few contact times
    h = t_c / steps
    while True:
        k1 = (xd, acc(x, xd))
        k2 = (xd + 0.5 * h * k1[1], acc(x + 0.5 * h * k1[0], xd + 0.5 * h * k1[1]))
        k3 = (xd + 0.5 * h * k2[1], acc(x + 0.5 * h * k2[0], xd + 0.5 * h * k2[1]))
        k4 = (xd + h * k3[1], acc(x + h * k3[0], xd + h * k3[1]))
        x += h / 6 * (k1[0] + 2 * k2[0] + 2 * k3[0] + k4[0])
        xd += h / 6 * (k1[1] + 2 * k2[1] + 2 * k3[1] + k4[1])
        if x <= 0.0:
            return -xd / v


@pytest.mark.parametrize("e", [0.3, 0.6, 0.95])
def test_hunt_crossley_damping_from_e_rebounds_with_e(e):
    """a(e) solves the exact energy relation: an integrated impact rebounds
    with e (to the integration's accuracy), for any exponent."""
    assert _rebound(e, steps=20000) == pytest.approx(e, rel=2e-3)
    assert _rebound(e, n=1.0, steps=20000) == pytest.approx(e, rel=2e-3)
    a = HC.alpha(e)
    assert a * (1 + e) - np.log1p(a) + np.log1p(-a * e) == pytest.approx(0.0, abs=1e-12)


def test_the_classical_damping_is_far_off_and_e_one_is_undamped():
    assert HC.alpha(1.0) == 0.0
    classical = 1.5 * (1 - 0.6)
    assert abs(classical - HC.alpha(0.6)) / HC.alpha(0.6) > 0.3


def test_laws_closed_forms_and_clamp():
    row = np.zeros(PN.NCOEF)
    row[[PN.C_K_SD, PN.C_C_SD]] = 1e5, 50.0
    row[[PN.C_K_HC, PN.C_N_HC, PN.C_ALPHA]] = 1e8, 1.5, HC.alpha(0.5)
    row[[PN.C_K_IMP, PN.C_N1_IMP, PN.C_D_MAX, PN.C_P_MAX]] = 1e9, 2.2, 1e3, 1e-3
    x, xd, vi = 4e-4, 0.3, 0.8
    assert PN.normal_force(PN.LAW_SPRING_DAMPER, row, x, xd, vi) == pytest.approx(1e5 * x + 50 * xd)
    chi = HC.alpha(0.5) / vi
    assert PN.normal_force(PN.LAW_HUNT_CROSSLEY, row, x, xd, vi) == pytest.approx(
        1e8 * x ** 1.5 * (1 + chi * xd))
    s = x / 1e-3
    assert PN.normal_force(PN.LAW_IMPACT, row, x, xd, vi) == pytest.approx(
        1e9 * x ** 2.2 + 1e3 * (3 * s * s - 2 * s ** 3) * xd)
    # full damping from p_max on, no force outside, never a pull
    assert PN.normal_force(PN.LAW_IMPACT, row, 2e-3, 0.1, vi) == pytest.approx(
        1e9 * 2e-3 ** 2.2 + 1e3 * 0.1)
    assert PN.normal_force(PN.LAW_HUNT_CROSSLEY, row, 0.0, 1.0, vi) == 0.0
    assert PN.normal_force(PN.LAW_SPRING_DAMPER, row, 1e-6, -10.0, vi) == 0.0


def test_stiction_curve():
    row = np.zeros(PN.NCOEF)
    row[[PN.C_MU_S, PN.C_MU_K, PN.C_VE1, PN.C_VE2]] = 0.5, 0.3, 0.01, 0.1
    assert PN.stiction(row, 0.0) == PN.stiction(row, 0.01) == 0.5
    assert PN.stiction(row, 0.1) == PN.stiction(row, 3.0) == 0.3
    assert PN.stiction(row, 0.055) == pytest.approx(0.4)  # the cubic step's middle
    s = np.linspace(0.0, 0.2, 2001)
    mu = np.array([PN.stiction(row, x) for x in s])
    # monotone and continuous: no jump beyond the cubic's steepest slope 1.5 dmu / dv
    assert np.all(np.diff(mu) <= 0)
    assert np.max(np.abs(np.diff(mu))) <= 1.5 * 0.2 / 0.09 * (s[1] - s[0]) * (1 + 1e-9)


@pytest.mark.parametrize("zeta", [0.0, 0.3, 2.0, 30.0])
@pytest.mark.parametrize("implicit", [True, False])
def test_step_limit_is_the_semi_implicit_eulers_stability_boundary(zeta, implicit):
    """v' = v + h (-k x - c v*)/m, x' = x + h v' with the damper at the new
    (v* = v', the time-stepper's) or the old velocity: the spectral radius of
    the step crosses 1 at 2/w_n (sqrt(zeta^2 + 1) +- zeta)."""
    m, k = 0.1, 1e6
    wn = np.sqrt(k / m)
    c = 2 * zeta * np.sqrt(k * m)
    limit = PN.step_limit(k, c, m, implicit=implicit)
    sign = 1 if implicit else -1
    assert limit == pytest.approx(2 / wn * (np.sqrt(zeta ** 2 + 1) + sign * zeta))

    def radius(h):
        if implicit:  # (v, x) -> v' = (v - h k x / m) / (1 + h c / m)
            a = np.array([[1, -h * k / m], [0, 1]]) / np.array([[1 + h * c / m], [1]])
        else:
            a = np.array([[1 - h * c / m, -h * k / m], [0, 1]])
        a = np.array([[1, 0], [h, 1]]) @ a  # then drift with the new v
        return np.max(np.abs(np.linalg.eigvals(a)))

    assert radius(0.99 * limit) <= 1 + 1e-12
    assert radius(1.01 * limit) > 1


# --- the face contact -----------------------------------------------------------

def _platform(top=0.0, half=(0.3, 0.3, 0.05), quat=(1, 0, 0, 0)):
    """A fixed box whose top face is at height ``top`` (unrotated)."""
    return dict(shape="box", ext=half, pos=(0, 0, top - half[2]), fixed=True, mass=10.0,
                quat=quat)


def test_face_contact_points_inside_and_past_an_edge():
    """A cube sunk 1 mm into a platform: 4 corner points inside its face; past
    the edge, the corners outside move along the edges onto the platform's edge."""
    sunk = H - 1e-3
    inside = bodies([_platform(top=0.5), dict(shape="box", ext=(H, H, H), pos=(0, 0, 0.5 + sunk))])
    model, state = M.build([inside])
    rep = E.contacts(model, state, 0)
    assert rep["body"].tolist() == [1, 1, 1, 1] and sorted(rep["corner"]) == [0, 1, 2, 3]
    assert np.allclose(rep["penetration"], 1e-3)
    edge = 0.3
    past = bodies([_platform(top=0.5), dict(shape="box", ext=(H, H, H),
                                            pos=(edge + 0.02, 0, 0.5 + sunk))])
    model, state = M.build([past])
    rep = E.contacts(model, state, 0)
    x = rep["point"][:, 0]
    # two corners inside, the two outside moved along their edges onto x = 0.3
    assert len(x) == 4 and sorted(rep["corner"]) == [0, 1, 2, 3]
    assert np.sort(x) == pytest.approx([edge - 0.03, edge - 0.03, edge, edge])
    assert np.allclose(rep["penetration"], 1e-3)


def test_resting_cube_corner_forces_sum_to_its_weight():
    _, _, res = simulate([cube((0, 0, H), t_end=0.5)])
    model, state = M.build([cube((0, 0, H), t_end=0.5)])
    rep = E.contacts(model, res.final, 0)
    assert rep["contact"].sum() == 4 and sorted(rep["corner"]) == [0, 1, 2, 3]
    assert rep["normal_force"].sum(axis=0) == pytest.approx([0, 0, MASS * G], rel=1e-9, abs=1e-9)
    assert np.abs(rep["friction_force"]).max() < 1e-9
    assert np.allclose(rep["total_force"], rep["normal_force"] + rep["friction_force"])


# --- motions with closed forms ---------------------------------------------------

def test_box_sliding_flat_stops_at_the_closed_form_and_converges_with_the_step():
    """v0^2 / (2 mu_k g), to a small fraction that shrinks with the step."""
    v0, mu = 1.0, 0.3
    errs = []
    for dt in (8e-5, 2e-5):
        _, _, res = simulate([cube((0, 0, H), vel=(v0, 0, 0), t_end=0.6, dt=dt)],
                             {"mu_s": mu, "mu_k": mu}, strict=True)
        errs.append(abs(res.final.body_pos[0, 0, 0] / (v0 ** 2 / (2 * mu * G)) - 1))
        assert np.abs(res.final.body_vel[0, 0]).max() < 1e-9
    assert errs[0] < 1e-3 and errs[1] < errs[0]


def test_stiction_curve_sliding_matches_its_ode():
    """With mu_s > mu_k the box decelerates by mu(v) g (the stiction curve of
    the slip speed): the stop distance of dv/dx = -mu(v) g / v."""
    v0, mu_s, mu_k, ve1, ve2 = 0.5, 0.45, 0.3, 0.05, 0.2
    params = {"mu_s": mu_s, "mu_k": mu_k, "v_e1": ve1, "v_e2": ve2}
    _, _, res = simulate([cube((0, 0, H), vel=(v0, 0, 0), t_end=0.5, dt=2e-4)], params)
    row = np.zeros(PN.NCOEF)
    row[[PN.C_MU_S, PN.C_MU_K, PN.C_VE1, PN.C_VE2]] = mu_s, mu_k, ve1, ve2
    v = np.linspace(1e-9, v0, 200001)
    integrand = v / (np.array([PN.stiction(row, x) for x in v]) * G)
    expected = np.sum(0.5 * (integrand[1:] + integrand[:-1]) * np.diff(v))
    assert res.final.body_pos[0, 0, 0] == pytest.approx(expected, rel=3e-3)


@pytest.mark.parametrize("e", [0.3, 0.6, 0.95])
def test_flat_drop_rebounds_to_e_squared_of_its_height(e):
    drop = 0.1
    times = np.arange(0.005, 0.45, 0.0005)
    _, _, res = simulate([cube((0, 0, H + drop), t_end=0.45, dt=1e-4)], {"e_bg": e}, [times])
    z, vz = res.samp_pos[:, 0, 2] - H, res.samp_vel[:, 0, 2]
    up = np.flatnonzero((vz > 0) & (z > 1e-3))[0]  # moving up, clear of the ground
    apex = z[up] + vz[up] ** 2 / (2 * G)  # the ballistic rest of the rebound
    assert np.sqrt(apex / drop) == pytest.approx(e, rel=1e-2)


def _incline(theta, mu_bb, mu_bb_s, t_end):
    """A cube resting on a fixed ramp tilted by ``theta`` about y (its surface
    through the origin), both rotated alike; returns the cube's displacement
    along the slope over the run and the run."""
    q = quat_about((0, 1, 0), theta)  # the ramp's +x axis points downhill
    n = quat_matrix(q) @ np.array([0, 0, 1.0])
    ramp = dict(shape="box", ext=(1.0, 0.5, 0.05), pos=tuple(-0.05 * n), quat=tuple(q),
                fixed=True, mass=10.0)
    block = dict(shape="box", ext=(H, H, H), pos=tuple(H * n), quat=tuple(q))
    sc = bodies([ramp, block], t_end=t_end, dt=2e-4)
    sc.quat = [tuple(q), tuple(q)]
    _, _, res = simulate([sc], {"mu_bb": mu_bb, "mu_bb_s": mu_bb_s},
                         [np.array([0.2, t_end])], ground_z=-5.0)
    down = quat_matrix(q) @ np.array([1.0, 0, 0])
    return res.samp_pos[:, 1] @ down, res


def test_box_on_an_incline_slides_at_g_sin_minus_mu_cos():
    theta, mu = np.radians(20), 0.2
    s, _ = _incline(theta, mu, mu, 0.6)
    acc = 2 * (s[1] - s[0]) / (0.6 ** 2 - 0.2 ** 2)  # s = a t^2 / 2 from rest
    assert acc == pytest.approx(G * (np.sin(theta) - mu * np.cos(theta)), rel=1e-2)


def test_box_on_an_incline_holds_when_static_friction_exceeds_tan_theta():
    s, res = _incline(np.radians(20), 0.4, 0.5, 1.0)
    assert abs(s[1]) < 2e-3 and abs(s[1] - s[0]) < 1e-4  # creep under 2 mm in 1 s


@pytest.mark.parametrize("offset, tips", [(0.02, True), (-0.02, False)])
def test_cube_past_a_platform_edge_tips_off_and_inside_it_stays(offset, tips):
    edge, top = 0.3, 0.5
    sc = bodies([_platform(top=top), dict(shape="box", ext=(H, H, H),
                                           pos=(edge + offset, 0, top + H))], t_end=1.0, dt=2e-4)
    times = np.linspace(0.02, 1.0, 50)
    _, state, res = simulate([sc], samples=[times])
    tilt = np.degrees(quat_angle(res.samp_quat[:, 1], state.body_quat[0, 1]))
    if tips:  # over the edge, off the platform, down to the ground
        assert tilt.max() > 60 and res.final.body_pos[0, 1, 2] == pytest.approx(H, abs=1e-3)
        assert res.final.body_pos[0, 1, 0] > edge
    else:
        assert tilt.max() < 0.1 and abs(res.final.body_pos[0, 1, 2] - (top + H)) < 1e-4


# --- energy, determinism, the NumPy reference ------------------------------------

def _tosses(n, seed, t_end=1.2):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        q = rng.normal(size=4)
        out.append(cube((rng.uniform(-0.2, 0.2), rng.uniform(-0.2, 0.2), 0.3),
                        vel=tuple(rng.uniform(-1, 1, 3)), omega=tuple(rng.uniform(-8, 8, 3)),
                        quat=tuple(q / np.linalg.norm(q)), t_end=t_end, dt=5e-4))
    return out


def test_energy_never_increases_without_pushes():
    times = np.arange(0.0, 1.2, 0.002)
    model, state, res = simulate(_tosses(6, 1), {"e_bg": 0.6, "mu_s": 0.4, "mu_k": 0.3},
                                 [times] * 6)
    inertia = model.body_inertia[:, 0]

    def energy(s, pos, vel, omega, quat):
        rot = np.array([quat_matrix(q) for q in quat])
        wb = np.einsum("nji,nj->ni", rot, omega)
        return (0.5 * MASS * np.sum(vel ** 2, -1) + 0.5 * np.sum(inertia[s] * wb ** 2, -1)
                + MASS * G * pos[:, 2])

    e0 = [energy(s, state.body_pos[s, :1], state.body_vel[s, :1], state.body_omega[s, :1],
                 state.body_quat[s, :1])[0] for s in range(6)]
    m = times.size
    for s in range(6):
        sl = slice(s * m, (s + 1) * m)
        e = energy(s, res.samp_pos[sl, 0], res.samp_vel[sl, 0], res.samp_omega[sl, 0],
                   res.samp_quat[sl, 0])
        assert np.all(e <= e0[s] * (1 + 1e-9)), (s, np.max(e) - e0[s])
        assert e[-1] < 0.5 * e0[s]


def test_serial_and_parallel_runs_are_bit_identical():
    model, state = M.build(_tosses(8, 2, t_end=0.8), params={"e_bg": 0.5})
    times = [np.linspace(0.1, 0.8, 8)] * 8
    a = E.simulate(model, state, times, parallel=True)
    b = E.simulate(model, state, times, parallel=False)
    for f in ("samp_pos", "samp_vel", "samp_omega", "samp_quat"):
        assert np.array_equal(getattr(a, f), getattr(b, f))


@pytest.mark.parametrize("com", [(0.0, 0.0, 0.0), (0.01, -0.005, 0.012)])
def test_numpy_reference_of_the_step_agrees_with_the_kernel(com):
    """Two boxes, one on a fixed platform and one tumbling onto it and the
    ground (its mass at ``com`` from its centre): 600 steps of the kernel
    against the NumPy reference."""
    q1 = quat_about((1, 2, 0.5), 0.7)
    specs = [_platform(top=0.1, half=(0.2, 0.2, 0.05)),
             dict(shape="box", ext=(H, 0.04, 0.03), pos=(0.1, 0.0, 0.13), vel=(0.4, 0.1, -0.5),
                  omega=(3, -2, 5), quat=tuple(q1), mass=0.3, com=com),
             dict(shape="box", ext=(H, H, H), pos=(-0.1, 0.05, 0.1 + H - 5e-4), mass=0.5)]
    h, n = 1e-4, 600
    sc = bodies(specs, t_end=h * n, dt=h)
    model, state = M.build([sc], params={"e_bg": 0.6, "e_bb": 0.5, "mu_bb": 0.3, "mu_bb_s": 0.4,
                                         "v_e1": 0.05, "v_e2": 0.2, "k_v": 0.5})
    assert model.scen_dt[0] == h
    res = E.simulate(model, state, [h * np.arange(1, n + 1)])
    lay = model.layout
    table = np.array(__import__("simcore.rigid.rigid_engine", fromlist=["x"])._coefficients(
        model.params, *lay.penalty_rows()))
    ref = []
    for k in range(3):  # the reference's state: the centre of mass's
        arm = quat_matrix(state.body_quat[0, k]) @ model.body_com[0, k]
        ref.append(O.Body("box", state.body_pos[0, k] + arm, state.body_quat[0, k],
                          state.body_vel[0, k] + np.cross(state.body_omega[0, k], arm),
                          state.body_omega[0, k], model.body_mass[0, k],
                          model.body_inertia[0, k], model.body_ext[0, k],
                          fixed=bool(model.body_fixed[0, k]), com=model.body_com[0, k]))
    planes = [(np.array([0, 0, 1.0]), 0.0)]
    memory, touched = {}, 0
    for step in range(n):
        pts = O.step(ref, planes, [0], table, lay.law_codes, 0, G, h, memory)
        touched += len(pts)
        for k in (1, 2):
            assert np.allclose(ref[k].centre(), res.samp_pos[step, k], rtol=0, atol=1e-10), step
            assert np.allclose(ref[k].w, res.samp_omega[step, k], rtol=0, atol=1e-7), step
            assert np.allclose(ref[k].q, res.samp_quat[step, k], rtol=0, atol=1e-10), step
    assert touched > 400  # contacts were exercised


def test_an_off_centre_mass_flies_about_its_centre_of_mass():
    """In free flight the centre of mass falls on its parabola and the cube
    (isotropic: no torque changes its spin) turns about it at its constant
    rate: the sampled centre is ``x_m(t) - R(t) c``, its velocity ``v_m(t) -
    w x R(t) c``, with ``x_m(t) = x_m0 + v_m0 t - g t (t + h) / 2`` (the
    step's semi-implicit Euler, exact for a constant force, at steps ``h``)
    from ``x_m0 = x0 + R0 c``, ``v_m0 = v0 + w x R0 c``."""
    c, w, q0, h = np.array([0.01, -0.02, 0.015]), np.array([3.0, -5.0, 7.0]), \
        quat_about((1, 1, 0), 0.4), 1e-4
    times = 1e-3 * np.arange(1, 301)
    sc = cube((0, 0, 2.0), vel=(0.5, 0.0, 1.0), omega=tuple(w), quat=tuple(q0), t_end=0.3, dt=h,
              com=[c])
    model, state, res = simulate([sc], samples=[times], strict=True)
    arm = quat_matrix(q0) @ c
    xm0, vm0 = state.body_pos[0, 0] + arm, state.body_vel[0, 0] + np.cross(w, arm)
    for k, t in enumerate(times):
        r = quat_matrix(quat_about(w, np.linalg.norm(w) * t)) @ quat_matrix(q0) @ c
        xm = xm0 + vm0 * t - np.array([0.0, 0.0, G * t * (t + h) / 2])
        vm = vm0 - np.array([0.0, 0.0, G * t])
        assert np.allclose(res.samp_pos[k, 0], xm - r, rtol=0, atol=1e-12)
        assert np.allclose(res.samp_vel[k, 0], vm - np.cross(w, r), rtol=0, atol=1e-12)
    assert np.allclose(res.final.body_pos[0, 0], res.samp_pos[-1, 0])  # the state: the centre's


def test_the_stable_step_measures_the_arm_from_the_centre_of_mass():
    """A corner's arm from an off-centre mass reaches ``|ext + |c||``: a
    lighter effective mass, a stiffer contact for it, a shorter step."""
    steps = []
    for com in ((0.0, 0.0, 0.0), (0.03, -0.03, 0.03)):
        model, _ = M.build([cube((0, 0, 0.2), t_end=0.1, dt=1.0, com=[com])])
        steps.append(model.scen_dt[0])
    reach = [np.sqrt(3) * H, np.sqrt(3) * (H + 0.03)]
    inertia = MASS * (2 * H * H) / 3
    m_eff = [1.0 / (1.0 / MASS + r * r / inertia) for r in reach]
    assert steps[1] < steps[0]
    # Hunt-Crossley's stiffness at the deepest dip: the step scales as m_eff^(1/2.5)
    assert steps[1] / steps[0] == pytest.approx((m_eff[1] / m_eff[0]) ** 0.4, rel=0.05)


def test_a_resting_box_presses_hardest_under_its_centre_of_mass():
    """At rest the corner forces carry the weight and their centre of
    pressure lies under the centre of mass, not under the box's centre."""
    c = np.array([0.02, -0.012, 0.01])
    sc = cube((0, 0, H), t_end=0.6, com=[c])
    model, state, res = simulate([sc], {"e_bg": 0.3})
    rep = E.contacts(model, res.final, 0)
    f = rep["normal_force"][:, 2]
    assert f.sum() == pytest.approx(MASS * G, rel=1e-9)
    pressure = (f[:, None] * rep["point"]).sum(axis=0) / f.sum()
    under = res.final.body_pos[0, 0] + quat_matrix(res.final.body_quat[0, 0]) @ c
    assert np.allclose(pressure[:2], under[:2], rtol=0, atol=1e-9)
    # it stays put: its corners sink unequally (micrometres) and tilt it a hair
    assert np.abs(under[:2] - c[:2]).max() < 1e-5


# --- the time-stepper against the event-exact engine ---------------------------

def _sphere(pos, vel=(0, 0, 0), r=0.05, t_end=0.5, dt=1e-4):
    return M.Scenario(radius=[r], mass=[0.2], pos=[pos], vel=[vel], t_end=t_end, dt=dt)


def test_spheres_converge_to_the_event_exact_bounce_as_the_contact_stiffens():
    """A ball dropped on the ground under Hunt-Crossley from e_bg against the
    event-exact impulse law, over the first two bounces: the gap shrinks as
    the contact's compliance and the step shrink together."""
    times = np.linspace(0.05, 0.5, 46)
    exact = E.simulate(*M.build([_sphere((0, 0, 0.25))], params={"e_bg": 0.7}), [times])
    errs = []
    for k, dt in ((1e6, 1e-4), (1e8, 1e-5), (1e10, 1e-6)):
        _, _, res = simulate([_sphere((0, 0, 0.25), dt=dt)], {"e_bg": 0.7, "k_hc": k},
                             [times], laws={"body_ground": "hunt_crossley"}, strict=True)
        errs.append(np.max(np.abs(res.samp_pos[:, 0, 2] - exact.samp_pos[:, 0, 2])))
    assert errs[0] > 5 * errs[1] > 25 * errs[2] and errs[2] < 3e-4  # the contact's compliance


def test_head_on_spheres_exchange_momentum_as_the_impulse_law_says():
    times = np.array([0.2])
    sc = M.Scenario(radius=[0.05, 0.05], mass=[0.2, 0.3], pos=[[0, 0, 0.5], [0.2, 0, 0.5]],
                    vel=[[1.0, 0, 0], [0, 0, 0]], t_end=0.2, dt=1e-4)
    exact = E.simulate(*M.build([sc], params={"e_bb": 0.8}, gravity=0.0), [times])
    assert exact.samp_vel[0, :, 0] == pytest.approx([-0.08, 0.72])
    errs = []
    for dt in (1e-5, 1e-6):  # about 25 and 250 steps over the contact
        sc.dt = dt
        _, _, res = simulate([sc], {"e_bb": 0.8, "k_hc": 1e9}, [times], gravity=0.0,
                             laws={"body_body": "hunt_crossley"}, strict=True)
        errs.append(np.max(np.abs(res.samp_vel[0, :, 0] - exact.samp_vel[0, :, 0])))
    assert errs[1] < errs[0] and errs[1] < 2e-3


# --- inputs ---------------------------------------------------------------------

def test_bad_rigid_inputs_are_named():
    with pytest.raises(ValueError, match=r"body 0: quaternion .* has norm 2: expected a unit"):
        M.build([cube((0, 0, H), quat=(2, 0, 0, 0))])
    bad = cube((0, 0, H))
    bad.extent = [[H, -1.0, H]]
    with pytest.raises(ValueError, match=r"body 0: hy = -1.0: expected a half extent > 0"):
        M.build([bad])
    with pytest.raises(ValueError, match=r"body 0: starts 0.01 m below the ground"):
        M.build([cube((0, 0, H - 0.01))])
    tilted = cube((0, 0, H), quat=tuple(quat_about((1, 0, 0), 0.3)))
    with pytest.raises(ValueError, match=r"below the ground"):
        M.build([tilted])
    odd = cube((0, 0, H))
    odd.inertia = [[1.0, 1.0, 3.0]]
    with pytest.raises(ValueError, match="triangle inequality"):
        M.build([odd])
    moving = bodies([dict(shape="box", ext=(H, H, H), pos=(0, 0, H), vel=(1, 0, 0),
                          fixed=True)])
    with pytest.raises(ValueError, match="fixed, but given a velocity"):
        M.build([moving])


def test_the_stability_guard_sub_steps_says_so_and_strict_refuses():
    model, _ = M.build([cube((0, 0, H), dt=1e-2)])
    assert model.scen_dt[0] < 1e-3 and len(model.notes) == 1
    assert "sub-stepped to their contacts' stable step" in model.notes[0]
    with pytest.raises(ValueError, match="have a dt over .* strict: refused"):
        M.build([cube((0, 0, H), dt=1e-2)], strict=True)
    ok, _ = M.build([cube((0, 0, H), dt=1e-5)], strict=True)
    assert ok.scen_dt[0] == 1e-5 and ok.notes == ()
    chosen, _ = M.build([cube((0, 0, H), dt=None)])
    assert chosen.scen_dt[0] == model.scen_dt[0] and "no dt" in chosen.notes[0]


def test_pyramidal_cone_brakes_a_diagonal_slide_by_mu_over_root_two():
    v0, mu = 0.6, 0.3
    out = {}
    for cone in ("elliptic", "pyramidal"):
        _, _, res = simulate([cube((0, 0, H), vel=(v0 / np.sqrt(2), v0 / np.sqrt(2), 0),
                                   t_end=0.6, dt=2e-4)], {"mu_s": mu, "mu_k": mu}, cone=cone)
        out[cone] = np.linalg.norm(res.final.body_pos[0, 0, :2])
    assert out["elliptic"] == pytest.approx(v0 ** 2 / (2 * mu * G), rel=3e-3)
    assert out["pyramidal"] == pytest.approx(np.sqrt(2) * v0 ** 2 / (2 * mu * G), rel=3e-3)


# --- the dataset contract -----------------------------------------------------

def _write_box_dataset(root, bodies, replayed=True):
    """A dataset of boxes: ``bodies`` rows (dicts), 0.3 s of trajectories at
    100 Hz, the engine's own (``replayed``) or standing still."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from simcore.data import replay

    root.mkdir(parents=True, exist_ok=True)
    meta = "name: boxes\nunits: {length: m, time: s}\n"
    (root / "dataset.yaml").write_text(meta + "allow_implausible: true\n")
    pq.write_table(pa.Table.from_pylist(bodies), root / "bodies.parquet")
    times = np.round(np.arange(0.0, 0.3001, 0.01), 10)
    rows = [dict(scenario_id=b["scenario_id"], body_id=b["body_id"], t=float(t), x=b["x0"],
                 y=b["y0"], z=b["z0"]) for b in bodies for t in times]
    pq.write_table(pa.Table.from_pylist(rows), root / "trajectories.parquet")
    if replayed:
        traj = replay.simulate_dataset(root)["trajectories"]
        pq.write_table(pa.Table.from_pydict({c: traj[c] for c in ("scenario_id", "body_id", "t",
                                                                  "x", "y", "z")}),
                       root / "trajectories.parquet")
        (root / "dataset.yaml").write_text(meta)


def _box_rows():
    q = quat_about((1, 1, 0), 0.4)
    return [dict(scenario_id="toss", body_id=0, shape="box", radius=None, mass=MASS, hx=H, hy=H,
                 hz=0.03, ixx=None, iyy=None, izz=None, fixed=0, qw0=q[0], qx0=q[1], qy0=q[2],
                 qz0=q[3], x0=0.0, y0=0.0, z0=0.2, vx0=1.0, vy0=0.0, vz0=0.0, wx0=0.0, wy0=5.0,
                 wz0=0.0),
            dict(scenario_id="table", body_id=0, shape="box", radius=None, mass=10.0, hx=0.3,
                 hy=0.3, hz=0.05, ixx=None, iyy=None, izz=None, fixed=1, qw0=1.0, qx0=0.0,
                 qy0=0.0, qz0=0.0, x0=0.0, y0=0.0, z0=0.45, vx0=0.0, vy0=0.0, vz0=0.0, wx0=0.0,
                 wy0=0.0, wz0=0.0),
            dict(scenario_id="table", body_id=1, shape="sphere", radius=0.03, mass=0.1, hx=None,
                 hy=None, hz=None, ixx=None, iyy=None, izz=None, fixed=0, qw0=None, qx0=None,
                 qy0=None, qz0=None, x0=0.1, y0=0.0, z0=0.6, vx0=0.0, vy0=0.0, vz0=0.0,
                 wx0=0.0, wy0=0.0, wz0=0.0)]


def test_a_box_dataset_reads_simulates_and_replays_with_orientations(tmp_path):
    from simcore.data import dataset as D
    from simcore.data import replay

    _write_box_dataset(tmp_path / "ds", _box_rows())
    ds = D.read(tmp_path / "ds")
    assert ds.laws == dict.fromkeys(ds.laws, "hunt_crossley")
    model, state, times, ids = D.scenarios(ds)
    table, toss = [sid for sid, _ in ids].index("table"), [sid for sid, _ in ids].index("toss")
    assert model.integrator == 2 and model.body_fixed[table].tolist() == [True, False]
    assert model.body_ext[toss, 0] == pytest.approx([H, H, 0.03])
    assert model.body_inertia[toss, 0] == pytest.approx(
        MASS / 3 * np.array([H ** 2 + 0.03 ** 2, H ** 2 + 0.03 ** 2, 2 * H ** 2]))
    assert state.body_quat[toss, 0] == pytest.approx(quat_about((1, 1, 0), 0.4))
    tables = replay.simulate_dataset(ds)
    traj = tables["trajectories"]
    assert {"qw", "qx", "qy", "qz", "wx", "wy", "wz"} <= set(traj)
    assert np.allclose(np.linalg.norm(np.stack([traj[c] for c in ("qw", "qx", "qy", "qz")]),
                                      axis=0), 1.0)
    # the ball falls onto the fixed table top (z = 0.5) and bounces on it (e_bb 0.95)
    ball = (np.asarray(traj["scenario_id"]) == "table") & (traj["body_id"] == 1)
    z = traj["z"][ball]
    assert z.min() == pytest.approx(0.53, abs=1e-3) and z[-1] > 0.53
    table_z = traj["z"][(np.asarray(traj["scenario_id"]) == "table") & (traj["body_id"] == 0)]
    assert np.all(table_z == 0.45)


@pytest.mark.parametrize("change, message", [
    ({"qw0": 0.9}, "(?s)non-unit quaternion.*table bodies, column qw0"),
    ({"hy": -0.1}, "(?s)column hy.*half extent hy must be given and > 0"),
    ({"z0": 0.0}, "(?s)below the ground at the first sample.*lowest corner"),
    ({"fixed": 3}, "(?s)column fixed.*expected true or false"),
    ({"com_x": 0.0, "com_y": 0.0, "com_z": 0.03},
     "(?s)centre of mass outside the body.*column com_z.*below the half extent hz"),
])
def test_bad_box_rows_are_named(tmp_path, change, message):
    from simcore.data import dataset as D

    rows = _box_rows()[:1]
    rows[0].update(change)
    _write_box_dataset(tmp_path / "ds", rows, replayed=False)
    with pytest.raises(D.DatasetError, match=message) as err:
        D.read(tmp_path / "ds")
    assert "row 0" in str(err.value)


def test_an_off_centre_mass_is_read_and_only_a_box_takes_one(tmp_path):
    from simcore.data import dataset as D

    rows = _box_rows()
    for r, com in zip(rows, ((0.01, 0.0, -0.02), (0.0, 0.0, 0.0), (None, None, None))):
        r.update(com_x=com[0], com_y=com[1], com_z=com[2])
    _write_box_dataset(tmp_path / "ok", rows, replayed=False)
    model, state, _, ids = D.scenarios(D.read(tmp_path / "ok"))
    toss = [sid for sid, _ in ids].index("toss")
    assert model.body_com[toss, 0] == pytest.approx([0.01, 0.0, -0.02])
    assert not model.body_com[1 - toss].any()
    rows[2].update(com_x=0.01)
    _write_box_dataset(tmp_path / "bad", rows, replayed=False)
    with pytest.raises(D.DatasetError, match="(?s)column com_x, row 2.*only a box takes"):
        D.read(tmp_path / "bad")


def test_a_sphere_without_a_radius_is_named(tmp_path):
    from simcore.data import dataset as D

    rows = _box_rows()[1:]
    rows[1]["radius"] = None
    _write_box_dataset(tmp_path / "ds", rows, replayed=False)
    with pytest.raises(D.DatasetError, match="(?s)column radius, row 1.*a sphere's radius"):
        D.read(tmp_path / "ds")


def test_cli_simulates_a_box_dataset_says_it_sub_steps_and_strict_refuses(tmp_path, capsys):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from flows.cli import main

    ds = tmp_path / "ds"
    _write_box_dataset(ds, _box_rows()[:1])
    assert main(["simulate", str(ds), "--out", str(tmp_path / "o")]) == 0
    out = capsys.readouterr().out
    assert "sub-stepped to their contacts' stable step" in out
    traj = pq.read_table(tmp_path / "o" / "trajectories.parquet")
    assert {"qw", "qx", "qy", "qz"} <= set(traj.column_names)
    pq.write_table(pa.table({"scenario_id": ["toss"], "duration": [0.3], "dt": [1e-2]}),
                   ds / "scenarios.parquet")
    assert main(["simulate", str(ds), "--out", str(tmp_path / "o"), "--strict"]) == 1
    err = capsys.readouterr().err
    assert "have a dt over their contacts' stable step" in err and "Traceback" not in err


def test_a_stiffness_is_reported_in_its_exponents_unit(tmp_path, capsys):
    from flows.cli import main
    from simcore import params as P

    assert P.unit("k_hc", {"n_hc": 1.5}) == "N/m^1.5"
    assert P.unit("k_hc@felt", {"n_hc": 1.5, "n_hc@felt": 2.0}) == "N/m^2"
    assert P.unit("k_imp") == "N/m^2.2" and P.unit("mu_s") == "1"
    ds = tmp_path / "ds"
    _write_box_dataset(ds, _box_rows()[:1], replayed=False)
    assert main(["params", str(ds)]) == 0
    out = capsys.readouterr().out
    assert "N/m^1.5" in out and "hunt_crossley" in out


# --- more laws and pairs in motion ---------------------------------------------

def _ball(pos, vel=(0, 0, 0), omega=(0, 0, 0), r=0.03, t_end=1.0, dt=1e-4):
    return M.Scenario(radius=[r], mass=[0.1], pos=[pos], vel=[vel], omega=[omega], t_end=t_end,
                      dt=dt)


def test_rolling_resistance_stops_a_rolling_ball_at_its_closed_form():
    """A torque of mu_roll N against the rolling: the ball rolls to rest with
    deceleration (5/7) mu_roll g / R."""
    r, v0, arm = 0.03, 0.5, 2e-3
    _, _, res = simulate([_ball((0, 0, r), vel=(v0, 0, 0), omega=(0, v0 / r, 0), r=r, t_end=1.5)],
                         {"mu_roll": arm, "mu_s": 0.5, "mu_k": 0.5},
                         laws={"body_ground": "hunt_crossley"})
    decel = 5 / 7 * arm * G / r
    assert res.final.body_pos[0, 0, 0] == pytest.approx(v0 ** 2 / (2 * decel), rel=1e-2)
    assert np.abs(res.final.body_vel[0, 0]).max() < 1e-6


def test_viscous_friction_slows_a_box_exponentially():
    """k_v at each of the 4 corners, no Coulomb friction: v = v0 exp(-4 k_v t / m)."""
    kv, v0 = 0.2, 0.4
    times = np.array([0.2, 0.5])
    _, _, res = simulate([cube((0, 0, H), vel=(v0, 0, 0), t_end=0.5)],
                         {"mu_s": 0.0, "mu_k": 0.0, "k_v": kv}, [times])
    assert res.samp_vel[:, 0, 0] == pytest.approx(v0 * np.exp(-4 * kv * times / MASS), rel=1e-3)


def _drop_1d(force, m, v, h=1e-7):
    """The rebound speed of a mass m meeting a contact force(x, xd) >= 0 at
    speed v (no gravity), by semi-implicit Euler at a fine step."""
    x, xd = 0.0, v
    while True:
        xd -= h * max(force(x, xd), 0.0) / m
        x += h * xd
        if x <= 0.0:
            return -xd


@pytest.mark.parametrize("law, params, force", [
    ("spring_damper", {"k_sd": 2e5, "c_sd": 0.0}, lambda x, xd: 2e5 * x),
    ("spring_damper", {"k_sd": 2e5, "c_sd": 30.0}, lambda x, xd: 2e5 * x + 30.0 * xd),
    ("impact", {"k_imp": 1e9, "n1_imp": 2.2, "d_max": 50.0, "p_max": 1e-3},
     lambda x, xd: 1e9 * x ** 2.2 + 50.0 * min(x / 1e-3, 1) ** 2 * (3 - 2 * min(x / 1e-3, 1)) * xd),
])
def test_a_flat_drop_rebounds_as_its_law_does(law, params, force):
    """A flat box dropped from 5 cm on four corners under each law: its
    rebound speed against the law's own 1-D impact (four corners, the mass)."""
    drop, v = 0.05, np.sqrt(2 * G * 0.05)
    times = np.arange(0.05, 0.195, 1e-4)
    _, _, res = simulate([cube((0, 0, H + drop), t_end=0.2, dt=1e-5)], params, [times],
                         laws={"body_ground": law})
    vz = res.samp_vel[:, 0, 2]
    up = np.flatnonzero((vz > 0) & (res.samp_pos[:, 0, 2] - H > 2e-3))[0]
    v_out = np.sqrt(vz[up] ** 2 + 2 * G * (res.samp_pos[up, 0, 2] - H))  # back at the ground
    expected = _drop_1d(lambda x, xd: 4 * force(x, xd), MASS, v)
    assert v_out == pytest.approx(expected, rel=1e-2)
    if params.get("c_sd") == 0.0:
        assert v_out == pytest.approx(v, rel=1e-2)  # an undamped spring gives all back


def test_a_box_meets_a_wall_with_the_walls_restitution():
    """A box sliding frictionless into a wall x = 0.3 leaves it at e_bw of its speed."""
    v0 = 0.5
    sc = cube((0, 0, H), vel=(v0, 0, 0), t_end=1.0, dt=1e-4, walls=[[-1.0, 0, 0, -0.3]])
    _, _, res = simulate([sc], {"mu_s": 0.0, "mu_k": 0.0, "mu_w": 0.0, "e_bw": 0.6})
    assert res.final.body_vel[0, 0, 0] == pytest.approx(-0.6 * v0, rel=1e-2)
    assert res.final.body_pos[0, 0, 0] < 0.3 - H


def test_a_ball_rests_on_a_fixed_box_and_bounces_off_its_side():
    """Sphere-box: a ball settles on a platform's top (its centre r above it);
    thrown at the platform's side it comes back with e_bb."""
    r, top = 0.03, 0.5
    sc = bodies([_platform(top=top), dict(shape="sphere", ext=(r, r, r), pos=(0.1, 0, top + r),
                                          mass=0.1)], t_end=0.5, dt=1e-4)
    _, _, res = simulate([sc])
    assert res.final.body_pos[0, 1, 2] == pytest.approx(top + r, abs=1e-4)
    side = bodies([_platform(top=top), dict(shape="sphere", ext=(r, r, r), mass=0.1,
                                            pos=(0.4, 0, top - 0.05), vel=(-1.0, 0, 0))],
                  t_end=0.08, dt=1e-5)
    _, _, res = simulate([side], {"e_bb": 0.7}, gravity=0.0)
    assert res.final.body_vel[0, 1] == pytest.approx([0.7, 0, 0], abs=1e-2)
