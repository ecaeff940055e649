"""MLflow tracking through :class:`mlflow.MlflowClient` with explicit run ids.

Fluent ``mlflow.*`` calls keep their active run per thread: inside a Prefect
task submitted to a thread pool they would silently open a new run (see
``shared/docs/stack-notes.md``).  Everything here names its run.

A run is opened RUNNING by :func:`start_run` and closed by :func:`finish`
(FINISHED) or :func:`fail` (FAILED, with the error as the ``error`` tag and
``error.txt``); nothing sets FINISHED before the last artifact and the
registration are in.

MLflow keys cannot hold ``@`` or ``+``: a per-material coefficient's name
becomes its key with both replaced by ``.`` (:func:`key`;
``fitted_mu_bb@resin+rubber`` is logged as ``fitted_mu_bb.resin.rubber``,
and :func:`simcore.params.from_mlflow_key` reads a coefficient's key back).
"""

import hashlib
import json
import tempfile
import time
import traceback
from pathlib import Path

from mlflow import MlflowClient
from mlflow.data.dataset_source_registry import get_dataset_source_from_json
from mlflow.data.meta_dataset import MetaDataset
from mlflow.entities import DatasetInput, InputTag, Metric, Param, RunTag

#: MLflow's batch limits (metrics per call, params per call).
MAX_METRICS, MAX_PARAMS = 1000, 100


def client(settings):
    """A client on the settings' stores; creates the store and the experiment
    once, before anything fans out (concurrent creation of a new SQLite store
    crashes)."""
    c = MlflowClient(tracking_uri=settings.tracking_uri, registry_uri=settings.registry_uri)
    exp = c.get_experiment_by_name(settings.experiment)
    exp_id = exp.experiment_id if exp else c.create_experiment(settings.experiment)
    return c, exp_id


def start_run(c, exp_id, name, tags):
    run = c.create_run(exp_id, run_name=name, tags={k: str(v) for k, v in tags.items()})
    return run.info.run_id


def key(name):
    """``name`` as an MLflow key (see the module docstring)."""
    return name.replace("@", ".").replace("+", ".")


def log_params(c, run_id, params):
    items = [Param(key(k), _text(v)) for k, v in sorted(params.items())]
    for i in range(0, len(items), MAX_PARAMS):
        c.log_batch(run_id, params=items[i:i + MAX_PARAMS])


def log_metrics(c, run_id, values, step=0):
    now = int(time.time() * 1000)
    items = [Metric(key(k), float(v), now, step) for k, v in values.items()]
    for i in range(0, len(items), MAX_METRICS):
        c.log_batch(run_id, metrics=items[i:i + MAX_METRICS])


def set_tags(c, run_id, tags):
    c.log_batch(run_id, tags=[RunTag(k, _text(v)) for k, v in tags.items()])


class History:
    """The fit's per-iteration callback: buffers each record's metrics (every
    loss component, each coefficient, gradient norm, step size) with
    ``step = iteration`` and writes them ``every`` iterations in one batch."""

    def __init__(self, c, run_id, every=20, prefix=""):
        self.c, self.run_id, self.every, self.prefix = c, run_id, every, prefix
        self.buffer, self.count = [], 0

    def __call__(self, rec):
        now = int(time.time() * 1000)
        step = int(rec["iter"])
        p = self.prefix
        values = {f"{p}loss": rec["loss"], f"{p}grad_norm": rec["grad_norm"],
                  f"{p}step_size": rec["step"], f"{p}horizon": rec.get("horizon", 1.0)}
        values.update({f"{p}loss_{k}": v for k, v in rec["components"].items()})
        values.update({f"{p}theta_{k}": v for k, v in rec["theta"].items()})
        self.buffer += [Metric(key(k), float(v), now, step) for k, v in values.items()]
        self.count += 1
        if self.count % self.every == 0:
            self.flush()

    def flush(self):
        for i in range(0, len(self.buffer), MAX_METRICS):
            self.c.log_batch(self.run_id, metrics=self.buffer[i:i + MAX_METRICS])
        self.buffer = []


def log_dataset(c, run_id, path, name, digest, context, rows):
    """Dataset lineage: the dataset directory as a run input (no copy)."""
    # The local-directory source type, named (resolving it from a bare path
    # warns that two registered source classes match).
    source = get_dataset_source_from_json(json.dumps({"uri": str(Path(path).resolve())}),
                                          "local")
    meta = MetaDataset(source=source, name=name, digest=digest[:36])
    tags = [InputTag("mlflow.data.context", context)]
    tags += [InputTag(f"rows.{k}", str(v)) for k, v in rows.items()]
    c.log_inputs(run_id, datasets=[DatasetInput(meta._to_mlflow_entity(), tags=tags)])


def log_files(c, run_id, files, artifact_path=None):
    """Write ``{name: bytes | str}`` to the run's artifacts."""
    with tempfile.TemporaryDirectory() as d:
        for name, data in files.items():
            p = Path(d) / name
            p.write_bytes(data if isinstance(data, bytes) else data.encode())
        c.log_artifacts(run_id, d, artifact_path)


def finish(c, run_id):
    c.set_terminated(run_id, "FINISHED")


def fail(c, run_id, exc):
    """Mark the run FAILED with the error (never raises over the original error)."""
    text = "".join(traceback.format_exception(exc))
    try:
        set_tags(c, run_id, {"error": f"{type(exc).__name__}: {exc}"[:5000]})
        log_files(c, run_id, {"error.txt": text})
    finally:
        c.set_terminated(run_id, "FAILED")


def content_hash(path):
    """SHA-256 of a dataset directory's files (names and bytes, sorted)."""
    digest = hashlib.sha256()
    for p in sorted(Path(path).iterdir()):
        if p.is_file():
            digest.update(p.name.encode())
            with open(p, "rb") as f:
                # Large chunks: hashlib releases the GIL while it hashes one,
                # and each chunk takes it back (the load runs beside it).
                for chunk in iter(lambda: f.read(1 << 24), b""):
                    digest.update(chunk)
    return digest.hexdigest()


def _text(v):
    s = v if isinstance(v, str) else json.dumps(v, sort_keys=True, default=str)
    return s[:6000]
