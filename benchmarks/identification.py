"""Identification of box tosses from the defaults: is the answer the truth,
do the intervals cover it, does the verdict say so?

``python -m benchmarks.identification [--json] [--replicates R] [--tosses N]
[--families NAME ...]``: for each family of :data:`FAMILIES` (box tosses
unlike the generator's defaults: a cube and a flat box, low and high
tosses, little and much spin, truths across mu_k 0.15-0.28 and e_bg
0.25-0.55, mu_s at its default 0.3 (not fitted); 1 mm and 0.5 degrees of
noise, orientations measured), ``R``
replicate datasets of ``N`` tosses (seeds 0..R-1) are generated and each is
calibrated through the CLI's path (the ``calibrate`` flow on a temporary
Prefect server, an MLflow store in a temporary folder) with nothing but
``fit: [mu_k, e_bg]``: the strategy, the secant steps and the gate are the
defaults.  Printed per family:

* ``err_<name>_pct``: the mean absolute error of each coefficient in per
  cent of the truth, ``worst_<name>_pct`` the largest (``worst_seed_<name>``:
  its replicate's seed, to rerun it), and ``worst_registered_<name>_pct`` the
  largest of the fits the gate registered (a refused fit says it is off);
* ``cover_<name>``: the share of replicates whose 95 % interval holds the
  truth (``cover_registered_<name>``: of the registered ones;
  ``halfwidth_<name>_pct``: the median half-width in per cent of the truth),
  and ``cover_cluster_<name>`` the same for the interval of the
  errors clustered by toss (``estimate +- 1.96 stderr_cluster``), over the
  replicates that have one (NaN when none has: fewer than two training
  tosses per free coefficient);
* ``rms_over_noise``: the mean training rms position error over the
  positions' noise (at the truth about sqrt(3): a 3-d distance);
* ``registered``: the share the gate registered; ``verdicts``: the status
  words; ``fit_s``: the mean wall time of a calibration.

Targets (issue 33): every coefficient within 2 % and intervals covering in
at least 90 % of at least 20 replicates per family.

The family ``cube-body-and-recording`` (issue 36) also frees the body's own
coefficients and the recording's: a cube whose centre of mass sits 5 mm up
its body z axis, whose inertia is 10 % above the table's, recorded falling
at 9.61 m/s^2 (its ``dataset.yaml`` declares what its flights show) on a
table tilted by 0.5 degrees, fitted from the defaults with positions and
orientations in the loss.  A coefficient whose truth is 0 (an offset, a
tilt) is scored by ``err_<name>_abs``, its absolute error in its unit.
Targets: centre of mass within 0.5 mm, inertia within 2 %, gravity within
0.2 %, tilt within 0.05 degrees, intervals that cover.
"""

import argparse
import os
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np

from ._emit import emit

FREE = ("mu_k", "e_bg")
#: The body's and the recording's coefficients the issue-36 family frees too.
BODY = ("com_x", "com_y", "com_z", "inertia_scale", "gravity", "tilt_x", "tilt_y")

#: name -> (generator settings beyond the defaults, truth[, free, config]).
FAMILIES = {
    "cube-default": ({}, {"mu_s": 0.3, "mu_k": 0.25, "e_bg": 0.40}),
    "cube-high-little-spin": ({"height": [0.4, 0.6], "spin": 0.5},
                              {"mu_s": 0.3, "mu_k": 0.15, "e_bg": 0.25}),
    "flat-low-much-spin": ({"half": [0.075, 0.05, 0.02], "height": [0.02, 0.06], "spin": 8.0},
                           {"mu_s": 0.3, "mu_k": 0.28, "e_bg": 0.55}),
    "flat-high-slow": ({"half": [0.075, 0.05, 0.02], "height": [0.3, 0.5],
                        "speed": [0.3, 0.8], "spin": 1.0},
                       {"mu_s": 0.3, "mu_k": 0.20, "e_bg": 0.30}),
    "cube-body-and-recording": ({}, {"mu_s": 0.3, "mu_k": 0.25, "e_bg": 0.40, "com_x": 0.0,
                                     "com_y": 0.0, "com_z": 0.005, "inertia_scale": 1.1,
                                     "gravity": 9.61, "tilt_x": float(np.radians(0.5)),
                                     "tilt_y": 0.0},
                                FREE + BODY, {"weights": {"trajectory": 1.0, "orientation": 1.0}}),
}


def calibrate(path, store, free=FREE, config=None):
    """One calibration through the CLI's path of the coefficients ``free``
    (and ``config``'s other settings): ``fit.json``'s document (a refused
    fit's too)."""
    from flows import pipeline

    os.environ["MLFLOW_TRACKING_URI"] = f"sqlite:///{store}/mlflow.db"
    try:
        return pipeline.run(pipeline.calibrate, str(path), {**(config or {}), "fit": list(free)})
    except pipeline.CalibrationFailed as exc:
        return exc.doc


def family(name, replicates, tosses, root):
    """The figures of one family over its replicates."""
    from simcore.data import synth

    extra, truth, *rest = FAMILIES[name]
    free, config = (tuple(rest[0]), rest[1]) if rest else (FREE, None)
    rows = []
    for seed in range(replicates):
        cfg = synth.GeneratorSettings(shape="box", scenarios=tosses, seed=seed, duration=1.2,
                                      rate=148.0, **extra)
        data = synth.generate(root / f"{name}-{seed}", cfg, dict(synth.TRUTH_BOX, **truth),
                              name=name)
        store = root / f"{name}-{seed}-mlflow"
        store.mkdir()
        t0 = time.perf_counter()
        doc = calibrate(data, store, free, config)
        rows.append((doc, time.perf_counter() - t0))
    out = {"replicates": replicates, "tosses": tosses}
    reg = np.array([bool(d["gate"]["registered"]) for d, _ in rows])
    for n in free:
        if truth[n]:
            err = np.array([abs(d["params"][n] / truth[n] - 1) * 100 for d, _ in rows])
            unit = "pct"
        else:
            err = np.array([abs(d["params"][n] - truth[n]) for d, _ in rows])
            unit = "abs"
        out[f"err_{n}_{unit}"] = float(err.mean())
        out[f"worst_{n}_{unit}"] = float(err.max())
        out[f"worst_seed_{n}"] = int(err.argmax())
        out[f"worst_registered_{n}_{unit}"] = float(err[reg].max()) if reg.any() else float("nan")
        lo_hi = [d["ci95"][n] for d, _ in rows]
        held = np.array([lo <= truth[n] <= hi for lo, hi in lo_hi])
        out[f"cover_{n}"] = float(np.mean(held))
        out[f"cover_registered_{n}"] = float(np.mean(held[reg])) if reg.any() else float("nan")
        out[f"halfwidth_{n}_{unit}"] = float(np.median([
            (hi - lo) / 2 / truth[n] * 100 if truth[n] else (hi - lo) / 2
            for lo, hi in lo_hi]))
        clustered = [(d["params"][n], (d.get("stderr_cluster") or {}).get(n)) for d, _ in rows]
        clustered = [abs(v - truth[n]) <= 1.96 * se for v, se in clustered if se is not None]
        out[f"cover_cluster_{n}"] = float(np.mean(clustered)) if clustered else float("nan")
    ratio = [d["scores"]["train_rms_m"] / d["noise_m"] for d, _ in rows
             if d.get("noise_m") and "train_rms_m" in d.get("scores", {})]
    out["rms_over_noise"] = float(np.mean(ratio)) if ratio else float("nan")
    out["registered"] = float(np.mean(reg))
    out["verdicts"] = dict(Counter(d["status"] for d, _ in rows))
    out["fit_s"] = float(np.mean([s for _, s in rows]))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--replicates", type=int, default=20)
    ap.add_argument("--tosses", type=int, default=30)
    ap.add_argument("--families", nargs="+", choices=list(FAMILIES), default=list(FAMILIES))
    args = ap.parse_args(argv)
    from flows import server

    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    out = {}
    with tempfile.TemporaryDirectory() as tmp, server.run_settings(), \
            server.temporary_server():
        for name in args.families:
            out[name] = family(name, args.replicates, args.tosses, Path(tmp))
    emit(out, args.json, width=30)


if __name__ == "__main__":
    main()
