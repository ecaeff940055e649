"""What an export reads: a fit's coefficients and model (:class:`Fitted`) and,
optionally, a dataset's scene (:class:`Scene`: its bodies, walls, ground and
free fall), both plain values (no arrays a kernel reads).

A fit comes as a calibration's ``fit.json`` document or a registered model's
configuration (``params``, ``laws``, ``model``); a coefficient it does not
give takes the registry's default (:func:`Fitted.value`), as a simulation
would.  A scene is one scenario's bodies (the first; the export says so when
the scenarios' bodies differ), the dataset's walls of that scenario, its
ground height (``ground_z`` plus the fit's ``ground_offset``) and tilt, and
its free fall (the fit's ``gravity`` when it has one, else the dataset's).
"""

from dataclasses import dataclass, field

import numpy as np

from .. import params as P
from ..geometry.rigid import ground_normal
from ..laws import registry as contact_laws


def number(x):
    """``x`` as a file's text: ten significant digits, never ``-0``."""
    return f"{float(x) + 0.0:.10g}"


def numbers(xs):
    """:func:`number` of each of ``xs``, space-separated."""
    return " ".join(number(x) for x in xs)


def _material(row):
    """A table row's material name, or "" (no column, null, empty)."""
    value = row.get("material")
    return value if isinstance(value, str) else ""


@dataclass(frozen=True)
class Fitted:
    """A fit's coefficients ``params`` ``{name: value}`` (per-material names
    included), its contact ``laws`` ``{kind: law}`` (resolved), whether its
    model ``spin``\\ s, and where it came from (``where``, for messages)."""

    params: dict
    laws: dict
    spin: bool = False
    where: str = "fit"

    @classmethod
    def from_doc(cls, doc, where="fit.json"):
        """From a calibration's ``fit.json`` (``params`` and ``dataset``'s
        ``laws`` and ``model``) or a registered model's configuration
        (``params``, ``laws``, ``model``), or a flat ``{name: value}``
        object (the default laws).  Raises ``ValueError`` naming ``where``
        and the key."""
        if not isinstance(doc, dict):
            raise ValueError(f"{where}: expected a JSON object (a calibration's fit.json)")
        lineage = doc.get("dataset") if isinstance(doc.get("dataset"), dict) else doc
        values = doc["params"] if isinstance(doc.get("params"), dict) else doc
        values = {k: v for k, v in values.items() if k not in ("laws", "model", "dataset")}
        for k, v in values.items():
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not np.isfinite(v):
                raise ValueError(f"{where}: params: {k} = {v!r}: expected a finite number")
            try:
                P.parse(k)
            except ValueError as exc:
                raise ValueError(f"{where}: params: {exc}") from None
        spin = bool((lineage.get("model") or {}).get("spin", False))
        try:
            laws = contact_laws.resolve(lineage.get("laws") or None, spin)
        except ValueError as exc:
            raise ValueError(f"{where}: laws: {exc}") from None
        return cls({P.canonical(k): float(v) for k, v in values.items()}, laws, spin, where)

    def value(self, root, *materials):
        """The coefficient ``root`` for the contact of ``materials`` (a body's
        material against the ground or a wall without one; a pair): the
        addressed entry, else the plain one, else the default."""
        mats = tuple(sorted(m for m in materials if m))
        if mats:
            addressed = f"{root}@{'+'.join(mats)}"
            if addressed in self.params:
                return self.params[addressed]
        if root in self.params:
            return self.params[root]
        return float(P.BY_NAME[root].default)

    def law(self, kind):
        """The law of contact ``kind`` (``body_ground``, ``body_body``, ``body_wall``)."""
        return self.laws[kind]


@dataclass(frozen=True)
class Body:
    """One body of a scene: ``shape`` (``sphere`` or ``box``), ``size`` (the
    radius, or the half extents), ``mass`` [kg], principal ``inertia``
    [kg m^2] (the fit's ``inertia_scale`` applied), ``com`` the centre of
    mass in the body frame [m] (the fit's ``com_*`` added), ``material``."""

    body_id: int
    shape: str
    size: tuple
    mass: float
    inertia: tuple
    com: tuple
    material: str = ""
    pos: tuple = (0.0, 0.0, 0.0)
    quat: tuple = (1.0, 0.0, 0.0, 0.0)


@dataclass(frozen=True)
class Wall:
    """A fixed plane ``n . p = d`` (``n`` into the free side), its material
    and, for a cushion, its nose line's ``height`` above the ground [m]
    (None: a plain wall)."""

    wall_id: int
    normal: tuple
    d: float
    material: str = ""
    height: float | None = None


@dataclass(frozen=True)
class Scene:
    """A dataset's scene as a fit sees it: ``bodies``, ``walls``, the
    ground's height ``ground`` [m] (on the world z axis) and unit ``normal``,
    the free fall ``gravity`` [m/s^2, along -z], the friction ``cone``, the
    dataset's step ``dt`` [s], its name and the scenario the bodies are
    read from (``scenario``; ``notes``: what the reading approximated)."""

    name: str
    scenario: str
    bodies: tuple
    walls: tuple
    ground: float
    normal: tuple
    gravity: float
    cone: str
    dt: float
    notes: tuple = field(default_factory=tuple)

    @classmethod
    def from_dataset(cls, ds, fitted, scenario=None):
        """The scene of dataset ``ds`` (:class:`simcore.data.dataset.Dataset`)
        under the coefficients of ``fitted``: the bodies of ``scenario``
        (default its first), that scenario's walls, the ground and free
        fall."""
        bodies = ds.tables["bodies"].to_pandas()
        ids = sorted(bodies["scenario_id"].unique())
        if scenario is not None and scenario not in ids:
            raise ValueError(f"{ds.path}: no scenario {scenario!r} in its bodies table")
        first = ids[0] if scenario is None else scenario
        notes = []
        mine = bodies[bodies["scenario_id"] == first].sort_values("body_id")
        keys = [c for c in ("shape", "mass", "radius", "hx", "hy", "hz", "material")
                if c in bodies.columns]
        if scenario is None and len(bodies.drop_duplicates(keys + ["body_id"])) != len(mine):
            notes.append(f"the scenarios' bodies differ: the scene holds scenario {first}'s")
        out = []
        for _, row in mine.iterrows():
            material = _material(row)
            scale = fitted.value("inertia_scale", material)
            m = float(row["mass"])
            if row["shape"] == "sphere":
                r = float(row["radius"])
                size, inertia = (r,), (0.4 * m * r * r,) * 3
            else:
                size = tuple(float(row[c]) for c in ("hx", "hy", "hz"))
                inertia = tuple(float(row[c]) for c in ("ixx", "iyy", "izz"))
            com = tuple(float(row[f"com_{a}"]) if f"com_{a}" in row else 0.0 for a in "xyz")
            com = tuple(c + fitted.value(f"com_{a}", material) for c, a in zip(com, "xyz"))
            quat = tuple(float(row[c]) for c in ("qw0", "qx0", "qy0", "qz0")) if (
                "qw0" in row) else (1.0, 0.0, 0.0, 0.0)
            out.append(Body(int(row["body_id"]), str(row["shape"]), size, m,
                            tuple(scale * i for i in inertia), com, material,
                            tuple(float(row[c]) for c in ("x0", "y0", "z0")), quat))
        walls = []
        if "walls" in ds.tables:
            w = ds.tables["walls"].to_pandas()
            w = w[(w["scenario_id"] == first) | (w["scenario_id"] == "*")].sort_values("wall_id")
            for _, row in w.iterrows():
                n = np.array([row["nx"], row["ny"], row["nz"]], dtype=np.float64)
                scale = float(np.linalg.norm(n))
                height = row["height"] if "height" in row else None
                walls.append(Wall(int(row["wall_id"]), tuple(n / scale), float(row["d"]) / scale,
                                  _material(row), None if height is None or height != height
                                  else float(height)))
        dts = ds.tables["scenarios"].column("dt").to_pylist() if (
            "scenarios" in ds.tables and "dt" in ds.tables["scenarios"].column_names) else []
        gravity = fitted.params.get("gravity", ds.gravity)
        normal = tuple(float(c) for c in ground_normal(fitted.value("tilt_x"),
                                                       fitted.value("tilt_y")))
        return cls(ds.name, first, tuple(out), tuple(walls),
                   ds.ground_z + fitted.value("ground_offset"), normal, float(gravity),
                   ds.model.cone, float(np.median(dts)) if dts else 0.0, tuple(notes))
