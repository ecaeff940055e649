"""Measured planar impacts (``datasets/fazeli-ellipse``): every impact law
fitted on a split of the training file's unflagged events and scored on the
rest with the metric of Fazeli et al., per event ``||v*+ - v+|| / ||v*+||``
on ``(vx, vz, vth)``, beside the baselines of the data's README.

    python -m benchmarks.impacts [--splits 5] [--coverage 100] [--json]

The held-out events are a quarter of the unflagged ones, by the stable hash
of their ids and the split's seed (seed 0: the dataset's own ``test``
split, which ``contactfit calibrate`` scores); every law
and loss is fitted from the defaults (``mu_k`` 0.2, ``e_bg`` 0.5) through
the calibration's own fit (:func:`simcore.identify.fit.fit` with
:data:`flows.impacts.FIT_OVERRIDES`).  Printed per law and loss: the fitted
``mu_k``, ``e_bg`` and their 95 % intervals (first split), the held-out
median and mean error (mean over the splits, and the worst split), the fit's
wall time.  Losses: ``ke`` the kinetic-energy metric (the default),
``shipped`` the dataset's ``calibrate.yaml`` (the metric's own least-squares
form: rad/s weighed as m/s, each event relative to its measured velocity).

``--coverage N``: the share of ``N`` synthetic datasets (``contactfit``'s
generator of impacts, :func:`simcore.data.impacts.generate`: 150 planar box
impacts each, truth ``mu_k`` 0.3, ``e_bg`` 0.6, noise 0.02 m/s isotropic in
the loss's metric) whose 95 % intervals hold the truth, per law, and the
largest error of an estimate.
"""

import argparse
import time

import numpy as np

from flows.impacts import FIT_OVERRIDES
from flows.settings import calibration
from simcore.data import impacts as I
from simcore.data.dataset import held_out
from simcore.identify import fit as F
from simcore.identify.impact_problem import ImpactProblem, fazeli_error

from ._emit import emit

DATASET = "datasets/fazeli-ellipse"
LAWS = ("newton_lcp", "poisson_lcp", "stronge_energetic")
#: The anchors of ``../shared/data/fazeli-planar/README.md`` (held-out events
#: of the same experiment): median, mean.
BASELINES = {"Anitescu-Potra/Poisson LCP fitted (README)": (0.39, 0.47),
             "no impact (README)": (1.05, None), "zero velocity (README)": (1.00, None)}


def split(data, seed, fraction=0.25):
    """``(train, test)`` rows of the unflagged events: :func:`held_out` of
    their ids (seed 0: the dataset's own ``split`` column)."""
    rows = np.flatnonzero(~data.flagged)
    held = held_out([data.ids[r] for r in rows], fraction, seed)
    return rows[~held], rows[held]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--splits", type=int, default=5)
    ap.add_argument("--coverage", type=int, default=0, help="synthetic replicates per law")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    data = I.read(DATASET)
    shipped = calibration(f"{DATASET}/calibrate.yaml")
    losses = {"ke": {}, "shipped": dict(lever=shipped.lever_m, relative=shipped.relative)}
    out = {"events": data.count, "unflagged": int((~data.flagged).sum())}
    for law in LAWS:
        data.laws = {k: law for k in data.laws}
        for name, kw in losses.items():
            med, mean, secs = [], [], []
            first = None
            for seed in range(args.splits):
                train, test = split(data, seed)
                prob = ImpactProblem.from_data(data, train, **kw)
                t = time.perf_counter()
                r = F.fit(prob, free=["mu_k", "e_bg"], **FIT_OVERRIDES)
                secs.append(time.perf_counter() - t)
                theta = prob.model.layout.vector(r.params)
                err = fazeli_error(ImpactProblem.from_data(data, test).predict(theta),
                                   data.post[test])
                med.append(float(np.median(err)))
                mean.append(float(np.mean(err)))
                first = first or r
            out[f"{law} [{name}]"] = {
                "mu_k": first.params["mu_k"], "mu_k ci95": _ci(first, "mu_k"),
                "e_bg": first.params["e_bg"], "e_bg ci95": _ci(first, "e_bg"),
                "status": F.STATUSES[first.status].word,
                "held-out median": float(np.mean(med)), "held-out mean": float(np.mean(mean)),
                "worst split median": max(med), "worst split mean": max(mean),
                "fit s": float(np.median(secs))}
    if args.coverage:
        out.update(coverage(args.coverage))
    for name, (m, mean) in BASELINES.items():
        out[name] = {"held-out median": m, "held-out mean": mean if mean is not None else "-"}
    emit(out, args.json, width=26)


def coverage(replicates):
    """Per law: how often the 95 % intervals hold the truth over
    ``replicates`` synthetic datasets, and the largest error."""
    import tempfile

    out = {}
    for law in LAWS:
        held = {"mu_k": 0, "e_bg": 0}
        worst = 0.0
        with tempfile.TemporaryDirectory() as tmp:
            for seed in range(replicates):
                data = I.read(I.generate(f"{tmp}/s{seed}", 150, law=law, seed=seed))
                r = F.fit(ImpactProblem.from_data(data), free=["mu_k", "e_bg"], **FIT_OVERRIDES)
                for n in held:
                    lo, hi = r.ci95[n]
                    held[n] += lo <= data.truth[n] <= hi
                    worst = max(worst, abs(r.params[n] / data.truth[n] - 1.0))
        out[f"{law} [synthetic, {replicates} replicates]"] = {
            "mu_k ci95 coverage": held["mu_k"] / replicates,
            "e_bg ci95 coverage": held["e_bg"] / replicates, "largest error %": 100 * worst}
    return out


def _ci(r, n):
    lo, hi = r.ci95[n]
    return f"[{lo:.4f}, {hi:.4f}]"


if __name__ == "__main__":
    main()
