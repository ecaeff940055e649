"""Billiards shots per second against pooltool 0.6, on the shipped ``datasets/billiards``.

``python -m benchmarks.billiards [--json] [--pooltool-python PY]``: the 60
two-ball shots of pooltool 0.6 (slide, roll, spin, ball-ball throw, Stronge
cushions), simulated to rest:

* ``shots_per_s`` (serial, one core) and ``shots_per_s_parallel`` (the
  batch over both cores), ``events_per_s``, each the best of ``--repeat``;
* ``pooltool_shots_per_s`` and ``speedup`` (serial over pooltool's, which is
  serial too), measured in the same run, when pooltool is there: importable
  here, or in the interpreter ``--pooltool-python`` names (pooltool pins a
  numba and llvmlite of its own, so it usually lives in a venv of its own:
  ``pip install --no-deps pooltool-billiards==0.6.0`` there, then its
  runtime dependencies with ``panda3d==1.10.16``);
* ``gradient_cost_ratio``: one evaluation of the calibration's loss with its
  exact gradient and Gauss-Newton matrix along the ten coefficients, over
  one evaluation of the loss alone (central differences would take 21 runs).

The peer runs the same shots from the dataset's tables (initial states,
cushions and ``truth``), with pooltool's default resolver passed explicitly.
"""

import argparse
import json
import subprocess
from pathlib import Path

import numpy as np

from benchmarks._emit import best as _best
from benchmarks._emit import emit

DATASET = Path(__file__).resolve().parents[1] / "datasets" / "billiards"
FREE = ["mu_k", "mu_r", "mu_sp", "e_bb", "mu_bb", "mu_bb_b", "mu_bb_c", "e_bw", "mu_w",
        "omega_ratio_w"]


def _peer(repeat):
    """pooltool's time per shot on the dataset's shots (run where pooltool imports)."""
    import pooltool as pt
    import pyarrow.parquet as pq
    import yaml
    from pooltool.objects.table.specs import BilliardTableSpecs
    from pooltool.physics.engine import PhysicsEngine
    from pooltool.physics.resolve.resolver import default_resolver

    meta = yaml.safe_load((DATASET / "dataset.yaml").read_text())
    truth = meta["truth"]
    bodies = pq.read_table(DATASET / "bodies.parquet").to_pylist()
    walls = pq.read_table(DATASET / "walls.parquet").to_pylist()
    radius, mass = bodies[0]["radius"], bodies[0]["mass"]
    params = pt.BallParams(m=mass, R=radius, u_s=truth["mu_k"], u_r=truth["mu_r"],
                           u_sp_proportionality=truth["mu_sp"] / radius, e_b=truth["e_bb"],
                           e_c=truth["e_bw"], f_c=truth["mu_w"], g=meta["gravity"])
    # The cushions x = 0, x = w, y = 0, y = l (n . p = d, n into the table).
    width = -next(wl["d"] for wl in walls if wl["nx"] < 0)
    length = -next(wl["d"] for wl in walls if wl["ny"] < 0)
    table = pt.Table.from_table_specs(BilliardTableSpecs(l=length, w=width,
                                                         cushion_height=walls[0]["height"]))
    engine = PhysicsEngine(resolver=default_resolver())
    shots = {}
    for b in bodies:
        shots.setdefault(b["scenario_id"], []).append(b)

    def system(balls):
        out = {}
        for b in sorted(balls, key=lambda r: r["body_id"]):
            bid = "cue" if b["body_id"] == 0 else str(b["body_id"])
            ball = pt.Ball.create(bid, xy=(b["x0"], b["y0"]))
            ball.params = params
            ball.state.rvw = np.array([[b["x0"], b["y0"], b["z0"]], [b["vx0"], b["vy0"], b["vz0"]],
                                       [b["wx0"], b["wy0"], b["wz0"]]], float)
            moving = np.any(ball.state.rvw[1:])
            ball.state.s = pt.constants.sliding if moving else pt.constants.stationary
            out[bid] = ball
        return pt.System(cue=pt.Cue(cue_ball_id="cue"), table=table, balls=out)

    def run_all():
        n = 0
        for balls in shots.values():
            s = system(balls)
            pt.simulate(s, engine=engine, inplace=True)
            n += len(s.events)
        return n

    events = run_all()  # compiles pooltool's kernels
    best = _best(run_all, repeat)
    return {"pooltool_shots_per_s": len(shots) / best, "pooltool_events": events}


def _peer_figures(python, repeat):
    """The peer's figures from this interpreter, or from ``python``; {} when neither has it."""
    if python is None:
        try:
            return _peer(repeat)
        except ImportError:
            return {}
    code = ("import json, sys; sys.path.insert(0, %r); from benchmarks.billiards import _peer; "
            "print(json.dumps(_peer(%d)))" % (str(Path(__file__).resolve().parents[1]), repeat))
    done = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=3600)
    if done.returncode:
        raise SystemExit(f"pooltool in {python} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--pooltool-python", default=None,
                    help="an interpreter where pooltool 0.6 imports (default: this one, if it does)")
    args = ap.parse_args(argv)

    from simcore.data import dataset as D
    from simcore.engine import simulate
    from simcore.identify import problem as PB

    ds = D.read(DATASET)
    model, state, _, _ = D.scenarios(ds, coefficients=list(ds.truth))
    model = model.with_params({**ds.fixed_params, **ds.truth})
    simulate(model, state, parallel=False)
    simulate(model, state, parallel=True)
    serial = _best(lambda: simulate(model, state, parallel=False), args.repeat)
    parallel = _best(lambda: simulate(model, state, parallel=True), args.repeat)
    events = int(simulate(model, state, parallel=False).event_ptr[-1])
    out = {"shots": model.nscen, "events": events, "shots_per_s": model.nscen / serial,
           "shots_per_s_parallel": model.nscen / parallel, "events_per_s": events / serial}
    peer = _peer_figures(args.pooltool_python, args.repeat)
    if peer:
        out.update(peer)
        out["speedup"] = out["shots_per_s"] / peer["pooltool_shots_per_s"]
    prob = PB.Problem.from_dataset(ds)
    lay = prob.model.layout
    theta = lay.vector({**ds.fixed_params, **ds.truth})
    free = [lay.index(n) for n in FREE]
    prob.evaluate(theta, free)
    grad = _best(lambda: prob.evaluate(theta, free), args.repeat)
    loss = _best(lambda: prob.loss_only(theta), args.repeat)
    out["gradient_cost_ratio"] = grad / loss
    emit(out, args.json)


if __name__ == "__main__":
    main()
