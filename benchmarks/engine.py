"""Engine throughput: ``python -m benchmarks.engine [--json] [--scenarios N]``.

Scene (the issue's): two spheres on a walled table (4 walls), random
velocities, collisions, wall hits and stops, 2 s at dt = 1 ms, trajectories
sampled at 100 Hz.  A second row adds a push across the motion on half of
the bodies: the friction direction then rotates and the exact integrator
steps every dt while the push lasts (0.3 s).  A *sphere-step* is one body advanced by one dt, so a
scenario counts ``nbody * duration / dt`` sphere-steps whatever the
integrator does.  The exact integrator is event-driven: it jumps from event
to event and evaluates the samples in closed form, so its figure is nominal
(its real work is per event and per sample: ``events_per_s`` is printed
too).  The symplectic integrator steps every dt: its figure is the
time-stepping cost.  Compilation is excluded (one warm-up run first).

All figures come from one run.  JSON keys: ``sphere_steps_per_s`` (numba,
all cores, 10,000 two-sphere scenarios), ``sphere_steps_per_s_1`` (one
scenario through the public API), ``oracle_sphere_steps_per_s`` (the NumPy
oracle, on a subset), ``ratio_vs_oracle`` (the first over the third),
``sphere_steps_per_s_8`` (8 spheres), ``pushes_sphere_steps_per_s``,
``symplectic_sphere_steps_per_s``,
``events_per_s``, ``threads``; with ``mujoco`` installed (``bench`` extra)
also ``mujoco_sphere_steps_per_s`` (same table, MuJoCo at timestep = dt, one
scenario after another) and ``ratio_vs_mujoco``.
"""

import argparse
import json
import time

import numpy as np

import simcore
from simcore import params as P

DURATION = 2.0
DT = 1e-3
RATE = 100.0
HALF = 0.6


def scene(rng, nbody, name, pushes=False):
    radius = np.full(nbody, 0.028575)
    mass = np.full(nbody, 0.17)
    pos = np.zeros((nbody, 3))
    pos[:, 2] = radius
    for i in range(nbody):
        while True:
            xy = rng.uniform(-HALF + 0.03, HALF - 0.03, 2)
            if all(np.hypot(*(xy - pos[j, :2])) > 0.07 for j in range(i)):
                break
        pos[i, :2] = xy
    vel = np.zeros((nbody, 3))
    vel[:, :2] = rng.normal(0.0, 1.0, (nbody, 2))
    controls = [[i, 0.2, 0.5, *(rng.normal(0, 0.4, 2)), 0.0]
                for i in range(nbody) if pushes and rng.random() < 0.5]
    walls = np.array([[1, 0, 0, -HALF], [-1, 0, 0, -HALF], [0, 1, 0, -HALF], [0, -1, 0, -HALF]],
                     float)
    return simcore.Scenario(radius=radius, mass=mass, pos=pos, vel=vel, t_end=DURATION, dt=DT,
                            walls=walls, controls=np.array(controls).reshape(-1, 6), name=name)


def batch(nscen, nbody, seed, integrator="exact", pushes=False):
    rng = np.random.default_rng(seed)
    scenes = [scene(rng, nbody, f"b{s}", pushes) for s in range(nscen)]
    model, state = simcore.build(scenes, integrator=integrator)
    times = [np.arange(0.0, DURATION + 1e-12, 1.0 / RATE)] * nscen
    return scenes, model, state, times


def timed(fn, repeat=5):
    fn()  # warm-up (compiles on first use)
    best = np.inf
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def steps(model):
    return float(model.body_count.sum()) * DURATION / DT


def run(nscen=10_000):
    import numba

    out = {"threads": numba.get_num_threads(), "scenarios": nscen, "duration_s": DURATION,
           "dt": DT, "sample_rate_hz": RATE}
    _, model, state, times = batch(nscen, 2, 1)
    t, res = timed(lambda: simcore.simulate(model, state, times))
    out["sphere_steps_per_s"] = steps(model) / t
    out["events_per_s"] = float(res.event_count.sum()) / t
    out["wall_s"] = t

    one = batch(1, 2, 2)
    t1, _ = timed(lambda: simcore.simulate(one[1], one[2], one[3]), repeat=20)
    out["sphere_steps_per_s_1"] = steps(one[1]) / t1

    _, m8, s8, tm8 = batch(max(1, nscen // 5), 8, 3)
    t8, _ = timed(lambda: simcore.simulate(m8, s8, tm8))
    out["sphere_steps_per_s_8"] = steps(m8) / t8

    _, mp, sp, tmp = batch(nscen, 2, 1, pushes=True)
    tp, _ = timed(lambda: simcore.simulate(mp, sp, tmp))
    out["pushes_sphere_steps_per_s"] = steps(mp) / tp

    _, ms, ss, tms = batch(nscen, 2, 1, integrator="symplectic")
    tsy, _ = timed(lambda: simcore.simulate(ms, ss, tms))
    out["symplectic_sphere_steps_per_s"] = steps(ms) / tsy

    from tests.oracle import Oracle

    sub, msub, _, tsub = batch(20, 2, 1)
    vec = P.vector()
    t0 = time.perf_counter()
    for sc, ts in zip(sub, tsub):
        Oracle(sc.radius, sc.mass, sc.pos, sc.vel, sc.walls, sc.controls, sc.t0, sc.t_end,
               sc.dt, vec).run(ts)
    out["oracle_sphere_steps_per_s"] = steps(msub) / (time.perf_counter() - t0)
    out["ratio_vs_oracle"] = out["sphere_steps_per_s"] / out["oracle_sphere_steps_per_s"]
    try:
        import mujoco  # optional `bench` extra
    except ImportError:
        out["mujoco"] = "not installed (pip install -e '.[bench]')"
        return out
    out["mujoco"] = mujoco.__version__
    out["mujoco_sphere_steps_per_s"] = mujoco_row(mujoco, sub)
    out["ratio_vs_mujoco"] = out["sphere_steps_per_s"] / out["mujoco_sphere_steps_per_s"]
    return out


MJCF = """
<mujoco>
  <option timestep="{dt}" gravity="0 0 -9.81"/>
  <worldbody>
    <geom type="plane" size="{w} {w} 0.1" friction="0.2 0.005 0.0001"/>
    <geom type="box" pos="{wx} 0 0.1" size="0.05 {w} 0.1"/>
    <geom type="box" pos="-{wx} 0 0.1" size="0.05 {w} 0.1"/>
    <geom type="box" pos="0 {wx} 0.1" size="{w} 0.05 0.1"/>
    <geom type="box" pos="0 -{wx} 0.1" size="{w} 0.05 0.1"/>
    {bodies}
  </worldbody>
</mujoco>
"""


def mujoco_row(mujoco, scenes):
    """MuJoCo on the same table (spheres on a plane, four box walls), one
    scenario after another, ``mj_step(..., nstep)`` in C at timestep = dt.

    A cost reference only: MuJoCo's balls roll and its contacts are soft, so
    its trajectories are not the patent's sliding model.
    """
    nb = len(scenes[0].radius)
    bodies = "".join(
        f'<body pos="0 0 0.1"><freejoint/><geom type="sphere" size="{scenes[0].radius[0]}" '
        f'mass="{scenes[0].mass[0]}"/></body>' for _ in range(nb))
    xml = MJCF.format(dt=DT, w=HALF + 0.1, wx=HALF + 0.05, bodies=bodies)
    model = mujoco.MjModel.from_xml_string(xml)
    data = mujoco.MjData(model)
    nstep = int(round(DURATION / DT))

    def run_all():
        for sc in scenes:
            mujoco.mj_resetData(model, data)
            for i in range(nb):
                data.qpos[7 * i:7 * i + 3] = sc.pos[i]
                data.qpos[7 * i + 3:7 * i + 7] = (1, 0, 0, 0)
                data.qvel[6 * i:6 * i + 3] = sc.vel[i]
            mujoco.mj_step(model, data, nstep=nstep)

    t, _ = timed(run_all, repeat=2)
    return len(scenes) * nb * nstep / t


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("--scenarios", type=int, default=10_000)
    args = ap.parse_args()
    out = run(args.scenarios)
    if args.json:
        print(json.dumps(out))
        return
    print(f"contactfit engine, {out['threads']} threads, {out['scenarios']} scenarios x "
          f"{DURATION} s at dt = {DT * 1e3:g} ms, samples at {RATE:g} Hz")
    rows = [("exact, 2 spheres, all cores", out["sphere_steps_per_s"]),
            ("exact, 2 spheres, one scenario", out["sphere_steps_per_s_1"]),
            ("exact, 8 spheres, all cores", out["sphere_steps_per_s_8"]),
            ("exact, 2 spheres, transverse pushes", out["pushes_sphere_steps_per_s"]),
            ("symplectic, 2 spheres, all cores", out["symplectic_sphere_steps_per_s"]),
            ("NumPy oracle, 2 spheres", out["oracle_sphere_steps_per_s"])]
    for label, v in rows:
        print(f"  {label:34s} {v:12.3g} sphere-steps/s")
    print(f"  {'events (exact, 2 spheres)':34s} {out['events_per_s']:12.3g} events/s")
    if "mujoco_sphere_steps_per_s" in out:
        print(f"  {'MuJoCo ' + out['mujoco'] + ', 2 spheres, one core':34s} "
              f"{out['mujoco_sphere_steps_per_s']:12.3g} sphere-steps/s")
        print(f"  ratio vs MuJoCo: {out['ratio_vs_mujoco']:.0f}x")
    print(f"  ratio vs oracle: {out['ratio_vs_oracle']:.0f}x;  mujoco: {out['mujoco']}")


if __name__ == "__main__":
    main()
