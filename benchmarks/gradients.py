"""Cost of the sensitivities and iterations to converge, on the shipped table.

``python -m benchmarks.gradients [--json]``: ``gradient_cost_ratio`` is the
wall time of one forward run with sensitivities along the 8 coefficients
(and the in-kernel trajectory residuals with J^T r and J^T J) over the
forward run alone (central differences would cost 17 forward runs); then,
per optimiser (lm, gd, adam), the iterations and wall time to converge on
the 7 informed coefficients from the defaults.
"""

import argparse
import time

from benchmarks._emit import best as _best
from benchmarks._emit import emit
from simcore import params as P
from simcore.engine import Directions, simulate
from simcore.identify.fit import fit
from simcore.identify.problem import Problem

TABLE = "datasets/synthetic-table"
INFORMED = ["mu_s", "mu_k", "v_th", "mu_bb", "e_bb", "mu_w", "e_bw"]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args(argv)
    prob = Problem.from_dataset(TABLE)
    m, st, times = prob.model, prob.state, prob.targets.sample_times
    ncoef = len(P.COEFFICIENTS)
    dirs = Directions.build(params=range(ncoef))
    simulate(m, st, times, directions=dirs, measured=prob.targets.measured, gauss_newton=True)
    fwd = _best(lambda: simulate(m, st, times), args.repeat)
    sens = _best(lambda: simulate(m, st, times, directions=dirs, measured=prob.targets.measured,
                                  gauss_newton=True), args.repeat)
    out = {"forward_s": fwd, "sensitivities_s": sens, "gradient_cost_ratio": sens / fwd,
           "fd_cost_ratio": 2 * ncoef + 1}
    for method in ("lm", "gd", "adam"):
        t = time.perf_counter()
        r = fit(prob, free=INFORMED, method=method, max_iter=3000)
        out[f"{method}_wall_s"] = time.perf_counter() - t
        out[f"{method}_iterations"] = r.nit
        out[f"{method}_converged"] = bool(r.success)
    emit(out, args.json)


if __name__ == "__main__":
    main()
