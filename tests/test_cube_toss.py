"""The cube-toss importer (``contactfit import cube-toss``), the shipped real
dataset, and the scores of ``benchmarks.cube_toss``."""

import runpy
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from benchmarks import cube_toss as B
from flows.cli import main
from simcore.data import dataset as D
from simcore.data import importers as I
from simcore.geometry.rigid import integrate_orientation, quat_angle, quat_matrix
from simcore.identify.problem import Problem

SHIPPED = Path(__file__).resolve().parents[1] / "datasets" / "cube-toss"
#: The shipped recording's model (its make.py): the synthetic tosses below
#: fly as its cube would, at its free fall.
SHIPPED_MODEL = I.TossModel.like(SHIPPED)
G_REC = SHIPPED_MODEL.gravity
COM = np.array(SHIPPED_MODEL.com)


def _long_table(path, tosses=(3, 7, 12), n=30, g=G_REC, com=COM):
    """A long table of ``tosses`` in ContactNets' format: cubes in free
    flight (exact poses: the centre of mass, at ``com`` from the
    recorded centre, falling at ``g``) spinning about a known body-frame
    rate."""
    rows = {c: [] for c in I.COLUMNS}
    for k, toss in enumerate(tosses):
        q0 = np.array([np.cos(0.3 + k), np.sin(0.3 + k), 0.0, 0.0])
        w_body = np.array([1.0, -2.0, 0.5 * k])
        w_world = quat_matrix(q0) @ w_body
        for step in range(n):
            t = step / 148.0
            q = q0.copy()
            integrate_orientation(q, *w_world, t)
            arm = quat_matrix(q) @ com
            x = np.array([0.1 * k + 0.5 * t, -0.2, 0.4 - 0.5 * g * t * t]) - arm
            v = np.array([0.5, 0.0, -g * t]) - np.cross(w_world, arm)
            vals = dict(toss_id=toss, step=step, t=t, x=x[0], y=x[1], z=x[2], vx=v[0], vy=v[1],
                        vz=v[2], qw=q[0], qx=q[1], qy=q[2], qz=q[3])
            wb = quat_matrix(q).T @ w_world  # the body-frame rate at that sample
            vals.update(wx=wb[0], wy=wb[1], wz=wb[2])
            for c in I.COLUMNS:
                rows[c].append(vals[c])
    order = np.random.default_rng(0).permutation(len(rows["t"]))  # any row order
    pq.write_table(pa.table({c: np.asarray(v)[order] for c, v in rows.items()}), path)
    return path


def test_import_keeps_the_poses_and_turns_the_spin_into_the_world_frame(tmp_path, capsys):
    src = _long_table(tmp_path / "tosses.parquet")
    (tmp_path / "LICENSE").write_text("BSD-3-Clause\n")
    assert main(["import", "cube-toss", str(src), str(tmp_path / "out"), "--like",
                 str(SHIPPED)]) == 0
    assert "free fall in the recorded poses: 9.6" in capsys.readouterr().out
    ds = D.read(tmp_path / "out")
    assert (tmp_path / "out" / "LICENSE").read_text() == "BSD-3-Clause\n"
    assert ds.meta["ground_z"] == SHIPPED_MODEL.ground_z
    assert ds.meta["laws"] == {"body_ground": "hunt_crossley"}
    assert ds.gravity == G_REC
    prob = Problem.from_dataset(ds)
    assert prob.ids == ["toss12", "toss3", "toss7"]
    k = prob.ids.index("toss7")
    q0 = np.array([np.cos(1.3), np.sin(1.3), 0.0, 0.0])
    assert np.allclose(prob.state.body_omega[k, 0], quat_matrix(q0) @ [1.0, -2.0, 0.5])
    assert np.allclose(prob.state.body_quat[k, 0], q0)
    assert np.allclose(prob.model.body_ext[k, 0], SHIPPED_MODEL.half)
    assert prob.model.scen_dt[k] == pytest.approx(SHIPPED_MODEL.dt)
    # the samples as recorded, from t = 0; the state: sample 0's
    ts = prob.targets.sample_times[k]
    assert ts[0] == 0.0 and ts.size == 30 and np.allclose(np.diff(ts), 1 / 148.0)
    ptr = np.r_[0, np.cumsum([len(t) for t in prob.targets.sample_times])]
    meas = prob.targets.measured[ptr[k]:ptr[k + 1], 0]
    quat = prob.targets.states["quat"][ptr[k]:ptr[k + 1], 0]
    arm = np.array([quat_matrix(q) @ COM for q in quat])
    assert np.allclose(meas[:, 2], 0.4 - 0.5 * G_REC * ts ** 2 - arm[:, 2])
    assert np.allclose(prob.model.body_com[k, 0], COM)
    # a free flight replays exactly from the imported state
    from simcore.engine import simulate
    sim = simulate(prob.model, prob.state, prob.targets.sample_times)
    assert np.abs(sim.samp_pos[ptr[k]:ptr[k + 1], 0] - meas).max() < 1e-3
    assert quat_angle(sim.samp_quat[ptr[k]:ptr[k + 1], 0],
                   prob.targets.states["quat"][ptr[k]:ptr[k + 1], 0]).max() < 1e-6


def test_flight_gravity_is_the_free_fall_before_the_first_touch(tmp_path, capsys):
    """Each toss falls at 7.3 m/s^2 until its lowest corner reaches the
    table, then rests on it: the parabola through the flight gives 7.3
    exactly, whatever the rest."""
    rows = {k: [] for k in ("toss", "t", "z")}
    half, g = 0.05, 7.3
    for toss, (z0, vz0) in enumerate([(0.3, 0.5), (0.25, -0.2), (0.05, 0.0)]):
        for step in range(60):
            t = step / 148.0
            rows["toss"].append(toss)
            rows["t"].append(t)
            rows["z"].append(max(z0 + vz0 * t - 0.5 * g * t * t, half))
    quat = np.tile([1.0, 0.0, 0.0, 0.0], (len(rows["t"]), 1))  # flat: the face is the corner
    got, tosses = I.flight_gravity(rows["toss"], rows["t"], rows["z"], quat, half=half,
                                   table_z=0.0)
    assert got == pytest.approx(g, rel=1e-9) and tosses == 2  # the third never flies
    with pytest.raises(ValueError, match="no toss has 6 samples of free flight"):
        I.flight_gravity([0, 0], [0.0, 0.01], [half, half], quat[:2], half=half, table_z=0.0)
    # the shipped tosses fall at the model's gravity, and other tosses are told otherwise
    shipped, n = I.imported_flight_gravity(SHIPPED)
    assert shipped == pytest.approx(G_REC, abs=0.01) and n >= 440
    src = _long_table(tmp_path / "earth.parquet", g=9.81)
    assert main(["import", "cube-toss", str(src), str(tmp_path / "o"), "--like",
                 str(SHIPPED)]) == 0
    assert "fall otherwise than the model" in capsys.readouterr().out
    # imported on their own, the tosses' free fall is measured and written
    assert main(["import", "cube-toss", str(src), str(tmp_path / "own"), "--com",
                 ",".join(map(str, COM))]) == 0
    assert "fall otherwise" not in capsys.readouterr().out
    assert D.read(tmp_path / "own").gravity == pytest.approx(9.81, abs=0.02)


def test_duplicate_recordings_share_a_side_of_the_split(tmp_path):
    src = _long_table(tmp_path / "t.parquet", tosses=tuple(range(40)), n=3)
    pairs = tmp_path / "dup.csv"
    pairs.write_text("toss_a,toss_b\n" + "".join(f"{a},{a + 20}\n" for a in range(20)))
    out = I.cube_tosses(src, tmp_path / "o", duplicates=pairs, test_share=0.3)
    split = D.split(D.read(out))
    assert {split[f"toss{a}"] == split[f"toss{a + 20}"] for a in range(20)} == {True}
    assert 0 < sum(v == "test" for v in split.values()) < 40
    # the same split for the same tosses imported again
    again = I.cube_tosses(src, tmp_path / "o2", duplicates=pairs, test_share=0.3)
    assert D.split(D.read(again)) == split


@pytest.mark.parametrize("change, words", [
    (lambda t: t.drop(["qz"]), "missing column(s) ['qz']"),
    (lambda t: t.set_column(6, "qw", pa.array(np.r_[2.0, t["qw"].to_numpy()[1:]])),
     "qw, qx, qy, qz, row 0: the quaternion's norm"),
    (lambda t: t.set_column(3, "x", pa.array(np.r_[np.nan, t["x"].to_numpy()[1:]])),
     "column x, row 0: nan is not a finite number"),
])
def test_a_bad_long_table_is_named_without_a_traceback(tmp_path, capsys, change, words):
    src = _long_table(tmp_path / "t.parquet")
    pq.write_table(change(pq.read_table(src)), src)
    assert main(["import", "cube-toss", str(src), str(tmp_path / "o")]) == 1
    err = capsys.readouterr().err
    assert str(src) in err and words in err and "Traceback" not in err, err
    assert not (tmp_path / "o").exists()


def test_the_shipped_tosses_are_the_upstream_training_split():
    ds = D.read(SHIPPED)
    assert len(ds.scenario_ids()) == 453 and (SHIPPED / "LICENSE").is_file()
    make = runpy.run_path(str(SHIPPED / "make.py"))["MODEL"]
    # the free fall measured by the import (make.py gives none), the mass at the centre
    assert make.gravity is None and make.com == (0.0, 0.0, 0.0)
    assert ds.gravity == round(I.imported_flight_gravity(SHIPPED)[0], 2)
    assert ds.meta["ground_z"] == make.ground_z
    assert ds.meta["laws"] == make.laws and ds.meta["model"] == make.model
    model, *_ = D.scenarios(ds)
    assert np.all(model.body_com[:, 0] == make.com) and np.all(model.scen_dt == make.dt)
    split = D.split(ds)
    test = sorted(s for s, v in split.items() if v == "test")
    assert 60 <= len(test) <= 110
    pairs = np.loadtxt(SHIPPED / "duplicate_pairs.csv", delimiter=",", skiprows=1, dtype=int)
    for a, b in pairs:
        assert split[f"toss{a}"] == split[f"toss{b}"]


def test_scores_and_faces():
    q = np.array([[1.0, 0, 0, 0]])
    turned = np.array([[np.cos(0.25), np.sin(0.25), 0, 0]])  # 0.5 rad about x
    assert quat_angle(q, turned)[0] == pytest.approx(0.5)
    assert quat_angle(q, -turned)[0] == pytest.approx(0.5)  # the same rotation
    assert B.face_down(q[0]) == 5  # body -z down
    flip = np.array([0.0, 1.0, 0, 0])  # half a turn about x: body +z down
    assert B.face_down(flip) == 4
    pos = np.zeros((4, 3))
    quat = np.repeat(q, 4, axis=0)
    s = B.scores(pos + [0.0524, 0, 0], quat, pos, np.r_[quat[:3], turned], np.array([0, 2, 4]),
                 0.0524)
    assert np.allclose(s["pos"], 0.0524) and s["face"].tolist() == [True, True]
    assert s["e_q"][0] == pytest.approx(1.0) and s["e_q"][1] == pytest.approx(1.0 + 0.25 / 2)


def test_baseline_flies_snaps_flat_and_slides_to_rest():
    from simcore import model as M
    from simcore.identify.losses import Targets
    half = 0.0524
    q0 = np.array([np.cos(0.2), np.sin(0.2), 0.0, 0.0])  # tilted 0.4 rad about x
    model, state = M.build([M.Scenario(radius=[np.nan], mass=[0.37], pos=[(0, 0, 0.3)],
                                       vel=[(1.0, 0, 0)], omega=[(0.0, 0, 0)], quat=[q0],
                                       shape=("box",), extent=[[half, half, half]], t_end=1.0,
                                       dt=2.5e-4)])
    ts = np.linspace(0, 1.0, 149)
    targets = Targets([ts], np.zeros((ts.size, 1, 3)), np.full((1, 1, 3), np.nan),
                      np.full((1, 1, 3), np.nan))
    pos, quat = B.baseline(Problem(model, state, targets), mu=0.2)
    # flight: ballistic until the lowest corner (0.4 rad tilt) meets z = 0
    low = half * (np.cos(0.4) + np.sin(0.4))
    hit = np.sqrt(2 * (0.3 - low) / 9.81)
    fly = ts < hit - 1e-3
    assert np.allclose(pos[fly, 2], 0.3 - 4.905 * ts[fly] ** 2)
    # then flat on a face at the table, sliding 1 m/s down at 0.2 g to rest
    assert np.allclose(pos[~fly & (ts > hit + 1e-3), 2], half)
    assert quat_angle(quat[-1:], np.array([[1.0, 0, 0, 0]]))[0] < 1e-9
    assert pos[-1, 0] == pytest.approx(hit * 1.0 + 1.0 / (2 * 0.2 * 9.81), rel=2e-3)


def test_ceiling_takes_the_best_of_each_score_over_the_grid(tmp_path):
    src = _long_table(tmp_path / "tosses.parquet", tosses=(3, 7))
    prob = Problem.from_dataset(I.cube_tosses(src, tmp_path / "o", model=SHIPPED_MODEL))
    theta = prob.model.layout.vector()
    # free flights: friction changes nothing, the table's height nothing
    nominal, _ = B._predict(prob, theta)
    got = B.ceiling(prob, theta, {"mu_k": (0.1, 0.3), "ground_offset": (0.0, 0.01)})
    assert got["ceiling_points"] == 4 and got["ceiling_right_face"] == 1.0
    assert got["ceiling_pos_cm"] == pytest.approx(100 * nominal["pos"].mean(), abs=1e-9)
    # a start that flies wrong: the best of the grid is the set that flies right
    moved = prob.state.body_vel.copy()
    moved[:, 0, 0] += 0.5
    from dataclasses import replace
    off = replace(prob, state=replace(prob.state, body_vel=moved))
    worse = B.ceiling(off, theta, {"mu_k": (0.1, 0.3)})
    assert worse["ceiling_pos_cm"] > 100 * nominal["pos"].mean() + 1.0


def test_com_z_moves_the_cubes_centre_of_mass_for_the_run(tmp_path):
    """Free flights recorded turning about a centre of mass 7 mm up the
    cube's z axis, imported with the mass at the centre: scored with the
    ``com_z`` coefficient held at 7 mm they fly as recorded, at the centre
    they do not."""
    import json

    src = _long_table(tmp_path / "tosses.parquet", tosses=tuple(range(10)),
                      com=np.array([0.0, 0.0, 0.007]))
    out = I.cube_tosses(src, tmp_path / "o", test_share=0.5, model=SHIPPED_MODEL)
    (tmp_path / "fit.json").write_text(json.dumps({"params": {}}))
    config = SHIPPED / "calibrate.yaml"
    right = B.run(out, config, params=tmp_path / "fit.json", com_z=0.007)
    moved = B.run(out, config, params=tmp_path / "fit.json", com_z=0.0)
    assert right["test_tosses"] > 0 and right["pos_cm"] < 0.02  # the stepper's 0.1 mm
    assert moved["pos_cm"] - right["pos_cm"] > 0.02  # the 7 mm arm's swing, 0.2 mm on average


def test_spread_reruns_the_predictions_from_perturbed_starts(tmp_path, monkeypatch):
    src = _long_table(tmp_path / "tosses.parquet", tosses=(3, 7, 12, 20))
    prob = Problem.from_dataset(I.cube_tosses(src, tmp_path / "o", model=SHIPPED_MODEL))
    theta = prob.model.layout.vector()
    nominal, faces = B._predict(prob, theta)
    # the tosses fly freely: the poses up to the stepper's first-order error
    # (g h t / 2 = 0.1 mm), and each ends on its own face
    assert nominal["pos"].max() < 2e-4 and nominal["rot"].max() < 1e-6
    assert nominal["face"].all() and faces.shape == (4,)
    monkeypatch.setattr(B, "SPREAD_VEL", 0.0)
    monkeypatch.setattr(B, "SPREAD_OMEGA", 0.0)
    same = B.spread(prob, theta, 2)
    assert same["spread_face_agree"] == 1.0 and same["spread_right_face"] == 1.0
    assert same["spread_pos_cm"] == pytest.approx(100 * nominal["pos"].mean(), abs=1e-9)
    # a start spinning 30 rad/s off lands the free flights on other faces;
    monkeypatch.setattr(B, "SPREAD_OMEGA", 30.0)
    moved = B.spread(prob, theta, 3)
    assert moved["spread_face_agree"] < 0.8 and moved["spread_copies"] == 3
    assert moved["spread_face_agree"] == pytest.approx(moved["spread_right_face"])
    # a velocity 0.1 m/s off moves the centre by 0.1 m/s x t on average
    monkeypatch.setattr(B, "SPREAD_OMEGA", 0.0)
    monkeypatch.setattr(B, "SPREAD_VEL", 0.1)
    moved = B.spread(prob, theta, 3)
    t_mean = np.mean(prob.targets.sample_times[0])
    assert moved["spread_pos_cm"] == pytest.approx(100 * 0.1 * np.sqrt(8 / np.pi) * t_mean,
                                                   rel=0.35)


def test_paths_of_tossed_boxes_carry_height_and_tilt_for_the_report(tmp_path, monkeypatch):
    from flows import report
    from simcore.data import replay, synth
    assert replay.tilt(np.array([1.0, 0, 0, 0])) == pytest.approx(0.0)
    corner = np.r_[np.cos(np.arctan(np.sqrt(2)) / 2),
                   np.sin(np.arctan(np.sqrt(2)) / 2) * np.array([1.0, -1.0, 0]) / np.sqrt(2)]
    assert np.degrees(replay.tilt(corner)) == pytest.approx(54.7356, abs=1e-3)
    out = synth.generate(tmp_path / "b", synth.GeneratorSettings(shape="box", scenarios=2,
                                                                 duration=1.2, rate=148.0))
    prob = Problem.from_dataset(out)
    meas, sim = replay.paths(prob, prob.model.layout.vector(synth.TRUTH_BOX), [0, 1])
    q = prob.targets.states["quat"][:, 0]
    assert np.allclose(meas["tilt"], replay.tilt(q))
    assert np.abs(sim["z"] - meas["z"]).max() < 0.01  # the truth replays its data
    assert np.degrees(np.abs(sim["tilt"][-5:] - meas["tilt"][-5:])).max() < 2.0  # both flat
    png = report.overlays_png(meas, sim, prob.ids)
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    # the figure says what its lower panels show (height and tilt, not a residual)
    monkeypatch.setattr(report, "_png", lambda fig: fig)
    fig = report.overlays_png(meas, sim, prob.ids)
    assert fig._suptitle.get_text() == ("measured and simulated paths, and height and tilt "
                                        "over time")


def test_import_model_options_are_checked_in_one_line(tmp_path, capsys):
    src = _long_table(tmp_path / "t.parquet")
    for extra, words in ((["--com", "0,0"], "--com 0,0: expected three numbers"),
                         (["--like", str(tmp_path)], "not an imported cube-toss dataset")):
        assert main(["import", "cube-toss", str(src), str(tmp_path / "o"), *extra]) == 1
        err = capsys.readouterr().err
        assert words in err and "Traceback" not in err, err
