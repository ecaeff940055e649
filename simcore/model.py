"""Model (what a run does not change) and State (what a step advances).

Both are structure-of-arrays over a batch of scenarios, padded to the largest
scenario: ``nscen`` scenarios, at most ``nbody <= 32`` bodies and ``nwall``
walls each.

Conventions (SI units, float64):

* the ground is the plane ``z = ground_z``; gravity ``g`` acts along ``-z``;
* a wall is the plane ``n . p = d`` with unit normal ``n`` pointing into the
  free side (a sphere of radius r is clear of it while ``n . p - d >= r``);
* a control force acts on one body, constant over the window ``[t0, t1)``;
* times are absolute: a scenario runs from ``State.time`` to ``scen_t_end``.

Build a batch with :func:`build` from :class:`Scenario` descriptions; every
input is validated there with an error naming the scenario, body and field.
"""

from dataclasses import dataclass, field, replace

import numpy as np

from . import params as P
from .geometry import shapes as shape_table
from .geometry.collision import SHAPE_NAMES, SHAPE_SPHERE, check_shapes
from .geometry.rigid import ground_normal
from .laws import penalty
from .laws import registry as contact_laws
from .sliding.integrate import RIGID, choose

MAX_BODIES = 32


@dataclass
class Scenario:
    """One scenario as a user writes it (validated by :func:`build`).

    ``radius``, ``mass`` (nbody,); ``pos``, ``vel`` (nbody, 3) at ``t0``;
    ``walls`` (nwall, 4) rows ``nx, ny, nz, d``; ``controls`` (nctrl, 6)
    rows ``body, t0, t1, fx, fy, fz``, or (nctrl, 9) with the torques ``tx,
    ty, tz`` [N m] (world frame; spinning balls and rigid bodies only);
    ``t_end`` absolute end time; ``dt`` the step.  ``shape`` is a name per
    body ("sphere", "box");
    ``material`` and ``wall_material`` (one per body, per wall) are material
    names, or ids into :func:`build`'s ``materials`` (1 for the first name;
    0, None or "" for no material, the default).  With the spinning model
    (``build(spin=True)``): ``omega`` (nbody, 3) the initial angular
    velocities [rad/s] (None: zero) and ``wall_height`` (nwall,) each wall's
    nose height above the ground [m] (NaN or None: a vertical plane).
    Rigid bodies (boxes, or any body under a penalty law; see
    :mod:`simcore.geometry.rigid` for the conventions): ``extent`` (nbody, 3) a box's
    half extents [m] (a sphere's row is unread), ``inertia`` (nbody, 3)
    principal inertia [kg m^2] (None or NaN rows: a uniform body), ``fixed``
    (nbody,) bodies that never move, ``quat`` (nbody, 4) orientations
    (None: identity), ``omega`` the angular velocities and ``com`` (nbody, 3)
    a box's centre of mass in its body frame from its centre [m] (None: the
    centre; ``pos``, ``vel`` and the samples stay the centre's, ``inertia``
    is about the centre of mass); ``radius`` is read for spheres only.
    ``dt`` None: the time-stepper's stable step.
    """

    radius: np.ndarray
    mass: np.ndarray
    pos: np.ndarray
    vel: np.ndarray
    t_end: float
    dt: float = 1e-3
    t0: float = 0.0
    walls: np.ndarray = field(default_factory=lambda: np.zeros((0, 4)))
    controls: np.ndarray = field(default_factory=lambda: np.zeros((0, 6)))
    shape: tuple | None = None
    material: np.ndarray | None = None
    wall_material: np.ndarray | None = None
    name: str = ""
    omega: np.ndarray | None = None
    wall_height: np.ndarray | None = None
    extent: np.ndarray | None = None
    inertia: np.ndarray | None = None
    fixed: np.ndarray | None = None
    quat: np.ndarray | None = None
    com: np.ndarray | None = None


@dataclass(frozen=True)
class Model:
    """Constants of a batch of scenarios (see module docstring for conventions).

    ``body_count (nscen,)``; ``body_shape``, ``body_material (nscen, nbody)``
    int64; ``body_radius``, ``body_mass (nscen, nbody)``; ``wall_count
    (nscen,)``; ``wall_normal (nscen, nwall, 3)``; ``wall_offset``,
    ``wall_material (nscen, nwall)``; controls in CSR form: scenario ``s``
    owns rows ``ctrl_ptr[s]:ctrl_ptr[s+1]`` of ``ctrl_body``, ``ctrl_t0``,
    ``ctrl_t1 (nctrl,)``, ``ctrl_force`` and ``ctrl_torque (nctrl, 3)``
    (torques: spinning balls and rigid bodies only); ``scen_t_end``,
    ``scen_dt (nscen,)``; ``params (P,)``, the coefficient vector of
    ``layout`` (:class:`simcore.params.Layout`: its names, and the tables
    through which each contact reads it), or ``(nscen, P)``: a row of
    coefficients per scenario, as the finite differences run perturbed
    copies of scenarios side by side;
    scalars ``gravity`` [m/s^2], ``ground_z`` [m] and the integrator code;
    ``wall_height (nscen, nwall)`` the cushions' nose heights above the
    ground [m] (NaN: a vertical plane; the spinning model reads it).
    The time-stepper's rigid bodies (``integrator`` ``penalty``):
    ``body_ext``, ``body_inertia (nscen, nbody, 3)`` half extents (a sphere's
    radius thrice) and principal inertia, ``body_fixed (nscen, nbody)``
    bool; ``cone`` the friction cone (:data:`simcore.laws.penalty.CONES`);
    ``scen_dt`` is then the step it takes at most (the stability guard's,
    when the scenario's own was longer); ``notes`` what :func:`build` has to
    say about the batch (one line each: sub-stepping).
    """

    body_count: np.ndarray
    body_shape: np.ndarray
    body_radius: np.ndarray
    body_mass: np.ndarray
    body_material: np.ndarray
    wall_count: np.ndarray
    wall_normal: np.ndarray
    wall_offset: np.ndarray
    wall_material: np.ndarray
    ctrl_ptr: np.ndarray
    ctrl_body: np.ndarray
    ctrl_t0: np.ndarray
    ctrl_t1: np.ndarray
    ctrl_force: np.ndarray
    scen_t_end: np.ndarray
    scen_dt: np.ndarray
    params: np.ndarray
    layout: P.Layout
    gravity: float = 9.81
    ground_z: float = 0.0
    integrator: int = 0
    names: tuple = ()
    wall_height: np.ndarray | None = None
    body_ext: np.ndarray | None = None
    body_inertia: np.ndarray | None = None
    body_fixed: np.ndarray | None = None
    body_com: np.ndarray | None = None
    cone: int = 0
    notes: tuple = ()
    ctrl_torque: np.ndarray | None = None

    def __post_init__(self):
        if self.ctrl_torque is None:
            object.__setattr__(self, "ctrl_torque", np.zeros_like(self.ctrl_force))

    @property
    def nscen(self):
        return int(self.body_count.shape[0])

    @property
    def spin(self):
        """Whether the spheres spin (:mod:`simcore.spin.spin`): the layout's model."""
        return self.layout.spin

    def with_params(self, values):
        """A new model with other coefficients: a mapping (per-material names
        not yet in the layout are added to it), a full vector of the layout
        (shared by every scenario), or ``(nscen, P)`` (a row each)."""
        if isinstance(values, dict):
            layout = self.layout.extend(values)
            return replace(self, params=layout.vector(values), layout=layout)
        vec = np.array(values, dtype=np.float64)
        self.layout.validate_rows(vec, self.nscen)
        return replace(self, params=vec)

    def with_coefficients(self, names):
        """This model with the per-material entries ``names`` added to its
        layout, each at its plain name's current value."""
        layout = self.layout.extend(names)
        if layout is self.layout:
            return self
        if self.params.ndim == 2:
            rows = [layout.vector(self.layout.as_dict(r)) for r in self.params]
            return replace(self, params=np.array(rows), layout=layout)
        return replace(self, params=layout.vector(self.layout.as_dict(self.params)),
                       layout=layout)

    def subset(self, scen):
        """The scenarios ``scen`` (indices, in that order) as a model of their own."""
        scen = np.asarray(scen, np.int64)
        rows = (np.concatenate([np.arange(self.ctrl_ptr[s], self.ctrl_ptr[s + 1]) for s in scen])
                if scen.size else np.zeros(0, np.int64)).astype(np.int64)
        ptr = np.zeros(scen.size + 1, np.int64)
        ptr[1:] = np.cumsum(self.ctrl_ptr[scen + 1] - self.ctrl_ptr[scen])
        per_scen = ("body_count", "body_shape", "body_radius", "body_mass", "body_material",
                    "wall_count", "wall_normal", "wall_offset", "wall_material",
                    "scen_t_end", "scen_dt") + tuple(
            f for f in ("wall_height", "body_ext", "body_inertia", "body_fixed", "body_com")
            if getattr(self, f) is not None)
        per_ctrl = ("ctrl_body", "ctrl_t0", "ctrl_t1", "ctrl_force", "ctrl_torque")
        return replace(self, ctrl_ptr=ptr,
                       params=self.params[scen] if self.params.ndim == 2 else self.params,
                       names=tuple(self.names[s] for s in scen) if self.names else (),
                       **{f: getattr(self, f)[scen] for f in per_scen},
                       **{f: getattr(self, f)[rows] for f in per_ctrl})


def _layout(scenarios, materials, coefficients, params, laws, spin, gravity):
    """The coefficient layout of a batch (see :func:`build`)."""
    if materials is None:
        used = [m for sc in scenarios for col in (sc.material, sc.wall_material)
                if col is not None for m in np.asarray(col, object).ravel()]
        names = sorted({m for m in used if isinstance(m, str) and m})
        ids = [int(m) for m in used if not isinstance(m, str) and m is not None]
        if names and any(ids):
            raise ValueError("scenario materials: names and integer ids mixed; give the "
                             "names as build(materials=...)")
        materials = names or [f"m{k}" for k in range(1, max(ids, default=0) + 1)]
    named = list(params) if isinstance(params, dict) else []
    return P.Layout.build(materials, list(coefficients) + named, laws, spin,
                          {"gravity": gravity})


def _material_ids(values, layout, n, label):
    """Material ids of ``n`` bodies or walls from names or ids (see :class:`Scenario`)."""
    values = list(np.asarray(values, object).ravel())
    if len(values) != n:
        raise ValueError(f"{label}: {len(values)} materials for {n}")
    out = np.zeros(n, np.int64)
    for k, v in enumerate(values):
        if isinstance(v, str) or v is None:
            out[k] = layout.material_id(v)
        elif not 0 <= int(v) <= len(layout.materials):
            raise ValueError(f"{label} {k}: material id {v}: expected 0 (none) to "
                             f"{len(layout.materials)}")
        else:
            out[k] = int(v)
    return out


@dataclass
class State:
    """What the engine advances: ``body_pos``, ``body_vel``, ``body_omega``
    (nscen, nbody, 3), ``time (nscen,)`` and ``body_quat (nscen, nbody, 4)``
    (orientations, scalar first, body to world; identity for spheres).
    ``body_omega`` is carried from the start and stays zero in the patent's
    sliding model."""

    body_pos: np.ndarray
    body_vel: np.ndarray
    body_omega: np.ndarray
    time: np.ndarray
    body_quat: np.ndarray | None = None

    def __post_init__(self):
        if self.body_quat is None:
            self.body_quat = np.zeros(self.body_pos.shape[:2] + (4,))
            self.body_quat[..., 0] = 1.0

    def copy(self):
        return State(self.body_pos.copy(), self.body_vel.copy(),
                     self.body_omega.copy(), self.time.copy(), self.body_quat.copy())

    def subset(self, scen):
        scen = np.asarray(scen, np.int64)
        return State(self.body_pos[scen], self.body_vel[scen], self.body_omega[scen],
                     self.time[scen], self.body_quat[scen])


def _label(sc, s):
    return f"scenario {sc.name!r}" if sc.name else f"scenario {s}"


def _finite(label, what, arr):
    bad = ~np.isfinite(arr)
    if bad.any():
        idx = tuple(int(x) for x in np.argwhere(bad)[0])
        raise ValueError(f"{label}: {what}{list(idx)} = {arr[bad][0]}: expected a finite number")


def _check_scenario(sc, s):
    """Validate one scenario; return normalised float64 arrays."""
    label = _label(sc, s)
    radius = np.asarray(sc.radius, dtype=np.float64).reshape(-1)
    mass = np.asarray(sc.mass, dtype=np.float64).reshape(-1)
    nb = radius.shape[0]
    if nb == 0:
        raise ValueError(f"{label}: no bodies")
    if nb > MAX_BODIES:
        raise ValueError(f"{label}: {nb} bodies, expected at most {MAX_BODIES}")
    if mass.shape[0] != nb:
        raise ValueError(f"{label}: {mass.shape[0]} masses for {nb} radii")
    pos = np.array(sc.pos, dtype=np.float64).reshape(nb, 3)  # a copy: build may move it out
    vel = np.array(sc.vel, dtype=np.float64).reshape(nb, 3)
    walls = np.asarray(sc.walls, dtype=np.float64).reshape(-1, 4)
    controls = np.asarray(sc.controls, dtype=np.float64)
    width = controls.shape[-1] if controls.ndim == 2 else 6
    if width not in (6, 9):
        raise ValueError(f"{label}: controls have {width} columns: expected 6 (body, t0, t1, "
                         "fx, fy, fz) or 9 (and tx, ty, tz)")
    controls = np.hstack([controls.reshape(-1, width), np.zeros((controls.size // width,
                                                                 9 - width))])
    shapes = sc.shape if sc.shape is not None else ("sphere",) * nb
    if len(shapes) != nb:
        raise ValueError(f"{label}: {len(shapes)} shapes for {nb} bodies")
    shape_codes = np.empty(nb, dtype=np.int64)
    for i, name in enumerate(shapes):
        if name not in SHAPE_NAMES:
            raise ValueError(f"{label} body {i}: shape = {name!r}: expected one of {list(SHAPE_NAMES)}")
        shape_codes[i] = SHAPE_NAMES.index(name)
    round_ = shape_table.flags(shape_codes, "reads_radius")
    for what, arr in (("radius", radius[round_]), ("mass", mass), ("pos", pos), ("vel", vel),
                      ("walls", walls), ("controls", controls)):
        _finite(label, what, arr)
    for what, x in (("t0", sc.t0), ("t_end", sc.t_end)) + ((("dt", sc.dt),) if sc.dt is not None
                                                          else ()):
        if not np.isfinite(x):
            raise ValueError(f"{label}: {what} = {x}: expected a finite number")
    if sc.dt is not None and sc.dt <= 0:
        raise ValueError(f"{label}: dt = {sc.dt}: expected dt > 0")
    if sc.t_end < sc.t0:
        raise ValueError(f"{label}: t_end = {sc.t_end} < t0 = {sc.t0}")
    for i in range(nb):
        if round_[i] and radius[i] <= 0:
            raise ValueError(f"{label} body {i}: radius = {radius[i]}: expected radius > 0")
        if mass[i] <= 0:
            raise ValueError(f"{label} body {i}: mass = {mass[i]}: expected mass > 0")
    norms = np.linalg.norm(walls[:, :3], axis=1)
    for k in range(walls.shape[0]):
        if norms[k] == 0:
            raise ValueError(f"{label} wall {k}: normal is zero: expected a non-zero (nx, ny, nz)")
    walls = walls.copy()
    walls[:, :3] /= norms[:, None] if walls.shape[0] else 1.0
    walls[:, 3] /= norms if walls.shape[0] else 1.0
    for q in range(controls.shape[0]):
        b = controls[q, 0]
        if b != int(b) or not 0 <= b < nb:
            raise ValueError(f"{label} control {q}: body = {b}: expected an index in [0, {nb})")
        if controls[q, 2] < controls[q, 1]:
            raise ValueError(f"{label} control {q}: t1 = {controls[q, 2]} < t0 = {controls[q, 1]}")
    return radius, mass, pos, vel, walls, controls, shape_codes


#: Initial penetration [m] of the ground, a wall or another body that is
#: taken as touching: measured positions carry noise, and a body pressed into
#: a surface (a soft-contact simulator's, or a tracker's) sits slightly inside
#: it.  Within this the body is moved out along the normal (a pair: each by
#: half) and starts in contact; beyond it the scenario is refused.
TOUCH_TOL = 1e-3


def _check_geometry(label, radius, pos, walls, ground_z):
    """Ground, wall and overlap checks at the initial configuration; a
    penetration within :data:`TOUCH_TOL` is moved out (``pos`` is updated,
    one pass in the order ground, walls, pairs) and checked again."""
    nb = radius.shape[0]
    for i in range(nb):
        depth = ground_z + radius[i] - pos[i, 2]
        if depth > TOUCH_TOL:
            raise ValueError(
                f"{label} body {i}: z = {pos[i, 2]} puts the sphere {depth:.3g} m below the "
                f"ground (expected z >= ground_z + radius = {ground_z + radius[i]}, or within "
                f"{TOUCH_TOL:g} m of it: touching)")
        if depth > 0.0:
            pos[i, 2] = ground_z + radius[i]
        for k in range(walls.shape[0]):
            n = walls[k, :3]  # unit (normalised by _check_scenario)
            gap = n @ pos[i] - walls[k, 3] - radius[i]
            if gap < -TOUCH_TOL:
                raise ValueError(f"{label} body {i}: penetrates wall {k} by {-gap:.3g} m at the "
                                 f"start (more than the {TOUCH_TOL:g} m taken as touching)")
            if gap < 0.0:
                pos[i] -= gap * n
    for i in range(nb):
        for j in range(i + 1, nb):
            d = pos[j] - pos[i]
            dist = np.linalg.norm(d)
            gap = dist - radius[i] - radius[j]
            if gap < -TOUCH_TOL or dist == 0.0:
                raise ValueError(f"{label} bodies {i} and {j}: overlap by {-gap:.3g} m at the "
                                 f"start (more than the {TOUCH_TOL:g} m taken as touching)")
            if gap < 0.0:
                pos[i] += 0.5 * gap * d / dist
                pos[j] -= 0.5 * gap * d / dist
    for i in range(nb):  # moving out of one surface may not push into another
        bad = pos[i, 2] - radius[i] < ground_z - 1e-12 or any(
            walls[k, :3] @ pos[i] - walls[k, 3] - radius[i] < -1e-12
            for k in range(walls.shape[0]))
        bad = bad or any(np.linalg.norm(pos[j] - pos[i]) - radius[i] - radius[j] < -1e-12
                         for j in range(i + 1, nb))
        if bad:
            raise ValueError(f"{label} body {i}: touches several surfaces inside the "
                             f"{TOUCH_TOL:g} m tolerance in a way no move out of each resolves")


def _check_spin(label, sc, radius, mass, pos, vel, walls, controls, ground_z, gravity, spin):
    """The spinning model's inputs of one scenario: ``(omega (nb, 3),
    wall_height (nw,))``.  It runs spheres on the ground (pooltool's table:
    centres at ``ground_z + radius``, no vertical velocity) between vertical
    walls; the sliding model takes neither spin nor nose heights."""
    nb = radius.shape[0]
    omega = np.zeros((nb, 3)) if sc.omega is None else np.asarray(
        sc.omega, dtype=np.float64).reshape(nb, 3)
    height = np.full(walls.shape[0], np.nan) if sc.wall_height is None else np.asarray(
        sc.wall_height, dtype=np.float64).reshape(walls.shape[0])
    _finite(label, "omega", omega)
    if not spin:
        if np.any(omega != 0.0):
            raise ValueError(f"{label}: bodies are given an angular velocity, but the model "
                             "does not spin; add model: {spin: true} to dataset.yaml")
        if np.any(~np.isnan(height)):
            raise ValueError(f"{label}: walls are given a nose height, which only the "
                             "spinning model reads; add model: {spin: true} to dataset.yaml")
        return omega, height
    for k in range(walls.shape[0]):
        if not (np.isnan(height[k]) or (np.isfinite(height[k]) and height[k] > 0.0)):
            raise ValueError(f"{label} wall {k}: height = {height[k]}: expected a number > 0 "
                             "(the nose line above the ground, m)")
        if abs(walls[k, 2]) > 1e-12:
            raise ValueError(f"{label} wall {k}: normal ({walls[k, 0]:g}, {walls[k, 1]:g}, "
                             f"{walls[k, 2]:g}) is not horizontal: the spinning model's walls "
                             "are cushions, vertical planes")
        walls[k, 2] = 0.0
    for i in range(nb):
        lift = pos[i, 2] - ground_z - radius[i]
        if abs(lift) > TOUCH_TOL:
            raise ValueError(f"{label} body {i}: z = {pos[i, 2]}: the spinning model runs "
                             f"spheres on the ground (expected z = ground_z + radius = "
                             f"{ground_z + radius[i]}, within {TOUCH_TOL:g} m)")
        pos[i, 2] = ground_z + radius[i]
        if abs(vel[i, 2]) > 1e-9:
            raise ValueError(f"{label} body {i}: vz = {vel[i, 2]}: the spinning model runs "
                             "spheres on the ground (expected vz = 0)")
        vel[i, 2] = 0.0
    for q in range(controls.shape[0]):
        b = int(controls[q, 0])
        if controls[q, 5] >= mass[b] * gravity:
            raise ValueError(f"{label} control {q}: fz = {controls[q, 5]} N lifts body {b} "
                             f"(weight {mass[b] * gravity:.4g} N): the spinning model keeps "
                             "balls on the cloth")
    return omega, height


def _rows(label, what, values, nb, width, default):
    """``values`` as an ``(nb, width)`` float64 array (None: ``default``)."""
    if values is None:
        return np.array(default, np.float64)
    arr = np.asarray(values, dtype=np.float64)
    if arr.size != nb * width:
        raise ValueError(f"{label}: {what} has {arr.size} values for {nb} bodies "
                         f"({width} each)")
    return arr.reshape(nb, width).copy()


def _check_rigid(label, sc, shapes, radius, mass, pos, vel, walls, ground):
    """The rigid bodies of one scenario (the time-stepper's): ``(ext, inertia,
    fixed, quat, omega, com)``, each validated with an error naming the body and
    the field; a moving body within :data:`TOUCH_TOL` below the ground
    (``(normal, offset)``: :func:`_ground`) or behind a wall is moved out
    (``pos`` updated), deeper is an error."""
    nb = radius.shape[0]
    if sc.wall_height is not None and np.any(~np.isnan(np.asarray(sc.wall_height, float))):
        raise ValueError(f"{label}: walls are given a nose height, which only the spinning "
                         "model reads (rigid bodies meet walls as planes)")
    round_ = shape_table.flags(shapes, "reads_radius")
    ext = _rows(label, "extent", sc.extent, nb, 3, np.full((nb, 3), np.nan))
    ext[round_] = radius[round_, None]
    names = ("hx", "hy", "hz")
    for i in np.flatnonzero(~round_):
        for a in range(3):
            if not (np.isfinite(ext[i, a]) and ext[i, a] > 0):
                raise ValueError(f"{label} body {i}: {names[a]} = {ext[i, a]}: expected a "
                                 "half extent > 0 [m] (a box)")
    quat = _rows(label, "quat", sc.quat, nb, 4, np.tile([1.0, 0, 0, 0], (nb, 1)))
    _finite(label, "quat", quat)
    for i in range(nb):
        norm = np.linalg.norm(quat[i])
        if abs(norm - 1.0) > 1e-6:
            raise ValueError(f"{label} body {i}: quaternion (qw0, qx0, qy0, qz0) = "
                             f"{tuple(float(x) for x in quat[i])} has norm {norm:.9g}: expected "
                             "a unit quaternion (norm 1 within 1e-6)")
        quat[i] /= norm
    omega = _rows(label, "omega", sc.omega, nb, 3, np.zeros((nb, 3)))
    _finite(label, "omega", omega)
    com = _rows(label, "com", sc.com, nb, 3, np.zeros((nb, 3)))
    _finite(label, "com", com)
    for i in np.flatnonzero(np.any(com != 0.0, axis=1)):
        if not shape_table.of(shapes[i]).takes_com:
            raise ValueError(f"{label} body {i}: a {SHAPE_NAMES[shapes[i]]} with a centre of "
                             "mass (com_x, com_y, com_z) off its centre: only boxes take one")
        out = np.flatnonzero(np.abs(com[i]) >= ext[i])
        if out.size:
            a = int(out[0])
            raise ValueError(f"{label} body {i}: {('com_x', 'com_y', 'com_z')[a]} = "
                             f"{com[i, a]:g}: expected inside the box (|{'xyz'[a]}| < "
                             f"{('hx', 'hy', 'hz')[a]} = {ext[i, a]:g} m)")
    fixed = (np.zeros(nb, bool) if sc.fixed is None
             else np.asarray(sc.fixed, dtype=bool).reshape(nb).copy())
    inertia = _rows(label, "inertia", sc.inertia, nb, 3, np.full((nb, 3), np.nan))
    names = ("ixx", "iyy", "izz")
    for i in range(nb):
        if np.all(np.isnan(inertia[i])):
            inertia[i] = shape_table.of(shapes[i]).inertia(mass[i], ext[i])
        for a in range(3):
            if not (np.isfinite(inertia[i, a]) and inertia[i, a] > 0):
                raise ValueError(f"{label} body {i}: {names[a]} = {inertia[i, a]}: expected a "
                                 "principal moment of inertia > 0 [kg m^2]")
        lo = np.sort(inertia[i])
        if lo[0] + lo[1] < lo[2] * (1 - 1e-9):
            raise ValueError(f"{label} body {i}: inertia ({', '.join(f'{x:g}' for x in inertia[i])}) "
                             "breaks the triangle inequality (no body has these principal moments)")
        if fixed[i] and (np.any(vel[i] != 0) or np.any(omega[i] != 0)):
            raise ValueError(f"{label} body {i}: fixed, but given a velocity: a fixed body "
                             "never moves")
    planes = [(*ground, "the ground")] + [
        (walls[k, :3], walls[k, 3], f"wall {k}") for k in range(walls.shape[0])]
    for i in np.flatnonzero(~fixed):
        for n, d, what in planes:
            depth = d - shape_table.of(shapes[i]).support(pos[i], quat[i], ext[i], n)
            if depth > TOUCH_TOL:
                raise ValueError(f"{label} body {i}: starts {depth:.3g} m {'below' if what == 'the ground' else 'behind'} "
                                 f"{what} (more than the {TOUCH_TOL:g} m taken as touching)")
            if depth > 0.0:
                pos[i] += depth * n
    return ext, inertia, fixed, quat, omega, com


def _ground(layout, vec, ground_z):
    """The ground plane ``(normal, offset)`` of the time-steppers under the
    vector ``vec``'s tilt (:func:`simcore.geometry.rigid.ground_normal`; level
    where the layout holds none), through ``(0, 0, ground_z)``."""
    tilt = [vec[q] if q >= 0 else 0.0 for q in layout.scene[1:]]
    n = np.array(ground_normal(*tilt))
    return n, n[2] * ground_z


def _stable_step(law, model, state, s, bodies, gravity):
    """The largest step [s] the stiffest contact of a scenario allows
    (:func:`simcore.laws.penalty.stable_step`): each moving body against the
    ground and the walls, and against the other bodies, with the effective
    mass of a contact at its farthest point from the centre of mass
    (``1/m + r^2 / I_min``, ``r = |arm|``: a box's ``ext + |c|`` for its
    half extents and centre of mass ``c``), met at
    the fastest speed its energy allows (kinetic, potential above the
    ground, and the controls' impulses) and pressed by the weight of every
    moving body.

    ``law``: ``(rows, codes, vec)``, the layout's penalty rows per kind, its
    law codes and the coefficient vector; ``bodies``: scenario ``s``'s
    ``(mass, arm, inertia, fixed, shapes, controls)`` as checked, with the
    body's own coefficients applied; ``gravity``: the vector's, or the
    model's."""
    rows, codes, vec = law
    mass, arm, inertia, fixed, shapes, controls = bodies
    nb = mass.shape[0]
    material = model.body_material[s, :nb]
    wall_mat = model.wall_material[s, :model.wall_count[s]]
    pos, vel, omega = state.body_pos[s, :nb], state.body_vel[s, :nb], state.body_omega[s, :nb]
    ground_z = model.ground_z
    ground, body, wall = rows  # the layout's penalty_rows, per kind
    moving = ~fixed
    weight = float(np.sum(mass[moving])) * gravity
    reach = shape_table.by_shape(shapes, "lever", arm)
    m_eff = 1.0 / (1.0 / mass + reach ** 2 / inertia.min(axis=1))
    kick = np.zeros(mass.shape[0])
    for row in controls:
        kick[int(row[0])] += np.linalg.norm(row[3:6]) * (row[2] - row[1]) / mass[int(row[0])]
    height = np.maximum(pos[:, 2] - ground_z, 0.0) + reach
    speed = (np.sqrt(np.sum(vel ** 2, axis=1) + (np.linalg.norm(omega, axis=1) * reach) ** 2
                     + 2.0 * gravity * height) + kick)
    v = float(np.max(speed[moving], initial=0.0))
    h = np.inf
    for i in np.flatnonzero(moving):
        me = float(m_eff[i])
        cases = [(codes[0], ground[material[i]], me)]
        cases += [(codes[2], wall[material[i], wm], me) for wm in wall_mat]
        cases += [(codes[1], body[material[i], material[j]],
                   me if fixed[j] else 1.0 / (1.0 / me + 1.0 / m_eff[j]))
                  for j in range(mass.shape[0]) if j != i]
        for code, pair_rows, pair_mass in cases:
            row = np.zeros(penalty.NCOEF)
            row[:len(pair_rows)] = [vec[r] if r >= 0 else 0.0 for r in pair_rows]
            penalty.derive(row)
            h = min(h, penalty.stable_step(int(code), row, pair_mass, v, weight))
    return h


def build(scenarios, params=None, gravity=9.81, ground_z=0.0, integrator=None,
          materials=None, coefficients=(), laws=None, spin=False, cone="elliptic",
          strict=False):
    """Validate scenarios and pack them into a ``(Model, State)`` pair.

    ``integrator``: a registered name (checked against the shapes), or None
    for the first registered one that runs them
    (:func:`simcore.sliding.integrate.choose`).  ``materials``: the material names
    (ids 1, 2, ... of the scenarios' integer materials); None takes the
    sorted names the scenarios use, or ``m1``, ``m2``, ... for integer ids.
    The layout has the per-material entries ``coefficients`` and those that
    ``params`` (a mapping, or a vector of that layout) names; ``laws`` the
    contact law of each kind (``{kind: name}``, :mod:`simcore.laws.registry`; absent:
    the impulse law everywhere, or ``hunt_crossley`` for boxes and beside
    another penalty law); ``spin`` the spinning model (:mod:`simcore.spin.spin`:
    spheres on the ground that slide, roll and spin).  Boxes or penalty laws
    run on the time-stepper (:mod:`simcore.rigid.rigid_engine`) with the friction
    ``cone`` (``elliptic`` or ``pyramidal``); a scenario whose ``dt`` is over
    its contacts' stable step (or None) is sub-stepped and
    ``Model.notes`` says so, or, with ``strict``, refused.  The patent's
    impulse-law spheres on integrator ``moreau`` take an infinite inertia
    (the sliding model's spheres do not turn; :mod:`simcore.rigid.moreau`).
    """
    if integrator is not None:
        choose((), integrator)  # an unknown name fails before the scenarios are checked
    if not (np.isfinite(gravity) and gravity >= 0):
        raise ValueError(f"gravity = {gravity}: expected a finite number >= 0")
    if not np.isfinite(ground_z):
        raise ValueError(f"ground_z = {ground_z}: expected a finite number")
    if cone not in penalty.CONES:
        raise ValueError(f"cone = {cone!r}: expected one of {list(penalty.CONES)}")
    boxes = any("box" in tuple(sc.shape or ()) for sc in scenarios)
    laws = contact_laws.resolve(laws, None, boxes, impacts=False)
    family = contact_laws.family(laws)
    layout = _layout(scenarios, materials, coefficients, params, laws, spin, gravity)
    vec = (layout.vector(params) if params is None or isinstance(params, dict)
           else np.asarray(params, np.float64))
    layout.validate(vec)
    arrays_of = [_check_scenario(sc, s) for s, sc in enumerate(scenarios)]
    if not arrays_of:
        raise ValueError("no scenarios")
    shapes = {SHAPE_NAMES[c] for a in arrays_of for c in np.unique(a[6])}
    chosen = integrator_for(shapes, integrator, laws, spin)
    rigid_model = chosen.code in RIGID
    # the patent's sliding spheres on the Moreau-Jean stepper: they do not turn
    frozen = rigid_model and family != penalty.FAMILY
    checked, rigids = [], []
    for s, (sc, arrays) in enumerate(zip(scenarios, arrays_of)):
        if rigid_model:
            rigids.append(_check_rigid(_label(sc, s), sc, arrays[6], arrays[0], arrays[1],
                                       arrays[2], arrays[3], arrays[4],
                                       _ground(layout, vec, ground_z)))
            spun = (rigids[-1][4], np.full(arrays[4].shape[0], np.nan))
            if frozen:
                _check_spin(_label(sc, s), sc, *arrays[:6], ground_z, gravity, False)
                _no_torques(_label(sc, s), arrays[5])
        else:
            if sc.dt is None:
                raise ValueError(f"{_label(sc, s)}: dt = None: expected a step > 0 (only the "
                                 "time-stepper of boxes and penalty laws chooses its own)")
            _check_geometry(_label(sc, s), arrays[0], arrays[2], arrays[4], ground_z)
            spun = _check_spin(_label(sc, s), sc, arrays[0], arrays[1], arrays[2], arrays[3],
                               arrays[4], arrays[5], ground_z, gravity, spin)
            if not spin:
                _no_torques(_label(sc, s), arrays[5])
        checked.append(arrays + spun)
    fields, state = _pack(scenarios, checked, layout)
    if not rigid_model:
        check_shapes(shapes)
    names = tuple(sc.name or str(s) for s, sc in enumerate(scenarios))
    model = Model(**fields, params=vec, layout=layout, gravity=float(gravity),
                  ground_z=float(ground_z), integrator=chosen.code, names=names)
    if rigid_model:
        moreau = chosen.name == "moreau"
        if moreau and not np.all(np.isfinite(model.scen_dt)):
            raise ValueError("integrator moreau: every scenario needs its dt (the Moreau-Jean "
                             "step has no stiffness to choose one from)")
        model = _with_rigid(model, state, checked, rigids, penalty.CONES.index(cone), strict,
                            guard=not moreau)
        if frozen:
            model.body_inertia[...] = np.inf
    return model, state


def integrator_for(shapes, name, laws, spin):
    """The :class:`~simcore.sliding.integrate.Integrator` of a batch of
    these shape names under ``laws`` (resolved, ``{kind: name}``) and
    ``spin``: ``name``, checked (a ``ValueError`` says what it cannot run),
    or None for the first registered that runs it."""
    chosen = choose(shapes, name, contact_laws.family(laws))
    if chosen.code in RIGID and contact_laws.family(laws) != penalty.FAMILY:
        _refuse_on_moreau(laws, spin)
    return chosen


def _refuse_on_moreau(laws, spin):
    """The patent's impulse-law models the Moreau-Jean stepper runs: the
    sliding spheres under the ``impulse`` law on every contact kind (a
    ``ValueError`` names the kind or the spinning model it does not run)."""
    if spin:
        raise ValueError("integrator moreau does not run the spinning model (model: {spin: "
                         "true}): its balls' rolling and spinning friction are the spinning "
                         "engine's; use integrator exact")
    for kind, name in laws.items():
        if name != contact_laws.DEFAULT:
            raise ValueError(f"integrator moreau runs the impulse family's {contact_laws.DEFAULT!r} "
                             f"law only; {kind}: {name!r} has no Moreau-Jean counterpart (use "
                             "integrator exact)")


def _no_torques(label, controls):
    """Refuse controls with torques on spheres that do not turn."""
    if np.any(controls[:, 6:9] != 0.0):
        raise ValueError(f"{label}: controls give torques (tx, ty, tz), which turn spinning balls "
                         "(model: {spin: true}) and rigid bodies only: the sliding model's "
                         "spheres do not rotate")


def _pack(scenarios, checked, layout):
    """The checked scenarios packed into ``(fields, state)``: the Model's
    per-scenario arrays by name (padded to the widest scenario) and the
    initial State."""
    nscen = len(checked)
    nbmax = max(a[0].shape[0] for a in checked)
    nwmax = max(1, max(a[4].shape[0] for a in checked))
    nctrl = sum(a[5].shape[0] for a in checked)

    body_count = np.zeros(nscen, np.int64)
    body_shape = np.full((nscen, nbmax), SHAPE_SPHERE, np.int64)
    body_radius = np.ones((nscen, nbmax))
    body_mass = np.ones((nscen, nbmax))
    body_material = np.zeros((nscen, nbmax), np.int64)
    wall_count = np.zeros(nscen, np.int64)
    wall_normal = np.zeros((nscen, nwmax, 3))
    wall_offset = np.zeros((nscen, nwmax))
    wall_material = np.zeros((nscen, nwmax), np.int64)
    wall_height = np.full((nscen, nwmax), np.nan)
    omega = np.zeros((nscen, nbmax, 3))
    ctrl_ptr = np.zeros(nscen + 1, np.int64)
    ctrl_body = np.zeros(nctrl, np.int64)
    ctrl_t0 = np.zeros(nctrl)
    ctrl_t1 = np.zeros(nctrl)
    ctrl_force = np.zeros((nctrl, 3))
    ctrl_torque = np.zeros((nctrl, 3))
    scen_t_end = np.zeros(nscen)
    scen_dt = np.zeros(nscen)
    pos = np.zeros((nscen, nbmax, 3))
    vel = np.zeros((nscen, nbmax, 3))
    time = np.zeros(nscen)
    q = 0
    for s, (sc, (radius, mass, p, v, walls, controls, shapes, w, height)) in enumerate(
            zip(scenarios, checked)):
        nb = radius.shape[0]
        nw = walls.shape[0]
        body_count[s] = nb
        body_shape[s, :nb] = shapes
        body_radius[s, :nb] = radius
        body_mass[s, :nb] = mass
        if sc.material is not None:
            body_material[s, :nb] = _material_ids(sc.material, layout, nb, f"{_label(sc, s)} bodies")
        wall_count[s] = nw
        wall_normal[s, :nw] = walls[:, :3]
        wall_offset[s, :nw] = walls[:, 3]
        wall_height[s, :nw] = height
        omega[s, :nb] = w
        if sc.wall_material is not None:
            wall_material[s, :nw] = _material_ids(sc.wall_material, layout, nw,
                                                  f"{_label(sc, s)} walls")
        nc = controls.shape[0]
        ctrl_body[q:q + nc] = controls[:, 0].astype(np.int64)
        ctrl_t0[q:q + nc] = controls[:, 1]
        ctrl_t1[q:q + nc] = controls[:, 2]
        ctrl_force[q:q + nc] = controls[:, 3:6]
        ctrl_torque[q:q + nc] = controls[:, 6:9]
        q += nc
        ctrl_ptr[s + 1] = q
        scen_t_end[s] = sc.t_end
        scen_dt[s] = np.inf if sc.dt is None else sc.dt
        pos[s, :nb] = p
        vel[s, :nb] = v
        time[s] = sc.t0
    fields = dict(body_count=body_count, body_shape=body_shape, body_radius=body_radius,
                  body_mass=body_mass, body_material=body_material, wall_count=wall_count,
                  wall_normal=wall_normal, wall_offset=wall_offset,
                  wall_material=wall_material, ctrl_ptr=ctrl_ptr, ctrl_body=ctrl_body,
                  ctrl_t0=ctrl_t0, ctrl_t1=ctrl_t1, ctrl_force=ctrl_force,
                  scen_t_end=scen_t_end, scen_dt=scen_dt, wall_height=wall_height,
                  ctrl_torque=ctrl_torque)
    return fields, State(pos, vel, omega, time)


def _with_rigid(model, state, checked, rigids, cone, strict, guard=True):
    """``model`` with its rigid bodies (``body_ext``, ``body_inertia``,
    ``body_fixed``, ``body_com``), orientations into ``state``, and, with
    ``guard`` (the penalty stepper), each scenario's step bounded by its
    stable step (:func:`_stable_step`), with a note, or an error when
    ``strict``."""
    nscen, nbmax = model.body_mass.shape
    ext = np.ones((nscen, nbmax, 3))
    inertia = np.ones((nscen, nbmax, 3))
    fixed = np.zeros((nscen, nbmax), bool)
    com = np.zeros((nscen, nbmax, 3))
    dt = model.scen_dt.copy()
    vec = model.params if model.params.ndim == 1 else model.params[0]
    over = []
    rows, codes = model.layout.penalty_rows(), model.layout.law_codes
    # the body's own coefficients and the recording's gravity, where the vector holds them
    rows_m, q_g = model.layout.mass, model.layout.scene[0]
    gravity = vec[q_g] if q_g >= 0 else model.gravity
    for s, (arrays, (e, inert, fx, quat, _, c)) in enumerate(zip(checked, rigids)):
        nb = e.shape[0]
        ext[s, :nb], inertia[s, :nb], fixed[s, :nb], com[s, :nb] = e, inert, fx, c
        state.body_quat[s, :nb] = quat
        model.body_radius[s, :nb] = shape_table.by_shape(arrays[6], "bounding_radius", e)
        own = rows_m[model.body_material[s, :nb]]  # each body's own coefficients' rows
        for i in np.flatnonzero(np.any(own[:, :3] >= 0, axis=1)):
            if not shape_table.of(arrays[6][i]).takes_com:
                raise ValueError(f"{model.names[s]!r} body {i}: a {SHAPE_NAMES[arrays[6][i]]} "
                                 "under a centre of mass coefficient (com_x, com_y, com_z): only "
                                 "boxes take one; address it to the boxes' material "
                                 "(com_z@MAT)")
        if not guard:
            continue
        held = np.where(own >= 0, vec[own], [0.0, 0.0, 0.0, 1.0])
        h = _stable_step((rows, codes, vec), model, state, s,
                         (arrays[1], e + np.abs(c + held[:, :3]), inert * held[:, 3:], fx,
                          arrays[6], arrays[5]), gravity)
        if dt[s] > h:
            over.append((s, dt[s], h))
            dt[s] = h
    notes = ()
    if over:
        s, asked, h = min(over, key=lambda r: r[2])
        given = "no dt" if not np.isfinite(asked) else f"dt = {asked:.3g} s"
        line = (f"{len(over)} of {nscen} scenario(s) sub-stepped to their contacts' stable "
                f"step (smallest: scenario {model.names[s]!r}, {given}, h = {h:.3g} s)")
        if strict and any(np.isfinite(r[1]) for r in over):
            raise ValueError(line.replace("sub-stepped to", "have a dt over") +
                             "; strict: refused (give dt <= h, or soften the contact law)")
        notes = (line,)
    return replace(model, body_ext=ext, body_inertia=inertia, body_fixed=fixed, body_com=com,
                   scen_dt=dt, cone=cone, notes=notes)
