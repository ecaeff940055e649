"""A fit in Drake's terms: an SDFormat file whose collision geometries carry
``drake:proximity_properties`` for Drake's compliant point contact, and,
with a dataset, the scene's bodies (mass, fitted centre of mass and
inertia), its ground and its walls.

Drake's point contact (its documentation, "Modeling of Compliant Contact")
pushes with ``f_n = k x (1 + d x')`` (``x`` the penetration, ``k``
``point_contact_stiffness`` [N/m], ``d`` ``hunt_crossley_dissipation``
[s/m]) and rubs with Coulomb friction ``mu_static`` / ``mu_dynamic`` (its
continuous model's Stribeck curve; its discrete ones take the dynamic one).
This is contactfit's Hunt-Crossley law at ``n_hc = 1`` with a damping that
does not scale with the approach speed:

* ``d = a(e) / v``, ``a(e)`` the root of :func:`simcore.laws.hunt_crossley.alpha`
  at ``v =`` :data:`SPEED`: in continuous time a contact met at that speed
  rebounds at the fitted ratio (the relation between ``a``, ``e`` and the
  rebound holds for any exponent and mass), faster ones a little less
  (contactfit's damping scales with the approach speed, Drake's does not).
  Drake's implicit step dissipates more as the step grows against the
  contact's duration: a 1.8 ms contact exported for e = 0.4 rebounds at
  0.39 at a 0.01 ms step, 0.34 at 0.1 ms (the export says so; its
  ``time_step`` comment is the plant's);
* ``k`` so that the linear spring's contact lasts as long as the fitted
  law's (:func:`simcore.export.contact.drop`) for the body's mass at
  :data:`SPEED`: ``k = m (pi / T)^2``; the fitted law itself when it is
  linear (``spring_damper``: ``k_sd``; ``hunt_crossley`` with ``n_hc = 1``:
  ``k_hc``);
* friction: ``mu_s`` and ``mu_k`` as Drake's static and dynamic ones;
* geometry: against a plane a box's contact is its eight corners, as
  contactfit's is, each a sphere of :data:`CORNER_RADIUS` (the box itself is
  the visual); against another body, the box; a sphere is itself.  The
  ground and each wall are boxes whose top face is the plane (:data:`SLAB`).

Drake combines two geometries' properties: stiffnesses in series (``k1 k2
/ (k1 + k2)``), dissipations weighted by the other's stiffness, friction by
the harmonic mean ``2 mu1 mu2 / (mu1 + mu2)``, and a geometry has one set
of them for every partner.  contactfit's contacts are per kind and per
material pair (body-ground, body-wall, body-body), so each body carries one
set of contact geometries per partner: the ground's on its own link, each
wall material's and each other body material's on a massless link welded to
it, and collision filter groups (``drake:collision_filter_group``; Drake
filters by link) let each set meet only its partner.  A plane (the ground, a wall material) gets
``2 k`` of the stiffest material's fitted contact with it, the least
dissipation and the largest friction, and each body set the values that
combine with the plane's into the fitted ones (:func:`against`); a body
pair's two sets both get ``2 k`` and the fitted dissipation and friction:
every pair gets exactly the fit's values.  A body-body contact lasts as
long as the fit's for its material pair's first two bodies' reduced mass
(said when other pairs of those materials differ in mass).  A rigid
(event-exact) law of a contact the scene has carries no stiffness: refused,
as is the spinning model (``--to pooltool``).
"""

from xml.sax.saxutils import quoteattr

import numpy as np

from ..geometry.rigid import quat_matrix
from ..laws import hunt_crossley, penalty
from ..laws import registry as contact_laws
from ..laws.penalty_row import OWN
from . import contact
from .source import number as _num
from .source import numbers as _vec

#: The impact speed [m/s] the dissipation and stiffness are matched at.
SPEED = 1.0
#: The plant's timestep [s] the file's comment names without --timestep (Drake's default).
TIMESTEP = 1e-3
#: The radius [m] of the spheres at a box's corners that carry its contact
#: (Drake's point contact between a box and a half space is one point, the
#: deepest: a box on the ground then rocks on it instead of resting on four).
CORNER_RADIUS = 1e-5
#: The width and depth [m] of the box that stands for the ground and each wall,
#: its top face the plane.  Not Drake's half space (``<plane>``): on a link
#: welded to the world it is a moving geometry to Drake, and fcl's half space
#: as a moving geometry corrupts its broad phase (drake#19263): Drake 1.51
#: crashes loading a scene of five boxes' corners.
SLAB = (200.0, 20.0)


def refuse(fitted, kinds=("body_ground",)):
    """Raise ``ValueError`` (one line) for a fit Drake has no counterpart for
    (its contacts of ``kinds``)."""
    if fitted.spin:
        raise ValueError(f"{fitted.where}: a fit of the spinning model (billiard balls) has no "
                         "Drake counterpart; export it --to pooltool")
    for kind in kinds:
        law = contact_laws.BY_NAME[fitted.law(kind)]
        if law.family != penalty.FAMILY:
            what = kind.replace("_", "-")
            raise ValueError(f"{fitted.where}: the {what} law {law.name!r} is rigid "
                             "(event-exact): Drake's compliant point contact needs a stiffness; "
                             "fit a penalty law (hunt_crossley, spring_damper) to export to Drake")


def contact_values(fitted, mass, *materials, kind="body_ground"):
    """``(k [N/m], d [s/m], mu_static, mu_dynamic, notes)`` of contact
    ``kind`` between ``materials`` for a body of ``mass`` (a pair's reduced
    mass) (module docstring)."""
    law = fitted.law(kind)
    e, duration = contact.drop(fitted, kind, mass, SPEED, *materials)
    notes = []
    what = kind.replace("_", "-")  # as the notes name it
    if law == "spring_damper":
        k = fitted.value("k_sd")
    elif law == "hunt_crossley" and fitted.value("n_hc") == 1.0:
        k = fitted.value("k_hc")
    else:
        k = mass * (np.pi / duration) ** 2
        notes.append(f"{what}: {law} contact (n_hc {fitted.value('n_hc'):g}): Drake's point "
                     f"contact is linear; its stiffness {k:.4g} N/m lasts as long "
                     f"({1e3 * duration:.3g} ms) for {mass:g} kg met at {SPEED:g} m/s")
    d = hunt_crossley.alpha.py_func(e) / SPEED
    notes.append(f"{what}: restitution {e:.4g}: Drake's dissipation is fixed, contactfit's "
                 f"scales with the approach speed: exact at {SPEED:g} m/s in continuous time; "
                 "faster impacts rebound a little less, and Drake's implicit step loses more "
                 "as the step grows")
    if fitted.value("k_v", *materials) > 0.0:
        notes.append("k_v (viscous contact friction) has no Drake counterpart: left out")
    static, kinetic = OWN[kind][:2]
    return (k, d, fitted.value(static, *materials), fitted.value(kinetic, *materials), notes)


def against(ground, fit):
    """A body's ``(k, d, mu_s, mu_k)`` that Drake's combination with the
    ground's ``ground`` turns into ``fit``: ``k = k_f k_g / (k_g - k_f)``,
    ``d`` from ``d_f = (k_g d + k d_g) / (k + k_g)``, each friction from
    ``mu_f = 2 mu mu_g / (mu + mu_g)``."""
    kg, dg, sg, mg = ground
    kf, df, sf, mf = fit
    k = kf * kg / (kg - kf)
    d = ((k + kg) * df - k * dg) / kg
    return (k, d, sf * sg / (2.0 * sg - sf), mf * mg / (2.0 * mg - mf))


def _properties(values, indent):
    k, d, mu_s, mu_k = values
    pad = " " * indent
    return "\n".join([
        f"{pad}<drake:proximity_properties>",
        f"{pad}  <drake:point_contact_stiffness>{_num(k)}</drake:point_contact_stiffness>",
        f"{pad}  <drake:hunt_crossley_dissipation>{_num(d)}</drake:hunt_crossley_dissipation>",
        f"{pad}  <drake:mu_static>{_num(mu_s)}</drake:mu_static>",
        f"{pad}  <drake:mu_dynamic>{_num(mu_k)}</drake:mu_dynamic>",
        f"{pad}</drake:proximity_properties>"])


def _rpy(q):
    """Roll, pitch, yaw (SDFormat's fixed-axis x-y-z) of quaternion ``q`` (w, x, y, z)."""
    r = quat_matrix(np.asarray(q, dtype=np.float64))
    pitch = np.arcsin(-np.clip(r[2, 0], -1.0, 1.0))
    return np.arctan2(r[2, 1], r[2, 2]), pitch, np.arctan2(r[1, 0], r[0, 0])


def _plane_rpy(normal):
    """Roll and pitch (yaw 0) turning the plane's +z onto unit ``normal``:
    ``R_y(pitch) R_x(roll) e_z = normal``."""
    n = np.asarray(normal, dtype=np.float64)
    return float(np.arcsin(-n[1])), float(np.arctan2(n[0], n[2])), 0.0


def _half_space(name, point, normal, values):
    """A link welded to the world whose collision is a slab :data:`SLAB`
    below the plane through ``point`` with ``normal`` (into the free side),
    its top face the plane."""
    wide, deep = SLAB
    return [f'    <link name="{name}">',
            f'      <pose>{_vec((*point, *_plane_rpy(normal)))}</pose>',
            f'      <collision name="{name}">',
            f"        <pose>0 0 {_num(-deep / 2)} 0 0 0</pose>",
            f"        <geometry><box><size>{_vec((wide, wide, deep))}</size></box></geometry>",
            _properties(values, 8), "      </collision>", "    </link>",
            f'    <joint name="{name}_weld" type="fixed"><parent>world</parent>'
            f"<child>{name}</child></joint>"]


def _shapes(body, label, against_planes):
    """``[(collision name, offset, geometry)]`` of ``body``: against a plane a
    box is its eight corners (contactfit's box meets a plane at its
    corners), else the box; a sphere is itself."""
    if body.shape == "sphere":
        return [(label, (0.0, 0.0, 0.0), f"<sphere><radius>{_num(body.size[0])}</radius>"
                                          "</sphere>")]
    if not against_planes:
        return [(label, (0.0, 0.0, 0.0), f"<box><size>{_vec(2 * s for s in body.size)}</size>"
                                          "</box>")]
    return [(f"{label}_corner_{k}",
             tuple(sx * e for sx, e in zip(((-1) ** (k & 1), (-1) ** (k >> 1 & 1),
                                            (-1) ** (k >> 2 & 1)), body.size)),
             f"<sphere><radius>{_num(CORNER_RADIUS)}</radius></sphere>") for k in range(8)]


def _collisions(shapes, values):
    out = []
    for name, at, shape in shapes:
        out += [f'      <collision name="{name}">',
                f'        <pose>{_vec((*at, 0, 0, 0))}</pose>',
                f"        <geometry>{shape}</geometry>",
                _properties(values, 8), "      </collision>"]
    return out


def _planes(fits):
    """The values a ground or wall geometry carries for the materials' fitted
    contacts ``fits`` ``{material: (k, d, mu_s, mu_k)}`` and each body
    material's against it (:func:`against`): twice the stiffest, the least
    dissipation (each body's, set against it, then stays positive) and the
    largest friction (harmonic means)."""
    plane = (2.0 * max(v[0] for v in fits.values()), min(v[1] for v in fits.values()),
             max(v[2] for v in fits.values()), max(v[3] for v in fits.values()))
    return plane, {m: against(plane, v) for m, v in fits.items()}


def _group(name, members, ignored):
    return ([f'    <drake:collision_filter_group name="{name}">']
            + [f"      <drake:member>{m}</drake:member>" for m in members]
            + [f"      <drake:ignored_collision_filter_group>{g}"
               "</drake:ignored_collision_filter_group>" for g in ignored]
            + ["    </drake:collision_filter_group>"])


def write(fitted, scene=None, timestep=None):
    """``(text, notes)``: the SDFormat of ``fitted`` (module docstring): a
    model of ``scene``'s ground, walls and bodies (required: Drake's
    properties sit on collision geometries); ``timestep`` [s] (default
    :data:`TIMESTEP`) is the plant's step its comment names."""
    if scene is None:
        refuse(fitted)
        raise ValueError(f"{fitted.where}: Drake's contact properties sit on the bodies' "
                         "collision geometries: give --dataset for the bodies they go on")
    bodies = scene.bodies
    pairs = [(a, b) for i, a in enumerate(bodies) for b in bodies[i + 1:]]
    refuse(fitted, ("body_ground",) + (("body_wall",) if scene.walls else ())
           + (("body_body",) if pairs else ()))
    h = TIMESTEP if timestep is None else float(timestep)
    if not h > 0.0:
        raise ValueError(f"timestep {timestep!r}: expected a number of seconds > 0")
    materials = sorted({b.material for b in bodies})
    mass_of = {m: next(b.mass for b in bodies if b.material == m) for m in materials}
    notes = []

    def values(kind, mass, *mats):
        *got, said = contact_values(fitted, mass, *mats, kind=kind)
        notes.extend(said)
        return tuple(got)

    # each body material's set of collision geometries per partner: (material, partner) ->
    # the values its geometries carry; a partner is "ground", ("wall", w) or ("body", n)
    sets = {}
    ground, own = _planes({m: values("body_ground", mass_of[m], m) for m in materials})
    sets.update({(m, "ground"): v for m, v in own.items()})
    wall_mats = sorted({w.material for w in scene.walls})
    wall_values = {}
    for w in wall_mats:
        wall_values[w], own = _planes({m: values("body_wall", mass_of[m], m, w)
                                       for m in materials})
        sets.update({(m, ("wall", w)): v for m, v in own.items()})
    first = {}  # a material pair's first pair of bodies: its contact is matched for them
    for a, b in pairs:  # both sides twice the pair's stiffness: in series, exactly the pair's
        key = tuple(sorted((a.material, b.material)))
        if key not in first:
            first[key] = (a, b)
            k, d, mu_s, mu_k = values("body_body", a.mass * b.mass / (a.mass + b.mass), *key)
            for m, n in (key, key[::-1]):
                sets[m, ("body", n)] = (2.0 * k, d, mu_s, mu_k)
        elif {a.mass, b.mass} != {x.mass for x in first[key]}:
            x, y = first[key]
            notes.append(f"body-body: Drake's properties are per geometry: the contact of bodies "
                         f"{a.body_id} and {b.body_id} lasts as long as the fit's for bodies "
                         f"{x.body_id} and {y.body_id} ({x.mass:g} and {y.mass:g} kg)")
    notes.append(f"gravity {scene.gravity:g} m/s^2 along -z: a model file cannot carry it; set "
                 "plant.mutable_gravity_field().set_gravity_vector((0, 0, "
                 f"{-scene.gravity:g}))")
    lines = ['<?xml version="1.0"?>', '<sdf version="1.9" xmlns:drake="http://drake.mit.edu">',
             "  <!-- contactfit export to Drake: point contact, MultibodyPlantConfig("
             f"time_step={h:g}, contact_model='point', discrete_contact_approximation='tamsi') "
             "(Drake's solver of Hunt-Crossley point contact). Approximated: -->"]
    lines += [f"  <!--   {n.replace('--', '- -')} -->" for n in dict.fromkeys(notes)]
    lines.append(f"  <model name={quoteattr('contactfit ' + scene.name)}>")
    lines += _half_space("ground", (0.0, 0.0, scene.ground), scene.normal, ground)
    for w in scene.walls:
        lines += _half_space(f"wall_{w.wall_id}", tuple(c * w.d for c in w.normal), w.normal,
                             wall_values[w.material])
    members = {}  # filter group -> its links
    for b in bodies:
        label = f"body_{b.body_id}"
        ixx, iyy, izz = b.inertia
        lines += [f'    <link name="{label}">',
                  f'      <pose>{_vec((*b.pos, *_rpy(b.quat)))}</pose>',
                  "      <inertial>",
                  f'        <pose>{_vec((*b.com, 0, 0, 0))}</pose>',
                  f"        <mass>{_num(b.mass)}</mass>",
                  f"        <inertia><ixx>{_num(ixx)}</ixx><iyy>{_num(iyy)}</iyy>"
                  f"<izz>{_num(izz)}</izz><ixy>0</ixy><ixz>0</ixz><iyz>0</iyz></inertia>",
                  "      </inertial>"]
        lines += _collisions(_shapes(b, label, True), sets[b.material, "ground"])
        if b.shape != "sphere":
            lines += [f'      <visual name="{label}"><geometry><box><size>'
                      f"{_vec(2 * s for s in b.size)}</size></box></geometry></visual>"]
        lines.append("    </link>")
        members.setdefault((b.material, "ground"), []).append(label)
        # its other partners' geometries on massless links welded to it: Drake filters
        # collisions by link, so each partner's set meets only that partner
        for (m, partner), carried in sets.items():
            if m != b.material or partner == "ground":
                continue
            kind, other = partner
            if kind == "body" and other not in {(q if p is b else p).material
                                                for p, q in pairs if b is p or b is q}:
                continue  # no body of that material to meet
            link = f"{label}_vs_{kind}" + (f"_{other}" if other else "")
            lines += [f'    <link name="{link}">',
                      f'      <pose relative_to="{label}">0 0 0 0 0 0</pose>']
            lines += _collisions(_shapes(b, link, kind == "wall"), carried)
            lines += ["    </link>",
                      f'    <joint name="{link}_weld" type="fixed"><parent>{label}</parent>'
                      f"<child>{link}</child></joint>"]
            members.setdefault((m, partner), []).append(link)
    if len(members) > 1:  # each set meets its partner only: the ground, its walls, a body set
        names = {key: _group_name(key) for key in members}
        partners = {(m, "ground"): "cf_ground" for m in materials}
        partners.update({(m, ("wall", w)): f"cf_wall{'_' + w if w else ''}"
                         for m in materials for w in wall_mats})
        partners.update({(m, p): names[p[1], ("body", m)] for m, p in members
                         if p != "ground" and p[0] == "body"})
        lines += _group("cf_ground", ["ground"], [])
        for w in wall_mats:
            lines += _group(f"cf_wall{'_' + w if w else ''}",
                            [f"wall_{x.wall_id}" for x in scene.walls if x.material == w], [])
        everything = ["cf_ground"] + [f"cf_wall{'_' + w if w else ''}" for w in wall_mats]
        everything += list(names.values())
        for key, links in members.items():
            lines += _group(names[key], links, [g for g in everything if g != partners[key]])
    lines += ["  </model>", "</sdf>"]
    return "\n".join(lines) + "\n", list(dict.fromkeys(notes))


def _group_name(key):
    m, partner = key
    tail = partner if partner == "ground" else "_".join(x for x in partner if x)
    return "cf_" + (f"{m}_" if m else "") + "vs_" + tail
