"""Exports: the fitted law's figures against closed forms, the MuJoCo
contact's discrete rebound against MuJoCo itself, the file's round trips
and the CLI's messages."""

import json
import math
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from flows.cli import main
from simcore.export import Fitted, Scene, contact
from simcore.export import mujoco as M
from simcore.export.mujoco_match import rollout

CUBE = Path(__file__).resolve().parents[1] / "datasets" / "cube-toss"


def _fit(params, laws=None, spin=False):
    return Fitted.from_doc({"params": params, "dataset": {"laws": laws or {},
                                                          "model": {"spin": spin}}})


def _hertz_duration(k, n, m, v):
    """The undamped contact time of ``m x'' = -k x^n`` met at ``v``:
    ``2 x_max / v sqrt(pi) G(1 + 1/(n+1)) / G(1/2 + 1/(n+1))``."""
    x_max = ((n + 1) * m * v * v / (2 * k)) ** (1 / (n + 1))
    return 2 * x_max / v * math.sqrt(math.pi) * math.gamma(1 + 1 / (n + 1)) / math.gamma(
        0.5 + 1 / (n + 1))


@pytest.mark.parametrize("n", [1.0, 1.5, 2.0])
def test_hunt_crossley_drop_rebounds_at_e_and_lasts_the_hertz_time(n):
    fit = _fit({"k_hc": 1e7, "n_hc": n, "e_bg": 1.0}, {"body_ground": "hunt_crossley"})
    e, t = contact.drop(fit, "body_ground", 0.37, 1.5)
    assert e == pytest.approx(1.0, abs=2e-3)
    assert t == pytest.approx(_hertz_duration(1e7, n, 0.37, 1.5), rel=2e-3)
    for target in (0.29, 0.6):
        fit = _fit({"k_hc": 1e7, "n_hc": n, "e_bg": target}, {"body_ground": "hunt_crossley"})
        assert contact.drop(fit, "body_ground", 0.37, 1.5)[0] == pytest.approx(target, abs=2e-3)


def test_spring_damper_drop_rebounds_as_the_clamped_linear_oscillator():
    """Schwager and Poeschel (2007): a linear spring-dashpot whose force
    never pulls rebounds at ``exp(-z / s (pi - atan(2 z s / (1 - 2 z^2))))``,
    ``s = sqrt(1 - z^2)``, for ``z < 1/sqrt(2)``."""
    m, k = 0.2, 1e5
    for zeta in (0.05, 0.2, 0.4):
        c = 2 * zeta * math.sqrt(k * m)
        fit = _fit({"k_sd": k, "c_sd": c}, {"body_ground": "spring_damper"})
        s = math.sqrt(1 - zeta * zeta)
        closed = math.exp(-zeta / s * (math.pi - math.atan(2 * zeta * s / (1 - 2 * zeta ** 2))))
        e, t = contact.drop(fit, "body_ground", m, 1.0)
        assert e == pytest.approx(closed, rel=2e-3)


def test_a_rigid_law_rebounds_at_its_restitution_at_once():
    fit = _fit({"e_bg": 0.42})
    assert contact.drop(fit, "body_ground", 1.0, 1.0) == (0.42, 0.0)


@pytest.mark.parametrize("h", [0.002, 0.001])
def test_the_damping_ratio_found_rebounds_at_the_fitted_ratio(h):
    for e in (0.1, 0.29, 0.6, 0.9):
        s = M.contact_set(0.3, e, 0.0, h, 9.81)
        floors = [k * h for k in M.STEPS if k * h <= s.solref[0] * (1 + 1e-12)]
        assert s.solref[0] == pytest.approx(max(floors[-1], h / s.solref[1]))
        assert s.spread <= M.SPREAD  # one impact rebounds near e, not only their mean
        assert s.rebound == pytest.approx(e, abs=2e-3)
        assert M.rebound(s.solref[1] * 1.2, *s.solref[:1], h) < e  # more damping, less rebound


def _mujoco_drop(xml, half, h, speed=M.SPEED, phases=M.PHASES):
    """The mean rebound of the export's body dropped flat at ``speed`` in
    MuJoCo, over touch-down phases as :func:`M.rebounds` spreads them."""
    mujoco = pytest.importorskip("mujoco")
    model = mujoco.MjModel.from_xml_string(xml)
    data = mujoco.MjData(model)
    out = []
    for phase in (np.arange(phases) + 0.5) / phases:
        mujoco.mj_resetData(model, data)
        data.qpos[2] = half + phase * speed * h  # a free joint, or a ball's three slides
        data.qvel[2] = -speed
        touched, res = False, 0.0
        for _ in range(5000):
            touched |= data.qpos[2] - half < 0
            mujoco.mj_step(model, data)
            if touched and data.qpos[2] - half >= 0 and data.qvel[2] > 0:
                res = data.qvel[2] / speed
                break
        out.append(res)
    return float(np.mean(out))


def _scene(shape, size, mass, normal=(0.0, 0.0, 1.0), gravity=9.81, com=(0.0, 0.0, 0.0)):
    from simcore.export.source import Body

    inertia = (0.4 * mass * size[0] ** 2,) * 3
    return Scene("drop", "s0", (Body(0, shape, size, mass, inertia, com),), (), 0.0, normal,
                 gravity, "elliptic", 0.001)


@pytest.mark.parametrize("h", [0.002, 0.001])
def test_mujoco_rebounds_at_the_fitted_e_at_the_exported_timestep(h):
    """The issue's check: a drop in MuJoCo itself, from the exported file,
    rebounds within 2 % of the fitted e (a ball; a box dropped flat at the
    cube's e)."""
    for e in (0.3, 0.6, 0.9):
        fit = _fit({"e_bg": e, "mu_k": 0.2, "mu_s": 0.2})
        xml, _ = M.write(fit, _scene("sphere", (0.03,), 0.17), h)
        assert _mujoco_drop(xml, 0.03, h) == pytest.approx(e, rel=0.02)
    fit = _fit({"e_bg": 0.29, "mu_k": 0.19, "mu_s": 0.19}, {"body_ground": "hunt_crossley"})
    xml, _ = M.write(fit, _scene("box", (0.05, 0.05, 0.05), 0.37), h)
    assert _mujoco_drop(xml, 0.05, h) == pytest.approx(0.29, rel=0.02)


def test_the_file_carries_the_fit_exactly_where_mujoco_can():
    """Round trips: friction per material, the pair's friction, the centre
    of mass, the inertia, the free fall, the ground's height and tilt."""
    mujoco = pytest.importorskip("mujoco")
    from simcore.export.source import Body

    fit = _fit({"mu_k": 0.3, "mu_s": 0.3, "mu_k@rubber": 0.7, "mu_s@rubber": 0.7, "mu_bb": 0.11,
                "mu_bb_s": 0.11, "tilt_x": 0.01, "gravity": 9.6, "ground_offset": -0.002},
               {"body_ground": "hunt_crossley"})
    bodies = (Body(0, "box", (0.05, 0.04, 0.03), 0.3, (1e-3, 2e-3, 3e-3), (0.0, 0.0, 0.004),
                   "rubber", (0.0, 0.0, 0.2)),
              Body(1, "sphere", (0.03,), 0.1, (3.6e-5,) * 3, (0.0, 0.0, 0.0), "wood",
                   (0.3, 0.0, 0.2)))
    from simcore.geometry.rigid import ground_normal

    scene = Scene("t", "s0", bodies, (), -0.002, tuple(ground_normal(0.01, 0.0)), 9.6,
                  "elliptic", 0.001)
    xml, notes = M.write(fit, scene, 0.001)
    model = mujoco.MjModel.from_xml_string(xml)
    box = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, "body_0")
    ball = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, "body_1")
    ground = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, "ground")
    assert model.geom_friction[box, 0] == 0.7 and model.geom_friction[ball, 0] == 0.3
    pair = {frozenset((int(a), int(b))): k for k, (a, b) in enumerate(zip(model.pair_geom1,
                                                                           model.pair_geom2))}
    assert set(pair) == {frozenset(p) for p in ((box, ground), (ball, ground), (box, ball))}
    assert model.pair_friction[pair[frozenset((box, ball))], 0] == pytest.approx(0.11)
    assert model.pair_friction[pair[frozenset((box, ground))], 0] == pytest.approx(0.7)
    assert model.pair_friction[pair[frozenset((ball, ground))], 0] == pytest.approx(0.3)
    assert np.allclose(model.pair_solreffriction[:, 0], M.STEPS[0] * 0.001)
    assert np.allclose(model.body_ipos[1], (0, 0, 0.004))
    assert np.allclose(model.body_inertia[1], (1e-3, 2e-3, 3e-3))
    assert np.allclose(model.body_mass[1:], (0.3, 0.1))
    assert np.allclose(model.opt.gravity, (0, 0, -9.6))
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    assert np.allclose(data.geom_xmat[ground].reshape(3, 3)[:, 2], ground_normal(0.01, 0.0))
    assert np.allclose(data.geom_xpos[ground], (0, 0, -0.002))
    root = ET.fromstring(xml)
    assert root.find("option").get("cone") == "elliptic"
    assert not any("mu_s" in n for n in notes)  # static equal to kinetic: nothing lost


def test_what_mujoco_cannot_take_is_said_or_refused(tmp_path, capsys):
    fit = _fit({"mu_s": 0.5, "mu_k": 0.3, "k_v": 2.0})
    _, notes = M.write(fit, _scene("sphere", (0.03,), 0.17), 0.002)
    assert any(n.startswith("mu_s 0.5 (static)") for n in notes)
    assert any("k_v 2" in n for n in notes)
    spin = tmp_path / "spin.json"
    spin.write_text(json.dumps({"params": {"mu_k": 0.2}, "dataset": {"model": {"spin": True}}}))
    assert main(["export", str(spin), "--to", "mujoco", "--out", str(tmp_path / "x.xml")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "export it --to pooltool" in err[0]
    assert not (tmp_path / "x.xml").exists()
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"params": {"mu_x": 0.2}}))
    assert main(["export", str(bad), "--to", "mujoco", "--out", str(tmp_path)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "bad.json: params: unknown coefficient 'mu_x'" in err[0]


def test_the_cube_flies_in_mujoco_as_in_contactfit(tmp_path, capsys):
    """The CLI's scene of the real cube, its centre of mass off the centre:
    a spinning toss's flight in MuJoCo (free joint: the origin's world
    velocity, the body-frame spin) follows contactfit's to the step's
    truncation, so the frames and the start are MuJoCo's."""
    pytest.importorskip("mujoco")
    from simcore.data import dataset as D
    from simcore.engine import simulate
    from simcore.identify.problem import Problem

    doc = {"params": {"com_z": 0.006, "mu_k": 0.19, "mu_s": 0.19, "e_bg": 0.29},
           "dataset": {"laws": {"body_ground": "hunt_crossley"}}}
    (tmp_path / "fit.json").write_text(json.dumps(doc))
    out = tmp_path / "cube.xml"
    assert main(["export", str(tmp_path / "fit.json"), "--to", "mujoco", "--out", str(out),
                 "--dataset", str(CUBE), "--timestep", "0.00025"]) == 0
    assert "approximated:" in capsys.readouterr().out
    ds = D.read(CUBE)
    problem = Problem.from_dataset(ds, order=["toss0", "toss1"], coefficients=["com_z"])
    theta = problem.model.layout.vector({**doc["params"]})
    times = [t[:6] for t in problem.targets.sample_times]  # before the first touch
    pos, quat = rollout(out.read_text(), problem.state, times)
    sim = simulate(problem.model.with_params(theta), problem.state, times)
    assert np.abs(pos - sim.samp_pos[:, 0]).max() < 2e-5
    assert np.abs(np.abs(np.sum(quat * sim.samp_quat[:, 0], axis=1)) - 1).max() < 1e-8


def test_the_match_scales_only_the_ground_pairs():
    """``scaled`` multiplies a body-ground pair's friction, solref and
    solreffriction time constant by the factors; a wall's pair is left."""
    from simcore.export.mujoco_match import scaled

    xml = ('<pair geom1="body_0" geom2="ground" condim="3" friction="0.2 0.2 0 0 0" '
           'solref="0.004 0.5" solreffriction="0.004 1" solimp="0.99 0.99 0.001 0.5 2"/>\n'
           '<pair geom1="body_0" geom2="wall_0" condim="3" friction="0.3 0.3 0 0 0" '
           'solref="0.004 0.5" solreffriction="0.004 1"/>')
    out = ET.fromstring(f"<c>{scaled(xml, (1.5, 2.0, 0.5, 3.0))}</c>")
    ground, wall = out.findall("pair")
    assert [float(x) for x in ground.get("friction").split()] == [0.3, 0.3, 0, 0, 0]
    assert [float(x) for x in ground.get("solref").split()] == [0.008, 0.25]
    assert [float(x) for x in ground.get("solreffriction").split()] == [0.012, 1.0]
    assert ground.get("solimp") == "0.99 0.99 0.001 0.5 2"
    assert wall.get("friction") == "0.3 0.3 0 0 0" and wall.get("solref") == "0.004 0.5"


def test_the_contact_matched_in_mujoco_follows_contactfits_tosses_closer(tmp_path, capsys):
    """``export --match N``: MuJoCo started from the first real cube tosses
    follows contactfit's own trajectories of them closer than at the
    drop-matched values (the printed line gives both distances), the file
    loads, and the friction's floor and time constants' floor hold."""
    mujoco = pytest.importorskip("mujoco")
    import re

    doc = {"params": {"com_z": 0.006, "mu_k": 0.19, "mu_s": 0.19, "e_bg": 0.29,
                      "ground_offset": -0.002},
           "dataset": {"laws": {"body_ground": "hunt_crossley"}}}
    (tmp_path / "fit.json").write_text(json.dumps(doc))
    out = tmp_path / "cube.xml"
    assert main(["export", str(tmp_path / "fit.json"), "--to", "mujoco", "--out", str(out),
                 "--dataset", str(CUBE), "--timestep", "0.002", "--match", "6"]) == 0
    line = [x for x in capsys.readouterr().out.splitlines() if "contact matched" in x][0]
    before, after = map(float, re.search(r"distance ([0-9.e-]+) -> ([0-9.e-]+) cm", line).groups())
    assert after < 0.9 * before
    text = out.read_text()
    mujoco.MjModel.from_xml_string(text)
    pair = ET.fromstring(re.search(r'<pair [^>]*geom2="ground"[^>]*/>', text).group(0))
    assert float(pair.get("solref").split()[0]) >= M.STEPS[0] * 0.002 * (1 - 1e-9)
    assert float(pair.get("solreffriction").split()[0]) >= M.STEPS[0] * 0.002 * (1 - 1e-9)


@pytest.mark.parametrize("extra, words", [
    (["--to", "drake", "--dataset", str(CUBE)], "--match: give --to mujoco and --dataset"),
    (["--to", "mujoco"], "--match: give --to mujoco and --dataset"),
    (["--to", "mujoco", "--dataset", str(CUBE), "--match", "-1"], "expected a number"),
])
def test_the_match_refuses_in_one_line(tmp_path, capsys, extra, words):
    (tmp_path / "fit.json").write_text(json.dumps({"params": {"mu_k": 0.19, "e_bg": 0.29},
                                                   "dataset": {"laws": {
                                                       "body_ground": "hunt_crossley"}}}))
    args = ["export", str(tmp_path / "fit.json"), "--out", str(tmp_path / "x"),
            "--match", "3", *extra]
    assert main(args) == 1
    err = capsys.readouterr().err
    assert words in err and "Traceback" not in err
    assert not (tmp_path / "x").exists()


BILLIARDS = Path(__file__).resolve().parents[1] / "datasets" / "billiards"


def test_pooltool_takes_the_spinning_models_coefficients_one_to_one(tmp_path, capsys):
    """The billiards' coefficients (pooltool's own physics) come back exactly
    under pooltool's names, with the balls and the cushion height."""
    import yaml

    from simcore.data import dataset as D

    ds = D.read(BILLIARDS)
    truth = {**ds.fixed_params, **ds.truth}
    (tmp_path / "fit.json").write_text(json.dumps(
        {"params": truth, "dataset": {"laws": dict(ds.laws), "model": {"spin": True}}}))
    assert main(["export", str(tmp_path / "fit.json"), "--to", "pooltool", "--out",
                 str(tmp_path / "pt.yaml"), "--dataset", str(BILLIARDS)]) == 0
    doc = yaml.safe_load((tmp_path / "pt.yaml").read_text())
    bp = doc["ball_params"]
    assert bp == {"m": 0.170097, "R": 0.028575, "u_s": truth["mu_k"], "u_r": truth["mu_r"],
                  "u_sp_proportionality": truth["mu_sp"] / 0.028575, "u_b": truth["mu_bb"],
                  "e_b": truth["e_bb"], "e_c": truth["e_bw"], "f_c": truth["mu_w"], "g": 9.81}
    friction = doc["resolver"]["ball_ball"]["friction"]
    assert friction == {"model": "alciatore", "a": truth["mu_bb"], "b": truth["mu_bb_b"],
                        "c": truth["mu_bb_c"]}
    for kind in ("ball_linear_cushion", "ball_circular_cushion"):
        assert doc["resolver"][kind] == {"model": "stronge_compliant",
                                         "omega_ratio": truth["omega_ratio_w"]}
    assert doc["resolver"]["version"] == 9
    assert doc["table"] == {"cushion_height": 0.036576}
    assert "approximated" not in capsys.readouterr().out  # nothing lost


@pytest.mark.parametrize("doc, words", [
    ({"params": {"mu_k": 0.2}}, "pooltool simulates billiard balls"),
    ({"params": {"mu_k": 0.2, "e_bb@a+b": 0.9}, "dataset": {"model": {"spin": True}}},
     "e_bb@a+b is a pair's own coefficient"),
])
def test_pooltool_refuses_what_it_has_no_counterpart_for(tmp_path, capsys, doc, words):
    (tmp_path / "fit.json").write_text(json.dumps(doc))
    assert main(["export", str(tmp_path / "fit.json"), "--to", "pooltool", "--out",
                 str(tmp_path / "pt.yaml")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and words in err[0]
    assert not (tmp_path / "pt.yaml").exists()


def test_pooltool_refuses_a_scene_of_boxes(tmp_path, capsys):
    (tmp_path / "fit.json").write_text(json.dumps({"params": {"mu_k": 0.2},
                                                   "dataset": {"model": {"spin": True}}}))
    assert main(["export", str(tmp_path / "fit.json"), "--to", "pooltool", "--out",
                 str(tmp_path / "pt.yaml"), "--dataset", str(CUBE)]) == 1
    assert "has box bodies; pooltool's are balls" in capsys.readouterr().err


def _drake_box(params, shape="box", size=(0.05, 0.05, 0.05), mass=0.37, tmp=None):
    from simcore.export import drake
    from simcore.export.source import Body

    fit = _fit(params, {"body_ground": "hunt_crossley"})
    scene = Scene("t", "s0", (Body(0, shape, size, mass, (6e-4,) * 3, (0.0, 0.0, 0.0)),), (),
                  0.0, (0.0, 0.0, 1.0), 9.81, "elliptic", 0.001)
    text, notes = drake.write(fit, scene)
    (tmp / "t.sdf").write_text(text)
    return tmp / "t.sdf", notes


def _drake_run(sdf, starts, tmp, step):
    from benchmarks.export import drake_predict

    (tmp / "s.json").write_text(json.dumps(starts))
    return drake_predict(sdf, tmp / "s.json", step)


def test_drakes_combination_gives_the_pair_the_fitted_values():
    """Drake combines stiffness in series, dissipation by the other's
    stiffness and friction harmonically: the body's values against the
    ground's give the fit's exactly, for each of several materials."""
    from simcore.export.drake import against

    ground = (4e6, 3.0, 0.6, 0.5)
    for fit in ((1e6, 2.0, 0.3, 0.25), (2e6, 3.0, 0.6, 0.5), (5e5, 0.5, 0.45, 0.1)):
        k, d, ms, mk = against(ground, fit)
        kg, dg, sg, mg = ground
        assert k * kg / (k + kg) == pytest.approx(fit[0])
        assert (kg * d + k * dg) / (k + kg) == pytest.approx(fit[1])
        assert 2 * ms * sg / (ms + sg) == pytest.approx(fit[2])
        assert 2 * mk * mg / (mk + mg) == pytest.approx(fit[3])


def test_a_box_slides_in_drake_as_far_as_the_fitted_friction_lets_it(tmp_path):
    pytest.importorskip("pydrake")
    sdf, _ = _drake_box({"mu_s": 0.2, "mu_k": 0.2, "e_bg": 0.4}, tmp=tmp_path)
    got = _drake_run(sdf, [{"pos": [0, 0, 0.05], "quat": [1, 0, 0, 0], "vel": [1, 0, 0],
                            "omega": [0, 0, 0], "times": [1.0]}], tmp_path, 1e-3)
    assert got["pos"][0][0] == pytest.approx(1 / (2 * 0.2 * 9.81), rel=0.01)


def test_drakes_rebound_converges_to_the_fitted_e_as_its_step_shrinks(tmp_path):
    """The dissipation is the continuous-time one: a ball dropped at 1 m/s
    rebounds at e in the limit of Drake's step (within 3 % at 0.01 ms),
    nearer as the step shrinks."""
    pytest.importorskip("pydrake")
    sdf, notes = _drake_box({"mu_s": 0.2, "mu_k": 0.2, "e_bg": 0.4}, "sphere", (0.05,),
                            tmp=tmp_path)
    assert any("Drake's implicit step loses more" in n for n in notes)
    gaps = []
    for step in (1e-4, 1e-5):
        got = _drake_run(sdf, [{"pos": [0, 0, 0.05 + 0.0509684], "quat": [1, 0, 0, 0],
                                "vel": [0, 0, 0], "omega": [0, 0, 0],
                                "times": list(np.arange(0.095, 0.12, 2e-5))}], tmp_path, step)
        v = np.array(got["vel"])[:, 2]
        gaps.append(abs(v.max() / -v.min() - 0.4))
    assert gaps[1] < gaps[0] and gaps[1] < 0.03 * 0.4


_ROOM = {"mu_s": 0.3, "mu_k": 0.25, "e_bg": 0.4, "mu_w_s": 0.15, "mu_w": 0.15, "e_bw": 0.7,
         "mu_bb_s": 0.05, "mu_bb": 0.05, "e_bb": 0.9, "mu_s@rubber": 0.6, "mu_k@rubber": 0.6}


def _drake_room(shape, tmp):
    """Two bodies of one material, one of rubber and a glass wall at x =
    0.6 (the room's fit: each contact kind its own friction and
    restitution), written to ``tmp/room.sdf`` and loaded in Drake without
    gravity: ``(plant, scene_graph, diagram, fit, scene, notes)``."""
    from pydrake.all import (
        AddMultibodyPlant,
        DiagramBuilder,
        MultibodyPlantConfig,
        Parser,
    )

    from simcore.export import drake
    from simcore.export.source import Body, Wall

    hc = "hunt_crossley"
    fit = _fit(_ROOM, {"body_ground": hc, "body_wall": hc, "body_body": hc})
    size = (0.05,) if shape == "sphere" else (0.05,) * 3
    bodies = tuple(Body(i, shape, size, m, (2e-4,) * 3, (0.0, 0.0, 0.0), mat, at)
                   for i, (m, mat, at) in enumerate(((0.2, "", (0.0, 0.0, 0.2)),
                                                     (0.2, "", (0.3, 0.0, 0.2)),
                                                     (0.5, "rubber", (0.0, 0.5, 0.2)))))
    scene = Scene("room", "s0", bodies, (Wall(0, (-1.0, 0.0, 0.0), -0.6, "glass"),), 0.0,
                  (0.0, 0.0, 1.0), 9.81, "elliptic", 1e-3)
    text, notes = drake.write(fit, scene)
    (tmp / "room.sdf").write_text(text)
    builder = DiagramBuilder()
    plant, graph = AddMultibodyPlant(MultibodyPlantConfig(
        time_step=1e-5, contact_model="point", discrete_contact_approximation="tamsi"), builder)
    Parser(plant).AddModels(str(tmp / "room.sdf"))
    plant.mutable_gravity_field().set_gravity_vector([0.0, 0.0, 0.0])
    plant.Finalize()
    return plant, graph, builder.Build(), fit, scene, notes


@pytest.mark.parametrize("shape", ["sphere", "box"])
def test_every_pair_drake_lets_touch_combines_into_its_kinds_fitted_values(tmp_path, shape):
    """Drake combines per-geometry values (stiffness in series, dissipation
    by the other's stiffness, friction harmonically) and filters by link:
    in a room of two bodies of one material, one of rubber and a glass
    wall, exactly the contacts contactfit has meet (each body's contact
    geometry with the ground and the wall, the three body pairs; nothing
    else), each with its kind's fitted stiffness, dissipation and friction."""
    pytest.importorskip("pydrake")
    from simcore.export.drake import contact_values
    from simcore.laws import hunt_crossley

    r = _ROOM  # the fit's coefficients per kind, as the room's fit was given them
    FRICTION = {"body_ground": (r["mu_s"], r["mu_k"]), "body_wall": (r["mu_w_s"], r["mu_w"]),
                "body_body": (r["mu_bb_s"], r["mu_bb"])}
    RESTITUTION = {"body_ground": r["e_bg"], "body_wall": r["e_bw"], "body_body": r["e_bb"]}

    plant, graph, _, fit, scene, _ = _drake_room(shape, tmp_path)
    inspector = graph.model_inspector()
    ids = [g for g in inspector.GetAllGeometryIds()
           if inspector.GetProximityProperties(g) is not None]

    def values(g):
        p = inspector.GetProximityProperties(g)
        return (p.GetProperty("material", "point_contact_stiffness"),
                p.GetProperty("material", "hunt_crossley_dissipation"),
                p.GetProperty("material", "coulomb_friction"))

    def body_of(g):
        name = plant.GetBodyFromFrameId(inspector.GetFrameId(g)).name()
        return None if not name.startswith("body_") else scene.bodies[int(name.split("_")[1])]

    seen = {}
    for i, a in enumerate(ids):
        for b in ids[i + 1:]:
            if inspector.CollisionFiltered(a, b):
                continue
            x, y = sorted((a, b), key=lambda g: body_of(g) is not None)
            bx, by = body_of(x), body_of(y)
            assert by is not None  # two planes never meet
            if bx is None:
                wall = plant.GetBodyFromFrameId(inspector.GetFrameId(x)).name() != "ground"
                kind, mats, mass = ("body_wall", (by.material, "glass"), by.mass) if wall else (
                    "body_ground", (by.material,), by.mass)
                key = (kind, by.body_id)
            else:
                assert bx.body_id != by.body_id
                kind, mats = "body_body", (bx.material, by.material)
                mass = bx.mass * by.mass / (bx.mass + by.mass)
                key = (kind, *sorted((bx.body_id, by.body_id)))
            seen[key] = seen.get(key, 0) + 1
            (ka, da, fa), (kb, db, fb) = values(x), values(y)
            k, d, mu_s, mu_k, _ = contact_values(fit, mass, *mats, kind=kind)
            # each kind's own coefficients, read off the room's table here, not by the export
            assert (mu_s, mu_k) == (FRICTION[kind] if "rubber" not in mats or kind != "body_ground"
                                    else (r["mu_s@rubber"], r["mu_k@rubber"]))
            assert d == pytest.approx(hunt_crossley.alpha.py_func(RESTITUTION[kind]))
            assert ka * kb / (ka + kb) == pytest.approx(k, rel=1e-9)
            assert (kb * da + ka * db) / (ka + kb) == pytest.approx(d, rel=1e-9)
            for got, want in ((2 * fa.static_friction() * fb.static_friction() / (
                    fa.static_friction() + fb.static_friction()), mu_s),
                              (2 * fa.dynamic_friction() * fb.dynamic_friction() / (
                                  fa.dynamic_friction() + fb.dynamic_friction()), mu_k)):
                assert got == pytest.approx(want, rel=1e-9)
    points = 1 if shape == "sphere" else 8  # a box meets a plane at its corners
    assert seen == {**{(kind, i): points for kind in ("body_ground", "body_wall")
                       for i in range(3)},
                    ("body_body", 0, 1): 1, ("body_body", 0, 2): 1, ("body_body", 1, 2): 1}


@pytest.mark.parametrize("shape", ["sphere", "box"])
def test_two_bodies_and_a_wall_rebound_in_drake_at_their_fitted_ratios(tmp_path, shape):
    """Without gravity, body 0 strikes body 1 (same mass) head-on at 1 m/s,
    which goes on to strike the wall: the pair separates at e_bb = 0.9 and
    the wall returns it at e_bw = 0.7 (within 3 %: Drake's dissipation is
    exact at 1 m/s in continuous time, its step 0.01 ms); the rubber body
    is never touched."""
    pytest.importorskip("pydrake")
    from pydrake.all import Simulator, SpatialVelocity

    plant, _, diagram, *_ = _drake_room(shape, tmp_path)
    sim = Simulator(diagram)
    ctx = plant.GetMyMutableContextFromRoot(sim.get_mutable_context())
    b0, b1, b2 = (plant.GetBodyByName(f"body_{i}") for i in range(3))
    plant.SetFreeBodySpatialVelocity(ctx, b0, SpatialVelocity(w=[0, 0, 0], v=[1.0, 0, 0]))

    def vx(body):
        return plant.EvalBodySpatialVelocityInWorld(ctx, body).translational()[0]

    sim.AdvanceTo(0.3)  # after the pair's impact, before the wall's
    v0, v1 = vx(b0), vx(b1)
    assert v0 + v1 == pytest.approx(1.0, abs=1e-9)  # momentum
    assert v1 - v0 == pytest.approx(0.9, rel=0.03)
    sim.AdvanceTo(0.6)
    assert -vx(b1) / v1 == pytest.approx(0.7, rel=0.03)
    assert np.abs(plant.EvalBodySpatialVelocityInWorld(ctx, b2).translational()).max() == 0.0


def test_drake_refuses_a_rigid_law_and_a_fit_without_bodies(tmp_path, capsys):
    (tmp_path / "fit.json").write_text(json.dumps({"params": {"e_bg": 0.5}}))
    assert main(["export", str(tmp_path / "fit.json"), "--to", "drake", "--out",
                 str(tmp_path / "x.sdf"), "--dataset", str(BILLIARDS)]) == 1
    assert "is rigid (event-exact)" in capsys.readouterr().err
    (tmp_path / "hc.json").write_text(json.dumps({"params": {"e_bg": 0.5}, "dataset": {
        "laws": {"body_ground": "hunt_crossley"}}}))
    assert main(["export", str(tmp_path / "hc.json"), "--to", "drake", "--out",
                 str(tmp_path / "x.sdf")]) == 1
    assert "give --dataset" in capsys.readouterr().err
    assert not (tmp_path / "x.sdf").exists()


def test_the_cube_flies_in_drake_as_in_contactfit(tmp_path):
    """Drake's free body from the export's scene: the origin's pose and the
    world-frame spin as contactfit's flight, to the discrete step's lead."""
    pytest.importorskip("pydrake")
    from simcore.data import dataset as D
    from simcore.engine import simulate
    from simcore.export import drake
    from simcore.identify.problem import Problem

    doc = {"params": {"com_z": 0.006, "mu_k": 0.19, "mu_s": 0.19, "e_bg": 0.29},
           "dataset": {"laws": {"body_ground": "hunt_crossley"}}}
    fit = Fitted.from_doc(doc)
    ds = D.read(CUBE)
    text, _ = drake.write(fit, Scene.from_dataset(ds, fit))
    (tmp_path / "c.sdf").write_text(text)
    problem = Problem.from_dataset(ds, order=["toss0", "toss1"], coefficients=["com_z"])
    st = problem.state
    times = [t[:6] for t in problem.targets.sample_times]
    from benchmarks.export import drake_predict, drake_starts

    (tmp_path / "s.json").write_text(json.dumps(drake_starts(st, times)))
    got = drake_predict(tmp_path / "c.sdf", tmp_path / "s.json", 1e-5, gravity=ds.gravity)
    sim = simulate(problem.model.with_params(problem.model.layout.vector(doc["params"])),
                   st, times)
    assert np.abs(np.array(got["pos"]) - sim.samp_pos[:, 0]).max() < 5e-5
    dots = np.abs(np.sum(np.array(got["quat"]) * sim.samp_quat[:, 0], axis=1))
    assert np.abs(dots - 1).max() < 1e-8


def test_a_sliding_model_ball_slides_in_mujoco_as_its_point_mass_does():
    """The patent's sphere never turns: MuJoCo moves it on three slide
    joints, and it stops where ``v0^2 / (2 mu_k g)`` says (a free ball would
    roll on)."""
    mujoco = pytest.importorskip("mujoco")
    fit = _fit({"mu_k": 0.2, "mu_s": 0.2, "e_bg": 0.5})
    xml, _ = M.write(fit, _scene("sphere", (0.03,), 0.17), 0.001)
    model = mujoco.MjModel.from_xml_string(xml)
    assert model.nq == 3 and set(model.jnt_type.tolist()) == {int(mujoco.mjtJoint.mjJNT_SLIDE)}
    data = mujoco.MjData(model)
    data.qpos[2], data.qvel[0] = 0.03, 1.0
    for _ in range(1000):
        mujoco.mj_step(model, data)
    assert data.qpos[0] == pytest.approx(1 / (2 * 0.2 * 9.81), rel=0.01)


def test_a_ball_striking_a_wall_in_mujoco_takes_coulombs_impulse():
    """Within an impact MuJoCo's soft friction falls short of Coulomb's
    impulse unless the pair's friction rows are stiff: the scene's pairs make
    them so, and a slipping ball's tangential velocity drops by
    ``mu (1 + e) v_n`` (within 5 %)."""
    mujoco = pytest.importorskip("mujoco")
    from simcore.export.source import Body, Wall

    fit = _fit({"mu_k": 0.0, "mu_s": 0.0, "mu_w": 0.18, "mu_w_s": 0.18, "e_bw": 0.7})
    scene = Scene("w", "s0", (Body(0, "sphere", (0.0286,), 0.17, (5.6e-5,) * 3, (0, 0, 0), "",
                                   (0, 0, 0.0286)),), (Wall(0, (0.0, -1.0, 0.0), -0.6),), 0.0,
                  (0.0, 0.0, 1.0), 9.81, "elliptic", 0.001)
    xml, _ = M.write(fit, scene, 0.001)
    model = mujoco.MjModel.from_xml_string(xml)
    data = mujoco.MjData(model)
    after = []
    for phase in (np.arange(8) + 0.5) / 8:
        mujoco.mj_resetData(model, data)
        data.qpos[1] = 0.6 - 0.0286 - 0.05 - phase * 1.4 * 0.001
        data.qvel[:2] = [0.6, 1.4]
        for _ in range(100):
            mujoco.mj_step(model, data)
        after.append(data.qvel[:2].copy())
    vt, vn = np.mean(after, axis=0)
    assert 0.6 - vt == pytest.approx(0.18 * (1.4 - vn), rel=0.05)
    assert -vn / 1.4 == pytest.approx(0.7, rel=0.05)
