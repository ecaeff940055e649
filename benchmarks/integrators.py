"""``002``'s rule measured: on sample scenes, is the integrator it chooses the
fastest of those within the accuracy target?

``python -m benchmarks.integrators [--json] [--scenarios N] [--repeat R]
[--scenes NAME ...]``: for each sample scene of the patent's sliding
spheres (``N`` seeded scenarios of it, ``dt`` 1 ms; the impulse law, the
coefficients of :data:`COEFFICIENTS`), per integrator that runs it
(``exact``, event-driven; ``moreau``, time-stepping):

* ``events_per_step``: the event-driven pilot's density (events of the
  event-exact engine per step of ``dt``; ``inf`` when it does not run);
* ``<name>_s``: the wall time of the batch with 101 samples per scenario
  (best of ``R``, the two alternated; ``nan`` when it does not run);
* ``<name>_error_mm``: the mean distance of its samples from the
  reference's [mm]: the event-exact engine's run, or, where that does not
  run, the Moreau-Jean stepper's at ``dt / 16`` (within a tenth of a
  millimetre of the event-exact answer where both run);
* ``fastest_within``: the fastest integrator whose error is within
  :data:`TARGET_MM`; ``chosen``: what :func:`simcore.choice.by_events`
  chooses; ``agree``: whether they are the same.

The scenes (:data:`SCENES`): ``shots`` (three balls, a cue ball struck at
one, few collisions), ``drops`` (three balls dropped from 0.1-0.4 m, their
bounces dying out), ``bin`` (ten balls thrown about a 1 m box), ``rattle``
(a ball sliding down a channel 10 micrometres wider than it, striking its
walls several times a step) and ``pressed`` (a row of five touching
balls pushed along by a force with a small sideways part: contacts that
open and close many times a step against a wall).
"""

import argparse

import numpy as np

from benchmarks._emit import best_alternated, emit

R, MASS = 0.0286, 0.17
COEFFICIENTS = {"mu_s": 0.3, "mu_k": 0.2, "v_th": 0.05, "e_bb": 0.9, "mu_bb": 0.05,
                "e_bw": 0.8, "mu_w": 0.1, "e_bg": 0.5}
#: The accuracy target: the mean distance of the samples from the reference
#: [mm] (twice the 1 mm noise of the shipped synthetic datasets).
TARGET_MM = 2.0
BOX = [[1, 0, 0, -0.5], [-1, 0, 0, -0.5], [0, 1, 0, -0.5], [0, -1, 0, -0.5]]
DT = 1e-3


def _shots(rng, k, dt):
    return dict(radius=[R] * 3, mass=[MASS] * 3, walls=BOX, t_end=4.0,
                pos=[[0, 0, R], [0.3, rng.uniform(-0.02, 0.02), R], [0.45, 0.1, R]],
                vel=[[rng.uniform(1, 2), rng.uniform(-0.1, 0.1), 0], [0, 0, 0], [0, 0, 0]])


def _drops(rng, k, dt):
    return dict(radius=[R] * 3, mass=[MASS] * 3, walls=BOX, t_end=3.0,
                pos=[[0.1 * i - 0.1, 0, R + rng.uniform(0.1, 0.4)] for i in range(3)],
                vel=[[*rng.uniform(-0.3, 0.3, 2), 0] for _ in range(3)])


def _bin(rng, k, dt):
    grid = [[x, y] for x in np.linspace(-0.4, 0.4, 4) for y in np.linspace(-0.4, 0.4, 3)][:10]
    return dict(radius=[R] * 10, mass=[MASS] * 10, walls=BOX, t_end=4.0,
                pos=[[x, y, R] for x, y in grid],
                vel=[[*rng.uniform(-1.5, 1.5, 2), 0] for _ in range(10)])


def _rattle(rng, k, dt):
    gap = 1e-5
    return dict(radius=[R], mass=[MASS], t_end=2.0, pos=[[0, 0, R]],
                vel=[[rng.uniform(0.5, 1.0), rng.uniform(0.3, 0.6), 0]],
                walls=[[0, 1, 0, -(R + gap)], [0, -1, 0, -(R + gap)]])


def _pressed(rng, k, dt):
    n = 5
    return dict(radius=[R] * n, mass=[MASS] * n, walls=BOX, t_end=1.0,
                pos=[[-0.3 + 2 * R * i, 0, R] for i in range(n)],
                vel=[[rng.uniform(0.2, 0.4), 0, 0]] + [[0, 0, 0]] * (n - 1),
                controls=[[0, 0, 1.0, 0.8, rng.choice([-1, 1]) * rng.uniform(0.04, 0.06), 0]])


SCENES = {"shots": _shots, "drops": _drops, "bin": _bin, "rattle": _rattle,
          "pressed": _pressed}
#: Scenes whose walls are perfectly elastic and frictionless (the rattle's).
ELASTIC = {"rattle": {"e_bw": 1.0, "mu_w": 0.0}}


def scenarios(scene, n, dt=DT, seed=0):
    """``n`` seeded scenarios of ``scene`` at the step ``dt``."""
    from simcore import model as M

    rng = np.random.default_rng(seed)
    return [M.Scenario(dt=dt, name=f"{scene}{k:03d}", **SCENES[scene](rng, k, dt))
            for k in range(n)]


def _run(batch, params, integrator, times):
    from simcore import engine as E
    from simcore import model as M

    model, state = M.build(batch, params=params, integrator=integrator)
    return lambda: E.simulate(model, state, times)


def row(scene, n, repeat):
    """The figures of one scene (module docstring)."""
    from simcore import choice
    from simcore import model as M

    params = dict(COEFFICIENTS, **ELASTIC.get(scene, {}))
    batch = scenarios(scene, n)
    times = [np.linspace(0.0, sc.t_end, 101) for sc in batch]
    exact = _run(batch, params, "exact", times)
    moreau = _run(batch, params, "moreau", times)
    try:
        ref = exact()
        runs = {"exact": exact, "moreau": moreau}
    except RuntimeError:
        ref = _run(scenarios(scene, n, DT / 16), params, "moreau", times)()
        runs = {"moreau": moreau}
    out = {}
    results = {name: fn() for name, fn in runs.items()}  # also compiles
    secs = dict(zip(runs, best_alternated(list(runs.values()), repeat)))
    for name in ("exact", "moreau"):
        out[f"{name}_s"] = secs.get(name, float("nan"))
        err = (np.linalg.norm(results[name].samp_pos - ref.samp_pos, axis=-1).mean() * 1e3
               if name in results else float("nan"))
        out[f"{name}_error_mm"] = float(err)

    def on(name):
        return M.build(batch, params=params, integrator=name)

    model, state = on(None)
    out["events_per_step"] = choice.pilot(model, state)[0]
    within = [name for name in runs if out[f"{name}_error_mm"] <= TARGET_MM]
    out["fastest_within"] = min(within, key=lambda name: secs[name]) if within else "none"
    chosen, _, line = choice.by_events(model, state, on)
    out["chosen"] = line.split()[1]
    out["agree"] = out["chosen"] == out["fastest_within"]
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--scenarios", type=int, default=16)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--scenes", nargs="+", choices=list(SCENES), default=list(SCENES))
    args = ap.parse_args(argv)
    out = {scene: row(scene, args.scenarios, args.repeat) for scene in args.scenes}
    out["agree"] = f"{sum(r['agree'] for r in out.values())} of {len(args.scenes)}"
    emit(out, args.json)


if __name__ == "__main__":
    main()
