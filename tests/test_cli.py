"""The command line and the dataset reader, end to end on small synthetic sets."""

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from flows.cli import main
from simcore.data import dataset, synth


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    out = tmp_path_factory.mktemp("ds") / "small"
    synth.generate(out, synth.GeneratorSettings(scenarios=6, seed=3, duration=1.0, noise_mm=1.0))
    return out


def _truth(ds_dir, tmp_path):
    truth = yaml.safe_load((ds_dir / "dataset.yaml").read_text())["truth"]
    path = tmp_path / "truth.json"
    path.write_text(json.dumps(truth))
    return path


def test_simulate_with_truth_reproduces_measurements(small, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["simulate", str(small), "--params", str(_truth(small, tmp_path)),
                 "--out", str(out)]) == 0
    out_text = capsys.readouterr().out
    assert "simulated 6 scenarios" in out_text
    assert "integrator exact (event-driven): " in out_text  # which, and why, in one line
    sim = pd.read_parquet(out / "trajectories.parquet")
    meas = pd.read_parquet(small / "trajectories.parquet")
    assert list(sim.columns) == ["scenario_id", "body_id", "t", "x", "y", "z", "vx", "vy", "vz"]
    both = meas.merge(sim, on=["scenario_id", "body_id", "t"], suffixes=("_m", "_s"))
    assert len(both) == len(meas) == len(sim)
    # Residuals are the generator's 1 mm noise, nothing else.
    res = np.concatenate([both[c + "_m"] - both[c + "_s"] for c in "xyz"])
    assert 0.9e-3 < res.std() < 1.1e-3
    events = pd.read_parquet(out / "events.parquet")
    assert {"t", "kind", "body_a", "body_b", "jn", "jt", "dvax", "slip"} <= set(events.columns)
    assert set(events.kind) <= {"body-body", "body-wall", "body-ground", "stop", "start"}
    final = pd.read_parquet(out / "final.parquet")
    assert len(final) == len(pd.read_parquet(small / "bodies.parquet"))
    assert np.allclose(final.t, 1.0)


def test_simulate_rejects_unknown_parameter(small, tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"mu_k": 0.2, "friction": 0.3}))
    assert main(["simulate", str(small), "--params", str(bad), "--out", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "bad.json" in err and "friction" in err and "Traceback" not in err


def test_simulate_rejects_out_of_range_parameter(small, tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"e_bb": 2.0}))
    assert main(["simulate", str(small), "--params", str(bad), "--out", str(tmp_path)]) == 1
    assert "e_bb" in capsys.readouterr().err


def test_missing_column_is_named(small, tmp_path, capsys):
    broken = tmp_path / "broken"
    broken.mkdir()
    for f in small.iterdir():
        (broken / f.name).write_bytes(f.read_bytes())
    df = pd.read_parquet(broken / "bodies.parquet").drop(columns=["mass"])
    df.to_parquet(broken / "bodies.parquet")
    assert main(["simulate", str(broken), "--out", str(tmp_path / "o")]) == 1
    err = capsys.readouterr().err
    assert "bodies" in err and "mass" in err


def test_csv_and_units_read_the_same(small, tmp_path):
    """The same dataset as CSV in mm and ms gives the same engine arrays."""
    other = tmp_path / "mm"
    other.mkdir()
    meta = yaml.safe_load((small / "dataset.yaml").read_text())
    meta["units"] = {"length": "mm", "time": "ms"}
    (other / "dataset.yaml").write_text(yaml.safe_dump(meta))
    lengths = {"radius", "x0", "y0", "z0", "x", "y", "z", "d"}
    speeds = {"vx0", "vy0", "vz0", "dvx", "dvy", "dvz"}
    times = {"t", "t0", "t1", "duration", "dt"}
    forces = {"fx", "fy", "fz"}
    for f in small.glob("*.parquet"):
        df = pd.read_parquet(f)
        for c in df.columns:
            if c in lengths:
                df[c] = df[c] * 1e3
            elif c in speeds:
                df[c] = df[c] * 1e3 / 1e3  # mm/ms == m/s
            elif c in times:
                df[c] = df[c] * 1e3
            elif c in forces:
                df[c] = df[c] * 1e3 / 1e6  # kg mm / ms^2
        df.to_csv(other / (f.stem + ".csv"), index=False)
    a = dataset.scenarios(dataset.read(small))
    b = dataset.scenarios(dataset.read(other))
    for name in ("body_radius", "body_mass", "wall_normal", "wall_offset", "ctrl_t0",
                 "ctrl_force", "scen_t_end"):
        np.testing.assert_allclose(getattr(b[0], name), getattr(a[0], name), rtol=1e-12,
                                   atol=1e-15, err_msg=name)
    np.testing.assert_allclose(b[1].body_pos, a[1].body_pos, rtol=1e-12)
    np.testing.assert_allclose(b[1].body_vel, a[1].body_vel, rtol=1e-12)


def test_generate_records_its_settings(tmp_path, capsys):
    out = tmp_path / "gen"
    assert main(["generate", str(out), "--scenarios", "3", "--seed", "9", "--format", "csv"]) == 0
    meta = yaml.safe_load((out / "dataset.yaml").read_text())
    assert meta["generator"]["scenarios"] == 3 and meta["generator"]["seed"] == 9
    assert set(meta["truth"]) == set(synth.TRUTH)
    again = tmp_path / "gen2"
    main(["generate", str(again), "--scenarios", "3", "--seed", "9", "--format", "csv"])
    assert (out / "trajectories.csv").read_text() == (again / "trajectories.csv").read_text()
    assert meta["name"] == "gen"  # named after its directory unless --name says otherwise
    main(["generate", str(tmp_path / "g3"), "--scenarios", "2", "--name", "lab-table"])
    assert yaml.safe_load((tmp_path / "g3" / "dataset.yaml").read_text())["name"] == "lab-table"


def test_generate_box_tosses_validates_and_names_its_settings(tmp_path, capsys):
    out = tmp_path / "cubes"
    assert main(["generate", str(out), "--shape", "box", "--scenarios", "2", "--seed", "3"]) == 0
    meta = yaml.safe_load((out / "dataset.yaml").read_text())
    assert meta["truth"] == synth.TRUTH_BOX and meta["generator"]["shape"] == "box"
    assert meta["generator"]["rate"] == 148.0 and meta["generator"]["duration"] == 1.2
    assert "table_half" not in meta["generator"]  # the sphere scenes' settings
    assert main(["validate", str(out)]) == 0
    ds = dataset.read(out)
    assert set(ds.tables["trajectories"].column_names) >= {"qw", "qx", "qy", "qz"}
    assert main(["generate", str(tmp_path / "bad"), "--shape", "box",
                 "--materials", "steel"]) == 1
    assert "--materials" in capsys.readouterr().err
    # Simulated, the tosses' contact phases are the events table's rows.
    assert main(["simulate", str(out), "--params", str(_truth(out, tmp_path)),
                 "--out", str(tmp_path / "sim")]) == 0
    events = pd.read_parquet(tmp_path / "sim" / "events.parquet")
    assert set(events.kind) == {"body-ground start", "body-ground end"}
    for _, toss in events.groupby("scenario_id"):
        assert toss.kind.iloc[0] == "body-ground start" and (toss.body_b == -1).all()
        ends = toss[toss.kind == "body-ground end"]
        assert len(ends) >= 1 and (ends.jn > 0).all() and (ends.dvaz > 0).all()


def test_serve_refuses_without_a_prefect_server_and_says_how(monkeypatch, capsys):
    """Cron never fires on the temporary server: serve needs a configured one."""
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from flows import cli, deploy

    def never(*a, **k):
        raise AssertionError("served without a server")

    monkeypatch.setattr(deploy, "serve", never)
    with temporary_settings(restore_defaults={PREFECT_API_URL}):
        code = cli.main(["serve", "datasets/synthetic-table", "--cron", "0 3 * * *"])
    err = capsys.readouterr().err
    assert code == 1
    assert "no Prefect server is configured" in err and "prefect server start" in err
    assert "PREFECT_API_URL=http://127.0.0.1:4200/api contactfit serve" in err
    assert "Traceback" not in err


class _Up:
    """A server process that has started and then ends with 0."""

    def poll(self):
        return None

    def wait(self, timeout=None):
        return 0


def test_ui_prints_the_runs_view_of_the_experiment(tmp_path, monkeypatch, capsys):
    """The URL printed opens the experiment's runs, on 127.0.0.1."""
    import subprocess

    from flows import cli

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path}/ui.db")
    monkeypatch.setenv("CONTACTFIT_EXPERIMENT", "ui-test")
    calls = []
    monkeypatch.setattr(subprocess, "Popen", lambda cmd, env=None: calls.append(cmd) or _Up())
    monkeypatch.setattr(cli, "_answers", lambda url, proc: url.endswith(":5077/health"))
    assert cli.main(["ui", "--port", "5077"]) == 0
    out = capsys.readouterr().out
    from mlflow import MlflowClient

    exp = MlflowClient(f"sqlite:///{tmp_path}/ui.db").get_experiment_by_name("ui-test")
    assert f"http://127.0.0.1:5077/#/experiments/{exp.experiment_id}/runs" in out
    assert calls and "127.0.0.1" in calls[0] and "5077" in calls[0]


def test_simulate_takes_a_calibrations_fit_json(small, tmp_path):
    """``--params fit.json`` uses its fitted coefficients (the intervals,
    status and lineage beside them are not parameters)."""
    truth = yaml.safe_load((small / "dataset.yaml").read_text())["truth"]
    doc = {"params": truth, "free": sorted(truth), "stderr": dict.fromkeys(truth, 1e-4),
           "ci95": {k: [v - 1e-4, v + 1e-4] for k, v in truth.items()}, "converged": True,
           "status": "converged_ftol", "mlflow_run_id": "abc", "model_version": "1"}
    (tmp_path / "fit.json").write_text(json.dumps(doc))
    flat = tmp_path / "flat"
    fitted = tmp_path / "fitted"
    assert main(["simulate", str(small), "--params", str(_truth(small, tmp_path)),
                 "--out", str(flat)]) == 0
    assert main(["simulate", str(small), "--params", str(tmp_path / "fit.json"),
                 "--out", str(fitted)]) == 0
    a = pd.read_parquet(flat / "final.parquet")
    b = pd.read_parquet(fitted / "final.parquet")
    assert a.equals(b)


def test_params_lists_the_registry_and_a_datasets_materials(tmp_path, capsys):
    from simcore import params as P

    ds = tmp_path / "two"
    synth.generate(ds, synth.GeneratorSettings(scenarios=2, duration=0.2,
                                               materials=["resin", "rubber"]))
    assert main(["params", str(ds)]) == 0
    out = capsys.readouterr().out
    for p in P.REGISTRY:
        assert p.name in out and p.unit in out
    assert "materials resin, rubber" in out and "resin+rubber" in out


def test_estimates_print_enough_digits_to_tell_the_interval_ends_apart():
    from flows import report

    doc = {"params": {"mu_k": 0.1900123}, "stderr": {"mu_k": 3.2e-5},
           "ci95": {"mu_k": (0.1900123 - 6.3e-5, 0.1900123 + 6.3e-5)}}
    val, se, ci = report.estimate(doc, "mu_k")
    assert (val, se) == ("0.190012", "3.2e-05")
    lo, hi = ci.strip("[]").split(", ")
    assert lo != hi and float(lo) < 0.19 < float(hi)
    assert report.digits(12.5, 0.3) == 4 and report.digits(1.0, float("inf")) == 4  # 12.50 +- 0.30


def test_ui_prints_its_url_only_once_the_server_answers(tmp_path, monkeypatch, capsys):
    """A server that never answers (it exits first): no URL is printed."""
    import subprocess

    from flows import cli

    class Gone:
        def poll(self):
            return 1

        def wait(self, timeout=None):
            return 1

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path}/ui.db")
    monkeypatch.setattr(subprocess, "Popen", lambda cmd, env=None: Gone())
    assert cli.main(["ui", "--port", "5078"]) == 1
    assert "http://" not in capsys.readouterr().out


@pytest.mark.parametrize("argv, words", [
    (["calibrate", "/nonexistent/dataset"], "/nonexistent/dataset: invalid dataset"),
    (["calibrate", "datasets/synthetic-table", "--fit", "mu_x"], "did you mean"),
    (["recalibrate", "datasets/fazeli-ellipse"], "reads trajectories"),
])
def test_bad_input_is_rejected_before_prefect_or_mlflow_is_imported(argv, words):
    """A typo is named without loading Prefect and MLflow (which take
    seconds to import): the check runs first."""
    import subprocess
    import sys

    code = ("import sys; from flows.cli import main; rc = main(%r); "
            "print(rc, 'prefect' in sys.modules, 'mlflow' in sys.modules)" % (argv,))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parents[1], timeout=300)
    assert done.stdout.split()[-3:] == ["1", "False", "False"], done.stderr[-2000:]
    assert words in done.stderr and "Traceback" not in done.stderr
