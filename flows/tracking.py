"""MLflow tracking through :class:`mlflow.MlflowClient` with explicit run ids.

Fluent ``mlflow.*`` calls keep their active run per thread: inside a Prefect
task submitted to a thread pool they would silently open a new run (see
``shared/docs/stack-notes.md``).  Everything here names its run.

A run is opened and closed by one context, :func:`tracked_run`: RUNNING
inside it, FINISHED at its end, FAILED (with the error as the ``error`` tag
and ``error.txt``, and a version it registered deleted) when anything
raises in it; nothing sets FINISHED before the last artifact and the
registration are in.  A run whose process was killed before it could close
it is found by the next :func:`client` on the store (:func:`reap`) and
marked FAILED.

MLflow keys cannot hold ``@`` or ``+``: a per-material coefficient's name
becomes its key with both replaced by ``.`` (:func:`key`;
``fitted_mu_bb@resin+rubber`` is logged as ``fitted_mu_bb.resin.rubber``,
and :func:`simcore.params.from_mlflow_key` reads a coefficient's key back).
"""

import contextlib
import hashlib
import json
import os
import signal
import socket
import tempfile
import threading
import time
import traceback
from pathlib import Path

from mlflow import MlflowClient
from mlflow.data.dataset_source_registry import get_dataset_source_from_json
from mlflow.data.meta_dataset import MetaDataset
from mlflow.entities import DatasetInput, InputTag, Metric, Param, RunTag

from . import store
from .store import StoreLocked, store_lock, store_uri

#: MLflow's batch limits (metrics per call, params per call).
MAX_METRICS, MAX_PARAMS = 1000, 100


#: A tracking server that stops answering fails a run in seconds, not after
#: MLflow's default of 7 retries with doubling waits (about 4 minutes per
#: request, and a run makes many): 2 retries, 1 s backoff, 30 s timeout,
#: unless the environment says otherwise.
HTTP_DEFAULTS = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2",
                 "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
                 "MLFLOW_HTTP_REQUEST_TIMEOUT": "30"}
for _name, _value in HTTP_DEFAULTS.items():
    os.environ.setdefault(_name, _value)


#: The main thread's MLflow calls in progress, and what a signal asked to
#: run once the outermost one has returned (:func:`deferred`).
_WRITING = [0]
_AFTER = []


class _Guarded:
    """The MLflow client, each call of the main thread a critical section:
    a signal handler that would write to the store while the main thread
    holds its SQLite write lock (between a statement and its commit) would
    wait out the busy timeout on its own process.  Ctrl-C's handler asks
    :func:`deferred` and waits for the call to return instead."""

    def __init__(self, c):
        self._c = c

    def __getattr__(self, name):
        attr = getattr(self._c, name)
        if not callable(attr):
            return attr

        def call(*args, **kwargs):
            if threading.current_thread() is not threading.main_thread():
                return attr(*args, **kwargs)
            _WRITING[0] += 1
            try:
                return attr(*args, **kwargs)
            finally:
                _WRITING[0] -= 1
                if not _WRITING[0] and _AFTER:
                    _AFTER.pop(0)()
        return call


def deferred(fn):
    """If the main thread is inside an MLflow call (a signal handler
    interrupted it), queue ``fn`` to run as soon as that call has returned
    and return True; else return False (the caller goes on now)."""
    if not _WRITING[0]:
        return False
    _AFTER.append(fn)
    return True


def client(settings):
    """A client on the settings' stores: a local store created whole, or
    waited for while another client creates it (:func:`flows.store.prepare`),
    and the experiment created under a file lock beside it."""
    try:
        store.prepare(settings.tracking_uri)
        store.prepare(settings.registry_uri)
        with store_lock(settings.tracking_uri, "create"):
            c = MlflowClient(tracking_uri=store_uri(settings.tracking_uri),
                             registry_uri=store_uri(settings.registry_uri))
            exp = c.get_experiment_by_name(settings.experiment)
            exp_id = exp.experiment_id if exp else c.create_experiment(settings.experiment)
        with store_lock(settings.registry_uri, "create"):
            c.search_registered_models(max_results=1)  # creates the registry's tables
    except Exception as exc:
        if "database is locked" in str(exc):
            raise StoreLocked(f"the MLflow store {settings.tracking_uri} stayed locked by "
                              f"another process for {store.wait_s():g} s "
                              "(CONTACTFIT_STORE_WAIT_S); try again when it is done") from None
        raise
    reap(c, exp_id)
    return _Guarded(c), exp_id


def _process_id(pid="self"):
    """``(host, pid, start)`` of a process: its host, pid and start time in
    clock ticks since boot (``/proc/PID/stat``), which tells a live process
    from a later one that reused its pid; None when it does not exist."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()
    return socket.gethostname(), int(stat.split()[0]), fields[19]


def start_run(c, exp_id, name, tags):
    """Open a RUNNING run tagged with this process (``contactfit.process``:
    host, pid, start) so that :func:`reap` can tell when it was abandoned."""
    host, pid, start = _process_id()
    tags = dict(tags, **{"contactfit.process": f"{host}:{pid}:{start}"})
    run = c.create_run(exp_id, run_name=name, tags={k: str(v) for k, v in tags.items()})
    return run.info.run_id


#: The runs this process has open, ``run_id -> OpenRun``: an interrupt marks
#: them FAILED (:func:`abandon`).
_OPEN = {}


class OpenRun:
    """A run :func:`tracked_run` holds open: its client and id, and the
    model version it registered (deleted again if the run fails before it
    finishes)."""

    def __init__(self, c, run_id, registered_model):
        self.c, self.run_id, self.registered_model = c, run_id, registered_model
        self.version = None

    def registered(self, version):
        """Note the version this run registered (undone if the run fails)."""
        self.version = version

    def _undo(self):
        if self.version is not None:
            self.c.delete_model_version(self.registered_model, self.version)
            self.version = None


@contextlib.contextmanager
def tracked_run(c, exp_id, name, tags, registered_model=None):
    """The one way a run is opened and closed: RUNNING and tagged with this
    process (:func:`start_run`) inside the block; FINISHED when the block
    ends; on any exception (an interrupt too) FAILED with the error
    (:func:`fail`), a version it registered deleted, and the exception
    raised on.  Yields the :class:`OpenRun`; :func:`abandon` fails every
    run still open (from a signal handler)."""
    run = OpenRun(c, start_run(c, exp_id, name, tags), registered_model)
    _OPEN[run.run_id] = run
    try:
        yield run
    except BaseException as exc:
        if _OPEN.pop(run.run_id, None) is not None:
            with contextlib.suppress(Exception):
                run._undo()
            fail(c, run.run_id, exc)
        raise
    if _OPEN.pop(run.run_id, None) is not None:
        finish(c, run.run_id)


def abandon(reason):
    """Mark every run this process has open FAILED with ``reason`` and delete
    a version one of them registered before it could finish (so an
    interrupted calibration never leaves a version or an alias behind).
    Called from a signal handler: it never raises."""
    for run_id, run in list(_OPEN.items()):
        with contextlib.suppress(Exception):
            run._undo()
            fail(run.c, run_id, KeyboardInterrupt(reason))
        _OPEN.pop(run_id, None)


def reap(c, exp_id):
    """Mark FAILED the RUNNING runs of this host whose process is gone (killed
    before it could close them); a live run, or one of another host, is never
    touched.  Returns the run ids marked."""
    host = socket.gethostname()
    marked = []
    for run in c.search_runs([exp_id], filter_string="attributes.status = 'RUNNING'"):
        who = run.data.tags.get("contactfit.process", "")
        r_host, _, rest = who.partition(":")
        pid, _, start = rest.partition(":")
        if r_host != host or not pid.isdigit():
            continue
        now = _process_id(pid)
        if now is not None and now[2] == start:
            continue  # alive
        with contextlib.suppress(Exception):
            set_tags(c, run.info.run_id, {"error": f"abandoned: its process (pid {pid} on "
                                                   f"{host}) ended without closing the run"})
            c.set_terminated(run.info.run_id, "FAILED")
            marked.append(run.info.run_id)
    return marked


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


class StoreLost(RuntimeError):
    """The tracking store stopped answering during a run."""


def _first_line(exc):
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


class History:
    """The fit's per-iteration callback: buffers each record's metrics (every
    loss component, each coefficient, gradient norm, step size) with
    ``step = iteration`` and writes them ``every`` iterations in one batch."""

    def __init__(self, c, run_id, every=20, prefix=""):
        self.c, self.run_id, self.every, self.prefix = c, run_id, every, prefix
        self.buffer, self.count = [], 0
        # Set when a write failed (the store stopped answering): later
        # flushes do not wait on it again.
        self.lost = None

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
        if self.lost is not None:
            return
        try:
            for i in range(0, len(self.buffer), MAX_METRICS):
                self.c.log_batch(self.run_id, metrics=self.buffer[i:i + MAX_METRICS])
        except Exception as exc:
            self.lost = exc
            raise StoreLost(f"the tracking store stopped answering while logging the fit's "
                            f"iterations: {_first_line(exc)}") from None
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
    """Mark the run FAILED with the error.  Where the store does not answer
    (it was lost mid-run) this raises :class:`StoreLost`, one line saying
    so, instead of a second traceback over the first: the run stays RUNNING
    there, and the next command on the store marks it FAILED (:func:`reap`)."""
    text = "".join(traceback.format_exception(exc))
    what = str(exc)
    if not what and isinstance(getattr(exc, "signal", None), int):  # Prefect's TerminationSignal
        what = f"interrupted by {signal.Signals(exc.signal).name}"
    with contextlib.suppress(Exception):  # the status below is what matters
        set_tags(c, run_id, {"error": f"{type(exc).__name__}: {what}"[:5000]})
        log_files(c, run_id, {"error.txt": text})
    try:
        c.set_terminated(run_id, "FAILED")
    except Exception as lost:
        raise StoreLost(f"the tracking store stopped answering ({_first_line(lost)}); run "
                        f"{run_id} could not be marked FAILED there (the next command on the "
                        "store does it); nothing was registered") from None


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
