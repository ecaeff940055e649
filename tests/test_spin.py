"""The spinning model against closed forms, conservation laws, Stronge's
compliant contact integrated in time, and the NumPy oracle (``tests/spin_oracle.py``)."""

from dataclasses import replace

import numpy as np
import pytest

from simcore import engine
from simcore import model as M
from simcore.kernel.events import EVENT_KINDS
from simcore.laws import stronge
from simcore.laws.registry import PairLaw
from simcore.spin import spin, spin_impact
from tests import spin_oracle

R, MASS, G = 0.028575, 0.170097, 9.81
MU, MU_R, MU_SP = 0.2, 0.01, 0.0127
CLOTH = {"mu_k": MU, "mu_s": MU, "v_th": 1e-9, "mu_r": MU_R, "mu_sp": MU_SP}
ALPHA_SP = 2.5 * MU_SP * G / R
TABLE = np.array([[1, 0, 0, 0], [-1, 0, 0, -1.42], [0, 1, 0, 0], [0, -1, 0, -2.84]], float)


def run(pos, vel, omega, t_end=30.0, params=CLOTH, samples=None, walls=None, heights=None,
        laws=None, parallel=False):
    nb = len(pos)
    sc = M.Scenario(radius=[R] * nb, mass=[MASS] * nb, pos=pos, vel=vel, omega=omega,
                    t_end=t_end, walls=np.zeros((0, 4)) if walls is None else walls,
                    wall_height=heights)
    mdl, st = M.build([sc], params=params, spin=True, laws=laws)
    return engine.simulate(mdl, st, sample_times=None if samples is None else [samples],
                           parallel=parallel)


def kinds(res):
    ev = res.events(0)
    return [EVENT_KINDS[k] for k in ev["kind"]], ev["t"]


def test_stun_shot_slides_for_2u_over_7mug_and_rolls_at_five_sevenths():
    v0 = 1.3
    res = run([[0.2, 0.3, R]], [[v0, 0, 0]], [[0, 0, 0]], samples=np.linspace(0, 9, 901))
    names, t = kinds(res)
    assert names == ["slide_roll", "roll_rest"]
    ts = 2 * v0 / (7 * MU * G)
    v1 = 5 / 7 * v0
    assert t[0] == pytest.approx(ts, rel=1e-13)
    assert t[1] == pytest.approx(ts + v1 / (MU_R * G), rel=1e-13)
    x = 0.2 + v0 * ts - 0.5 * MU * G * ts**2 + v1**2 / (2 * MU_R * G)
    assert res.final.body_pos[0, 0, 0] == pytest.approx(x, rel=1e-13)
    # Sampled: speed 5/7 v0 just after the slide, rolling without slip from then on.
    ts_, pos, vel = res.samples(0)
    w = res.samp_omega
    k = np.searchsorted(ts_, ts) + 1
    v_k = v1 - MU_R * G * (ts_[k] - ts)
    assert vel[k, 0, 0] == pytest.approx(v_k, rel=1e-12)
    rolling = (ts_ > ts) & (ts_ < t[1])
    np.testing.assert_allclose(w[rolling, 0, 1], vel[rolling, 0, 0] / R, rtol=1e-12)
    assert np.all(w[:, 0, 0] == 0.0) and np.all(w[:, 0, 2] == 0.0)


@pytest.mark.parametrize("spin_ratio", [-3.0, -1.0, 0.4, 2.5])
def test_draw_and_follow_shots_match_their_closed_forms(spin_ratio):
    """A ball along +x with w_y = k v0 / R: slip u0 = v0 (1 - k); the slide
    ends after 2|u0|/(7 mu g) at v = (5 + 2k) v0 / 7 (backward for strong draw)."""
    v0, x0 = 1.1, 0.7
    wy = spin_ratio * v0 / R
    res = run([[x0, 0.5, R]], [[v0, 0, 0]], [[0, wy, 0]])
    u0 = v0 - R * wy
    ts = 2 * abs(u0) / (7 * MU * G)
    v1 = (5 * v0 + 2 * R * wy) / 7
    x = x0 + v0 * ts - 0.5 * MU * G * ts**2 * np.sign(u0) + np.sign(v1) * v1**2 / (2 * MU_R * G)
    names, t = kinds(res)
    assert names == ["slide_roll", "roll_rest"]
    assert t[0] == pytest.approx(ts, rel=1e-12)
    assert res.final.body_pos[0, 0, 0] == pytest.approx(x, rel=1e-12, abs=1e-12)
    assert res.final.body_pos[0, 0, 1] == 0.5


def test_vertical_spin_decays_at_its_rate_in_place_and_while_rolling():
    wz = 40.0
    res = run([[0.5, 0.5, R]], [[0, 0, 0]], [[0, 0, wz]], t_end=60.0)
    names, t = kinds(res)
    assert names == ["spin_rest"]
    assert t[0] == pytest.approx(wz / ALPHA_SP, rel=1e-13)
    assert np.all(res.final.body_pos[0, 0] == [0.5, 0.5, R])
    # Rolling with more vertical spin than the roll lasts: roll_spin, then spin_rest.
    v0, wz = 0.3, 200.0
    res = run([[0.5, 0.5, R]], [[0, v0, 0]], [[-v0 / R, 0, wz]], t_end=60.0)
    names, t = kinds(res)
    assert names == ["roll_spin", "spin_rest"]
    assert t[0] == pytest.approx(v0 / (MU_R * G), rel=1e-13)
    assert t[1] == pytest.approx(wz / ALPHA_SP, rel=1e-13)
    assert res.final.body_pos[0, 0, 1] == pytest.approx(0.5 + v0**2 / (2 * MU_R * G), rel=1e-13)


def test_the_static_switch_splits_a_slide_at_v_th():
    """Slip above v_th slows at 7/2 mu_k g, below it at 7/2 mu_s g."""
    v0, v_th, mu_s = 1.0, 0.2, 0.3
    res = run([[0.5, 0.5, R]], [[v0, 0, 0]], [[0, 0, 0]],
              params={**CLOTH, "v_th": v_th, "mu_s": mu_s})
    names, t = kinds(res)
    assert names[0] == "slide_roll"
    assert t[0] == pytest.approx((v0 - v_th) / (3.5 * MU * G) + v_th / (3.5 * mu_s * G),
                                 rel=1e-13)


def _energy(vel, w):
    return 0.5 * MASS * np.sum(vel**2, axis=-1) + 0.5 * 0.4 * MASS * R**2 * np.sum(w**2, axis=-1)


def _random_scene(rng, nb):
    pos = []
    while len(pos) < nb:
        p = np.array([rng.uniform(0.1, 1.32), rng.uniform(0.1, 2.74), R])
        if all(np.linalg.norm(p - q) > 2.2 * R for q in pos):
            pos.append(p)
    vel = np.zeros((nb, 3))
    vel[:, :2] = rng.normal(0, 1.2, (nb, 2)) * (rng.random((nb, 1)) < 0.7)
    w = rng.normal(0, 40, (nb, 3)) * (rng.random((nb, 1)) < 0.6)
    return np.array(pos), vel, w


@pytest.mark.parametrize("laws", [None, {"body_body": "frictional_inelastic",
                                         "body_wall": "stronge_compliant"}])
def test_energy_never_increases(laws):
    rng = np.random.default_rng(4)
    params = {**CLOTH, "mu_bb": 0.05, "e_bb": 0.95, "e_bw": 0.85, "mu_w": 0.2}
    if laws:
        params.update(mu_bb_b=0.108, mu_bb_c=1.088, omega_ratio_w=1.8)
    for _ in range(12):
        pos, vel, w = _random_scene(rng, 3)
        res = run(pos, vel, w, t_end=12.0, params=params, walls=TABLE,
                  heights=[0.036576] * 4, laws=laws, samples=np.linspace(0, 12, 2401))
        _, _, v = res.samples(0)
        e = _energy(v, res.samp_omega).sum(axis=1)
        assert np.all(np.diff(e) <= 1e-12 * e[0] + 1e-15)


# -- impacts -----------------------------------------------------------------------

def _random_pair(rng):
    n = np.array([*rng.normal(size=2), 0.0])
    n /= np.linalg.norm(n)
    vi, vj = np.zeros(3), np.zeros(3)
    vi[:2] = rng.normal(0, 1, 2)
    vj[:2] = rng.normal(0, 0.5, 2)
    if (vj - vi) @ n > 0:
        vi, vj = vj, vi
    return n, vi, vj, rng.normal(0, 50, 3), rng.normal(0, 50, 3)


@pytest.mark.parametrize("law", [0, 1])
def test_ball_ball_impulse_conserves_momentum_and_angular_momentum_about_the_contact(law):
    rng = np.random.default_rng(1)
    stuck = slipped = 0
    for _ in range(300):
        n, vi, vj, wi, wj = _random_pair(rng)
        mi, mj = MASS * rng.uniform(0.5, 2), MASS * rng.uniform(0.5, 2)
        ri, rj = R * rng.uniform(0.8, 1.2), R * rng.uniform(0.8, 1.2)
        e, mu = rng.uniform(0.5, 1.0), rng.choice([0.02, 0.1, 2.0])
        out = [np.zeros(3) for _ in range(4)]
        jn, jt, slip = spin_impact.ball_ball(PairLaw(law, e, mu, 0.1, 1.0), (vi, wi, mi, ri),
                                             (vj, wj, mj, rj), n, tuple(out[:2]), tuple(out[2:]))
        dvi, dwi, dvj, dwj = out
        np.testing.assert_allclose(mi * dvi + mj * dvj, 0, atol=1e-12)
        # The impulse acts at the contact point: each ball's angular momentum about it holds.
        for m, r, c, dv, dw in ((mi, ri, ri * n, dvi, dwi), (mj, rj, -rj * n, dvj, dwj)):
            np.testing.assert_allclose(0.4 * m * r * r * dw - m * np.cross(c, dv), 0, atol=1e-10)
        # Restitution of the normal speed, and no energy gain.
        un = (vj - vi) @ n
        assert ((vj + dvj) - (vi + dvi)) @ n == pytest.approx(-e * un, rel=1e-12)
        before = mi * vi @ vi + mj * vj @ vj + 0.4 * (mi * ri**2 * wi @ wi + mj * rj**2 * wj @ wj)
        vi2, vj2, wi2, wj2 = vi + dvi, vj + dvj, wi + dwi, wj + dwj
        after = (mi * vi2 @ vi2 + mj * vj2 @ vj2
                 + 0.4 * (mi * ri**2 * wi2 @ wi2 + mj * rj**2 * wj2 @ wj2))
        assert after <= before * (1 + 1e-12)
        slip_after = (vj2 + np.cross(wj2, -rj * n)) - (vi2 + np.cross(wi2, ri * n))
        slip_after -= (slip_after @ n) * n
        if slip:
            slipped += 1
            bound = (mu * jn if law == 0 else
                     2 * (mu + 0.1 * np.exp(-1.0 * np.linalg.norm(
                         (vj + np.cross(wj, -rj * n)) - (vi + np.cross(wi, ri * n))
                         - (un * n)))) * e * -un / (1 / mi + 1 / mj))
            assert jt == pytest.approx(bound, rel=1e-12)
        else:
            stuck += 1
            np.testing.assert_allclose(slip_after, 0, atol=1e-10)
    assert stuck > 30 and slipped > 30


def test_equal_balls_no_slip_is_pooltools_one_seventh():
    n = np.array([1.0, 0, 0])
    vi, wi = np.array([1.0, 0.3, 0]), np.array([2.0, -5.0, 30.0])
    vj, wj = np.zeros(3), np.zeros(3)
    out = [np.zeros(3) for _ in range(4)]
    spin_impact.ball_ball(PairLaw(0, 0.9, 10.0, 0.0, 0.0), (vi, wi, MASS, R), (vj, wj, MASS, R),
                          n, tuple(out[:2]), tuple(out[2:]))
    # pooltool's no-slip: dv1_t = -(1/7)(v1 - v2 + R (w1 + w2) x n), tangential part.
    slip = vi - vj + R * np.cross(wi + wj, n)
    expect = -(slip - (slip @ n) * n) / 7
    np.testing.assert_allclose(out[0] - (out[0] @ n) * n, expect, atol=1e-14)
    np.testing.assert_allclose(out[1], -5 / 14 * (np.cross(n, vi - vj) / R + wi + wj)
                               + 5 / 14 * ((np.cross(n, vi - vj) / R + wi + wj) @ n) * n,
                               atol=1e-12)


@pytest.mark.parametrize("law", [0, 2])
def test_cushion_impulse_holds_angular_momentum_about_the_contact(law):
    rng = np.random.default_rng(2)
    for _ in range(300):
        n = np.array([0.0, 1.0, 0.0])
        if rng.random() < 0.5:
            n = np.array([0.0, R, R - 0.036576])
            n /= np.linalg.norm(n)
        v = np.array([rng.normal(), -abs(rng.normal()) - 0.05, 0.0])
        w = rng.normal(0, 60, 3)
        e, mu, ratio = rng.uniform(0.6, 0.95), rng.uniform(0.05, 0.4), rng.uniform(1.2, 1.9)
        dv, dw = np.zeros(3), np.zeros(3)
        jn, jt, _ = spin_impact.ball_cushion(law, e, mu, ratio, v, w, MASS, R, n, dv, dw)
        c = -R * n
        np.testing.assert_allclose(0.4 * MASS * R * R * dw - MASS * np.cross(c, dv), 0,
                                   atol=1e-10)
        assert (v + dv) @ n == pytest.approx(-e * (v @ n), rel=1e-12)
        e0 = v @ v + 0.4 * R * R * w @ w
        v2, w2 = v + dv, w + dw
        assert v2 @ v2 + 0.4 * R * R * w2 @ w2 <= e0 * (1 + 1e-12)


def _compliant_ode(vt0, vn0, mu, e, ratio, steps):
    """Stronge's compliant contact integrated in time (units of 1/omega_n):
    the normal force of the half-sine compression and stretched restitution,
    a tangential spring of frequency ``ratio`` that sticks, or slips at the
    friction limit (return mapping), semi-implicit Euler."""
    beta = 3.5
    tf = (1 + e) * np.pi / 2
    dt = tf / steps
    vt, u = np.array(vt0, float), np.zeros_like(np.asarray(vt0, float))
    for k in range(1, steps + 1):
        t = k * dt
        ph = np.where(t <= np.pi / 2, t, t / e + np.pi / 2 * (1 - 1 / e))
        fn = -vn0 * np.sin(ph)
        u_try = u + vt * dt
        limit = mu * fn * beta / ratio**2
        u = np.where(np.abs(u_try) > limit, np.sign(u_try) * limit, u_try)
        vt = vt - ratio**2 * u * dt
    return vt


def test_stronge_regimes_match_the_compliant_contact_integrated_in_time():
    rng = np.random.default_rng(3)
    cases = []
    for regime in range(3):
        while sum(1 for c in cases if c[-1] == regime) < 8:
            vn0 = -rng.uniform(0.2, 3)
            vt0 = -rng.uniform(0, 2) * abs(vn0)
            mu, e, ratio = rng.uniform(0.05, 0.5), rng.uniform(0.5, 0.95), rng.uniform(1.1, 1.9)
            if stronge.collinear(vt0, vn0, mu, e, ratio)[2] == regime:
                cases.append((vt0, vn0, mu, e, ratio, regime))
    c = np.array(cases).T
    expect = np.array([stronge.collinear(*x[:5])[0] for x in cases])
    coarse = _compliant_ode(c[0], c[1], c[2], c[3], c[4], 4000)
    fine = _compliant_ode(c[0], c[1], c[2], c[3], c[4], 16000)
    err_c = np.abs(coarse - expect) / np.abs(c[1])
    err_f = np.abs(fine - expect) / np.abs(c[1])
    assert err_f.max() < 1e-5
    assert np.median(err_f) < np.median(err_c)  # and it converges as the step shrinks
    for x in cases:
        assert stronge.collinear(*x[:5])[1] == pytest.approx(-x[3] * x[1], rel=1e-15)


# -- the event loop against the NumPy oracle --------------------------------------

@pytest.mark.parametrize("laws", [None, {"body_body": "frictional_inelastic",
                                         "body_wall": "stronge_compliant"}])
def test_engine_matches_the_numpy_oracle(laws):
    rng = np.random.default_rng(7)
    coef = {**CLOTH, "v_th": 0.05, "mu_s": 0.25, "mu_bb": 0.05, "e_bb": 0.93, "e_bw": 0.8,
            "mu_w": 0.2}
    if laws:
        coef.update(mu_bb_b=0.108, mu_bb_c=1.088, omega_ratio_w=1.7)
    heights = [np.nan, 0.036576, 0.036576, np.nan]
    impacts = 0
    for _ in range(25):
        pos, vel, w = _random_scene(rng, int(rng.integers(2, 5)))
        samples = np.linspace(0, 8, 33)
        res = run(pos, vel, w, t_end=8.0, params=coef, walls=TABLE, heights=heights, laws=laws,
                  samples=samples)
        r, v, om, events, out = spin_oracle.simulate(
            [R] * len(pos), [MASS] * len(pos), pos, vel, w, TABLE, heights, coef, 8.0,
            laws=laws, samples=samples)
        names, t = kinds(res)
        ev = res.events(0)
        assert names == [e[1] for e in events]
        np.testing.assert_allclose(t, [e[0] for e in events], rtol=0, atol=1e-9)
        assert list(ev["a"]) == [e[2] for e in events]
        np.testing.assert_allclose(res.final.body_pos[0], r, atol=1e-9)
        np.testing.assert_allclose(res.final.body_omega[0], om, atol=1e-6)
        _, sp, sv = res.samples(0)
        np.testing.assert_allclose(sp, np.array([[x[0] for x in row] for row in out]), atol=1e-9)
        np.testing.assert_allclose(res.samp_omega, np.array([[x[2] for x in row] for row in out]),
                                   atol=1e-6)
        impacts += sum(1 for e in events if e[1] in ("body-body", "body-wall"))
    assert impacts > 40


def test_serial_and_parallel_runs_are_identical():
    rng = np.random.default_rng(9)
    scs = []
    for k in range(16):
        pos, vel, w = _random_scene(rng, 3)
        scs.append(M.Scenario(radius=[R] * 3, mass=[MASS] * 3, pos=pos, vel=vel, omega=w,
                              walls=TABLE, wall_height=[0.036576] * 4, t_end=10.0))
    mdl, st = M.build(scs, params=CLOTH, spin=True)
    a = engine.simulate(mdl, st, [np.linspace(0, 10, 41)] * 16, parallel=False)
    b = engine.simulate(mdl, st, [np.linspace(0, 10, 41)] * 16, parallel=True)
    assert np.array_equal(a.samp_pos, b.samp_pos) and np.array_equal(a.samp_omega, b.samp_omega)
    assert np.array_equal(a.event_t, b.event_t) and np.array_equal(a.final.body_omega,
                                                                  b.final.body_omega)


def test_motion_state_codes_are_pooltools():
    assert spin.STATE_NAMES == ("stationary", "spinning", "sliding", "rolling")
    assert (spin.STATIONARY, spin.SPINNING, spin.SLIDING, spin.ROLLING) == (0, 1, 2, 3)


# -- what the spinning model refuses ------------------------------------------------

@pytest.mark.parametrize("change, message", [
    (dict(pos=[[0.5, 0.5, 0.2]]), "spinning model runs spheres on the ground"),
    (dict(vel=[[0.5, 0.0, 0.3]]), "expected vz = 0"),
    (dict(walls=[[0, 0.6, 0.8, 0.1]]), "is not horizontal"),
    (dict(controls=[[0, 0, 1, 0, 0, 100.0]]), "fz = 100.0 N lifts body 0"),
    (dict(walls=TABLE, wall_height=[0.03, -1, 0.03, 0.03]), "wall 1: height = -1.0"),
])
def test_spin_scenarios_outside_the_model_are_refused(change, message):
    base = dict(radius=[R], mass=[MASS], pos=[[0.5, 0.5, R]], vel=[[0.5, 0, 0]],
                omega=[[0, 0, 3.0]], t_end=1.0)
    with pytest.raises(ValueError, match=message):
        M.build([M.Scenario(**{**base, **change})], spin=True)


def test_spin_inputs_without_the_spinning_model_are_refused():
    base = dict(radius=[R], mass=[MASS], pos=[[0.5, 0.5, R]], vel=[[0.5, 0, 0]], t_end=1.0)
    with pytest.raises(ValueError, match="model: {spin: true}"):
        M.build([M.Scenario(**base, omega=[[0, 0, 3.0]])])
    with pytest.raises(ValueError, match="nose height"):
        M.build([M.Scenario(**base, walls=TABLE, wall_height=[0.03] * 4)])
    with pytest.raises(ValueError, match="needs the spinning model"):
        M.build([M.Scenario(**base)], laws={"body_wall": "stronge_compliant"})
    with pytest.raises(ValueError, match="spinning model only"):
        M.build([M.Scenario(**base)], params={"mu_r": 0.02})


# -- pooltool's own shots (datasets/billiards) ----------------------------------------

def test_the_billiards_dataset_replays_pooltool_to_rounding():
    """With pooltool's coefficients and laws every sample of the 60 shots
    (positions and spins, 50 Hz, up to rest) and every impact time agree
    with pooltool 0.6 to a nanometre and 10 ns."""
    from pathlib import Path

    from simcore.data import dataset as D
    from simcore.data import replay

    ds = D.read(Path(__file__).resolve().parents[1] / "datasets" / "billiards")
    assert ds.spin and ds.laws["body_wall"] == "stronge_compliant"
    out = replay.simulate_dataset(ds, params=ds.truth)
    tr = ds.tables["trajectories"]
    sim = out["trajectories"]
    for c in ("x", "y"):
        np.testing.assert_allclose(sim[c], tr[c].to_numpy(), rtol=0, atol=1e-9)
    for c in ("wx", "wy", "wz"):
        np.testing.assert_allclose(sim[c], tr[c].to_numpy(), rtol=0, atol=1e-6)
    ev = ds.tables["events"].to_pandas()
    ev = ev[ev.other.str.startswith("wall") | (ev.body_id == 0)]
    se = out["events"]
    hits = [(sid, t) for sid, t, k in zip(se["scenario_id"], se["t"], se["kind"])
            if k in ("body-body", "body-wall")]
    assert len(hits) == len(ev) == 204
    want = ev.sort_values(["scenario_id", "t"])
    got = sorted(hits)
    # (Two slow cushion impacts, 0.01-0.03 m/s, carry the dataset's mu_s over
    # the last 1e-9 m/s of earlier slides into a nanosecond.)
    np.testing.assert_allclose([t for _, t in got], want.t.to_numpy(), rtol=0, atol=1e-8)


# -- sensitivities ------------------------------------------------------------------

SPIN_COEFS = ["mu_s", "mu_k", "v_th", "mu_r", "mu_sp", "mu_bb", "e_bb", "mu_bb_b", "mu_bb_c",
              "e_bw", "mu_w", "omega_ratio_w"]


def _runs_alike(a, b, s):
    return np.array_equal(a.event_kind[a.event_ptr[s]:a.event_ptr[s + 1]],
                          b.event_kind[b.event_ptr[s]:b.event_ptr[s + 1]])


def _assert_tangents_match(res, dirs, nscen, differences, steps, floor):
    """Along every direction, the exact tangents of the final positions and
    of the trajectory's sse (``d sse/dp = 2 J^T r``) of ``res`` against
    ``differences(p, step)`` (its runs, their final positions' and sse's
    central differences) with each of ``steps``: the better must agree to
    1e-5 relative (the sse's with ``floor`` as its smallest scale), on the
    scenes whose event sequence the perturbations leave alone, at least 80 %
    of them."""
    checked = 0
    for p in range(dirs.count):
        fds = [differences(p, h) for h in steps]
        for s in range(nscen):
            if not all(_runs_alike(r, res, s) for runs, _, _ in fds for r in runs):
                continue
            scale = max(np.abs(fds[0][1][s]).max(), 1e-3)
            err_pos = min(np.abs(res.sens.final_pos[s, ..., p] - fd[s]).max()
                          for _, fd, _ in fds)
            assert err_pos <= 1e-5 * scale, (dirs.labels[p], s, err_pos, scale)
            g = 2 * res.sens.traj_grad[s, p]
            err_sse = min(abs(g - fd[s]) for _, _, fd in fds)
            assert err_sse <= 1e-5 * max(abs(g), floor), (dirs.labels[p], s, err_sse, g)
            checked += 1
    assert checked >= 0.8 * dirs.count * nscen


@pytest.mark.parametrize("laws", [None, {"body_body": "frictional_inelastic",
                                         "body_wall": "stronge_compliant"}])
def test_tangents_match_central_differences(laws):
    """Exact sensitivities of the final positions and the trajectory
    residuals (J^T r, J^T J) along every coefficient the spinning model reads
    and two initial velocities, against central differences, on random
    scenes whose event sequence the perturbation leaves alone."""
    rng = np.random.default_rng(11)
    coef = {**CLOTH, "v_th": 0.05, "mu_s": 0.25, "mu_bb": 0.05, "e_bb": 0.93, "e_bw": 0.8,
            "mu_w": 0.2}
    if laws:
        coef.update(mu_bb_b=0.108, mu_bb_c=1.088, omega_ratio_w=1.7)
    scs = []
    for _ in range(24):
        pos, vel, w = _random_scene(rng, 3)
        scs.append(M.Scenario(radius=[R] * 3, mass=[MASS] * 3, pos=pos, vel=vel, omega=w,
                              walls=TABLE, wall_height=[0.036576] * 4, t_end=3.0))
    mdl, st = M.build(scs, params=coef, spin=True, laws=laws)
    names = [n for n in SPIN_COEFS if n in mdl.layout.names]
    idx = [mdl.layout.index(n) for n in names]
    dirs = engine.Directions.build(params=idx, velocities=[(0, 0), (1, 1)],
                                   names=mdl.layout.names)
    times = [np.linspace(0, 3, 61)] * len(scs)
    base = engine.simulate(mdl, st, times, parallel=False)
    meas = base.samp_pos + rng.normal(0, 2e-3, base.samp_pos.shape)
    res = engine.simulate(mdl, st, times, directions=dirs, measured=meas, gauss_newton=True)
    assert not res.sens.nondiff.any()
    none = engine.Directions.build(names=mdl.layout.names)

    def differences(p, rel):
        """Central differences along direction p with a step ``rel`` (relative)."""
        if p < len(idx):
            q = idx[p]
            h = rel * abs(mdl.params[q])
            up, dn = mdl.params.copy(), mdl.params.copy()
            up[q] += h
            dn[q] -= h
            runs = [engine.simulate(mdl.with_params(x), st, times, measured=meas,
                                    directions=none) for x in (up, dn)]
        else:
            b, d = [(0, 0), (1, 1)][p - len(idx)]
            h = rel
            su, sd = st.copy(), st.copy()
            su.body_vel[:, b, d] += h
            sd.body_vel[:, b, d] -= h
            runs = [engine.simulate(mdl, x, times, measured=meas, directions=none)
                    for x in (su, sd)]
        return (runs, (runs[0].final.body_pos - runs[1].final.body_pos) / (2 * h),
                (runs[0].sens.traj_sse - runs[1].sens.traj_sse) / (2 * h))

    # Two steps: truncation dominates the larger, rounding the smaller
    # (mu_s acts over the short slides below v_th); the better must agree.
    _assert_tangents_match(res, dirs, len(scs), differences, (1e-5, 1e-7), 1e-6)
    # J^T J is symmetric positive semi-definite with J's diagonal.
    gn = res.sens.traj_gn
    assert np.allclose(gn, np.transpose(gn, (0, 2, 1)))
    assert np.all(np.linalg.eigvalsh(gn) >= -1e-9 * np.abs(gn).max())


def test_a_fit_recovers_the_cue_balls_spin_as_a_nuisance_unknown():
    """Twelve of pooltool's shots with the cue ball's initial spin off by
    about 1 rad/s: fitting three coefficients with ``nuisance="spin"`` puts
    every ball back on pooltool's path and recovers the horizontal spin the
    path reveals; the vertical spin, which barely moves a ball, is held."""
    from pathlib import Path

    from simcore.data import dataset as D
    from simcore.identify import fit as F
    from simcore.identify import problem as PB

    ds = D.read(Path(__file__).resolve().parents[1] / "datasets" / "billiards")
    pr = PB.Problem.from_dataset(ds).subset(np.arange(12))
    truth = {**ds.truth, **ds.fixed_params}
    w_true = pr.state.body_omega.copy()
    pr.state.body_omega[:, 0] += np.random.default_rng(0).normal(0, 1.0, (pr.nscen, 3))
    res = F.fit(pr, params0={**truth, "mu_k": 0.19}, free=["mu_k", "e_bw", "mu_w"],
                nuisance="spin")
    assert res.success and res.loss < 1e-18
    for n in ("mu_k", "e_bw", "mu_w"):
        assert res.params[n] == pytest.approx(truth[n], rel=1e-8)
    nb = pr.model.body_radius.shape[1]
    w_fit = res.nuisance[:, 2 * nb:].reshape(pr.nscen, nb, 3)
    np.testing.assert_allclose(w_fit[:, 0, :2], w_true[:, 0, :2], atol=1e-6)
    assert np.all(res.nuisance_held.reshape(pr.nscen, -1)[:, 2 * nb + 2])  # the cue's w_z


# -- pushes (controls) on spinning balls -------------------------------------------

def _pushed(vel=(0.0, 0, 0), omega=(0, 0, 0), force=(0.0, 0, 0), window=(0.0, 0.5), t_end=1.0,
            dt=1e-3, params=None):
    sc = M.Scenario(radius=[R], mass=[MASS], pos=[[0.5, 0.5, R]], vel=[vel], omega=[omega],
                    t_end=t_end, dt=dt, controls=[[0, *window, *force]])
    model, state = M.build([sc], spin=True, params=params)
    times = np.linspace(0.05, t_end, 20)
    return engine.simulate(model, state, [times])


def _kinds(res):
    return [EVENT_KINDS[k] for k in res.events(0)["kind"]]


def test_a_gentle_push_rolls_a_ball_at_rest_at_five_sevenths():
    """Within static friction (|F| <= 3.5 mu_s m g) a push rolls the ball:
    a = 5/7 F/m less rolling resistance; then it rolls to rest."""
    f, mu_r = 0.2, 0.01
    res = _pushed(force=(f, 0, 0), window=(0.0, 0.3), params={"mu_r": mu_r, "mu_s": 0.3},
                  t_end=3.0)
    a = 5 / 7 * f / MASS - mu_r * G
    t, pos, vel = res.samples(0)
    inside = t <= 0.3
    assert vel[inside, 0, 0] == pytest.approx(a * t[inside], rel=1e-9)
    w = res.samp_omega[:, 0]
    assert w[inside, 1] == pytest.approx(vel[inside, 0, 0] / R, rel=1e-9)  # rolling throughout
    v_end = a * 0.3
    stop = 0.3 + v_end / (mu_r * G)
    assert _kinds(res) == ["start", "roll_rest"]
    assert res.events(0)["t"][1] == pytest.approx(stop, rel=1e-9)


def test_a_hard_push_slides_a_ball_at_rest():
    """Beyond static friction it slides: v' = F/m - mu_k g, w' = 5 mu_k g / (2R)."""
    f, mu_k = 3.0, 0.2
    res = _pushed(force=(f, 0, 0), window=(0.0, 0.1), params={"mu_k": mu_k, "mu_s": 0.2,
                                                             "v_th": 1e-9})
    t, pos, vel = res.samples(0)
    assert vel[0, 0, 0] == pytest.approx((f / MASS - mu_k * G) * 0.05, rel=1e-6)
    assert res.samp_omega[0, 0, 1] == pytest.approx(2.5 * mu_k * G / R * 0.05, rel=1e-6)
    assert _kinds(res)[:2] == ["start", "slide_roll"]


def test_a_push_makes_a_rolling_ball_slip():
    v0 = 1.0
    res = _pushed(vel=(v0, 0, 0), omega=(0, v0 / R, 0), force=(-3.0, 0, 0), window=(0.1, 0.2),
                  params={"mu_s": 0.2, "mu_k": 0.2, "v_th": 1e-9})
    kinds = _kinds(res)
    assert kinds[0] == "roll_slide" and res.events(0)["t"][0] == pytest.approx(0.1)


def test_a_push_across_the_slip_converges_with_dt():
    """The slip's direction turns under a push across it: first order in dt."""
    finals = []
    for dt in (4e-3, 1e-3, 2.5e-4, 6.25e-5):
        res = _pushed(vel=(1.0, 0, 0), force=(0, 0.6, 0), window=(0.0, 0.4), t_end=0.4, dt=dt,
                      params={"mu_k": 0.2, "mu_s": 0.2, "v_th": 1e-9})
        finals.append(res.final.body_pos[0, 0, :2].copy())
    gaps = [np.linalg.norm(finals[k] - finals[-1]) for k in range(3)]
    assert gaps[0] > 3 * gaps[1] > 9 * gaps[2] and gaps[2] < 1e-4


def test_a_push_below_static_friction_and_rolling_resistance_moves_nothing():
    res = _pushed(force=(0.001, 0, 0), window=(0.0, 0.5), params={"mu_r": 0.01})
    assert np.all(res.samp_pos[:, 0, :2] == [0.5, 0.5]) and _kinds(res) == []


def test_pushed_tangents_match_central_differences():
    """Pushes (forces and torques in windows shifted by ``time_offset``) on
    balls that slide, roll, spin and rest, some set off from rest, one
    window of zero force: the exact sensitivities of the stepped motion
    along the cloth coefficients, ``time_offset``, an initial velocity, an
    initial spin and the control forces, against central differences."""
    rng = np.random.default_rng(7)
    coef = {**CLOTH, "v_th": 0.05, "mu_s": 0.25, "time_offset": 0.013}
    scs = []
    for k in range(20):
        kind = k % 4
        # at rest and set off; moving and made to slip; rolling slowly to
        # rest under a push too weak to hold it up; anything
        speed = (0.0, 0.8, 0.06, 0.8)[kind]
        vel = np.r_[rng.normal(0, speed, 2), 0.0]
        w = rng.normal(0, 25, 3) * (kind in (1, 3))
        if kind == 2:
            w = np.r_[-vel[1] / R, vel[0] / R, rng.normal(0, 10)]  # rolling
        t0 = rng.uniform(0.02, 0.3)
        scale = (2.0, 2.0, 0.004, 0.4)[kind]
        force = np.r_[rng.normal(0, scale, 2), rng.uniform(-0.3, 0.3)] * (k != 5)
        torque = rng.normal(0, 2e-3, 3) * (k % 2) + np.r_[0, 0, -3e-3 * np.sign(w[2])] * (k % 3 == 1)
        scs.append(M.Scenario(radius=[R], mass=[MASS], pos=[[0.7, 1.4, R]], vel=[vel],
                              omega=[w], t_end=1.2, dt=5e-3,
                              controls=[[0, t0, t0 + rng.uniform(0.1, 0.5), *force, *torque]]))
    mdl, st = M.build(scs, params=coef, spin=True)
    names = ["mu_s", "mu_k", "v_th", "mu_r", "mu_sp", "time_offset"]
    idx = [mdl.layout.index(n) for n in names]
    dirs = engine.Directions.build(params=idx, velocities=[(0, 0)], spins=[(0, 2)],
                                   controls=[(0, 0), (0, 1), (0, 2)], names=mdl.layout.names)
    times = [np.linspace(0, 1.2, 49)] * len(scs)
    base = engine.simulate(mdl, st, times, parallel=False)
    meas = base.samp_pos + rng.normal(0, 2e-3, base.samp_pos.shape)
    res = engine.simulate(mdl, st, times, directions=dirs, measured=meas)
    assert not res.sens.nondiff.any()
    none = engine.Directions.build(names=mdl.layout.names)

    def differences(p, h):
        """Central differences along direction p (the order of
        ``Directions.build``: coefficients, the velocity, the control
        forces, the spin) with the step ``h``."""
        nc = len(idx)
        if p < nc:
            up, dn = mdl.params.copy(), mdl.params.copy()
            up[idx[p]] += h
            dn[idx[p]] -= h
            runs = [engine.simulate(mdl.with_params(x), st, times, measured=meas,
                                    directions=none) for x in (up, dn)]
        elif nc < p <= nc + 3:
            runs = []
            for sign in (1.0, -1.0):
                force = mdl.ctrl_force.copy()
                force[:, p - nc - 1] += sign * h
                runs.append(engine.simulate(replace(mdl, ctrl_force=force), st, times,
                                            measured=meas, directions=none))
        else:
            field, d = ("body_vel", 0) if p == nc else ("body_omega", 2)
            su, sd = st.copy(), st.copy()
            getattr(su, field)[:, 0, d] += h
            getattr(sd, field)[:, 0, d] -= h
            runs = [engine.simulate(mdl, x, times, measured=meas, directions=none)
                    for x in (su, sd)]
        return (runs, (runs[0].final.body_pos - runs[1].final.body_pos) / (2 * h),
                (runs[0].sens.traj_sse - runs[1].sens.traj_sse) / (2 * h))

    _assert_tangents_match(res, dirs, len(scs), differences, (1e-6, 1e-8), 1e-5)


def _twisted(torque, omega=(0, 0, 0), vel=(0, 0, 0), window=(0.0, 0.2), t_end=0.5,
             params=None):
    sc = M.Scenario(radius=[R], mass=[MASS], pos=[[0.5, 0.5, R]], vel=[vel], omega=[omega],
                    t_end=t_end, controls=[[0, *window, 0, 0, 0, *torque]])
    model, state = M.build([sc], spin=True, params=params)
    return engine.simulate(model, state, [np.linspace(0.05, t_end, 10)])


def test_a_torque_about_z_spins_a_ball_up_against_spinning_friction():
    tau = 2e-3
    inertia = 0.4 * MASS * R ** 2
    assert tau / inertia > ALPHA_SP  # beats the spinning friction
    res = _twisted((0, 0, tau), params={"mu_sp": MU_SP})
    t = res.samp_t
    inside = t <= 0.2
    assert res.samp_omega[inside, 0, 2] == pytest.approx((tau / inertia - ALPHA_SP) * t[inside],
                                                         rel=1e-9)
    assert np.all(res.samp_pos[:, 0, :2] == [0.5, 0.5]) and "start" in _kinds(res)


def test_a_torque_about_y_rolls_a_ball_within_static_friction():
    """tau_y gives the slip c_x = -R tau_y / I; rolling needs friction -m c/3.5,
    so the ball rolls at a_x = -c_x/3.5 = 5 tau_y / (7 m R) (tau_y < 0: along -x,
    w_y = v_x / R < 0)."""
    tau = -2e-4
    res = _twisted((0, tau, 0), params={"mu_s": 0.3, "mu_r": 0.0})
    t = res.samp_t
    inside = t <= 0.2
    a = -(-R * tau / (0.4 * MASS * R ** 2)) / 3.5
    assert a == pytest.approx(5 * tau / (7 * MASS * R))
    assert res.samp_vel[inside, 0, 0] == pytest.approx(a * t[inside], rel=1e-9)


def test_torques_without_spin_are_refused():
    sc = M.Scenario(radius=[R], mass=[MASS], pos=[[0.5, 0.5, R]], vel=[[0, 0, 0]], t_end=1.0,
                    controls=[[0, 0, 1, 0, 0, 0, 0, 0, 1e-3]])
    with pytest.raises(ValueError, match="torques .* turn spinning balls"):
        M.build([sc])
