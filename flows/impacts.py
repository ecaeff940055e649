"""The calibration flow of a dataset of measured impacts (``dataset.yaml``
``kind: impacts``, :mod:`simcore.data.impacts`).

load and validate -> fit the Δv loss over the events (one batched
evaluation of every event per iteration: the impact maps take
milliseconds, so the fit runs in the flow without shards) -> score (the
training events, and the held-out ones: the dataset's ``test`` split, or a
seeded fraction when asked; Fazeli et al.'s per-event error beside the
loss) -> log to MLflow -> register.  The run is the same
MLflow run a trajectory calibration makes (params, per-iteration metrics,
``fit.json``, ``residuals.parquet``, the ``model`` artifact, the registry's
version and the first champion), opened and closed by
:func:`flows.tracking.tracked_run`.

The verdict: impact data carry no estimate of their noise (one sample
before and one after), so the fit's residual is reported, not gated
against a noise; a fit is registered when the optimiser converged on every
informed coefficient and every 95 % interval is finite and holds its
estimate (:func:`flows.report.intervals_hold`).
"""

import time
from pathlib import Path

import numpy as np
from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.task_runners import ThreadPoolTaskRunner

from simcore import params as P
from simcore.data import impacts as I
from simcore.data.dataset import held_out
from simcore.identify import fit as F
from simcore.identify.impact_problem import ImpactProblem, fazeli_error

from . import registry, report, server, settings, tracking
from .pipeline import (
    CalibrationFailed,
    _code_version,
    _parquet,
    _progress,
    run_name,
    start_values,
)

#: What a calibration of impacts fits with (the continuation over horizons,
#: the secant steps and the robust warm-up are for rollouts).
FIT_OVERRIDES = {"horizons": (1.0,), "secant": (), "segments": 0.0, "robust": 0.0}


@task(cache_policy=NO_CACHE)
def load(path, cfg, hold_out=False):
    """Read and validate; the train (and held-out) problems; the digest."""
    data = I.read(path)
    usable = np.isfinite(data.post).all(axis=1) & (cfg.use_flagged | ~data.flagged)
    rows = np.flatnonzero(usable)
    if not rows.size:
        raise ValueError(f"{path}: no event with a measured post-impact state"
                         + ("" if cfg.use_flagged else " that is not flagged"))
    test = np.zeros(0, np.int64)
    source = "none (all events fitted)"
    if (data.split == "test").any():
        test, rows = rows[data.split[rows] == "test"], rows[data.split[rows] == "train"]
        source = "dataset"
    elif hold_out:
        # a seeded fraction by the ids' stable hash: the same events in any order
        held = held_out([data.ids[r] for r in rows], cfg.test_fraction, cfg.seed)
        test, rows = rows[held], rows[~held]
        source = f"seeded fraction {cfg.test_fraction}"
    if not rows.size:
        raise ValueError(f"{path}: no event in the train split")
    kw = dict(lever=cfg.lever_m, relative=cfg.relative)
    train = ImpactProblem.from_data(data, rows, **kw)
    held = ImpactProblem.from_data(data, test, **kw) if test.size else None
    return data, train, held, tracking.content_hash(path), source


def _scores(problem, theta, name):
    """The loss, the rms of the residual [m/s], and Fazeli et al.'s error."""
    if problem is None or not problem.nscen:
        return {}
    pred = problem.predict(theta)
    err = fazeli_error(pred, problem.data.post[problem.rows])
    return {f"{name}_loss": problem.loss_only(theta),
            f"{name}_fazeli_median": float(np.median(err)),
            f"{name}_fazeli_mean": float(np.mean(err))}


def _residuals(problem, theta, split):
    pred = problem.predict(theta)
    meas = problem.data.post[problem.rows]
    out = {"scenario_id": problem.ids, "split": [split] * problem.nscen}
    for j, c in enumerate(I.VEL):
        out[f"pred_{c}"] = pred[:, j]
        out[f"meas_{c}"] = meas[:, j]
    out["fazeli_error"] = fazeli_error(pred, meas)
    return out


@flow(name="contactfit-calibrate-impacts", task_runner=ThreadPoolTaskRunner(max_workers=2))
def calibrate(dataset: str, config: dict | None = None, start: dict | None = None,
              tags: dict | None = None, hold_out: bool = False):
    """Calibrate the impact laws' coefficients on ``dataset``; returns the
    ``fit.json`` document (see the module docstring)."""
    server.own_signals()
    logger = get_run_logger()
    cfg = settings.calibration(**(config or {}))
    track = settings.tracking()
    c, exp_id = tracking.client(track)
    data, train, held, digest, source = load(dataset, cfg, hold_out)
    fixed = dict(data.fixed_params)
    free = cfg.fit or [n for n in data.read_coefficients() if n not in fixed]
    values = start_values(fixed, free, start, cfg.start)
    track = settings.for_dataset(track, cfg.model_key or data.name)
    train = train.with_coefficients([*free, *values])
    held = held.with_coefficients([*free, *values]) if held is not None else None
    layout = train.model.layout
    layout.vector(values)  # a bad name or value fails before any run exists
    free = [P.canonical(n) for n in free]
    if cfg.nuisance != "none":  # refused before any run exists
        raise ValueError(f"nuisance {cfg.nuisance!r}: measured impacts have no nuisance unknowns")
    logger.info(f"loaded {data.name}: {train.nscen} train and "
                f"{held.nscen if held is not None else 0} held-out impacts; fitting "
                f"{', '.join(free)} under {sorted(set(data.laws.values()))}")
    lineage = {"name": data.name, "path": str(Path(dataset).resolve()), "digest": digest,
               "rows": {"impacts": data.count, "contacts": int(data.cptr[-1])},
               "split": source, "laws": data.laws,
               "kind": "impacts"}
    with tracking.tracked_run(c, exp_id, run_name(data.name, free),
                              dict({"contactfit.flow": "calibrate", "dataset": data.name,
                                    "kind": "impacts"}, **(tags or {})),
                              track.registered_model) as run:
        run_id = run.run_id
        tracking.log_dataset(c, run_id, dataset, data.name, digest, "train", lineage["rows"])
        tracking.log_params(c, run_id, {
            **{f"theta0_{k}": v for k, v in layout.as_dict(layout.vector(values)).items()},
            "free": ",".join(free), "method": cfg.method, "ftol": cfg.ftol, "gtol": cfg.gtol,
            "step_sigma": cfg.step_sigma, "max_iter": cfg.max_iter, "starts": cfg.starts,
            "lever_m": cfg.lever_m, "relative": cfg.relative, "use_flagged": cfg.use_flagged,
            "edges": data.edges, **{f"law_{k}": v for k, v in data.laws.items()},
            "dataset": data.name, "dataset_digest": digest, "train_events": train.nscen,
            "test_events": held.nscen if held is not None else 0,
            "code_version": _code_version()})
        history = tracking.History(c, run_id)
        t0 = time.perf_counter()
        try:
            opts = dict(cfg.fit_options(), **FIT_OVERRIDES)
            result = F.fit(train, params0=values, free=free, **opts, callback=_progress(
                logger, history, opts["max_iter"] or F.MAX_ITER.get(opts["method"], 100)))
        finally:
            history.flush()
        fit_s = time.perf_counter() - t0
        result.strategy = ("the Δv loss: each measured impact mapped from its state just "
                           f"before ({', '.join(sorted(set(data.laws.values())))}), no rollouts")
        theta = layout.vector(result.params)
        scores = {"train_loss": result.loss, **_scores(train, theta, "train"),
                  **_scores(held, theta, "test")}
        scores["train_rms_mps"] = float(np.sqrt(result.loss))
        ok = report.converged(result)
        reason = "" if ok else f"the fit did not converge: {result.message}"
        if ok:
            ok, reason = report.intervals_hold(result)
        doc = report.fit_json(result, run_id, None, scores, lineage,
                              layout.as_dict(layout.vector(values)), data.truth)
        shown = set(free) | set(data.read_coefficients())  # (the layout holds every slot)
        doc["params"] = {n: v for n, v in doc["params"].items() if n in shown}
        doc.update(fit_s=fit_s, noise_m=None, **registry.uris(track),
                   gate={"registered": ok, "reason": reason, "rms_limit_m": None},
                   verdict=("impacts carry no noise estimate (one sample before and one after "
                            "each): the residual is reported, not gated against a noise"))
        tabs = [_residuals(train, theta, "train")] + (
            [_residuals(held, theta, "test")] if held is not None else [])
        res = {k: np.concatenate([np.asarray(t[k]) for t in tabs]) for k in tabs[0]}
        final = {"final_loss": result.loss, "iterations": result.nit,
                 "evaluations": result.nfev, **scores}
        for n in result.free:
            final[f"fitted_{n}"] = result.params[n]
            if np.isfinite(result.stderr[n]):
                final[f"stderr_{n}"] = result.stderr[n]
                final[f"ci95_lo_{n}"], final[f"ci95_hi_{n}"] = result.ci95[n]
        tracking.log_metrics(c, run_id, final, step=result.nit)
        tracking.set_tags(c, run_id, {"status": doc["status"], "converged": doc["converged"]})
        tracking.log_files(c, run_id, {"fit.json": report.dumps(doc),
                                       "residuals.parquet": _parquet(res)})
        if not ok:
            tracking.set_tags(c, run_id, {"gate": reason[:5000]})
            raise CalibrationFailed(f"not registered: {reason}", doc)
        registry.log_model(c, run_id, result.params, data.laws, False)
        version, first = registry.register_version(
            c, track, run_id, {"dataset": data.name, "dataset_digest": digest[:16],
                               "loss": result.loss, "kind": "impacts"})
        run.registered(version)
        doc.update(model_version=version, first_champion=first, **registry.uris(track, version))
        tracking.log_files(c, run_id, {"fit.json": report.dumps(doc)})
        tracking.set_tags(c, run_id, {"model_version": version or "",
                                      **({"champion": "first"} if first else {})})
    logger.info(f"calibrated {data.name}: loss {result.loss:.6e}, {result.nit} iterations, "
                f"model version {version}, run {run_id}")
    return doc
