"""Synthetic datasets: simulated scenes with known coefficients and noise.

``shape="sphere"`` (the default): each scenario is a walled table (a square of half-size ``table_half``) with
2-4 spheres (billiard-like radius and mass), random initial velocities and,
for about half of the bodies, a push: a constant horizontal force over a
window.  The scenes are simulated with the engine at the true coefficients,
sampled at ``rate`` Hz, and the positions get independent Gaussian noise of
standard deviation ``noise_mm`` millimetres per coordinate (velocities are
not written: measured data rarely has them).  The true initial state is
written to ``bodies`` (x0..vz0), as a tracker's fitted initial state would be.  ``shape="box"``: each scenario is one toss of the ContactNets cube
(:data:`CUBE_HALF`, :data:`CUBE_MASS`, :data:`CUBE_INERTIA`) onto a table,
run by the time-stepper at the true coefficients :data:`TRUTH_BOX`
(friction and ground restitution); the trajectories carry positions with
``noise_mm`` and orientations turned by independent small rotations of
``noise_deg`` per axis, as a motion tracker reports them (no velocities);
``bodies`` holds the true initial state.  The settings are recorded in
``dataset.yaml`` under ``generator``, so the same set can be made again at
any size.
"""

from dataclasses import asdict, dataclass, field, replace

import numpy as np
import yaml

from .. import params as P
from ..engine import simulate
from ..kernel.events import EVENT_KINDS
from ..laws.registry import spelled
from ..model import Scenario, build
from .dataset import write_table
from .flights import STANDARD_GRAVITY, flight_gravity


@dataclass
class GeneratorSettings:
    scenarios: int = 40
    seed: int = 7
    duration: float = 2.0
    rate: float = 100.0
    dt: float = 1e-3
    noise_mm: float = 1.0
    table_half: float = 0.6
    min_bodies: int = 2
    max_bodies: int = 4
    fmt: str = "parquet"
    #: Body materials, drawn uniformly per body (empty: no material column);
    #: ``truth`` may then give per-material coefficients (``mu_bb@A+B``).
    materials: list = field(default_factory=list)
    #: The walls' material ("" : none).
    wall_material: str = ""
    #: The contact law of each kind (``{kind: name}``, :mod:`simcore.laws.registry`;
    #: absent: the impulse law); written to ``dataset.yaml`` as ``laws``.
    laws: dict = field(default_factory=dict)
    #: "sphere" (table scenes) or "box" (cube tosses; see the module).
    shape: str = "sphere"
    #: Orientation noise [degrees per axis] of the box tosses.
    noise_deg: float = 0.5
    #: The box tosses' half extents [m] (None: the cube's, :data:`CUBE_HALF`;
    #: the mass stays :data:`CUBE_MASS`, the inertia scales as a uniform
    #: box's from :data:`CUBE_INERTIA`), the height of the box's centre
    #: over its bounding radius at release [m], the throw's horizontal speed
    #: [m/s] (each drawn uniformly from its range) and the spin's standard
    #: deviation per axis [rad/s].
    half: list = None
    height: list = field(default_factory=lambda: [0.1, 0.25])
    speed: list = field(default_factory=lambda: [1.0, 2.0])
    spin: float = 3.0


TRUTH = {"mu_s": 0.28, "mu_k": 0.19, "v_th": 0.04, "mu_bb": 0.07, "e_bb": 0.92,
         "mu_w": 0.18, "e_bw": 0.7, "e_bg": 0.5}


def _scene(rng, s, cfg):
    nb = int(rng.integers(cfg.min_bodies, cfg.max_bodies + 1))
    radius = np.full(nb, 0.028575)  # 57.15 mm pool balls
    mass = np.full(nb, 0.17)
    half = cfg.table_half
    pos = np.zeros((nb, 3))
    pos[:, 2] = radius
    for i in range(nb):
        for _ in range(1000):
            xy = rng.uniform(-half + 2 * radius[i], half - 2 * radius[i], 2)
            if all(np.hypot(*(xy - pos[j, :2])) > 3 * radius[i] for j in range(i)):
                break
        pos[i, :2] = xy
    vel = np.zeros((nb, 3))
    # One cue ball aimed at another body, the rest mostly at rest.
    target = pos[1, :2] - pos[0, :2]
    speed = rng.uniform(0.8, 2.5)
    vel[0, :2] = speed * target / np.linalg.norm(target) + rng.normal(0, 0.05, 2)
    moving = rng.random(nb) < 0.3
    moving[0] = False
    vel[moving, :2] = rng.normal(0, 0.5, (moving.sum(), 2))
    controls = []
    for i in range(nb):
        if rng.random() < 0.5:
            t0 = rng.uniform(0.0, 0.5 * cfg.duration)
            f = rng.normal(0, 1.0, 2)
            f *= rng.uniform(0.5, 2.5) * 0.3 * mass[i] * 9.81 / np.linalg.norm(f)
            controls.append([i, t0, t0 + rng.uniform(0.1, 0.5), f[0], f[1], 0.0])
    walls = np.array([[1, 0, 0, -half], [-1, 0, 0, -half], [0, 1, 0, -half], [0, -1, 0, -half]],
                     float)
    return Scenario(radius=radius, mass=mass, pos=pos, vel=vel, t_end=cfg.duration,
                    dt=cfg.dt, walls=walls, controls=np.array(controls).reshape(-1, 6),
                    name=f"s{s:04d}")


def generate(out_dir, cfg=None, truth=None, name="synthetic-table"):
    """Write a synthetic dataset to ``out_dir``; returns the directory path."""
    from pathlib import Path

    cfg = cfg or GeneratorSettings()
    if cfg.shape not in ("sphere", "box"):
        raise ValueError(f"generator shape {cfg.shape!r}: expected 'sphere' or 'box'")
    if cfg.shape == "box":
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        return _generate_boxes(out, cfg, dict(TRUTH_BOX if truth is None else truth), name)
    truth = dict(TRUTH if truth is None else truth)
    rng = np.random.default_rng(cfg.seed)
    scenes = [_scene(rng, s, cfg) for s in range(cfg.scenarios)]
    if cfg.materials:
        pick = np.random.default_rng([cfg.seed, 1])  # the scenes stay those without materials
        for sc in scenes:
            sc.material = [cfg.materials[k] for k in pick.integers(len(cfg.materials),
                                                                     size=len(sc.radius))]
            sc.wall_material = [cfg.wall_material] * len(sc.walls)
    materials = sorted(set(cfg.materials) | ({cfg.wall_material} - {""}))
    model, state = build(scenes, params=truth, materials=materials, laws=cfg.laws)
    nsamp = int(round(cfg.duration * cfg.rate)) + 1
    ts = np.linspace(0.0, cfg.duration, nsamp)
    res = simulate(model, state, [ts] * len(scenes))
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    ext = cfg.fmt
    noise = cfg.noise_mm * 1e-3

    sid, bid, rad, mas, shp = [], [], [], [], []
    for sc in scenes:
        nb = len(sc.radius)
        sid += [sc.name] * nb
        bid += list(range(nb))
        rad += list(sc.radius)
        mas += list(sc.mass)
        shp += ["sphere"] * nb
    p0 = np.concatenate([sc.pos for sc in scenes])
    v0 = np.concatenate([sc.vel for sc in scenes])
    bodies = {"scenario_id": sid, "body_id": bid, "shape": shp, "radius": rad, "mass": mas,
              "x0": p0[:, 0], "y0": p0[:, 1], "z0": p0[:, 2],
              "vx0": v0[:, 0], "vy0": v0[:, 1], "vz0": v0[:, 2]}
    if cfg.materials:
        bodies["material"] = [m for sc in scenes for m in sc.material]
    write_table(bodies, out / f"bodies.{ext}")

    cols = {k: [] for k in ("scenario_id", "body_id", "t", "x", "y", "z")}
    for s, sc in enumerate(scenes):
        t, pos, _ = res.samples(s)
        nb = len(sc.radius)
        p = pos[:, :nb].transpose(1, 0, 2).reshape(-1, 3)
        p = p + rng.normal(0.0, noise, p.shape)
        cols["scenario_id"] += [sc.name] * (nb * len(t))
        cols["body_id"].append(np.repeat(np.arange(nb), len(t)))
        cols["t"].append(np.tile(t, nb))
        for d, c in enumerate("xyz"):
            cols[c].append(p[:, d])
    write_table({k: (np.concatenate(v) if k != "scenario_id" else v) for k, v in cols.items()},
                out / f"trajectories.{ext}")

    walls = {"scenario_id": ["*"] * 4, "wall_id": [0, 1, 2, 3],
             "nx": scenes[0].walls[:, 0], "ny": scenes[0].walls[:, 1],
             "nz": scenes[0].walls[:, 2], "d": scenes[0].walls[:, 3]}
    if cfg.wall_material:
        walls["material"] = [cfg.wall_material] * 4
    write_table(walls, out / f"walls.{ext}")
    crow = [(sc.name, c) for sc in scenes for c in sc.controls]
    if crow:  # as for events below: no pushes, no table
        write_table({"scenario_id": [r[0] for r in crow],
                     "body_id": np.array([int(r[1][0]) for r in crow], np.int64),
                     **{k: np.array([r[1][j] for r in crow], float)
                        for j, k in enumerate(("t0", "t1", "fx", "fy", "fz"), start=1)}},
                    out / f"controls.{ext}")
    ev = {k: [] for k in ("scenario_id", "t", "body_id", "other", "dvx", "dvy", "dvz")}
    for s, sc in enumerate(scenes):
        e = res.events(s)
        for k in range(len(e["t"])):
            kind = EVENT_KINDS[e["kind"][k]]
            if kind not in ("body-body", "body-wall"):
                continue
            pairs = [(e["a"][k], f"body:{e['b'][k]}" if kind == "body-body" else f"wall:{e['b'][k]}",
                      e["dva"][k])]
            if kind == "body-body":
                pairs.append((e["b"][k], f"body:{e['a'][k]}", e["dvb"][k]))
            for body, other, dv in pairs:
                ev["scenario_id"].append(sc.name)
                ev["t"].append(e["t"][k])
                ev["body_id"].append(int(body))
                ev["other"].append(other)
                for d, c in enumerate(("dvx", "dvy", "dvz")):
                    ev[c].append(float(dv[d]))
    if ev["t"]:  # an empty table is invalid: no events, no table
        write_table(ev, out / f"events.{ext}")
    write_table({"scenario_id": [sc.name for sc in scenes], "duration": [cfg.duration] * len(scenes),
                 "dt": [cfg.dt] * len(scenes),
                 "split": ["test" if s % 5 == 4 else "train" for s in range(len(scenes))]},
                out / f"scenarios.{ext}")
    _write_meta(out, name, "Synthetic billiard-like table scenes (2-4 spheres, pushes, walls, "
                "collisions) simulated by contactfit with known coefficients.",
                "contactfit generate", model, truth,
                f"positions: independent Gaussian, sd {cfg.noise_mm} mm per coordinate; "
                "events: exact (simulated)", asdict(cfg))
    return out


def _write_meta(out, name, description, source, model, truth, noise, generator, gravity=9.81):
    """The generated dataset's ``dataset.yaml``: its provenance, the laws
    and true coefficients it was simulated with, its noise and settings,
    and the ``gravity`` it declares."""
    laws = spelled(model.layout.laws)
    meta = {"name": name, "description": description, "source": source,
            "license": "CC0-1.0", "units": {"length": "m", "time": "s"}, "gravity": gravity,
            "ground_z": 0.0, **({"laws": laws} if laws else {}),
            "truth": {k: float(v) for k, v in truth.items()}, "noise": noise,
            "generator": generator}
    (out / "dataset.yaml").write_text(yaml.safe_dump(meta, sort_keys=False))


#: The tossed cube of the ContactNets data (``../cube-toss``): half extent
#: [m], mass [kg], principal inertia [kg m^2].
CUBE_HALF = 0.0524
CUBE_MASS = 0.37
CUBE_INERTIA = 0.00081
#: The generator settings that shape the box tosses (the rest are the sphere scenes').
BOX_SETTINGS = ("shape", "scenarios", "seed", "duration", "rate", "noise_mm", "noise_deg", "fmt",
                "laws", "half", "height", "speed", "spin")
#: True coefficients of the box tosses (``--shape box``).
TRUTH_BOX = {"mu_s": 0.3, "mu_k": 0.25, "e_bg": 0.45}


def box_of(cfg):
    """The tossed box's half extents and principal inertia (``cfg.half``;
    a cube's inertia is :data:`CUBE_INERTIA`, another box's scales as a
    uniform box's, ``I_x ~ hy^2 + hz^2``, at the same mass)."""
    half = np.array(cfg.half if cfg.half is not None else [CUBE_HALF] * 3, np.float64)
    h2 = half ** 2
    inertia = CUBE_INERTIA * (h2.sum() - h2) / (2 * CUBE_HALF ** 2)
    return half, inertia


def _toss(rng, s, cfg, half, inertia):
    """One toss of the box of ``half`` extents and ``inertia``
    (:func:`box_of`): thrown at ``cfg.speed`` (1-2 m/s) from ``cfg.height``
    (0.1-0.25 m) above the table with ``cfg.spin`` (3 rad/s) of spin in a
    random orientation, tumbling, sliding and coming to rest (by default the
    ContactNets cube, the shape of the real tosses)."""
    q = rng.normal(size=4)
    q /= np.linalg.norm(q)
    pos = np.r_[rng.uniform(-0.2, 0.2, 2), rng.uniform(*cfg.height) + np.linalg.norm(half)]
    heading = rng.uniform(0, 2 * np.pi)
    speed = rng.uniform(*cfg.speed)
    vel = np.r_[speed * np.cos(heading), speed * np.sin(heading), rng.uniform(-1.0, 0.0)]
    omega = rng.normal(scale=cfg.spin, size=3)
    return Scenario(radius=[np.nan], mass=[CUBE_MASS], pos=[pos], vel=[vel], omega=[omega],
                    quat=[q], t_end=cfg.duration, dt=None, shape=("box",),
                    extent=[half.tolist()], inertia=[inertia.tolist()], name=f"toss{s:04d}")


def _noisy_quat(rng, q, sd_rad):
    """``q`` turned by independent small world-frame rotations of standard
    deviation ``sd_rad`` per axis (rows; scalar first, kept in the w >= 0
    hemisphere as trackers report them)."""
    phi = rng.normal(0.0, sd_rad, (q.shape[0], 3))
    ang = np.linalg.norm(phi, axis=1)
    axis = phi / np.where(ang > 0, ang, 1.0)[:, None]
    d = np.c_[np.cos(ang / 2), np.sin(ang / 2)[:, None] * axis]
    w0, v0 = d[:, 0], d[:, 1:]
    w1, v1 = q[:, 0], q[:, 1:]
    out = np.c_[w0 * w1 - np.sum(v0 * v1, 1), w0[:, None] * v1 + w1[:, None] * v0 + np.cross(v0, v1)]
    out /= np.linalg.norm(out, axis=1, keepdims=True)
    return out * np.where(out[:, :1] < 0, -1.0, 1.0)


def _generate_boxes(out, cfg, truth, name):
    """:func:`generate` for ``shape="box"``: box tosses on a table (by
    default the ContactNets cube's)."""
    rng = np.random.default_rng(cfg.seed)
    half, inertia = box_of(cfg)
    scenes = [_toss(rng, s, cfg, half, inertia) for s in range(cfg.scenarios)]
    model, state = build(scenes, params=truth, laws=cfg.laws)
    # One step for the data and for a model read from them: the stability
    # guard's at the true coefficients and at the defaults a reader builds
    # with, whichever is smaller (a tumbling toss is chaotic, so a model that
    # steps otherwise drifts from the data whatever its coefficients).
    model = replace(model, scen_dt=np.minimum(model.scen_dt,
                                              build(scenes, laws=cfg.laws)[0].scen_dt))
    nsamp = int(round(cfg.duration * cfg.rate)) + 1
    ts = np.linspace(0.0, cfg.duration, nsamp)
    res = simulate(model, state, [ts] * len(scenes))
    ext = cfg.fmt
    noise = cfg.noise_mm * 1e-3
    p0 = np.array([sc.pos[0] for sc in scenes])
    v0 = np.array([sc.vel[0] for sc in scenes])
    w0 = np.array([sc.omega[0] for sc in scenes])
    q0 = np.array([sc.quat[0] for sc in scenes])
    n = len(scenes)
    write_table({"scenario_id": [sc.name for sc in scenes], "body_id": np.zeros(n, np.int64),
                 "shape": ["box"] * n, "mass": np.full(n, CUBE_MASS),
                 **{f"h{c}": np.full(n, half[k]) for k, c in enumerate("xyz")},
                 **{f"i{c}{c}": np.full(n, inertia[k]) for k, c in enumerate("xyz")},
                 **{f"{c}0": p0[:, k] for k, c in enumerate("xyz")},
                 **{f"v{c}0": v0[:, k] for k, c in enumerate("xyz")},
                 **{f"w{c}0": w0[:, k] for k, c in enumerate("xyz")},
                 **{f"q{c}0": q0[:, k] for k, c in enumerate("wxyz")}},
                out / f"bodies.{ext}")
    pos = res.samp_pos[:, 0] + rng.normal(0.0, noise, (res.samp_pos.shape[0], 3))
    quat = _noisy_quat(rng, res.samp_quat[:, 0], np.radians(cfg.noise_deg))
    write_table({"scenario_id": [sc.name for sc in scenes for _ in ts],
                 "body_id": np.zeros(n * nsamp, np.int64), "t": np.tile(ts, n),
                 **{c: pos[:, k] for k, c in enumerate("xyz")},
                 **{f"q{c}": quat[:, k] for k, c in enumerate("wxyz")}},
                out / f"trajectories.{ext}")
    write_table({"scenario_id": [sc.name for sc in scenes], "duration": [cfg.duration] * n,
                 "dt": model.scen_dt, "split": ["test" if s % 5 == 4 else "train"
                                                for s in range(n)]},
                out / f"scenarios.{ext}")
    gravity = 9.81
    if "gravity" in truth:
        # A recording whose free fall is not 9.81 declares what an import
        # measures from its flights (its gravity coefficient's start).
        try:
            gravity = round(flight_gravity(np.repeat(np.arange(n), nsamp), np.tile(ts, n),
                                           pos[:, 2], quat, half)[0], 2)
        except ValueError:  # no toss flies long enough to tell
            gravity = STANDARD_GRAVITY
    size = " x ".join(f"{2 * h:.4g}" for h in half)
    _write_meta(out, name, f"Synthetic box tosses (a {size} m box thrown onto a table, "
                "tumbling, sliding and coming to rest) simulated by contactfit's time-stepper "
                "with known coefficients.", "contactfit generate --shape box", model, truth,
                f"positions: independent Gaussian, sd {cfg.noise_mm} mm per coordinate; "
                f"orientations: independent rotations, sd {cfg.noise_deg} degrees per axis",
                {k: v for k, v in asdict(cfg).items() if k in BOX_SETTINGS}, gravity)
    return out


P.validate(P.vector(TRUTH))
