"""The Prefect/MLflow pipeline end to end: runs, artifacts, registry, champion."""

import contextlib
import json
import threading
from html import escape as html_escape
from pathlib import Path

import mlflow
import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
import yaml
from prefect.testing.utilities import prefect_test_harness

from flows import pipeline, registry, server, settings, tracking
from flows.cli import main
from flows.store import StoreLocked
from simcore.data import synth

TABLE = str(Path("datasets/synthetic-table").resolve())
INFORMED = ["mu_s", "mu_k", "v_th", "mu_bb", "e_bb", "mu_w", "e_bw"]


def _table(track):
    """The registered model of the synthetic table's fits (one per dataset)."""
    return settings.model_name(track.registered_model, "synthetic-table")


@pytest.fixture(scope="session", autouse=True)
def harness():
    # A busy 2-core machine can take longer than Prefect's 30 s to start the
    # harness's server (the CLI's own wait is server.SERVER_STARTUP_S).
    with prefect_test_harness(server_startup_timeout=int(server.SERVER_STARTUP_S)):
        yield


def _runs(c, exp):
    return c.search_runs([exp], order_by=["attributes.start_time ASC"])


def test_calibrate_logs_the_run_and_registers_the_champion(store):
    track, c, exp = store
    doc = pipeline.calibrate(TABLE)
    (run,) = _runs(c, exp)
    assert run.info.status == "FINISHED" and run.info.run_id == doc["mlflow_run_id"]
    # Every iteration is a step of the loss and coefficient metrics.
    hist = c.get_metric_history(run.info.run_id, "loss")
    assert [m.step for m in hist] == list(range(1, doc["iterations"] + 1))
    assert len(c.get_metric_history(run.info.run_id, "theta_mu_k")) == doc["iterations"]
    p = run.data.params
    assert p["method"] == "lm" and p["dataset"] == "synthetic-table"
    assert p["dataset_digest"] == tracking.content_hash(TABLE)
    assert int(p["rows_trajectories"]) > 0 and int(p["shards"]) >= 1
    assert run.data.metrics["final_loss"] == pytest.approx(doc["loss"])
    assert run.data.tags["unidentified"] == "e_bg"
    (inp,) = run.inputs.dataset_inputs
    assert inp.dataset.name == "synthetic-table"
    names = {a.path for a in c.list_artifacts(run.info.run_id)}
    assert names >= {"fit.json", "convergence.png", "overlays.png", "residuals.parquet",
                     "report.html", "model"}
    local = Path(c.download_artifacts(run.info.run_id, "residuals.parquet"))
    res = pd.read_parquet(local)
    assert set(res["split"]) == {"train", "test"} and len(res) == 40
    assert res["rms_m"].median() == pytest.approx(np.sqrt(3) * 1e-3, rel=0.1)  # 1 mm noise
    html = Path(c.download_artifacts(run.info.run_id, "report.html")).read_text()
    assert "data:image/png;base64," in html and "mu_k" in html
    # One verdict: the same word and message in fit.json, the tags and the report,
    # the held coefficient named beside "converged", the registered version shown.
    assert doc["status"].startswith("converged") and doc["held"] == ["e_bg"]
    assert set(doc["start"]) == set(doc["free"]) and doc["truth"]["mu_k"] == 0.19
    assert all(abs(c["r"]) >= 0.5 for c in doc["correlations"])
    assert "e_bg" not in doc["corr"] and set(doc["corr"]) == set(doc["free"]) - {"e_bg"}
    assert all(doc["corr"][n][n] == pytest.approx(1.0) for n in doc["corr"])
    assert "Correlations of the estimates" in html and "<th>truth</th>" in html
    # the gate follows the noise: 5 x its 1 mm (the floor, a micrometre, is below)
    assert doc["gate"] == {"registered": True, "reason": "",
                           "rms_limit_m": pytest.approx(5 * doc["noise_m"])}
    assert doc["interval"].startswith("Gauss-Newton")  # at the noise: the plain intervals
    assert run.data.tags["status"] == doc["status"]
    assert run.info.run_name == f"synthetic-table [{','.join(doc['free'])}]"
    assert f"<b>{doc['status']}</b>: {html_escape(doc['message'])}" in html
    assert "model version 1" in html
    fit = json.loads(Path(c.download_artifacts(run.info.run_id, "fit.json")).read_text())
    assert fit["model_version"] == doc["model_version"] == "1"
    # The registry: version 1 is champion and simulates a dataset.
    mv = c.get_model_version_by_alias(_table(track), "champion")
    assert str(mv.version) == "1" and mv.run_id == run.info.run_id
    model = mlflow.pyfunc.load_model(f"models:/{_table(track)}@champion")
    out = model.predict(pd.DataFrame({"dataset": [TABLE]}))
    assert len(out) == int(p["rows_trajectories"])
    assert {"scenario_id", "body_id", "t", "x", "y", "z"} <= set(out.columns)
    for n in INFORMED:
        assert doc["params"][n] == pytest.approx(synth.TRUTH[n], rel=5e-3)


def test_a_failed_fit_leaves_the_run_failed_and_the_alias_in_place(store):
    track, c, exp = store
    first = pipeline.calibrate(TABLE)
    with pytest.raises(pipeline.CalibrationFailed, match="did not converge"):
        pipeline.calibrate(TABLE, config={"max_iter": 1})
    runs = _runs(c, exp)
    assert [r.info.status for r in runs] == ["FINISHED", "FAILED"]
    assert "did not converge" in runs[1].data.tags["error"]
    versions = c.search_model_versions(f"name = '{_table(track)}'")
    assert [str(v.version) for v in versions] == ["1"]
    assert str(c.get_model_version_by_alias(_table(track), "champion").version) == \
        first["model_version"]


def test_the_gate_refuses_a_residual_the_model_does_not_explain(store):
    """The shipped set's residual is its 1 mm noise (rms sqrt(3) mm over the
    three axes): a gate of 0.5 x the noise and no floor refuses it; the run is
    FAILED with the reason, nothing is registered, fit.json says why, and the
    verdict is not "converged": the fit did not reach the noise."""
    track, c, exp = store
    with pytest.raises(pipeline.CalibrationFailed, match="not registered: not at the noise: "
                                                         "the optimiser stopped") as err:
        pipeline.calibrate(TABLE, config={"gate_k": 0.5, "gate_floor_m": 0.0})
    doc = err.value.doc
    assert not doc["converged"] and doc["status"] == "above_noise"
    assert doc["gate"]["registered"] is False and doc["message"] == doc["gate"]["reason"]
    assert "times the positions' noise" in doc["message"] and "local minimum" in doc["message"]
    assert doc["noise_m"] == pytest.approx(1e-3, rel=0.05)
    assert doc["gate"]["rms_limit_m"] == pytest.approx(0.5 * doc["noise_m"])
    (run,) = _runs(c, exp)
    assert run.info.status == "FAILED" and "gate_k 0.5" in run.data.tags["gate"]
    assert run.data.tags["status"] == "above_noise"
    assert run.data.metrics["noise_m"] == pytest.approx(doc["noise_m"])
    assert c.search_registered_models() == []


def test_an_exception_inside_the_flow_marks_the_run_failed(store, monkeypatch):
    track, c, exp = store

    def broken(*a, **kw):
        raise RuntimeError("simulated crash")

    monkeypatch.setattr(pipeline.F, "fit", broken)
    with pytest.raises(RuntimeError, match="simulated crash"):
        pipeline.calibrate(TABLE)
    (run,) = _runs(c, exp)
    assert run.info.status == "FAILED" and "simulated crash" in run.data.tags["error"]
    assert c.search_registered_models() == []


def test_recalibrate_promotes_a_better_challenger_and_keeps_a_champion_otherwise(store):
    track, c, exp = store
    from simcore import params as P

    # Another dataset's champion, far off: never this dataset's start nor its rival.
    run_id = tracking.start_run(c, exp, "elsewhere", {})
    registry.register(c, settings.for_dataset(track, "billiards"), run_id,
                      dict(P.DEFAULTS, mu_k=0.9), {})
    tracking.finish(c, run_id)
    # A poor champion of the table: the defaults, registered from a run of their own.
    run_id = tracking.start_run(c, exp, "defaults", {})
    registry.register(c, settings.for_dataset(track, "synthetic-table"), run_id, P.DEFAULTS, {})
    tracking.finish(c, run_id)
    doc = pipeline.recalibrate(TABLE)
    assert doc["decision"] == "promoted"
    assert doc["challenger_test_loss"] < 0.99 * doc["champion_test_loss"]
    assert str(c.get_model_version_by_alias(_table(track), "champion").version) == \
        doc["model_version"] == "2"
    # Again on the same data: the challenger is not better by the margin.
    again = pipeline.recalibrate(TABLE)
    assert again["decision"] == "kept" and again["model_version"] == "3"
    assert str(c.get_model_version_by_alias(_table(track), "champion").version) == "2"
    tags = c.get_run(again["mlflow_run_id"]).data.tags
    assert tags["decision"] == "kept" and tags["champion_after"] == "2"
    assert again["champion_uri"] == f"models:/{_table(track)}@champion"
    assert again["model_uri"] == f"models:/{_table(track)}/3"
    other = settings.model_name(track.registered_model, "billiards")
    assert [str(v.version) for v in c.search_model_versions(f"name = '{other}'")] == ["1"]


def test_a_start_never_changes_what_the_dataset_fixes():
    """A champion's coefficients start a recalibration, except one the
    dataset fixes and the fit holds (the dataset's value stays)."""
    fixed = {"mu_s": 0.5, "v_th": 1e-9}
    champion = {"mu_s": 0.28, "v_th": 0.04, "mu_k": 0.21}
    assert pipeline.start_values(fixed, ["mu_k"], champion, {}) == {
        "mu_s": 0.5, "v_th": 1e-9, "mu_k": 0.21}
    assert pipeline.start_values(fixed, ["mu_k", "mu_s"], champion, {"mu_k": 0.3}) == {
        "mu_s": 0.28, "v_th": 1e-9, "mu_k": 0.3}


def test_simulate_refuses_a_model_fitted_under_another_motion_model_or_laws(store, tmp_path,
                                                                          capsys):
    """The billiards' spinning fit on the sliding table, or a fit under other
    laws, is one line and exit 1, not a silent simulation of another model."""
    from simcore import params as P

    track, c, exp = store
    run_id = tracking.start_run(c, exp, "spin", {})
    registry.register(c, track, run_id, dict(P.DEFAULTS), {}, laws={}, spin=True)
    tracking.finish(c, run_id)
    assert main(["simulate", TABLE, "--params", f"models:/{track.registered_model}/1",
                 "--out", str(tmp_path / "a")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "fitted under the spinning model" in err[0]
    run_id = tracking.start_run(c, exp, "laws", {})
    registry.register(c, track, run_id, dict(P.DEFAULTS), {},
                      laws={"body_body": "frictional_inelastic"})
    tracking.finish(c, run_id)
    assert main(["simulate", TABLE, "--params", f"models:/{track.registered_model}/2",
                 "--out", str(tmp_path / "b")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "body_body frictional_inelastic (fit) against impulse" in err[0]
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_champion_decisions_are_serialised(store):
    """The alias lock admits one decision at a time."""
    track, _, _ = store
    order = []
    inside = threading.Event()

    def hold():
        with registry.champion_lock(track):
            order.append("a in")
            inside.set()
            threading.Event().wait(0.2)
            order.append("a out")

    t = threading.Thread(target=hold)
    t.start()
    inside.wait()
    with registry.champion_lock(track):
        order.append("b in")
    t.join()
    assert order == ["a in", "a out", "b in"]


#: Two coefficients of the table fitted, the others left at their (wrong)
#: defaults: a model error of about 14 mm, declared so that the gate, which
#: follows the 1 mm noise, registers the fit.
PARTIAL = {"fit": ["mu_k", "e_bw"], "gate_floor_m": 0.02}


def test_cli_calibrate_writes_fit_json(store, tmp_path, capsys):
    cfg = tmp_path / "partial.yaml"
    cfg.write_text(yaml.safe_dump({"gate_floor_m": PARTIAL["gate_floor_m"]}))
    assert main(["calibrate", TABLE, "--fit", "mu_k,e_bw", "--config", str(cfg),
                 "--out", str(tmp_path / "o")]) == 0
    doc = json.loads((tmp_path / "o" / "fit.json").read_text())
    assert set(doc) >= {"params", "stderr", "ci95", "loss", "iterations", "converged", "status",
                        "message", "mlflow_run_id", "model_version"}
    assert doc["free"] == ["mu_k", "e_bw"] and doc["converged"] and doc["model_version"] == "1"
    assert doc["strategy"] == "whole rollouts" and doc["spread"] is None  # spheres, one start
    # the residual (the declared model error) is above the noise: the
    # intervals are the clustered ones, with Student's t
    assert doc["interval"].startswith("clustered by scenario")
    for n in doc["free"]:
        assert doc["stderr"][n] >= doc["stderr_cluster"][n]
        lo, hi = doc["ci95"][n]
        assert (hi - lo) / 2 > 1.96 * doc["stderr"][n]
    out = capsys.readouterr().out
    assert "mu_k" in out and "contactfit ui" in out and "strategy: whole rollouts" in out
    # which integrator, and why, in one line (002's rule: few events)
    assert doc["integrator"].startswith("integrator exact (event-driven): ")
    assert doc["integrator"] in out.splitlines()
    # the report, plots and residuals beside fit.json, their paths printed
    for name in ("report.html", "convergence.png", "overlays.png", "residuals.parquet"):
        assert (tmp_path / "o" / name).stat().st_size > 0 and str(tmp_path / "o" / name) in out
    assert "contactfit calibration" in (tmp_path / "o" / "report.html").read_text()


def test_cli_calibrate_on_a_named_integrator(store, tmp_path, capsys):
    """``--integrator moreau``: the table's spheres fitted on the Moreau-Jean
    stepper, said in one line, in fit.json and in the run's parameters."""
    _, c, _ = store
    cfg = tmp_path / "partial.yaml"
    cfg.write_text(yaml.safe_dump({"gate_floor_m": PARTIAL["gate_floor_m"]}))
    assert main(["calibrate", TABLE, "--fit", "mu_k,e_bw", "--integrator", "moreau",
                 "--config", str(cfg), "--out", str(tmp_path / "o")]) == 0
    doc = json.loads((tmp_path / "o" / "fit.json").read_text())
    assert doc["integrator"] == "integrator moreau: named by --integrator"
    assert doc["integrator"] in capsys.readouterr().out.splitlines()
    assert c.get_run(doc["mlflow_run_id"]).data.params["integrator"] == "moreau"
    assert doc["converged"] and abs(doc["params"]["mu_k"] - 0.19) < 0.01


def test_cli_calibrate_failure_exits_1_and_still_writes_fit_json(store, tmp_path, capsys):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("max_iter: 1\n")
    assert main(["calibrate", TABLE, "--config", str(cfg), "--out", str(tmp_path / "o")]) == 1
    doc = json.loads((tmp_path / "o" / "fit.json").read_text())
    assert doc["converged"] is False and doc["model_version"] is None
    err = capsys.readouterr().err
    assert "marked FAILED" in err and str(tmp_path / "o" / "report.html") in err
    assert (tmp_path / "o" / "report.html").is_file()  # the refused fit's report too


@pytest.mark.parametrize("text, words", [
    ("shards: -1\n", "shards = -1: expected >= 0"),
    ("method: newton\n", "method = 'newton'"),
    ("fit: [mu_x]\n", "unknown coefficient 'mu_x'"),
    ("colour: red\n", "unknown key(s) ['colour']"),
    ("max_iter: ten\n", "max_iter = 'ten': expected int"),
])
def test_bad_config_names_the_file_and_key(tmp_path, text, words, capsys):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(text)
    assert main(["calibrate", TABLE, "--config", str(cfg), "--out", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert str(cfg) in err and words in err and "Traceback" not in err


def test_dask_runner_and_shard_count_give_the_same_coefficients(store, capfd):
    """A 2-worker LocalCluster (processes) and five thread shards against the
    default thread runner: the same fit, bit for bit; the workers' task runs
    and the cluster's clean exit print nothing (quiet unless -v)."""
    cfg = dict(PARTIAL, fit=["mu_k", "e_bw", "mu_w"])
    threads = pipeline.run(pipeline.calibrate, TABLE, cfg)
    capfd.readouterr()
    dask = pipeline.run(pipeline.calibrate, TABLE, dict(cfg, task_runner="dask", workers=2))
    said = "".join(capfd.readouterr())
    assert "Task run" not in said and "distributed." not in said, said
    five = pipeline.run(pipeline.calibrate, TABLE, dict(cfg, shards=5))
    assert dask["loss"] == threads["loss"] == five["loss"]
    for n in cfg["fit"]:
        assert dask["params"][n] == threads["params"][n] == five["params"][n]


def test_tracking_settings_come_from_the_file_then_the_environment(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for var in ("MLFLOW_TRACKING_URI", "CONTACTFIT_EXPERIMENT", "CONTACTFIT_MLFLOW_CONFIG"):
        monkeypatch.delenv(var, raising=False)
    assert settings.tracking().tracking_uri == "sqlite:///mlflow.db"
    (tmp_path / "mlflow.yml").write_text("experiment: mine\n")
    assert settings.tracking().experiment == "mine"
    monkeypatch.setenv("CONTACTFIT_EXPERIMENT", "env")
    assert settings.tracking().experiment == "env"
    (tmp_path / "mlflow.yml").write_text("experimnet: typo\n")
    with pytest.raises(ValueError, match=r"mlflow.yml: unknown key\(s\) \['experimnet'\]"):
        settings.tracking()


def test_the_scheduled_deployment_is_defined_and_a_triggered_run_completes(store):
    import asyncio

    import yaml
    from prefect.deployments import run_deployment
    from prefect.runner import Runner

    from flows import deploy

    dep = deploy.deployment(TABLE, cron="0 3 * * *")
    (sched,) = dep.schedules
    assert sched.schedule.cron == "0 3 * * *"
    assert dep.parameters["dataset"] == TABLE and dep.entrypoint.endswith(
        "flows/pipeline.py:recalibrate")
    assert dep.concurrency_limit == 1
    # prefect.yaml describes the same deployment for `prefect deploy`.
    (spec,) = yaml.safe_load(Path(__file__).parents[1].joinpath("prefect.yaml").read_text())[
        "deployments"]
    assert spec["entrypoint"] == "flows/pipeline.py:recalibrate"
    assert spec["name"] == deploy.NAME and spec["schedules"][0]["cron"] == "0 3 * * *"
    assert spec["concurrency_limit"] == 1
    # Trigger it now and let a runner execute it once.
    runner = Runner(query_seconds=1)
    runner.add_deployment(dep)
    run = run_deployment(f"contactfit-recalibrate/{deploy.NAME}", timeout=0)
    asyncio.run(runner.start(run_once=True))
    from prefect.client.orchestration import get_client

    async def state():
        async with get_client() as client:
            return (await client.read_flow_run(run.id)).state
    final = asyncio.run(state())
    assert final.is_completed(), final
    track, c, exp = store
    assert str(c.get_model_version_by_alias(_table(track), "champion").version) == "1"


def _start_mlflow_server(tmp_path):
    """A real ``mlflow server`` on a free port of 127.0.0.1 (one worker, no
    job runners, its own process group), up and answering: ``(process, url,
    env)``, ``env`` the environment it was started with."""
    import os
    import socket
    import subprocess
    import sys
    import time
    import urllib.request

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, MLFLOW_SERVER_ENABLE_JOB_EXECUTION="false")
    env.pop("MLFLOW_TRACKING_URI", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(port),
         "--workers", "1", "--backend-store-uri", f"sqlite:///{tmp_path}/server.db",
         "--artifacts-destination", str(tmp_path / "server-artifacts")],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    for _ in range(240):
        try:
            urllib.request.urlopen(f"{url}/health", timeout=1)
            return proc, url, env
        except OSError:
            if proc.poll() is not None:
                raise RuntimeError("mlflow server exited") from None
            time.sleep(0.25)
    proc.kill()
    raise RuntimeError("mlflow server did not start in 60 s")


@pytest.fixture
def mlflow_server(tmp_path, monkeypatch):
    """A real ``mlflow server`` (:func:`_start_mlflow_server`) as the tracking URI."""
    proc, url, _ = _start_mlflow_server(tmp_path)
    try:
        monkeypatch.chdir(tmp_path)
        monkeypatch.setenv("MLFLOW_TRACKING_URI", url)
        monkeypatch.delenv("MLFLOW_REGISTRY_URI", raising=False)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_calibrate_against_a_real_tracking_server(mlflow_server):
    import urllib.parse
    import urllib.request

    doc = pipeline.calibrate(TABLE, config=PARTIAL)

    def get(path, **query):
        url = f"{mlflow_server}/api/2.0/mlflow/{path}?{urllib.parse.urlencode(query)}"
        with urllib.request.urlopen(url, timeout=10) as r:
            return json.loads(r.read())

    run = get("runs/get", run_id=doc["mlflow_run_id"])["run"]
    assert run["info"]["status"] == "FINISHED"
    metrics = {m["key"]: m["value"] for m in run["data"]["metrics"]}
    assert metrics["fitted_mu_k"] == pytest.approx(doc["params"]["mu_k"])
    hist = get("metrics/get-history", run_id=doc["mlflow_run_id"], metric_key="loss")["metrics"]
    assert len(hist) == doc["iterations"]
    arts = {f["path"] for f in get("artifacts/list", run_id=doc["mlflow_run_id"])["files"]}
    assert {"fit.json", "report.html", "model"} <= arts
    alias = get("registered-models/alias", name="contactfit-coefficients-synthetic-table",
                alias="champion")
    assert doc["champion_uri"] == "models:/contactfit-coefficients-synthetic-table@champion"
    assert alias["model_version"]["version"] == "1"


def test_a_scan_in_the_config_reaches_the_fit_and_the_run(store):
    """A config's ``scan`` is the fit's (its strategy line says what the
    scan did) and a parameter of the run."""
    track, c, exp = store
    doc = pipeline.calibrate(TABLE, config=dict(PARTIAL, scan={"e_bw": [0.2, 0.9]},
                                                model_key="scanned"))
    assert "then a scan: the rollouts' start checked against those points, 2 scanned" \
        in doc["strategy"]
    run = c.get_run(doc["mlflow_run_id"])
    assert json.loads(run.data.params["scan"]) == {"e_bw": [0.2, 0.9]}


def test_multi_start_logs_nested_runs(store, capsys):
    track, c, exp = store
    doc = pipeline.calibrate(TABLE, config=dict(PARTIAL, starts=2))
    runs = _runs(c, exp)
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == doc["mlflow_run_id"]]
    assert len(children) == 2 and all(r.info.status == "FINISHED" for r in children)
    assert min(r.data.metrics["final_loss"] for r in children) == pytest.approx(doc["loss"])
    assert all(len(c.get_metric_history(r.info.run_id, "loss")) >= 1 for r in children)
    # the parent's chart by step shows every start's iterations once, numbered on
    steps = [m.step for m in c.get_metric_history(doc["mlflow_run_id"], "loss")]
    assert steps == list(range(1, len(steps) + 1))
    # the spread of the starts beside the intervals
    spread = doc["spread"]
    assert spread["starts"] == spread["finite"] == 2 and 1 <= spread["agree"] <= 2
    fitted = [{n: r.data.metrics[f"fitted_{n}"] for n in ("mu_k", "e_bw")} for r in children]
    for n in ("mu_k", "e_bw"):
        assert spread["params"][n]["min"] == pytest.approx(min(f[n] for f in fitted))
        assert spread["params"][n]["max"] == pytest.approx(max(f[n] for f in fitted))
    from flows.cli import _print_fit

    capsys.readouterr()
    _print_fit(doc, [Path("o") / "fit.json"])
    out = capsys.readouterr().out
    assert "range over 2 starts" in out and f"{spread['agree']} of 2 starts reach" in out


def test_ui_starts_mlflow_on_localhost_for_the_configured_store(tmp_path, monkeypatch, capsys):
    import subprocess

    seen = {}
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path}/ui.db")
    from flows import cli

    class Up:
        def poll(self):
            return None

        def wait(self, timeout=None):
            return 0

    monkeypatch.setattr(subprocess, "Popen", lambda cmd, env: seen.update(cmd=cmd, env=env) or Up())
    monkeypatch.setattr(cli, "_answers", lambda url, proc: True)
    assert main(["ui", "--port", "5055"]) == 0
    cmd = seen["cmd"]
    assert cmd[cmd.index("--host") + 1] == "127.0.0.1" and cmd[cmd.index("--port") + 1] == "5055"
    assert cmd[cmd.index("--backend-store-uri") + 1] == f"sqlite:///{tmp_path}/ui.db"
    assert "http://127.0.0.1:5055" in capsys.readouterr().out


def test_cli_calibrate_on_a_bad_dataset_names_the_row_and_starts_nothing(store, tmp_path,
                                                                         capsys):
    import shutil

    import pyarrow as pa
    import pyarrow.parquet as pq

    track, c, exp = store
    bad = tmp_path / "bad"
    shutil.copytree(TABLE, bad)
    t = pq.read_table(bad / "bodies.parquet")
    mass = t["mass"].to_numpy().copy()
    mass[3] = -1.0
    pq.write_table(t.set_column(t.schema.get_field_index("mass"), "mass", pa.array(mass)),
                   bad / "bodies.parquet")
    assert main(["calibrate", str(bad), "--out", str(tmp_path / "o")]) == 1
    err = capsys.readouterr().err
    assert "table bodies, column mass, row 3" in err and "Traceback" not in err
    assert _runs(c, exp) == []


def test_fitted_nuisance_is_logged_with_its_standard_errors(store):
    """With ``nuisance: velocity`` the run holds ``nuisance.parquet``: every
    body's fitted initial velocity (x, y) by scenario and body id, with its
    standard error, NaN only where held."""
    track, c, exp = store
    try:
        doc = pipeline.calibrate(TABLE, config={"fit": ["mu_k"], "nuisance": "velocity"})
        run_id = doc["mlflow_run_id"]
    except pipeline.CalibrationFailed as exc:
        run_id = exc.doc["mlflow_run_id"]
    local = Path(c.download_artifacts(run_id, "nuisance.parquet"))
    tab = pq.read_table(local).to_pandas()
    bodies = pq.read_table(f"{TABLE}/bodies.parquet").to_pandas()
    train = json.loads(Path(c.download_artifacts(run_id, "fit.json")).read_text())
    n_train = train["dataset"]["rows"]["scenarios"] - sum(
        pq.read_table(f"{TABLE}/scenarios.parquet").to_pandas().split == "test")
    assert tab.scenario_id.nunique() == n_train
    assert len(tab) == 2 * bodies.scenario_id.isin(tab.scenario_id.unique()).sum()
    assert set(tab.component) == {"x", "y"}
    assert np.all(np.isfinite(tab.value))
    assert np.all(np.isnan(tab.stderr[tab.held])) and np.all(tab.stderr[~tab.held] > 0)


def test_run_settings_drop_heartbeats_only_on_the_temporary_server():
    """``pipeline.run``'s settings: task-run logs at WARNING for the run and
    restored after; no heartbeats without a configured server (the flow's
    end would wait for the heartbeat thread), Prefect's own with one."""
    import logging

    from prefect.settings import (
        PREFECT_API_URL,
        PREFECT_FLOWS_HEARTBEAT_FREQUENCY,
        get_current_settings,
        temporary_settings,
    )

    log = logging.getLogger("prefect.task_runs")
    before = log.level
    with temporary_settings(restore_defaults={PREFECT_API_URL}):
        assert get_current_settings().flows.heartbeat_frequency is not None
        with server.run_settings():
            assert get_current_settings().flows.heartbeat_frequency is None
            assert log.getEffectiveLevel() >= logging.WARNING
        assert get_current_settings().flows.heartbeat_frequency is not None
    # the temporary server's start keeps its address, not the documentation link
    record = logging.LogRecord("prefect", logging.INFO, "", 0, "Starting temporary server on "
                               "http://127.0.0.1:1\nSee https://www.prefect.io/docs ...", (), None)
    assert server.address_only(record) and record.getMessage() == (
        "Starting temporary server on http://127.0.0.1:1")
    with temporary_settings({PREFECT_API_URL: "http://127.0.0.1:4200/api",
                             PREFECT_FLOWS_HEARTBEAT_FREQUENCY: 60}):
        with server.run_settings():
            assert get_current_settings().flows.heartbeat_frequency == 60
    assert log.level == before


def test_cli_fits_per_material_coefficients_and_logs_them_under_encoded_keys(store, tmp_path,
                                                                           capsys):
    """Two materials end to end through the CLI: generate with a per-pair
    truth, calibrate the pair's restitution beside the plain one, read both
    back from fit.json and from MLflow (``@``/``+`` encoded as ``.``)."""
    track, c, exp = store
    from simcore import params as P

    truth = tmp_path / "truth.json"  # the defaults but for the fitted ones
    truth.write_text(json.dumps(dict(P.DEFAULTS, **{"e_bb@rubber+resin": 0.6, "e_bb": 0.9,
                                                     "mu_k": 0.19})))
    ds = tmp_path / "two"
    assert main(["generate", str(ds), "--scenarios", "16", "--seed", "4",
                 "--materials", "resin,rubber", "--truth", str(truth)]) == 0
    assert main(["calibrate", str(ds), "--fit", "e_bb,e_bb@rubber+resin,mu_k",
                 "--out", str(tmp_path / "o")]) == 0
    doc = json.loads((tmp_path / "o" / "fit.json").read_text())
    assert doc["free"] == ["mu_k", "e_bb", "e_bb@resin+rubber"]
    assert doc["params"]["e_bb@resin+rubber"] == pytest.approx(0.6, rel=1e-2)
    assert doc["params"]["e_bb"] == pytest.approx(0.9, rel=1e-2)
    assert doc["params"]["mu_k"] == pytest.approx(0.19, rel=1e-2)
    (run,) = _runs(c, exp)
    assert run.data.metrics["fitted_e_bb.resin.rubber"] == doc["params"]["e_bb@resin+rubber"]
    assert run.data.params["theta0_e_bb.resin.rubber"] == run.data.params["theta0_e_bb"]
    assert "e_bb@resin+rubber" in capsys.readouterr().out
    # The fitted set simulates the dataset again (the registry's pyfunc too).
    model = mlflow.pyfunc.load_model(doc["champion_uri"])
    assert len(model.predict(pd.DataFrame({"dataset": [str(ds)]}))) > 0


def test_cli_rejects_a_material_the_dataset_does_not_have(store, tmp_path, capsys):
    ds = tmp_path / "two"
    assert main(["generate", str(ds), "--scenarios", "2", "--materials", "resin"]) == 0
    assert main(["calibrate", str(ds), "--fit", "e_bb@resin+steel",
                 "--out", str(tmp_path / "o")]) == 1
    err = capsys.readouterr().err
    assert "e_bb@resin+steel" in err and "no material 'steel'" in err
    track, c, exp = store
    assert _runs(c, exp) == []


def _first_use(uri, out):
    """One process's first use of a store: open it, log a run, register a version."""
    import os

    os.environ["MLFLOW_TRACKING_URI"] = uri
    os.environ.pop("MLFLOW_REGISTRY_URI", None)
    from flows import registry as R
    from flows import settings as S
    from flows import tracking as T
    from simcore import params as P

    track = S.tracking()
    c, exp = T.client(track)
    run_id = T.start_run(c, exp, "race", {})
    R.log_model(c, run_id, P.DEFAULTS)
    version, first = R.register_version(c, track, run_id, {})
    T.finish(c, run_id)
    out.put((version, first))


def test_a_fresh_store_survives_four_first_uses_at_once(tmp_path):
    """Four processes open the same fresh SQLite store at once (MLflow's schema
    migration races without the lock beside it), each registers a version:
    all succeed, and exactly one of them becomes the first champion."""
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    uri = f"sqlite:///{tmp_path}/fresh.db"
    procs = [ctx.Process(target=_first_use, args=(uri, out)) for _ in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(300)
    assert [p.exitcode for p in procs] == [0] * 4
    results = [out.get(timeout=5) for _ in procs]
    assert sorted(int(v) for v, _ in results) == [1, 2, 3, 4]
    assert sum(first for _, first in results) == 1
    c = mlflow.MlflowClient(tracking_uri=uri, registry_uri=uri)
    champ = c.get_model_version_by_alias("contactfit-coefficients", "champion")
    assert champ.tags.get("champion") == "first"
    assert dict(results)[str(champ.version)] is True


def _children(pid):
    """The pids of a process's children (from /proc)."""
    out = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(OSError):
            out += [int(p) for p in (task / "children").read_text().split()]
    return out


@pytest.mark.parametrize("how", ["ctrl-c", "sigterm", "sighup"])
def test_an_interrupted_calibration_fails_its_run_and_exits_quickly(tmp_path, how):
    """Ctrl-C (SIGINT to the process group, as a terminal sends it), SIGTERM
    (to the process alone) or a hang-up (a terminal closed mid-fit: SIGHUP)
    while the fit runs, its kernels still compiling: the
    process exits within 10 s,
    its MLflow run is FAILED, nothing is registered, and the temporary Prefect
    server it started is gone."""
    import os
    import shutil
    import signal
    import subprocess
    import sys
    import time

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    # an empty kernel cache: the signal comes while the shards' threads compile
    # their kernels (Prefect's own SIGTERM handler waited for them: a minute)
    env = dict(os.environ, MLFLOW_TRACKING_URI=uri, PREFECT_SERVER_ANALYTICS_ENABLED="false",
               NUMBA_CACHE_DIR=str(tmp_path / "kernels"))
    env.pop("MLFLOW_REGISTRY_URI", None)
    env.pop("PREFECT_API_URL", None)
    cfg = tmp_path / "slow.yaml"
    cfg.write_text("starts: 400\n")  # long enough to be interrupted mid-fit
    # the table with its integrator named: no pilot of 002's rule compiles
    # the kernels before the run starts (it would, and the fit then finds them)
    table = tmp_path / "table"
    shutil.copytree(TABLE, table)
    with open(table / "dataset.yaml", "a") as f:
        f.write("model: {integrator: exact}\n")
    proc = subprocess.Popen([sys.executable, "-m", "flows.cli", "calibrate", str(table),
                             "--config", str(cfg), "--out", str(tmp_path / "o")], env=env,
                            cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    c = mlflow.MlflowClient(tracking_uri=uri, registry_uri=uri)
    running = []
    deadline = time.monotonic() + 240
    while not running and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.5)
        with contextlib.suppress(Exception):
            exp = c.get_experiment_by_name("contactfit")
            running = exp and [r for r in c.search_runs([exp.experiment_id])
                               if r.info.status == "RUNNING"]
    assert running, proc.communicate(timeout=30)
    time.sleep(2.0)  # into the fit
    children = _children(proc.pid)
    t0 = time.monotonic()
    sent = {"ctrl-c": signal.SIGINT, "sigterm": signal.SIGTERM, "sighup": signal.SIGHUP}[how]
    if how == "ctrl-c":
        os.killpg(proc.pid, sent)
    else:
        proc.send_signal(sent)
    _, err = proc.communicate(timeout=30)
    assert time.monotonic() - t0 < 10.0
    assert proc.returncode == 128 + sent, err.decode(errors="replace")[-4000:]
    assert b"marked FAILED" in err and b"Traceback" not in err
    (run,) = c.search_runs([running[0].info.experiment_id])
    assert run.info.status == "FAILED" and "interrupted by SIG" in run.data.tags["error"]
    assert [m.name for m in c.search_registered_models()
            if c.search_model_versions(f"name = '{m.name}'")] == []
    for pid in children:
        assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(
            f"/proc/{pid}/status").read_text().lower(), pid


def test_a_run_left_running_by_a_dead_process_is_failed_by_the_next_command(store):
    """A RUNNING run tagged with a process that has ended is marked FAILED by
    the next client on the store; the live process's own RUNNING run stays."""
    import subprocess
    import sys

    track, c, exp = store
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    host, _, start = tracking._process_id()
    gone = c.create_run(exp, run_name="killed", tags={
        "contactfit.process": f"{host}:{dead.pid}:{start}"}).info.run_id
    alive = tracking.start_run(c, exp, "alive", {})
    elsewhere = c.create_run(exp, tags={"contactfit.process": f"other-host:{dead.pid}:1"})
    tracking.client(track)
    assert c.get_run(gone).info.status == "FAILED"
    assert "abandoned" in c.get_run(gone).data.tags["error"]
    assert c.get_run(alive).info.status == "RUNNING"
    assert c.get_run(elsewhere.info.run_id).info.status == "RUNNING"


def test_simulate_takes_a_registered_model(store, tmp_path):
    """``simulate --params models:/NAME@champion`` simulates with the
    champion's coefficients: the same tables as those coefficients in JSON;
    an unknown alias is one clear line."""
    from simcore import params as P

    track, c, exp = store
    coef = dict(P.DEFAULTS, mu_k=0.17, e_bb=0.9)
    run_id = tracking.start_run(c, exp, "manual", {})
    registry.register(c, track, run_id, coef, {})
    tracking.finish(c, run_id)
    (tmp_path / "p.json").write_text(json.dumps(coef))
    assert main(["simulate", TABLE, "--params", "models:/contactfit-coefficients@champion",
                 "--out", str(tmp_path / "a")]) == 0
    assert main(["simulate", TABLE, "--params", str(tmp_path / "p.json"),
                 "--out", str(tmp_path / "b")]) == 0
    a = pd.read_parquet(tmp_path / "a" / "final.parquet")
    b = pd.read_parquet(tmp_path / "b" / "final.parquet")
    pd.testing.assert_frame_equal(a, b)
    assert main(["simulate", TABLE, "--params", "models:/contactfit-coefficients@nobody",
                 "--out", str(tmp_path / "c")]) == 1


@pytest.mark.parametrize("text, words", [
    ("champion_alias: v3\n", ["champion_alias = 'v3'", "reserved"]),
    ("champion_alias: 'my champ'\n", ["champion_alias = 'my champ'"]),
    ("registered_model: 'a/b'\n", ["registered_model = 'a/b'"]),
    ("tracking_uri: 'ftp://host/x'\n", ["tracking_uri = 'ftp://host/x'", "schemes"]),
])
def test_tracking_settings_are_checked_before_any_flow(tmp_path, monkeypatch, text, words):
    monkeypatch.chdir(tmp_path)
    for var in ("MLFLOW_TRACKING_URI", "MLFLOW_REGISTRY_URI", "CONTACTFIT_MLFLOW_CONFIG",
                "CONTACTFIT_CHAMPION_ALIAS", "CONTACTFIT_REGISTERED_MODEL"):
        monkeypatch.delenv(var, raising=False)
    (tmp_path / "mlflow.yml").write_text(text)
    with pytest.raises(ValueError) as err:
        settings.tracking()
    for w in words:
        assert w in str(err.value) and "mlflow.yml" in str(err.value), (w, str(err.value))


def test_a_locked_store_is_waited_on_then_reported(tmp_path, monkeypatch):
    """Another process holds the SQLite store locked for 6 s: a client waits
    for it (CONTACTFIT_STORE_WAIT_S 30) and goes on; with a 1 s wait it stops
    after about 1 s saying the store stayed locked, never a traceback."""
    import subprocess
    import sys
    import time

    monkeypatch.chdir(tmp_path)
    uri = f"sqlite:///{tmp_path}/locked.db"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.delenv("MLFLOW_REGISTRY_URI", raising=False)
    track = settings.tracking()
    tracking.client(track)  # the store exists

    def hold(seconds):
        p = subprocess.Popen([sys.executable, "-c", (
            "import sqlite3, sys, time; c = sqlite3.connect(sys.argv[1]); "
            "c.execute('BEGIN EXCLUSIVE'); print('locked', flush=True); "
            f"time.sleep({seconds})"), f"{tmp_path}/locked.db"], stdout=subprocess.PIPE)
        p.stdout.readline()
        return p

    locker = hold(6)
    monkeypatch.setenv("CONTACTFIT_STORE_WAIT_S", "30")
    t0 = time.monotonic()
    tracking.client(track)
    assert 3.0 < time.monotonic() - t0 < 30.0
    locker.communicate()
    locker = hold(6)
    monkeypatch.setenv("CONTACTFIT_STORE_WAIT_S", "1")
    t0 = time.monotonic()
    with pytest.raises(StoreLocked, match="stayed locked by another process for 1 s"):
        tracking.client(track)
    assert time.monotonic() - t0 < 5.0
    locker.communicate()


_FOREIGN_MIGRATION = """
import sys, time, sqlalchemy
from mlflow.store.db.utils import _upgrade_db
from mlflow.store.tracking.dbmodels.initial_models import Base as InitialBase
engine = sqlalchemy.create_engine("sqlite:///" + sys.argv[1])
InitialBase.metadata.create_all(engine)
print("half", flush=True)
time.sleep(2.0)
_upgrade_db(engine)
"""


def test_a_store_another_client_is_migrating_is_waited_for(tmp_path, monkeypatch):
    """Another MLflow client has created the store's first tables and is
    still migrating it: our client waits for the head revision instead of
    migrating the same file again, then works."""
    import subprocess
    import sys
    import time

    monkeypatch.chdir(tmp_path)
    db = tmp_path / "mlflow.db"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{db}")
    monkeypatch.delenv("MLFLOW_REGISTRY_URI", raising=False)
    foreign = subprocess.Popen([sys.executable, "-c", _FOREIGN_MIGRATION, str(db)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert foreign.stdout.readline() == b"half\n"
    t0 = time.monotonic()
    c, exp_id = tracking.client(settings.tracking())
    assert time.monotonic() - t0 > 1.0  # it waited for the other client
    _, err = foreign.communicate(timeout=60)
    assert foreign.returncode == 0, err.decode()[-2000:]
    run = c.create_run(exp_id)
    assert c.get_run(run.info.run_id).info.status == "RUNNING"


_OURS = "from flows import settings, tracking; tracking.client(settings.tracking()); print('ok')"
_THEIRS = """
import sys, time, mlflow
c = mlflow.MlflowClient(tracking_uri=sys.argv[1], registry_uri=sys.argv[1])
for _ in range(600):
    try:
        c.search_experiments(); c.search_registered_models(); print("ok"); break
    except Exception:
        time.sleep(0.1)
"""


def test_first_creation_of_a_store_is_safe_against_any_concurrent_client(tmp_path):
    """Three of our commands and a plain MLflow client (as a notebook or
    ``mlflow ui`` opens it) start at once on a store that does not exist yet,
    three times over: every one of ours succeeds, and the store ends at
    MLflow's head revision."""
    import os
    import sqlite3
    import subprocess
    import sys

    from mlflow.store.db.utils import _get_latest_schema_revision

    for k in range(3):
        db = tmp_path / f"s{k}" / "mlflow.db"
        db.parent.mkdir()
        env = dict(os.environ, MLFLOW_TRACKING_URI=f"sqlite:///{db}")
        env.pop("MLFLOW_REGISTRY_URI", None)
        procs = [subprocess.Popen([sys.executable, "-c", _OURS], env=env, cwd=db.parent,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                 for _ in range(3)]
        procs.append(subprocess.Popen([sys.executable, "-c", _THEIRS, f"sqlite:///{db}"],
                                      env=env, cwd=db.parent, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE))
        for p in procs:
            out, err = p.communicate(timeout=300)
            assert p.returncode == 0 and out.strip() == b"ok", err.decode()[-3000:]
        with sqlite3.connect(db) as con:
            (rev,), = con.execute("SELECT version_num FROM alembic_version")
        assert rev == _get_latest_schema_revision()
        assert not list(db.parent.glob(".*.creating"))


def test_losing_the_tracking_server_mid_run_fails_quickly_and_registers_nothing(tmp_path):
    """The MLflow server dies while a calibration runs: the CLI exits 1
    within a minute (not MLflow's minutes of retries per request), in one
    line, without a traceback, and the store holds no registered version."""
    import os
    import subprocess
    import sys
    import time

    server, url, env = _start_mlflow_server(tmp_path)
    try:
        cli = subprocess.Popen(
            [sys.executable, "-m", "flows.cli", "calibrate", TABLE, "--out", str(tmp_path / "o"),
             "--method", "gd"], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            env=dict(env, MLFLOW_TRACKING_URI=url), text=True)
        client = mlflow.MlflowClient(url)
        for _ in range(600):
            with contextlib.suppress(Exception):
                exp = client.get_experiment_by_name("contactfit")
                if exp and client.search_runs([exp.experiment_id]):
                    break
            time.sleep(0.1)
        # at once: the fit and its logging on this table take a few seconds
        # (a fixed pause raced them to the end of the run)
        os.killpg(server.pid, 9)
        lost = time.perf_counter()
        out, _ = cli.communicate(timeout=300)
        took = time.perf_counter() - lost
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.pid, 9)
        server.wait(timeout=30)
    assert cli.returncode == 1, out
    assert took < 60, took
    assert "tracking store stopped answering" in out and "Traceback" not in out, out
    db = f"sqlite:///{tmp_path}/server.db"
    local = mlflow.MlflowClient(tracking_uri=db, registry_uri=db)
    assert local.search_registered_models() == []


def test_losing_the_prefect_server_mid_run_fails_the_run_at_once(tmp_path):
    """The temporary Prefect server dies while a calibration runs: the CLI
    marks the run FAILED, registers nothing and exits 1 within seconds, in
    one line (Prefect's client alone would retry for minutes)."""
    import os
    import subprocess
    import sys
    import time

    env = dict(os.environ, MLFLOW_TRACKING_URI=f"sqlite:///{tmp_path}/mlflow.db")
    env.pop("PREFECT_API_URL", None)
    log = tmp_path / "out.txt"
    with open(log, "w") as out:
        cli = subprocess.Popen([sys.executable, "-m", "flows.cli", "calibrate", TABLE, "--out",
                                str(tmp_path / "o"), "--method", "gd"],
                               cwd=tmp_path, env=env, stdout=out, stderr=subprocess.STDOUT)
        db = f"sqlite:///{tmp_path}/mlflow.db"
        c = mlflow.MlflowClient(tracking_uri=db, registry_uri=db)
        try:
            # Until the flow has opened its MLflow run.
            for _ in range(1200):
                with contextlib.suppress(Exception):
                    exp = c.get_experiment_by_name(settings.tracking().experiment)
                    if exp and c.search_runs([exp.experiment_id]):
                        break
                time.sleep(0.25)
            ps = subprocess.run(["ps", "-eo", "pid,ppid,args"], capture_output=True,
                                text=True).stdout
            servers = [int(line.split()[0]) for line in ps.splitlines()[1:]
                       if int(line.split()[1]) == cli.pid and "uvicorn" in line]
            assert servers, ps
            for pid in servers:
                os.kill(pid, 9)
            lost = time.perf_counter()
            cli.wait(timeout=120)
            took = time.perf_counter() - lost
        finally:
            if cli.poll() is None:
                cli.kill()
                cli.wait()
    text = log.read_text()
    assert cli.returncode == 1 and took < 20, (took, text)
    assert "the Prefect server stopped during the run" in text and "Traceback" not in text
    exp = c.get_experiment_by_name(settings.tracking().experiment)
    assert [r.info.status for r in c.search_runs([exp.experiment_id])] == ["FAILED"]
    assert c.search_registered_models() == []


def test_calibrate_fits_tossed_boxes_by_secants_with_the_orientation_loss(store, tmp_path):
    """The flow on box tosses: the secant continuation and the orientation
    loss through the sharded problem, the run FINISHED and registered."""
    track, c, exp = store
    boxes = synth.generate(tmp_path / "boxes", synth.GeneratorSettings(
        shape="box", scenarios=3, duration=1.2, rate=148.0, noise_mm=0.0, noise_deg=0.0))
    doc = pipeline.calibrate(str(boxes), config={
        "fit": ["mu_k", "e_bg"], "start": {"mu_k": 0.23, "e_bg": 0.48},
        "weights": {"trajectory": 1.0, "orientation": 1.0}, "secant": [0.01, 0.003],
        "step_sigma": 0.0, "max_iter": 30, "test_fraction": 0.3,
        # noiseless tumbling boxes: 0.5 % off the truth is a millimetre
        # off, far above a noise of zero; the tolerance is declared
        "gate_floor_m": 0.005})
    (run,) = _runs(c, exp)
    assert run.info.status == "FINISHED" and doc["gate"]["registered"]
    assert "segments of 0.15 s" in doc["strategy"]  # chosen: tumbling boxes
    assert run.data.params["strategy"] == "segments"
    assert doc["params"]["mu_k"] == pytest.approx(0.25, rel=5e-3)
    assert doc["params"]["e_bg"] == pytest.approx(0.45, rel=5e-3)
    assert 0 < doc["components"]["orientation"] < 1e-5  # weighed, and matched
    assert "overlays.png" in {a.path for a in c.list_artifacts(run.info.run_id)}


def test_a_signal_inside_an_mlflow_call_acts_once_the_call_returns():
    """Ctrl-C's handler, arriving while the main thread is inside an MLflow
    call (which may hold the SQLite write lock), runs once that call has
    returned, not inside it; outside a call it goes on at once."""
    from flows import tracking

    seen = []

    class Store:
        def log_batch(self, run_id):
            seen.append(("inside", tracking.deferred(lambda: seen.append("handler"))))

    tracking._Guarded(Store()).log_batch("r")
    assert seen == [("inside", True), "handler"]
    assert not tracking.deferred(lambda: seen.append("never"))
    assert seen[-1] == "handler"


IMPACTS = str(Path("datasets/fazeli-ellipse").resolve())


def test_cli_calibrates_measured_impacts_and_registers_them(store, tmp_path, capsys):
    track, c, exp = store
    assert main(["calibrate", IMPACTS, "--config", f"{IMPACTS}/calibrate.yaml",
                 "--out", str(tmp_path / "o")]) == 0
    doc = json.loads((tmp_path / "o" / "fit.json").read_text())
    assert doc["free"] == ["mu_k", "e_bg"] and doc["converged"] and doc["model_version"] == "1"
    assert set(doc["params"]) == {"mu_k", "e_bg"} and doc["dataset"]["kind"] == "impacts"
    assert 0.15 < doc["params"]["mu_k"] < 0.3 and 0.3 < doc["params"]["e_bg"] < 0.6
    assert doc["scores"]["train_fazeli_median"] < 0.4 and "Δv loss" in doc["strategy"]
    run = c.get_run(doc["mlflow_run_id"])
    assert run.info.status == "FINISHED" and run.data.params["law_body_ground"] == "poisson_lcp"
    # the unflagged ones of the dataset's train split; its test split scored
    assert run.data.params["train_events"] == "1064" and run.data.params["test_events"] == "310"
    assert doc["scores"]["test_fazeli_median"] < 0.4 and doc["dataset"]["split"] == "dataset"
    assert "ci95_lo_mu_k" in run.data.metrics
    out = capsys.readouterr().out
    assert "Fazeli" in out and "e_bg" in out and "mu_s" not in out
    # the registered set predicts the impacts again (loaded from the version's
    # source: another test's simulate may have pointed mlflow's global URI elsewhere)
    assert doc["registered_model"] == settings.model_name(track.registered_model,
                                                          "fazeli-ellipse")
    mv = c.get_model_version_by_alias(doc["registered_model"], "champion")
    assert mv.run_id == doc["mlflow_run_id"]
    model = mlflow.pyfunc.load_model(mv.source)
    pred = model.predict(pd.DataFrame({"dataset": [IMPACTS]}))
    assert len(pred) == 1600 and list(pred.columns)[-6:] == ["vx", "vy", "vz", "wx", "wy", "wz"]
    from simcore.data import impacts

    data = impacts.read(IMPACTS)
    np.testing.assert_allclose(pred[["vx", "vy", "vz", "wx", "wy", "wz"]].to_numpy(),
                               impacts.simulate(data, doc["params"]), rtol=0, atol=1e-12)
    # a fit that does not converge: FAILED, nothing registered
    cfg = tmp_path / "c.yaml"
    cfg.write_text("max_iter: 1\n")
    assert main(["calibrate", IMPACTS, "--config", str(cfg), "--out", str(tmp_path / "f")]) == 1
    failed = json.loads((tmp_path / "f" / "fit.json").read_text())
    assert c.get_run(failed["mlflow_run_id"]).info.status == "FAILED"
    assert failed["model_version"] is None
    assert main(["recalibrate", IMPACTS, "--out", str(tmp_path / "r")]) == 1
    assert "fitted by contactfit calibrate" in capsys.readouterr().err
    runs = len(_runs(c, exp))
    cfg.write_text("nuisance: velocity\n")
    assert main(["calibrate", IMPACTS, "--config", str(cfg), "--out", str(tmp_path / "n")]) == 1
    assert "no nuisance unknowns" in capsys.readouterr().err
    assert len(_runs(c, exp)) == runs  # refused before any run exists


def test_progress_lines_are_throttled_but_every_stage_is_shown():
    """Every iteration goes to MLflow; the terminal gets a line at most every
    two seconds of one stage, and one at each new stage."""
    now = [0.0]
    seen, lines = [], []
    logger = type("L", (), {"info": lambda self, msg: lines.append(msg)})()
    callback = pipeline._progress(logger, seen.append, every=2.0, clock=lambda: now[0])
    for k in range(1, 301):  # 300 iterations 0.1 s apart, the horizon switching at 200
        now[0] = 1.0 + 0.1 * k
        callback({"iter": k, "horizon": 0.5 if k <= 200 else 1.0, "loss": 1.0 / k,
                  "theta": {"mu_k": 0.2}, "part": "rollouts"})
    assert len(seen) == 300
    assert 10 <= len(lines) <= 20 and any("iteration 201 (horizon 1.00)" in x for x in lines)
