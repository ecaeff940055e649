"""Per-material coefficients: names, layout tables, closed forms per pair, a fit."""

import numpy as np
import pytest
import yaml

from simcore import params as P
from simcore.data import dataset as D
from simcore.data import synth
from simcore.engine import simulate
from simcore.identify import fit as F
from simcore.identify.problem import Problem
from simcore.model import Scenario, build

R, M, G = 0.03, 0.17, 9.81
#: A frictionless ground: approach speeds stay what they were set to.
SMOOTH = {"mu_s": 0.0, "mu_k": 0.0}


def test_names_are_checked_and_written_in_one_spelling():
    assert P.canonical("mu_bb@rubber+resin") == "mu_bb@resin+rubber"
    assert P.canonical("mu_w@felt") == "mu_w@felt"
    for bad, words in (("mu_bb@resin", "pair coefficient"), ("mu_s@a+b", "ground has no"),
                       ("time_offset@a", "global offset"), ("mu_x", "unknown coefficient"),
                       ("mu_w@a+b+c", r"NAME@A\+B"), ("mu_w@a.b", r"NAME@A\+B")):
        with pytest.raises(ValueError, match=words):
            P.parse(bad)
    with pytest.raises(ValueError, match="no material 'steel'"):
        P.Layout.build(("resin",), ["mu_bb@resin+steel"])
    for name in ("mu_bb@resin+rubber", "mu_s@felt", "e_bw", "mu_w@a_1+b-2"):
        assert P.from_mlflow_key(P.mlflow_key(name)) == name
    assert P.mlflow_key("mu_bb@resin+rubber") == "mu_bb.resin.rubber"


def test_each_contact_reads_its_own_entry_or_the_plain_one():
    lay = P.Layout.build(("resin", "rubber", "steel"),
                         ["mu_bb@rubber+resin", "e_bb@resin+resin", "mu_s@rubber",
                          "e_bw@rubber", "e_bw@resin+steel"])
    row = {n: k for k, n in enumerate(lay.names)}
    none, resin, rubber, steel = 0, 1, 2, 3
    assert lay.bb[resin, rubber, 0] == lay.bb[rubber, resin, 0] == row["mu_bb@resin+rubber"]
    assert lay.bb[resin, rubber, 1] == row["e_bb"]
    assert lay.bb[resin, resin, 1] == row["e_bb@resin+resin"]
    assert lay.bb[none, rubber, 0] == lay.bb[steel, steel, 0] == row["mu_bb"]
    assert lay.bg[rubber, 0] == row["mu_s@rubber"] and lay.bg[rubber, 1] == row["mu_k"]
    assert lay.bg[resin, 0] == lay.bg[none, 0] == row["mu_s"]
    # A wall without a material: NAME@MAT of the body's; with one: NAME@A+B.
    assert lay.bw[rubber, none, 1] == row["e_bw@rubber"]
    assert lay.bw[rubber, steel, 1] == row["e_bw"]
    assert lay.bw[resin, steel, 1] == row["e_bw@resin+steel"]
    assert lay.bw[resin, none, 1] == row["e_bw"]


def test_unset_entries_take_the_plain_value_and_each_material_keeps_mu_s_above_mu_k():
    lay = P.Layout.build(("resin", "rubber"), ["mu_k@rubber", "mu_bb@resin+rubber"])
    vals = lay.as_dict(lay.vector({"mu_bb": 0.11, "mu_k@rubber": 0.25}))
    assert vals["mu_bb@resin+rubber"] == 0.11 and vals["mu_k@rubber"] == 0.25
    with pytest.raises(ValueError, match=r"mu_s = 0.3 < mu_k@rubber = 0.4"):
        lay.vector({"mu_k@rubber": 0.4})
    x = lay.project(lay.vector() + np.where(np.array(lay.names) == "mu_k@rubber", 0.5, 0.0),
                    [lay.index("mu_k@rubber")])
    assert x[lay.index("mu_k@rubber")] == x[lay.index("mu_s")]


def _pair(mat, v=1.0):
    """Body 0 (material ``mat[0]``) slides at ``v`` into body 1 at rest, head on."""
    pos = np.array([[0.0, 0.0, R], [0.2, 0.0, R]])
    vel = np.array([[v, 0.0, 0.0], [0.0, 0.0, 0.0]])
    return Scenario(radius=np.full(2, R), mass=np.full(2, M), pos=pos, vel=vel, t_end=0.3,
                    material=list(mat))


def test_body_pairs_bounce_with_their_own_restitution():
    """Equal masses, head on, approach 1 m/s: the struck body leaves at (1 + e)/2."""
    scenes = [_pair(("resin", "rubber")), _pair(("rubber", "resin")), _pair(("resin", "resin"))]
    model, state = build(scenes, params=dict(SMOOTH, e_bb=0.9, **{"e_bb@rubber+resin": 0.5}))
    res = simulate(model, state)
    for s, e in enumerate((0.5, 0.5, 0.9)):
        ev = res.events(s)
        assert len(ev["t"]) == 1
        np.testing.assert_allclose(ev["dvb"][0], [(1 + e) / 2, 0, 0], atol=1e-12)


def test_ground_friction_per_material_gives_its_closed_form_slide():
    """A body sliding from v0 stops after ``(v0^2 - v_th^2) / (2 mu_k g) +
    v_th^2 / (2 mu_s g)``, with its material's coefficients."""
    v0, vth = 1.0, 0.02
    scenes = [Scenario(radius=np.array([R]), mass=np.array([M]), pos=np.array([[0, 0, R]]),
                       vel=np.array([[v0, 0, 0]]), t_end=2.0, material=[m])
              for m in ("resin", "rubber", None)]
    values = {"mu_s": 0.5, "mu_k": 0.2, "v_th": vth, "mu_k@rubber": 0.4, "mu_s@rubber": 0.45}
    model, state = build(scenes, params=values, materials=("resin", "rubber"))
    res = simulate(model, state)
    for s, (mu_s, mu_k) in enumerate(((0.5, 0.2), (0.45, 0.4), (0.5, 0.2))):
        d = (v0 ** 2 - vth ** 2) / (2 * mu_k * G) + vth ** 2 / (2 * mu_s * G)
        np.testing.assert_allclose(res.final.body_pos[s, 0, 0], d, rtol=1e-10)


def test_wall_restitution_by_body_material_and_by_wall_material():
    """A head-on wall impact at 1 m/s changes the velocity by ``-(1 + e)``."""
    def hit(mat, wall_mat):
        return Scenario(radius=np.array([R]), mass=np.array([M]), pos=np.array([[0, 0, R]]),
                        vel=np.array([[1.0, 0, 0]]), t_end=0.2, material=[mat],
                        walls=np.array([[-1.0, 0, 0, -0.1]]), wall_material=[wall_mat])
    scenes = [hit("rubber", None), hit("resin", None), hit("resin", "steel"),
              hit("rubber", "steel")]
    values = dict(SMOOTH, e_bw=0.75, **{"e_bw@rubber": 0.3, "e_bw@steel+resin": 0.6})
    model, state = build(scenes, params=values)
    res = simulate(model, state)
    for s, e in enumerate((0.3, 0.75, 0.6, 0.75)):
        np.testing.assert_allclose(res.events(s)["dva"][0], [-(1 + e), 0, 0], atol=1e-12)


TRUTH2 = dict(synth.TRUTH, **{"e_bb@resin+rubber": 0.6, "mu_bb@resin+rubber": 0.2,
                              "mu_k@rubber": 0.3, "mu_s@rubber": 0.4})


@pytest.fixture(scope="module")
def two_materials(tmp_path_factory):
    out = tmp_path_factory.mktemp("mat") / "two"
    synth.generate(out, synth.GeneratorSettings(scenarios=40, seed=11, materials=["resin", "rubber"]),
                   truth=TRUTH2)
    return out


def test_a_two_material_dataset_reads_its_materials_and_simulates_per_pair(two_materials):
    ds = D.read(two_materials)
    assert ds.materials == ("resin", "rubber")
    assert yaml.safe_load((two_materials / "dataset.yaml").read_text())["truth"] == TRUTH2
    prob = Problem.from_dataset(ds)
    lay = prob.model.layout
    assert set(TRUTH2) <= set(lay.names)
    truth = lay.vector(ds.truth)
    plain = lay.vector({k: v for k, v in ds.truth.items() if "@" not in k})
    # The per-pair truth explains the data; the plain one does not.
    assert prob.loss_only(truth) < 0.05 * prob.loss_only(plain)


def test_a_fit_recovers_the_coefficients_of_each_pair(two_materials):
    prob = Problem.from_dataset(two_materials, split="train")
    free = ["e_bb", "e_bb@resin+rubber", "mu_k", "mu_k@rubber"]
    truth = D.read(two_materials).truth
    start = dict(truth, **{n: 0.8 * truth[n] for n in free})
    r = F.fit(prob, params0=start, free=free)
    assert r.success, r.message
    for n in free:
        assert abs(r.params[n] - truth[n]) <= 0.01 * truth[n], (n, r.params[n], truth[n])
        assert r.ci95[n][0] <= truth[n] <= r.ci95[n][1] or abs(r.params[n] - truth[n]) < 1e-3
