"""Importers: measured data in other formats written as contactfit datasets.

``cube_tosses``: the ContactNets cube tosses (Pfrommer, Halm, Posa, CoRL
2020), a long table with one row per sample: ``toss_id``, ``step``, ``t``
[s], the centre ``x, y, z`` [m] (world, z up), the orientation ``qw, qx,
qy, qz`` (scalar first, body to world), the centre velocity ``vx, vy, vz``
[m/s] (world) and the angular velocity ``wx, wy, wz`` [rad/s] in the BODY
frame.  Each toss becomes one scenario ``toss<id>`` with one box body: the
positions and quaternions are kept as recorded (the measurement), sample
0's state is the initial state (its angular velocity rotated into the
world frame, ``w_world = R(q) w_body``; the later velocities are backward
differences of the poses and are not kept).  Every model choice is written
into the dataset (``dataset.yaml`` and the scenarios table), so tosses
imported the same way simulate with the same model.

Every model choice is a field of :class:`TossModel`, written into the
dataset, never a constant here: facts about one recording (its free fall,
its table's height, its cube's centre of mass) live in that dataset's
``dataset.yaml`` and its ``make.py``, and :meth:`TossModel.like` reads them
back so that held-out tosses of the same recording import alike.  The free
fall, unless given, is measured from the tosses' own flights
(:func:`flight_gravity`): a recording whose lengths or clock are off falls
at another rate, and the model takes the recording's units as they are.
"""

import shutil
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import yaml

from ..geometry.rigid import quat_matrix
from .dataset import held_out, write_table
from .flights import (  # noqa: F401  (re-exported: the importers' own measure)
    FLIGHT_CLEARANCE,
    FLIGHT_MISMATCH,
    FLIGHT_SAMPLES,
    STANDARD_GRAVITY,
    flight_gravity,
)

# The ContactNets cube (half width, mass, upstream's principal inertia; a
# uniform cube would have 0.00068 kg m^2), as the generated tosses use it.
from .synth import CUBE_HALF, CUBE_INERTIA, CUBE_MASS


@dataclass(frozen=True)
class TossModel:
    """The model an import writes into its dataset (``dataset.yaml``, the
    ``scenarios`` and ``bodies`` tables), so that tosses imported alike
    simulate alike.

    ``gravity`` [m/s^2]: the recording's free fall; None measures it from
    the imported tosses (:func:`flight_gravity`, rounded to 0.01 m/s^2).
    ``ground_z`` [m]: the table's height.  ``com`` [m]: the centre of mass
    from the cube's centre, in its body frame (no import can measure it: a
    dataset chooses it by comparing fits).  ``dt`` [s]: the time-stepper's
    step, fixed so that every coefficient set steps alike.  ``laws``,
    ``model``: the dataset's sections.  ``half`` [m], ``mass`` [kg],
    ``inertia`` [kg m^2]: the cube, the ContactNets cube unless said."""

    gravity: float | None = None
    ground_z: float = 0.0
    com: tuple = (0.0, 0.0, 0.0)
    dt: float = 2.5e-4
    laws: dict = field(default_factory=lambda: {"body_ground": "hunt_crossley"})
    model: dict = field(default_factory=lambda: {"cone": "elliptic"})
    half: float = CUBE_HALF
    mass: float = CUBE_MASS
    inertia: float = CUBE_INERTIA

    @classmethod
    def like(cls, dataset):
        """The model of an imported dataset (a directory): what it was
        imported with, read back from its ``dataset.yaml``, its first body
        and its first scenario's step."""
        root = Path(dataset)
        try:
            meta = yaml.safe_load((root / "dataset.yaml").read_text())
            body = pq.read_table(root / "bodies.parquet").slice(0, 1).to_pylist()[0]
            dt = pq.read_table(root / "scenarios.parquet", columns=["dt"])["dt"][0].as_py()
            return cls(gravity=float(meta["gravity"]), ground_z=float(meta["ground_z"]),
                       com=tuple(float(body[f"com_{c}"] or 0.0) for c in "xyz"), dt=float(dt),
                       laws=dict(meta.get("laws") or {}), model=dict(meta.get("model") or {}),
                       half=float(body["hx"]), mass=float(body["mass"]),
                       inertia=float(body["ixx"]))
        except (OSError, KeyError, IndexError, TypeError, ValueError, yaml.YAMLError) as exc:
            raise ValueError(f"{root}: not an imported cube-toss dataset to take the model "
                             f"from ({type(exc).__name__}: {exc})") from None


#: The validation share of the duplicate-aware split.
TEST_SHARE = 0.2
COLUMNS = ("toss_id", "step", "t", "x", "y", "z", "qw", "qx", "qy", "qz", "vx", "vy", "vz",
           "wx", "wy", "wz")


def cube_tosses(src, out, duplicates=None, test_share=TEST_SHARE, seed=0, model=None):
    """Write the tosses of the long table ``src`` (Parquet or CSV) as a
    dataset in ``out`` under ``model`` (a :class:`TossModel`; None: the
    default one, its free fall measured); returns ``out``.

    ``duplicates``: a CSV of ``toss_a, toss_b`` pairs that are one
    recording stored twice (ContactNets' ``duplicate_pairs.csv``); each
    connected group of tosses goes to one side of the split.  The
    ``scenarios`` table's ``split`` column holds ``test`` for about
    ``test_share`` of the groups, drawn by a stable hash of the group's
    smallest toss id and ``seed`` (the same in every run and for any
    subset of tosses), ``train`` for the rest.  A ``LICENSE`` beside
    ``src`` is copied into ``out``.  Raises ``ValueError`` naming the file,
    the column and the row of a bad value."""
    src, out = Path(src), Path(out)
    table = _read(src)
    toss = table["toss_id"]
    order = np.lexsort((table["step"], toss))
    cols = {k: v[order] for k, v in table.items()}
    toss = cols["toss_id"]
    ids, first, counts = np.unique(toss, return_index=True, return_counts=True)
    group = _groups(ids, duplicates)
    split = np.where(held_out([f"toss{g}" for g in group], test_share, seed), "test", "train")
    names = np.array([f"toss{i}" for i in ids])
    t = cols["t"]
    t0 = t[first]
    duration = t[first + counts - 1] - t0
    q0 = np.stack([cols[c][first] for c in ("qw", "qx", "qy", "qz")], axis=1)
    w_body = np.stack([cols[c][first] for c in ("wx", "wy", "wz")], axis=1)
    w0 = np.einsum("nij,nj->ni", np.array([quat_matrix(q) for q in q0]), w_body)
    n = ids.size
    model = TossModel() if model is None else model
    if model.gravity is None:
        try:
            g, _ = flight_gravity(toss, t, cols["z"], np.stack([cols[c] for c in
                                  ("qw", "qx", "qy", "qz")], axis=1), half=model.half,
                                  table_z=model.ground_z)
        except ValueError:  # no toss flies long enough to tell
            g = STANDARD_GRAVITY
        model = replace(model, gravity=round(g, 2))
    out.mkdir(parents=True, exist_ok=True)
    write_table({"scenario_id": names, "duration": duration, "dt": np.full(n, model.dt),
                 "split": split}, out / "scenarios.parquet")
    write_table({"scenario_id": names, "body_id": np.zeros(n, np.int64),
                 "shape": ["box"] * n, "mass": np.full(n, model.mass),
                 **{c: np.full(n, model.half) for c in ("hx", "hy", "hz")},
                 **{c: np.full(n, model.inertia) for c in ("ixx", "iyy", "izz")},
                 **{c: np.full(n, v) for c, v in zip(("com_x", "com_y", "com_z"), model.com)},
                 **{f"{c}0": cols[c][first] for c in ("x", "y", "z")},
                 **{f"v{c}0": cols[f"v{c}"][first] for c in "xyz"},
                 **{f"w{c}0": w0[:, k] for k, c in enumerate("xyz")},
                 **{f"q{c}0": q0[:, k] for k, c in enumerate("wxyz")}},
                out / "bodies.parquet")
    owner = np.repeat(np.arange(n), counts)
    write_table({"scenario_id": names[owner], "body_id": np.zeros(owner.size, np.int64),
                 "t": t - t0[owner], **{c: cols[c] for c in ("x", "y", "z", "qw", "qx", "qy", "qz")}},
                out / "trajectories.parquet")
    meta = {"name": out.name, "description": (
        "Real cube tosses (ContactNets): a 0.1048 m cube tossed by hand onto a table, "
        "tracked at 148 Hz until it stops; one scenario per toss."),
        "source": f"contactfit import cube-toss {src.name} (DAIRLab/contact-nets, "
                  "data/tosses_processed, commit c3dc21c9, converted to SI)",
        "license": "BSD-3-Clause (c) 2020 Dynamic Autonomy and Intelligent Robotics Lab, "
                   "U. Penn: LICENSE",
        "citation": "Pfrommer, Halm, Posa, ContactNets: Learning Discontinuous Contact "
                    "Dynamics with Smooth, Implicit Representations, CoRL 2020",
        "units": {"length": "m", "time": "s"}, "gravity": float(model.gravity),
        "ground_z": float(model.ground_z), "laws": dict(model.laws), "model": dict(model.model)}
    (out / "dataset.yaml").write_text(yaml.safe_dump(meta, sort_keys=False))
    if (src.parent / "LICENSE").is_file():
        shutil.copyfile(src.parent / "LICENSE", out / "LICENSE")
    return out


def _read(src):
    """The long table's columns as float64 arrays (ids as int64), checked."""
    tab = _table(src)
    missing = [c for c in COLUMNS if c not in tab.column_names]
    if missing:
        raise ValueError(f"{src}: missing column(s) {missing}; expected {list(COLUMNS)}")
    cols = {}
    for c in COLUMNS:
        v = tab[c].to_numpy(zero_copy_only=False)
        try:
            v = v.astype(np.int64 if c in ("toss_id", "step") else np.float64)
        except (TypeError, ValueError):
            raise ValueError(f"{src}: column {c}: expected numbers") from None
        bad = np.flatnonzero(~np.isfinite(v.astype(np.float64)))
        if bad.size:
            raise ValueError(f"{src}: column {c}, row {bad[0]}: {v[bad[0]].item()!r} is not a "
                             "finite number")
        cols[c] = v
    norm = np.sqrt(sum(cols[c] ** 2 for c in ("qw", "qx", "qy", "qz")))
    bad = np.flatnonzero(np.abs(norm - 1.0) > 1e-3)
    if bad.size:
        raise ValueError(f"{src}: columns qw, qx, qy, qz, row {bad[0]}: the quaternion's "
                         f"norm is {norm[bad[0]]:.6g}; expected 1")
    key = cols["toss_id"] * (cols["step"].max() + 1) + cols["step"]
    uniq, counts = np.unique(key, return_counts=True)
    if (counts > 1).any():
        row = int(np.flatnonzero(key == uniq[counts > 1][0])[1])
        raise ValueError(f"{src}: columns toss_id, step, row {row}: toss "
                         f"{cols['toss_id'][row]} has step {cols['step'][row]} twice")
    return cols


def _table(src):
    """A Parquet or CSV file as a pyarrow Table; a missing or unreadable
    file raises ``ValueError`` naming it."""
    if not src.is_file():
        raise ValueError(f"{src}: no such file")
    try:
        if src.suffix == ".csv":
            import pyarrow.csv as pacsv
            return pacsv.read_csv(src)
        return pq.read_table(src)
    except Exception as exc:  # noqa: BLE001 - any reader failure is a bad file
        raise ValueError(f"{src}: unreadable: {str(exc).splitlines()[0]}") from None


def _groups(ids, duplicates):
    """Per toss id (in ``ids`` order), the smallest id of its group of
    duplicate recordings (union-find over the pairs)."""
    parent = {int(i): int(i) for i in ids}

    def root(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    if duplicates is not None:
        path = Path(duplicates)
        try:
            import pyarrow.csv as pacsv
            pairs = pacsv.read_csv(path)
            a = pairs["toss_a"].to_numpy().astype(np.int64)
            b = pairs["toss_b"].to_numpy().astype(np.int64)
        except Exception as exc:  # noqa: BLE001
            raise ValueError(f"{path}: expected a CSV with columns toss_a, toss_b: "
                             f"{str(exc).splitlines()[0]}") from None
        for x, y in zip(a, b):
            if int(x) in parent and int(y) in parent:
                rx, ry = root(int(x)), root(int(y))
                parent[max(rx, ry)] = min(rx, ry)
    return np.array([root(int(i)) for i in ids])


def imported_flight_gravity(out):
    """:func:`flight_gravity` of the tosses of the dataset directory ``out``
    (its ``trajectories`` table), for its cube and table."""
    model = TossModel.like(out)
    tab = pq.read_table(Path(out) / "trajectories.parquet").to_pandas()
    return flight_gravity(tab["scenario_id"].to_numpy(), tab["t"], tab["z"],
                          tab[["qw", "qx", "qy", "qz"]].to_numpy(), half=model.half,
                          table_z=model.ground_z)


# --- planar square drops (Fazeli et al.) --------------------------------------------------

#: The ``square_drops.parquet`` format's columns (``../shared/data/fazeli-planar``).
SQUARE_COLUMNS = ("traj_id", "step", "t", "x", "z", "th")
#: The square of Fazeli et al.: half side [m], mass [kg] (the upstream scripts').
SQUARE_HALF, SQUARE_MASS = 0.03, 0.0485
#: The first sample whose velocity is consistent with the poses, and how many
#: samples of flight after it the initial state is fitted to (the first impact
#: comes near sample 13).
SQUARE_START, SQUARE_WINDOW = 2, 5
#: The free fall of the recording: the median of the parabolas through the
#: later flights (the data's README).
SQUARE_GRAVITY = 9.82
#: A drop's last two samples count as at rest on a face when its centre moved
#: less than this [m] between them and its angle lies this close to a face
#: down [rad] (:func:`tracker_turn`).
SQUARE_REST_STEP, SQUARE_REST_FLAT = 1e-4, np.radians(10.0)


def tracker_turn(th, x, z, last):
    """The constant turn [rad] of a planar tracker's angle against the
    body's faces: the median, over the drops that end at rest on a face, of
    the last sample's angle folded into ``[-45, 45)`` degrees (a square at
    rest lies with a face on the ground, so its angle is a multiple of 90
    degrees plus the tracker's turn); 0 when no drop ends at rest.  ``th``,
    ``x``, ``z``: the samples' angles and centre [rad, m]; ``last``: each
    drop's last sample's index (the one before it is read too).

    On the Fazeli square drops the turn is -1.9 degrees, the same within 0.2
    degrees on each of the four faces, while the rest heights along x tilt
    the table by 0.16 degrees: the tracker's zero angle, not a tilted table
    (a table tilted by 1.9 degrees would raise the rest heights by 1.8 cm
    over the drops' half metre)."""
    last = np.asarray(last)
    fold = (th[last] + np.pi / 4) % (np.pi / 2) - np.pi / 4
    still = np.hypot(x[last] - x[last - 1], z[last] - z[last - 1]) < SQUARE_REST_STEP
    flat = still & (np.abs(fold) < SQUARE_REST_FLAT)
    return float(np.median(fold[flat])) if flat.any() else 0.0


def square_drops(src, out, test_share=0.25, seed=0, gravity=SQUARE_GRAVITY, dt=2.5e-4,
                 turn=None):
    """Write the planar drops of a file of the ``square_drops.parquet`` format
    (Fazeli et al.) as a dataset at ``out``: one scenario ``drop<traj_id>``
    per drop, one box body, a seeded ``test_share`` of the drops in the test
    split (by the stable hash of the id); the source's LICENSE copied.

    The planar frame (x right, z up; ``th`` counter-clockwise in it, as the
    format's README says: corners at ``R(th)(+-0.03, +-0.03)``) maps to the
    world's x-z plane with a turn about y: ``q = (cos(th/2), 0, -sin(th/2),
    0)`` (a counter-clockwise turn in the x-z plane is a turn about -y) and
    ``w_y = -vth``.  The square is a cube of side 0.06 m (its inertia about
    y, ``m s^2 / 6``, is the plate's; the cube's symmetry across the x-z
    plane keeps the motion planar), 48.5 g.  The recording starts at sample
    2 (its first two velocities are inconsistent with the poses); the
    initial state is the least-squares quadratic through the poses of
    samples 2-6 (flight: the first impact comes near sample 13), evaluated
    at sample 2 (:func:`simcore.geometry.rigid.window_state`); the poses
    from sample 2 on are the measurement, time from sample 2.  Gravity
    9.82 m/s^2 (the later flights' free fall); the ground at z = 0 (a fit
    frees ``ground_offset``); Hunt-Crossley contact on an elliptic cone at a
    0.25 ms step, as the cube tosses.  The angles are the body's: the
    tracker's constant turn ``turn`` [rad] (default: measured by
    :func:`tracker_turn` on the training drops' rest poses, or on all drops
    when none is for training; ``0``: the angles as recorded; stated in
    ``dataset.yaml``'s description) is taken off every sample, so a square
    at rest lies flat in the data as on the model's ground.  Returns ``(out,
    turn)``.  Bad files raise ``ValueError`` naming
    the file, column and row."""
    from ..geometry.rigid import window_state

    src, out = Path(src), Path(out)
    tab = _table(src)
    cols = {}
    for c in SQUARE_COLUMNS:
        if c not in tab.column_names:
            raise ValueError(f"{src}: column {c} missing (expected the square_drops format: "
                             f"{', '.join(SQUARE_COLUMNS)})")
        try:
            v = tab[c].to_numpy(zero_copy_only=False).astype(np.float64)
        except (TypeError, ValueError):
            raise ValueError(f"{src}: column {c}: expected numbers") from None
        bad = np.flatnonzero(~np.isfinite(v))
        if bad.size:
            raise ValueError(f"{src}: column {c}, row {bad[0]}: {v[bad[0]]!r} is not a finite "
                             "number")
        cols[c] = v
    order = np.lexsort((cols["step"], cols["traj_id"]))
    cols = {k: v[order] for k, v in cols.items()}
    ids, first, counts = np.unique(cols["traj_id"].astype(np.int64), return_index=True,
                                   return_counts=True)
    short = np.flatnonzero(counts < SQUARE_START + SQUARE_WINDOW + 1)
    if short.size:
        row = int(order[first[short[0]]])
        raise ValueError(f"{src}: column traj_id, row {row}: drop {ids[short[0]]} has "
                         f"{counts[short[0]]} samples; expected at least "
                         f"{SQUARE_START + SQUARE_WINDOW + 1}")
    n = ids.size
    x0 = np.zeros((n, 3))
    v0 = np.zeros((n, 3))
    q0 = np.zeros((n, 4))
    w0 = np.zeros((n, 3))
    keep = np.zeros(cols["t"].size, bool)
    t_rel = np.zeros(cols["t"].size)
    names = np.array([f"drop{i}" for i in ids])
    split = np.where(held_out(names, test_share, seed), "test", "train")
    last = first + counts - 1
    if turn is None:
        turn = tracker_turn(cols["th"], cols["x"], cols["z"],
                            last[split == "train"] if (split == "train").any() else last)
    pos = np.stack([cols["x"], np.zeros_like(cols["x"]), cols["z"]], axis=1)
    half = -0.5 * (cols["th"] - turn)
    quat = np.stack([np.cos(half), 0 * half, np.sin(half), 0 * half], axis=1)
    for k, (a, m) in enumerate(zip(first, counts)):
        s = a + SQUARE_START
        win = slice(s, s + SQUARE_WINDOW)
        tt = cols["t"][win] - cols["t"][s]
        p, v, q, w = window_state(tt, pos[win][:, None], quat[win][:, None])
        x0[k], v0[k], q0[k], w0[k] = p[0], v[0], q[0], w[0]
        keep[s:a + m] = True
        t_rel[s:a + m] = cols["t"][s:a + m] - cols["t"][s]
    owner = np.repeat(np.arange(n), counts)[keep]
    duration = np.array([t_rel[a + m - 1] for a, m in zip(first, counts)])
    inertia = SQUARE_MASS * (2 * SQUARE_HALF) ** 2 / 6.0
    out.mkdir(parents=True, exist_ok=True)
    write_table({"scenario_id": names, "duration": duration, "dt": np.full(n, dt),
                 "split": split}, out / "scenarios.parquet")
    write_table({"scenario_id": names, "body_id": np.zeros(n, np.int64), "shape": ["box"] * n,
                 "mass": np.full(n, SQUARE_MASS),
                 **{c: np.full(n, SQUARE_HALF) for c in ("hx", "hy", "hz")},
                 **{c: np.full(n, inertia) for c in ("ixx", "iyy", "izz")},
                 **{f"{c}0": x0[:, j] for j, c in enumerate("xyz")},
                 **{f"v{c}0": v0[:, j] for j, c in enumerate("xyz")},
                 **{f"w{c}0": w0[:, j] for j, c in enumerate("xyz")},
                 **{f"q{c}0": q0[:, j] for j, c in enumerate("wxyz")}},
                out / "bodies.parquet")
    write_table({"scenario_id": names[owner], "body_id": np.zeros(owner.size, np.int64),
                 "t": t_rel[keep], "x": pos[keep, 0], "y": pos[keep, 1], "z": pos[keep, 2],
                 **{c: quat[keep, j] for j, c in enumerate(("qw", "qx", "qy", "qz"))}},
                out / "trajectories.parquet")
    meta = {"name": out.name, "description": (
        f"Real planar drops of a 6 cm square (Fazeli et al.), imported from {src.name}: "
        f"{n} drops, 250 Hz, from sample {SQUARE_START} on; the square moves in the x-z plane "
        f"as a cube of side 0.06 m; the tracker's turn of {np.degrees(turn):.2f} degrees "
        "(against the faces of the squares at rest) taken off the angles."),
        "source": f"contactfit import fazeli-square {src.name} (DAIRLab/ImpactModeling, "
                  "IRB Bound/IRB Square, commit f6c28898)",
        "license": "BSD-3-Clause (c) 2020 Dynamic Autonomy and Intelligent Robotics Lab: "
                   "LICENSE",
        "citation": "N. Fazeli et al., Empirical evaluation of common contact models for "
                    "planar impact, ICRA 2017",
        "units": {"length": "m", "time": "s"}, "gravity": float(gravity), "ground_z": 0.0,
        "laws": {"body_ground": "hunt_crossley"}, "model": {"cone": "elliptic"}}
    (out / "dataset.yaml").write_text(yaml.safe_dump(meta, sort_keys=False))
    if (src.parent / "LICENSE").is_file():
        shutil.copyfile(src.parent / "LICENSE", out / "LICENSE")
    return out, turn
