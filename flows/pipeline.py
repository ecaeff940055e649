"""Prefect flows: ``calibrate`` and ``recalibrate``.

``calibrate``: load and validate -> shard -> fit (each evaluation of the fit
simulates the shards in parallel through the flow's task runner) ->
evaluate (per-scenario residuals, the test split when the dataset has one;
the plots are drawn and the model saved beside it) -> log to MLflow ->
register.  ``recalibrate``: fit new data starting from
the champion's coefficients, score challenger and champion on the new
data's test split, and move the champion alias only when the challenger is
better by ``promote_margin``.

Task granularity (measured, ``benchmarks/pipeline.py``): a Prefect task run
costs about 3-4 ms here, so a shard task is one whole batched evaluation of
its scenarios (forward run, sensitivities and loss: tens of milliseconds to
seconds), never one scenario or one iteration; the fit loop itself runs in
the flow (a subflow per iteration would cost about 1 s each).  A task per
shard and evaluation is about 2 x 3.5 ms per evaluation on 2 shards.

Shards reach the workers by reference (:class:`ShardRef`): the thread runner
finds the problem already built in this process; a Dask worker builds its
shard from the dataset path once and keeps it (``_PARTS``), so iterations
send only the coefficients.

Large task arguments stay opaque to Prefect, which otherwise walks every
element of a task's arguments looking for futures (0.73 s per task call with
the benchmark's 10,000-scenario dataset): the loaded dataset goes in
``quote``, a shard's scenario ids in an array.
"""

import io
import platform
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.task_runners import ThreadPoolTaskRunner
from prefect.utilities.annotations import quote

from simcore import params as P
from simcore.data import dataset as D
from simcore.data import flights as FL
from simcore.data import replay
from simcore.identify import fit as F
from simcore.identify.problem import Problem, ShardedProblem
from simcore.sliding.integrate import BY_CODE

from . import progress, registry, report, server, settings, tracking


class CalibrationFailed(RuntimeError):
    """The fit did not pass the registration gate (``report.gate``: not
    converged, a residual the model does not explain, or intervals that do
    not hold their estimates); its run is FAILED, nothing registered."""

    def __init__(self, message, doc):
        super().__init__(message)
        self.doc = doc


@dataclass
class Loaded:
    """A validated dataset and the problems built from it."""

    path: str
    ds: object
    digest: str
    rows: dict
    train: Problem
    test: Problem
    split: dict
    split_source: str
    #: ``(n, shards)``: the ``n`` default shards as index ranges of ``train``
    #: (see ``make_shards``).
    shards: tuple = ()
    #: What the training tosses' flights show (:func:`simcore.data.flights.of_dataset`;
    #: None: not box tosses).
    flights: object = None


@dataclass(frozen=True)
class ShardRef:
    """How a worker finds (or builds) one shard's problem."""

    key: str
    path: str
    weights: tuple
    #: The shard's scenario ids: an array, which Prefect does not walk
    #: element by element (a ``quote`` would not survive Dask's pickling).
    ids: np.ndarray = field(repr=False)
    #: The per-material and named coefficients of the fit's layout (``Layout.extra``).
    coefficients: tuple = ()
    #: The whole train problem's scenario count: the shard's loss is a mean over it.
    norm: int = 0
    #: The integrator the whole problem runs on (a worker builds its shard on it).
    integrator: str | None = None


#: Shard problems built in this process, by ``(ShardRef.key, horizon)``.
_PARTS = {}


def _part(ref, horizon):
    key = (ref.key, horizon)
    if key not in _PARTS:
        base = _PARTS.get((ref.key, 1.0))
        if base is None:
            # A worker of another process: build this shard's scenarios alone.
            base = replace(Problem.from_dataset(D.read(ref.path), dict(ref.weights),
                                                order=[str(s) for s in ref.ids],
                                                coefficients=ref.coefficients,
                                                integrator=ref.integrator), norm=ref.norm)
            _PARTS[(ref.key, 1.0)] = base
        _PARTS[key] = base.truncated(horizon)
    return _PARTS[key]


@task(cache_policy=NO_CACHE)
def simulate_shard(ref, horizon, method, kwargs):
    """One shard's batched evaluation (forward run, sensitivities, loss)."""
    out = getattr(_part(ref, horizon), method)(**kwargs)
    if hasattr(out, "sim"):
        out.sim = None  # the raw run stays on the worker
    return out


#: Datasets validated in this process before a flow starts (:func:`preload`).
_VALIDATED = {}


def preload(path, ds=None):
    """Read and validate ``path`` now (a bad dataset raises
    :class:`~simcore.data.dataset.DatasetError` before any flow or run exists),
    or take ``ds``, read and validated already; the next ``load`` of the same
    path in this process reuses it.  Returns the dataset."""
    _VALIDATED[str(path)] = D.read(path) if ds is None else ds
    return _VALIDATED[str(path)]


@task(cache_policy=NO_CACHE)
def load(path, cfg, need_test=False):
    """Read and validate; the train and test problems; lineage facts."""
    # The content hash reads the files again: overlap it with the parsing
    # (hashlib releases the GIL on large buffers).
    with ThreadPoolExecutor(1) as pool:
        digest = pool.submit(tracking.content_hash, path)
        loaded = _load(path, cfg, need_test)
        return replace(loaded, digest=digest.result())


def _load(path, cfg, need_test):
    ds = _VALIDATED.pop(str(path), None) or D.read(path)
    has_split = "scenarios" in ds.tables and "split" in ds.tables["scenarios"].column_names
    split = D.split(ds, test_fraction=cfg.test_fraction, seed=cfg.seed)
    source = "dataset" if has_split else f"seeded fraction {cfg.test_fraction}"
    if not has_split and not need_test:
        split = {sid: "train" for sid in split}
        source = "none (all scenarios fit and scored)"
    train = [sid for sid in sorted(split) if split[sid] == "train"]
    test = [sid for sid in sorted(split) if split[sid] == "test"]
    if not train:
        raise ValueError(f"{path}: no scenario in the train split")
    if need_test and not test:
        raise ValueError(f"{path}: no scenario in the test split ({source})")
    # One problem, ordered shard by shard and then the test split, so that
    # every shard and both splits are contiguous: views of its arrays.
    n = _shard_count(cfg, len(train))
    groups = [[sid for sid in g if split[sid] == "train"] for g in D.shards(ds, n)]
    whole = Problem.from_dataset(ds, cfg.weights, order=sum(groups, []) + test,
                                 integrator=cfg.integrator)
    ntrain = len(train)
    bounds = np.cumsum([0] + [len(g) for g in groups])
    rows = {name: t.num_rows for name, t in ds.tables.items()}
    return Loaded(str(path), ds, None, rows, whole.subset(np.arange(ntrain)),
                  whole.subset(np.arange(ntrain, whole.nscen)) if test else None, split, source,
                  (n, [list(range(a, b)) for a, b in zip(bounds[:-1], bounds[1:])]),
                  FL.of_dataset(ds, train) if whole.tumbling() else None)


@task(cache_policy=NO_CACHE)
def make_shards(loaded, n):
    """``n`` deterministic shards of the train scenarios, balanced by samples
    (:func:`simcore.data.dataset.shards`); the load has put each one's scenarios
    side by side, so a shard's problem is a view."""
    if loaded.shards and loaded.shards[0] == n:
        return loaded.shards[1]
    pos = {sid: k for k, sid in enumerate(loaded.train.ids)}
    return [sorted(pos[s] for s in g if s in pos) for g in D.shards(loaded.ds, n)]


@task(cache_policy=NO_CACHE)
def evaluate(loaded, params, train_loss, baseline=None):
    """Scores and per-scenario residuals of coefficients ``params`` (the fit
    already knows their ``train_loss``), and the test loss of ``baseline``
    coefficients when given."""
    vec = _vector(loaded, params)
    scores = {"train_loss": train_loss}
    if loaded.test is not None:
        scores["test_loss"] = loaded.test.loss_only(vec)
        if baseline is not None:
            scores["baseline_test_loss"] = loaded.test.loss_only(_vector(loaded, baseline))
    parts = _parts(loaded)
    tabs = [replay.residual_table(prob, vec) for prob, _ in parts]
    res = _concat(tabs)
    res["split"] = [name for prob, name in parts for _ in range(prob.nscen)]
    for (prob, name), tab in zip(parts, tabs):
        if prob.nscen:
            scores[f"{name}_rms_m"] = float(np.sqrt(np.nanmean(np.square(tab["rms_m"]))))
    return scores, res


@task(cache_policy=NO_CACHE)
def overlay_paths(loaded, params, n_overlay):
    """The measured and simulated paths of ``n_overlay`` scenarios (test
    scenarios first, in a stable order), or None."""
    vec = _vector(loaded, params)
    parts = _parts(loaded)
    pick = sorted((name != "test", D.stable_hash(sid), sid, part, k)
                  for part, (prob, name) in enumerate(parts) for k, sid in enumerate(prob.ids))
    pick = pick[:n_overlay]
    if not pick:
        return None
    runs = [replay.paths(prob, vec, [r[4] for r in pick if r[3] == part])
            for part, (prob, _) in enumerate(parts) if any(r[3] == part for r in pick)]
    return (_concat([m for m, _ in runs]), _concat([s for _, s in runs]), [r[2] for r in pick])


def _vector(loaded, params):
    """The coefficient vector of ``params`` on the loaded problems' layout."""
    return loaded.train.model.layout.vector(params)


def _parts(loaded):
    return [(loaded.train, "train")] + ([(loaded.test, "test")] if loaded.test is not None
                                        else [])


def _concat(tables):
    """Column dicts of the same keys, concatenated (string columns are lists)."""
    return {k: (sum((list(t[k]) for t in tables), []) if isinstance(tables[0][k], list)
                else np.concatenate([t[k] for t in tables])) for k in tables[0]}


def task_runner(cfg):
    """The task runner of ``cfg``: threads (the kernels release the GIL), or
    Dask through prefect-dask (``dask_address``, else a local cluster of
    ``workers`` single-threaded processes)."""
    if cfg.task_runner == "threads":
        return ThreadPoolTaskRunner(max_workers=cfg.workers)
    try:
        from prefect_dask import DaskTaskRunner
    except ImportError:
        raise ValueError("task_runner dask: prefect-dask is not installed "
                         "(pip install 'contactfit[dask]')") from None
    if cfg.dask_address:
        return DaskTaskRunner(address=cfg.dask_address)
    return DaskTaskRunner(cluster_kwargs={"n_workers": cfg.workers, "threads_per_worker": 1,
                                          "processes": True, "dashboard_address": None})


def run(flow_fn, dataset, config=None, on_server_lost=None):
    """Run ``calibrate`` or ``recalibrate`` on the task runner its config names,
    as the CLI does (:func:`flows.server.run_settings`,
    :func:`flows.server.temporary_server`).
    ``on_server_lost``: called (from a watcher thread) when the Prefect
    server stops during the run (:func:`flows.server.watch_server`)."""
    cfg = settings.calibration(**(config or {}))
    with server.run_settings(), server.temporary_server(), server.watch_server(on_server_lost):
        return flow_fn.with_options(task_runner=task_runner(cfg))(dataset, config=config)


def _code_version():
    from importlib.metadata import PackageNotFoundError, version

    try:
        v = version("contactfit")
    except PackageNotFoundError:
        v = "unknown"
    try:
        sha = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, cwd=Path(__file__).parent, timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        sha = ""
    return f"{v}+{sha}" if sha else v


def _shard_count(cfg, nscen):
    n = cfg.shards or cfg.workers
    return max(1, min(n, nscen // 2 or 1))


#: The least time [s] between two progress lines of one stage of a fit.
PROGRESS_EVERY_S = 2.0


def _progress(logger, history, budget=100, note="", every=PROGRESS_EVERY_S,
              clock=time.perf_counter):
    """The fit callback: MLflow metrics for every iteration, and in the
    terminal the live display's bar (:func:`flows.progress.iteration`,
    ``budget`` the stage's ``max_iter``, ``note`` how it runs) or, where none draws, once the fit
    has run for more than a second, a progress line at most every ``every``
    seconds (and at each new stage: a horizon, the segments or the
    rollouts), so that a fast optimiser's hundreds of iterations do not
    flood it."""
    t0 = clock()
    last = {"t": -np.inf, "stage": None}

    def callback(rec):
        history(rec)
        if progress.live():
            progress.iteration(rec, budget, note)
            return
        now = clock()
        stage = (rec.get("horizon"), rec.get("part"))
        if now - t0 > 1.0 and (now - last["t"] >= every or stage != last["stage"]):
            last.update(t=now, stage=stage)
            theta = ", ".join(f"{k}={v:.5g}" for k, v in rec["theta"].items())
            logger.info(f"iteration {rec['iter']:3d} (horizon {rec['horizon']:.2f}) "
                        f"loss {rec['loss']:.6e}  {theta}")
    return callback


def run_fit(loaded, cfg, start, free, n_shards, c, run_id, logger, enough=None, spread=None):
    """The fit over the shards through the flow's task runner (``enough``:
    the gate's yardstick, ``spread``: a searched fit's first draws, see
    :func:`simcore.identify.fit.fit`)."""
    shards = make_shards(quote(loaded), n_shards)
    weights = tuple(sorted(loaded.train.weights.items()))
    refs = []
    for k, ix in enumerate(s for s in shards if s):
        extra = loaded.train.model.layout.extra
        ref = ShardRef(f"{loaded.digest[:16]}:{k}:{len(shards)}:"
                       f"{D.stable_hash(repr((weights, extra)))}", loaded.path, weights,
                       np.array([loaded.train.ids[i] for i in ix], dtype=str), extra,
                       loaded.train.loss_norm, BY_CODE[loaded.train.model.integrator].name)
        _PARTS[(ref.key, 1.0)] = loaded.train.subset(ix, norm=loaded.train.loss_norm)
        refs.append(ref)

    def runner(calls):
        futures = [simulate_shard.submit(refs[k], h, method, kw) for k, h, method, kw in calls]
        return [f.result() for f in futures]

    problem = ShardedProblem(loaded.train, [s for s in shards if s], runner)
    history = tracking.History(c, run_id)
    try:
        opts = cfg.fit_options()
        budget = opts["max_iter"] or F.MAX_ITER.get(opts["method"], 100)
        note = f" · {len(refs)} shard{'s' * (len(refs) > 1)}, {cfg.task_runner}"
        result = F.fit(problem, params0=start, free=free, spread=spread,
                       callback=_progress(logger, history, budget, note), enough=enough, **opts)
    finally:
        history.flush()
        for key in [k for k in _PARTS if k[0] in {r.key for r in refs}]:
            del _PARTS[key]
    return result


def _log_starts(c, exp_id, run_id, result, ok):
    """A multi-start's starts as nested runs of the calibration's run (FAILED
    with it when the fit failed)."""
    for i, r in enumerate(result.starts):
        child = tracking.start_run(c, exp_id, f"start {i}", {"mlflow.parentRunId": run_id,
                                                            "start": i})  # closed below
        theta0 = r.history[0]["theta"] if r.history else {n: r.params[n] for n in r.free}
        tracking.log_params(c, child, {f"theta0_{n}": h for n, h in theta0.items()})
        hist = tracking.History(c, child)
        for rec in r.history:
            hist(rec)
        hist.flush()
        tracking.log_metrics(c, child, dict({"final_loss": r.loss},
                                            **{f"fitted_{n}": r.params[n] for n in r.free}),
                             step=r.history[-1]["iter"] if r.history else 0)
        tags = {"status": report.status_word(r), "best": r is result or r.loss == result.loss}
        if not np.isfinite(r.loss):  # this start could not be simulated: its run says why
            tags["error"] = r.message
        tracking.set_tags(c, child, tags)
        c.set_terminated(child, "FINISHED" if ok and np.isfinite(r.loss) else "FAILED")


def run_name(dataset, free):
    """An MLflow run's name: the dataset and the free set, short enough to read."""
    names = ",".join(free)
    return f"{dataset} [{names if len(names) <= 60 else f'{len(free)} coefficients'}]"


def flights_doc(fit):
    """``fit.json``'s ``flights``: what the training tosses' flights show."""
    finite = [float(e) if np.isfinite(e) else None for e in fit.stderr]
    return {"gravity": fit.gravity, "gravity_stderr": finite[0],
            "com": [float(c) for c in fit.com], "com_stderr": finite[1:],
            "tilt_x": fit.tilt_x, "tilt_y": fit.tilt_y,
            "tilt_stderr": [float(e) if np.isfinite(e) else None for e in fit.tilt_stderr],
            "phases": fit.phases,
            "rejected": fit.rejected}


def flights_start(loaded, cfg, free, start):
    """A searched fit's start and the spread of its first draws (``spread``
    of :func:`simcore.identify.fit.fit`) from what the flights show
    (:attr:`Loaded.flights`): a free centre of mass (less the bodies
    table's) or table tilt that ``start`` does not give (the dataset, the
    config or a champion) starts at the flights' value (gravity keeps the
    dataset's, which its import measured from the same flights), and the
    first stage draws each of gravity, centre of mass and tilt within two of
    the flights' standard errors of its start.  The tilt matters most: from
    a level start, drawn within +-0.6 deg, the first stage of synthetic
    tosses on a table tilted 0.5 deg ended 0.2 deg off about the other
    axis.  Other strategies, or data without flights:
    ``(start, None)``."""
    fit = loaded.flights
    if cfg.strategy != "search" or fit is None:
        return start, None
    bodies = loaded.ds.tables["bodies"]
    table = [float(bodies.column(c)[0].as_py() or 0.0) if c in bodies.column_names else 0.0
             for c in ("com_x", "com_y", "com_z")]
    shows = {"gravity": (None, fit.stderr[0]),
             **{f"com_{a}": (fit.com[k] - table[k], fit.stderr[1 + k])
                for k, a in enumerate("xyz")},
             "tilt_x": (fit.tilt_x, fit.tilt_stderr[0]), "tilt_y": (fit.tilt_y, fit.tilt_stderr[1])}
    start, spread = dict(start), {}
    given = {P.canonical(k) for k in start}
    for name in free:
        value, se = shows.get(P.base(name), (None, np.inf))
        if not np.isfinite(se):
            continue
        spread[name] = 2.0 * float(se)
        if value is not None and P.canonical(name) not in given:
            start[name] = float(value)
    return start, spread


def _free_and_start(loaded, cfg, start, baseline=None):
    """The free names and start values of a calibration, and ``loaded`` with
    every per-material coefficient they (or the ``baseline``) name in its
    problems' layout; a name or value that does not fit the dataset raises
    here, before any run exists."""
    fixed = loaded.ds.fixed_params
    free = cfg.fit or [n for n in loaded.train.model.layout.coefficients if n not in fixed]
    values = start_values(fixed, free, start, cfg.start)
    names = [*free, *values, *cfg.scan, *(baseline or {})]
    loaded = replace(loaded, train=loaded.train.with_coefficients(names),
                     test=loaded.test.with_coefficients(names) if loaded.test is not None
                     else None)
    _vector(loaded, values)
    return loaded, [P.canonical(n) for n in free], values


@flow(name="contactfit-calibrate", task_runner=ThreadPoolTaskRunner(max_workers=2))
def calibrate(dataset: str, config: dict | None = None, start: dict | None = None,
              tags: dict | None = None, hold_out: bool = False,
              baseline: dict | None = None):
    """Calibrate the coefficients on ``dataset``; returns the ``fit.json`` document.

    ``config``: :class:`flows.settings.CalibrationConfig` fields; ``start``:
    initial coefficients (the recalibration passes the champion's);
    ``hold_out``: keep a test split out of the fit even when the dataset
    names none (a seeded ``test_fraction``); ``baseline``: coefficients
    scored on the test split beside the fit (``baseline_test_loss``).  The
    first registered version of the model name becomes champion.
    """
    server.own_signals()
    logger = get_run_logger()
    cfg = settings.calibration(**(config or {}))
    track = settings.tracking()
    # Opening (or creating) the MLflow store overlaps the load; no run exists
    # until the data are loaded and valid.
    with ThreadPoolExecutor(1) as pool:
        store = pool.submit(tracking.client, track)
        loaded = load(dataset, cfg, need_test=hold_out)
        c, exp_id = store.result()
    loaded, free, start = _free_and_start(loaded, cfg, start, baseline)
    track = settings.for_dataset(track, cfg.model_key or loaded.ds.name)
    cfg = cfg.chosen(loaded.train)
    start, spread = flights_start(loaded, cfg, free, start)
    logger.info(f"loaded {loaded.ds.name}: {loaded.train.nscen} train and "
                f"{loaded.test.nscen if loaded.test is not None else 0} test scenarios, "
                f"{loaded.rows.get('trajectories', 0)} samples; fitting {', '.join(free)}")
    if loaded.flights is not None:  # an independent look at the body and the recording
        logger.info(FL.describe(loaded.flights))
    with tracking.tracked_run(c, exp_id, run_name(loaded.ds.name, free),
                              dict({"contactfit.flow": "calibrate",
                                    "dataset": loaded.ds.name}, **(tags or {})),
                              track.registered_model) as run:
        run_id = run.run_id
        tracking.log_dataset(c, run_id, dataset, loaded.ds.name, loaded.digest, "train",
                             loaded.rows)
        n_shards = _shard_count(cfg, loaded.train.nscen)
        tracking.log_params(c, run_id, _run_params(loaded, cfg, start, free, n_shards))
        t0 = time.perf_counter()
        noise = D.position_noise(loaded.ds)
        limit = report.rms_limit(noise, cfg.gate_k, cfg.gate_floor_m)
        result = run_fit(loaded, cfg, start, free, n_shards, c, run_id, logger,
                         report.at_noise(limit, loaded.train.weights), spread)
        fit_s = time.perf_counter() - t0
        logger.info(f"fit: {report.status_word(result)} after {result.nit} iterations in "
                    f"{fit_s:.1f} s; scoring, plotting and logging to MLflow")
        ok = report.converged(result)
        # The plots are drawn and the model artifact saved by a worker beside
        # the evaluation's simulations (their kernels release the GIL); the
        # version is registered only once everything else is in.
        with ThreadPoolExecutor(1) as side:
            conv = side.submit(report.convergence_png, result)
            model = (side.submit(registry.log_model, c, run_id, result.params,
                                 loaded.train.model.layout.laws, loaded.train.model.spin)
                     if ok else None)
            # ``ok`` so far: converged; the registration gate decides below.
            overlay = overlay_paths(quote(loaded), result.params, cfg.overlays)
            over = side.submit(report.overlays_png, *overlay) if overlay else None
            scores, res = evaluate(quote(loaded), result.params, result.loss, baseline)
            if noise is not None and report.beyond_noise(scores.get("train_rms_m"), noise,
                                                         cfg.gate_k):
                # a residual above the noise (a declared model error, a fit
                # the gate will refuse, or one beside the truth's narrow
                # well): the intervals allow for it
                result = F.widened(result, loaded.train.nscen)
            ok, refusal, limit = report.gate(result, scores.get("train_rms_m"), noise,
                                             cfg.gate_k, cfg.gate_floor_m)
            doc = report.fit_json(result, run_id, None, scores, _lineage(loaded),
                                  loaded.train.model.layout.as_dict(_vector(loaded, start)),
                                  loaded.ds.truth)
            if loaded.flights is not None:
                doc["flights"] = flights_doc(loaded.flights)
            doc["integrator"] = loaded.train.model.notes[0] if loaded.train.model.notes else ""
            doc.update(fit_s=fit_s, noise_m=noise,
                       gate={"registered": ok, "reason": refusal, "rms_limit_m": limit},
                       **registry.uris(track))
            if report.converged(result) and report.above(scores.get("train_rms_m"), limit):
                # The optimiser stopped, but not at the noise: no "converged" verdict.
                doc.update(converged=False, status=report.ABOVE_NOISE, message=refusal)
            conv_png, over_png = conv.result(), over.result() if over else b""
            _log_results(c, run_id, result, doc, res, conv_png, over_png,
                         report.nuisance_table(result, loaded.train, cfg.nuisance)
                         if result.nuisance is not None else None)
            if result.starts:
                _log_starts(c, exp_id, run_id, result, ok)
            if not ok:
                tracking.set_tags(c, run_id, {"gate": refusal[:5000]})
                raise CalibrationFailed(f"not registered: {refusal}", doc)
            model.result()
        version, first = registry.register_version(
            c, track, run_id,
            {"dataset": loaded.ds.name, "dataset_digest": loaded.digest[:16],
             "loss": result.loss, "test_loss": scores.get("test_loss", ""),
             "unidentified": ",".join(n for n in result.free
                                      if not result.identifiability[n]["identifiable"])}
        )
        run.registered(version)
        doc.update(model_version=version, first_champion=first,
                   **registry.uris(track, version))
        # fit.json and the report again, now with the version they describe.
        tracking.log_files(c, run_id, {"fit.json": report.dumps(doc),
                                       "report.html": report.report_html(doc, conv_png, over_png)})
        tracking.set_tags(c, run_id, {"model_version": version or "",
                                      **({"champion": "first"} if first else {})})
    logger.info(f"calibrated {loaded.ds.name}: loss {result.loss:.6e}, "
                f"{result.nit} iterations, model version {version}, run {run_id}")
    return doc


def start_values(fixed, free, start, given):
    """A calibration's start: the dataset's ``fixed`` values, then ``start``
    (a champion's coefficients) except where the dataset fixes a
    coefficient the fit does not free, then the config's ``given`` starts."""
    values = dict(fixed)
    held = {P.canonical(n) for n in fixed} - {P.canonical(n) for n in free}
    values.update({k: v for k, v in (start or {}).items() if P.canonical(k) not in held})
    values.update(given)
    return values


def registry_key(dataset, cfg):
    """The registry key of a calibration of ``dataset`` under ``cfg``: its
    ``model_key``, else the dataset's name as :class:`~simcore.data.dataset.Dataset`
    gives it (``dataset.yaml`` ``name``, else the directory's), read without
    loading the tables."""
    if cfg.model_key:
        return cfg.model_key
    meta = D.safe_yaml(Path(dataset) / "dataset.yaml") if (
        Path(dataset) / "dataset.yaml").is_file() else None
    return (meta or {}).get("name", Path(dataset).name)


def _run_params(loaded, cfg, start, free, n_shards):
    layout = loaded.train.model.layout
    out = {f"theta0_{k}": v for k, v in layout.as_dict(layout.vector(start)).items()}
    out.update({"free": ",".join(free), "method": cfg.method, "lr": cfg.lr, "ftol": cfg.ftol,
                "gtol": cfg.gtol, "step_sigma": cfg.step_sigma, "patience": cfg.patience,
                "max_iter": cfg.max_iter,
                "starts": cfg.starts, "nuisance": cfg.nuisance, "horizons": cfg.horizons,
                "robust": cfg.robust, "secant": cfg.secant, "strategy": cfg.strategy,
                **({"scan": cfg.scan} if cfg.scan else {}),
                "integrator": BY_CODE[loaded.train.model.integrator].name,
                "segment_s": cfg.segment_s, "weights": loaded.train.weights, "shards": n_shards,
                "task_runner": cfg.task_runner, "dataset": loaded.ds.name,
                **{f"law_{kind}": name for kind, name in layout.laws.items()},
                "model_spin": layout.spin,
                "dataset_path": str(Path(loaded.path).resolve()),
                "dataset_digest": loaded.digest, "split": loaded.split_source,
                "train_scenarios": loaded.train.nscen,
                "test_scenarios": loaded.test.nscen if loaded.test is not None else 0,
                "code_version": _code_version(), "python": platform.python_version()})
    out.update({f"bounds_{n}": list(P.BOUNDS[P.base(n)]) for n in free})
    out.update({f"rows_{k}": v for k, v in loaded.rows.items()})
    return out


def _lineage(loaded):
    return {"name": loaded.ds.name, "path": str(Path(loaded.path).resolve()),
            "digest": loaded.digest, "rows": loaded.rows, "split": loaded.split_source,
            "laws": dict(loaded.train.model.layout.laws),
            "model": {"spin": loaded.train.model.spin}}


def _parquet(columns):
    buf = io.BytesIO()
    pq.write_table(pa.table(columns), buf)
    return buf.getvalue()


def _log_results(c, run_id, result, doc, res, conv, over, nuisance=None):
    final = {"final_loss": result.loss, "iterations": result.nit,
             "evaluations": result.nfev}
    final.update({f"final_loss_{k}": v for k, v in result.components.items()})
    final.update({k: v for k, v in doc["scores"].items()})
    if doc.get("noise_m") is not None:
        final["noise_m"] = doc["noise_m"]
    final["gate_rms_limit_m"] = doc["gate"]["rms_limit_m"]
    for n in result.free:
        final[f"fitted_{n}"] = result.params[n]
        se = result.stderr[n]
        if np.isfinite(se):
            final[f"stderr_{n}"] = se
            final[f"ci95_lo_{n}"], final[f"ci95_hi_{n}"] = result.ci95[n]
        final[f"identifiable_{n}"] = float(result.identifiability[n]["identifiable"])
    tracking.log_metrics(c, run_id, final, step=result.nit)
    tracking.set_tags(c, run_id, {
        "status": doc["status"], "converged": doc["converged"],
        "unidentified": ",".join(n for n in result.free
                                 if not result.identifiability[n]["identifiable"]),
    })
    files = {"fit.json": report.dumps(doc), "convergence.png": conv, "overlays.png": over,
             "residuals.parquet": _parquet(res), "report.html": report.report_html(doc, conv, over)}
    if nuisance is not None:
        files["nuisance.parquet"] = _parquet(nuisance)
    tracking.log_files(c, run_id, files)


@flow(name="contactfit-recalibrate", task_runner=ThreadPoolTaskRunner(max_workers=2))
def recalibrate(dataset: str, config: dict | None = None):
    """Fit ``dataset`` from the champion's coefficients and promote the
    challenger if it beats the champion on the data's test split by
    ``promote_margin`` (relative).  Returns the challenger's fit document with
    the ``decision``."""
    server.own_signals()
    logger = get_run_logger()
    cfg = settings.calibration(**(config or {}))
    track = settings.for_dataset(settings.tracking(), registry_key(dataset, cfg))
    c, _ = tracking.client(track)
    champ = registry.champion(c, track)
    if champ is None:
        logger.info("no champion yet: this calibration becomes the first unless another "
                    "registers first")
        doc = calibrate.with_options(task_runner=task_runner(cfg))(
            dataset, config, tags={"contactfit.flow": "recalibrate"}, hold_out=True)
        if doc["first_champion"]:  # decided once, under the champion lock
            doc["decision"] = "first champion"
            tracking.set_tags(c, doc["mlflow_run_id"], {"decision": "first champion"})
            return doc
        champ_version = None  # another run became champion meanwhile: compare with it
    else:
        champ_version, champ_params = champ
        doc = calibrate.with_options(task_runner=task_runner(cfg))(
            dataset, config, start=champ_params, hold_out=True, baseline=champ_params,
            tags={"contactfit.flow": "recalibrate", "champion_before": champ_version})
    challenger_score = doc["scores"]["test_loss"]
    with registry.champion_lock(track):
        # Re-read under the lock: another recalibration may have moved it,
        # and then the challenger must beat the new champion.
        current_version, current_params = registry.champion(c, track)
        if current_version == champ_version:
            champion_score = doc["scores"]["baseline_test_loss"]
        else:
            test = load.fn(dataset, cfg, need_test=True).test
            test = test.with_coefficients(current_params)
            champion_score = test.loss_only(test.model.layout.vector(current_params))
        better = challenger_score < (1.0 - cfg.promote_margin) * champion_score
        if better:
            registry.set_champion(c, track, doc["model_version"])
    decision = "promoted" if better else "kept"
    doc.update(decision=decision, champion_version=current_version,
               champion_test_loss=champion_score, challenger_test_loss=challenger_score)
    run = doc["mlflow_run_id"]
    tracking.set_tags(c, run, {"decision": decision, "champion_before": current_version,
                               "champion_after": doc["model_version"] if better
                               else current_version})
    tracking.log_metrics(c, run, {"champion_test_loss": champion_score,
                                  "challenger_test_loss": challenger_score})
    logger.info(f"recalibrate: challenger v{doc['model_version']} test loss "
                f"{challenger_score:.6e} vs champion v{current_version} {champion_score:.6e}: "
                f"{decision}")
    return doc
