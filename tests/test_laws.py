"""The contact-law seam: the registry, ``dataset.yaml`` ``laws:``, and the
``frictional_inelastic`` body-body law against its closed form, the NumPy
oracle and central differences."""

import numpy as np
import pytest

import simcore
from simcore import params as P
from simcore.data.dataset import DatasetError, read
from simcore.engine import Directions, simulate
from simcore.laws import registry as laws

from .oracle import Oracle
from .scenes import random_params, random_scenario

FI = {"body_body": "frictional_inelastic"}


# --- registry and layout ------------------------------------------------------

def test_resolve_fills_the_default_and_names_what_is_allowed():
    assert laws.resolve(None) == dict.fromkeys(laws.KINDS, "impulse")
    assert laws.resolve(FI)["body_body"] == "frictional_inelastic"
    with pytest.raises(ValueError, match="unknown contact kind 'body_floor'"):
        laws.resolve({"body_floor": "impulse"})
    with pytest.raises(ValueError, match=r"laws.body_body = 'hertz': expected one of "
                                         r"\['impulse', 'frictional_inelastic', "
                                         r"'spring_damper', 'hunt_crossley', 'impact'\]"):
        laws.resolve({"body_body": "hertz"})
    # penalty laws: the others default to hunt_crossley; families never mix
    assert laws.resolve({"body_wall": "impact"}) == {
        "body_ground": "hunt_crossley", "body_body": "hunt_crossley", "body_wall": "impact"}
    assert laws.resolve(None, boxes=True) == dict.fromkeys(laws.KINDS, "hunt_crossley")
    with pytest.raises(ValueError, match="cannot be mixed"):
        laws.resolve({"body_wall": "impact", "body_ground": "impulse"})
    with pytest.raises(ValueError, match="boxes need a penalty law"):
        laws.resolve({"body_ground": "impulse"}, boxes=True)
    with pytest.raises(ValueError, match="frictional_inelastic serves"):
        laws.resolve({"body_wall": "frictional_inelastic"})
    with pytest.raises(ValueError, match="expected a mapping"):
        laws.resolve(["impulse"])


def test_a_laws_coefficients_exist_only_with_the_law():
    plain = P.Layout.build()
    assert "mu_bb_b" not in plain.names and plain.size == P.NPARAM
    assert (plain.bb[..., 2:] == -1).all()
    lay = P.Layout.build(["a", "b"], ["mu_bb_c@b+a"], FI)
    assert lay.names[P.NPARAM:] == ("mu_bb_b", "mu_bb_c", "mu_bb_c@a+b")
    assert "mu_bb_b" in lay.coefficients and "ground_offset" not in lay.coefficients
    a, b = lay.material_id("a"), lay.material_id("b")
    assert lay.bb[a, b, 3] == lay.bb[b, a, 3] == lay.index("mu_bb_c@a+b")
    assert lay.bb[a, a, 3] == lay.index("mu_bb_c") and lay.bb[a, b, 2] == lay.index("mu_bb_b")
    assert list(lay.law_codes) == [laws.LAW_IMPULSE, laws.LAW_FRICTIONAL_INELASTIC,
                                   laws.LAW_IMPULSE]
    assert lay.extend(["mu_bb@a+b"]).laws == lay.laws
    with pytest.raises(ValueError, match="laws: {body_body: frictional_inelastic}"):
        plain.vector({"mu_bb_b": 0.1})
    with pytest.raises(ValueError, match="read by the contact law 'frictional_inelastic'"):
        P.Layout.build(["a"], ["mu_bb_b@a+a"])


# --- the law against its closed form ----------------------------------------

def _glancing(params, law, angle, e=0.9, speed=2.0, m=(0.17, 0.17)):
    """Ball 1 at rest, ball 0 arriving along +x with its centre offset so the
    contact normal makes ``angle`` with the motion; no gravity (no ground
    contact).  Returns the impact's event fields and the closed-form inputs."""
    r = 0.028575
    b = 2 * r * np.sin(angle)
    sc = simcore.Scenario(radius=[r, r], mass=list(m),
                          pos=[[-0.2, 0.0, 1.0], [0.0, b, 1.0]],
                          vel=[[speed, 0.0, 0.0], [0.0, 0.0, 0.0]], t_end=0.2, dt=1e-3)
    prm = dict(params, e_bb=e)
    model, state = simcore.build([sc], prm, gravity=0.0, laws=law)
    res = simulate(model, state)
    ev = res.events(0)
    assert list(ev["kind"]) == [simcore.EventKind.BODY_BODY]
    return ev, res


@pytest.mark.parametrize("angle", [0.3, 0.8, 1.2])
@pytest.mark.parametrize("masses", [(0.17, 0.17), (0.1, 0.3)])
def test_frictional_inelastic_impulse_is_the_closed_form(angle, masses):
    """u_n = -v cos(a), |u_t| = v sin(a); J_n = (1 + e)|u_n| / W; J_t =
    min(|u_t| / W, 2 mu e |u_n| / W) with mu = mu_bb + mu_bb_b exp(-mu_bb_c |u_t|)."""
    prm = {"mu_bb": 0.01, "mu_bb_b": 0.108, "mu_bb_c": 1.088}
    e, v = 0.9, 2.0
    ev, _ = _glancing(prm, FI, angle, e=e, speed=v, m=masses)
    w = 1 / masses[0] + 1 / masses[1]
    un, ut = v * np.cos(angle), v * np.sin(angle)
    mu = 0.01 + 0.108 * np.exp(-1.088 * ut)
    jt = min(ut / w, 2 * mu * e * un / w)
    assert ev["jn"][0] == pytest.approx((1 + e) * un / w, rel=1e-12)
    assert ev["jt"][0] == pytest.approx(jt, rel=1e-12)
    assert ev["slip"][0] == (jt < ut / w)
    # Equal masses: each ball's tangential velocity change is mu e |u_n| (pooltool's bound).
    if masses[0] == masses[1] and ev["slip"][0]:
        dvt = np.linalg.norm(ev["dvb"][0] - (ev["dvb"][0] @ ev["normal"][0]) * ev["normal"][0])
        assert dvt == pytest.approx(mu * e * un, rel=1e-12)
    # Momentum is conserved.
    np.testing.assert_allclose(masses[0] * ev["dva"][0] + masses[1] * ev["dvb"][0], 0, atol=1e-15)


def test_the_laws_differ_where_their_bounds_do():
    """The impulse law bounds J_t by mu (1 + e) J_n-per-mass, pooltool's by
    2 mu e: equal at e = 1, the impulse law's larger below."""
    prm = {"mu_bb": 0.05}
    for e in (1.0, 0.6):
        imp, _ = _glancing(prm, None, 1.0, e=e)
        fi, _ = _glancing(prm, FI, 1.0, e=e)
        ratio = imp["jt"][0] / fi["jt"][0]
        assert ratio == pytest.approx((1 + e) / (2 * e), rel=1e-12)


def test_a_dataset_without_laws_simulates_as_before():
    """``laws`` absent and ``laws`` naming the default are the same model."""
    rng = np.random.default_rng(5)
    scenes = [random_scenario(rng, name=f"s{k}") for k in range(20)]
    prm = random_params(rng)
    a = simulate(*simcore.build(scenes, prm))
    b = simulate(*simcore.build(scenes, prm, laws=dict.fromkeys(laws.KINDS, "impulse")))
    np.testing.assert_array_equal(a.final.body_pos, b.final.body_pos)
    np.testing.assert_array_equal(a.final.body_vel, b.final.body_vel)


# --- oracle and sensitivities on random scenes ---------------------------------

def _fi_params(rng):
    prm = random_params(rng)
    prm.update(mu_bb=rng.uniform(0.0, 0.05), mu_bb_b=rng.uniform(0.05, 0.2),
               mu_bb_c=rng.uniform(0.5, 2.0))
    return prm


def test_frictional_inelastic_matches_the_oracle():
    """Random scenes without pushes (a push across the motion is integrated
    in dt steps, which the kernel and the oracle round differently whatever
    the law): samples to 1e-12, the same events, friction impulses to 1e-9."""
    rng = np.random.default_rng(17)
    scenes = [random_scenario(rng, name=f"o{k}") for k in range(60)]
    for sc in scenes:
        sc.controls = np.zeros((0, 6))
    prm = _fi_params(rng)
    times = [np.linspace(sc.t0, sc.t_end, 20) for sc in scenes]
    model, state = simcore.build(scenes, prm, laws=FI)
    res = simulate(model, state, times)
    nudged = state.copy()
    nudged.body_pos[:, :, :2] += 1e-15
    res_n = simulate(model, nudged, times)
    checked = impacts = 0
    for s, sc in enumerate(scenes):
        nb = len(sc.radius)
        _, pos, vel = res.samples(s)
        _, pos_n, vel_n = res_n.samples(s)
        if max(np.abs(pos_n - pos).max(), np.abs(vel_n - vel).max()) > 1e-13:
            continue  # amplifies rounding: no implementation can agree to 1e-12 there
        orc = Oracle(sc.radius, sc.mass, sc.pos, sc.vel, sc.walls, sc.controls, sc.t0, sc.t_end,
                     sc.dt, model.layout.as_dict(model.params), body_law="frictional_inelastic")
        samples = orc.run(times[s])
        np.testing.assert_allclose(pos[:, :nb], [p for p, _ in samples], rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(vel[:, :nb], [v for _, v in samples], rtol=1e-12, atol=1e-12)
        ev = res.events(s)
        assert len(ev["t"]) == len(orc.events), sc.name
        body = [k for k, o in enumerate(orc.events) if o["kind"] == "body-body"]
        for k in body:
            assert ev["jt"][k] == pytest.approx(orc.events[k]["jt"], rel=1e-9, abs=1e-12)
        impacts += sum(orc.events[k]["slip"] == 1 for k in body)
        checked += 1
    assert checked >= 40 and impacts >= 20, (checked, impacts)


def test_frictional_inelastic_sensitivities_match_central_differences():
    """d(final state)/d(mu_bb, mu_bb_b, mu_bb_c, e_bb) on random scenes with
    slipping body-body impacts, against central differences (relative 1e-6
    where the event sequence does not change)."""
    rng = np.random.default_rng(23)
    scenes = [random_scenario(rng, name=f"g{k}") for k in range(80)]
    prm = _fi_params(rng)
    model, state = simcore.build(scenes, prm, laws=FI)
    rows = [model.layout.index(n) for n in ("mu_bb", "mu_bb_b", "mu_bb_c", "e_bb")]
    r = simulate(model, state, directions=Directions.build(params=rows))
    vec = model.params

    def fd(h):
        out, same = [], np.ones(model.nscen, bool)
        for q in rows:
            runs = []
            for sgn in (1, -1):
                v = vec.copy()
                v[q] += sgn * h
                runs.append(simulate(model.with_params(v), state))
            out.append((runs[0].final.body_pos - runs[1].final.body_pos) / (2 * h))
            same &= runs[0].event_count == runs[1].event_count
        return np.stack(out, -1), same

    f1, same1 = fd(1e-6)
    f2, same2 = fd(1e-7)
    scale = np.abs(f2).max(axis=(1, 2, 3)) + 1e-3
    conv = np.abs(f1 - f2).max(axis=(1, 2, 3)) / scale < 1e-6
    ok = same1 & same2 & conv & (r.sens.nondiff == 0)
    assert ok.sum() >= 50, ok.sum()
    err = np.abs(r.sens.final_pos - f2).max(axis=(1, 2, 3)) / scale
    assert err[ok].max() <= 1e-6
    # The law's own coefficients carried signal in the compared scenes.
    assert (r.sens.signal[ok] > 0).any(axis=0).all()
    assert np.abs(r.sens.final_pos[ok][..., 1:3]).max() > 1e-4


# --- dataset.yaml -----------------------------------------------------------------

def _dataset(tmp_path, extra):
    from simcore.data import synth
    root = tmp_path / "ds"
    synth.generate(root, synth.GeneratorSettings(scenarios=3, seed=1))
    meta = (root / "dataset.yaml").read_text()
    (root / "dataset.yaml").write_text(meta + extra)
    return root


def test_dataset_yaml_chooses_the_law(tmp_path):
    root = _dataset(tmp_path, "laws:\n  body_body: frictional_inelastic\n"
                              "params:\n  mu_bb_b: 0.1\n")
    ds = read(root)
    assert ds.laws["body_body"] == "frictional_inelastic"
    model, *_ = simcore.data.dataset.scenarios(ds)
    assert model.layout.laws == ds.laws
    assert model.layout.as_dict(model.params)["mu_bb_b"] == 0.1


@pytest.mark.parametrize("extra, message", [
    ("laws:\n  body_body: hertz\n", "laws.body_body = 'hertz': expected one of"),
    ("laws:\n  body_floor: impulse\n", "unknown contact kind 'body_floor'"),
    ("laws: impulse\n", "expected a mapping"),
    ("params:\n  mu_bb_c: 2.0\n", "choose it in dataset.yaml as laws: {body_body: "
                                  "frictional_inelastic}"),
])
def test_a_bad_laws_entry_is_a_validation_error(tmp_path, extra, message):
    root = _dataset(tmp_path, extra)
    with pytest.raises(DatasetError) as err:
        read(root)
    assert "dataset.yaml" in str(err.value) and message in str(err.value)


def test_a_fit_recovers_the_laws_coefficients(tmp_path):
    """Synthetic data simulated under frictional_inelastic (``generate --law``):
    mu_bb, mu_bb_b, mu_bb_c and e_bb fitted from 0.8 x the truth land within
    3 standard errors and 5 % of it."""
    from simcore.data import synth
    from simcore.identify import fit as F
    from simcore.identify.problem import Problem

    truth = dict(synth.TRUTH, mu_bb=0.02, mu_bb_b=0.12, mu_bb_c=1.1)
    out = synth.generate(tmp_path / "fi", synth.GeneratorSettings(scenarios=40, seed=11,
                                                                 laws=FI), truth=truth)
    assert read(out).laws["body_body"] == "frictional_inelastic"
    free = ["mu_bb", "mu_bb_b", "mu_bb_c", "e_bb"]
    r = F.fit(Problem.from_dataset(out, split="train"),
              params0=dict(truth, **{n: 0.8 * truth[n] for n in free}), free=free)
    assert r.success, r.message
    for n in free:
        assert abs(r.params[n] - truth[n]) <= min(3 * r.stderr[n], 0.05 * truth[n]), (
            n, r.params[n], r.stderr[n], truth[n])
