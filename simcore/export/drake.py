"""A fit in Drake's terms: an SDFormat file whose collision geometries carry
``drake:proximity_properties`` for Drake's compliant point contact, and,
with a dataset, the scene's bodies (mass, fitted centre of mass and
inertia) and its ground.

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
* geometry: a box's contact is its eight corners, as contactfit's is, each
  a sphere of :data:`CORNER_RADIUS` (the box itself is the visual).

Drake combines two geometries' properties: stiffnesses in series (``k1 k2
/ (k1 + k2)``), dissipations weighted by the other's stiffness, friction by
the harmonic mean ``2 mu1 mu2 / (mu1 + mu2)``.  The export gives the ground
``2 k`` and the fitted friction, and each body the values that combine with
the ground's into the fitted ones (:func:`against`): the same values when
one material meets the ground, so the pair gets exactly the fit's.  Walls
and body-body contacts are not exported (said when the scene has them).
A rigid (event-exact) fit has no stiffness to carry: refused, as is the
spinning model (``--to pooltool``).
"""

from xml.sax.saxutils import quoteattr

import numpy as np

from ..geometry.rigid import quat_matrix
from ..laws import hunt_crossley, penalty
from ..laws import registry as contact_laws
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


def refuse(fitted):
    """Raise ``ValueError`` (one line) for a fit Drake has no counterpart for."""
    if fitted.spin:
        raise ValueError(f"{fitted.where}: a fit of the spinning model (billiard balls) has no "
                         "Drake counterpart; export it --to pooltool")
    law = contact_laws.BY_NAME[fitted.law("body_ground")]
    if law.family != penalty.FAMILY:
        raise ValueError(f"{fitted.where}: the body-ground law {law.name!r} is rigid "
                         "(event-exact): Drake's compliant point contact needs a stiffness; fit "
                         "a penalty law (hunt_crossley, spring_damper) to export to Drake")


def contact_values(fitted, mass, material=""):
    """``(k [N/m], d [s/m], mu_static, mu_dynamic, notes)`` of the body-ground
    contact of ``material`` for a body of ``mass`` (module docstring)."""
    law = fitted.law("body_ground")
    e, duration = contact.drop(fitted, "body_ground", mass, SPEED, material)
    notes = []
    if law == "spring_damper":
        k = fitted.value("k_sd")
    elif law == "hunt_crossley" and fitted.value("n_hc") == 1.0:
        k = fitted.value("k_hc")
    else:
        k = mass * (np.pi / duration) ** 2
        notes.append(f"{law} contact (n_hc {fitted.value('n_hc'):g}): Drake's point contact is "
                     f"linear; its stiffness {k:.4g} N/m lasts as long ({1e3 * duration:.3g} ms) "
                     f"for a {mass:g} kg body met at {SPEED:g} m/s")
    d = hunt_crossley.alpha.py_func(e) / SPEED
    notes.append(f"restitution {e:.4g}: Drake's dissipation is fixed, contactfit's scales with "
                 f"the approach speed: exact at {SPEED:g} m/s in continuous time; faster "
                 "impacts rebound a little less, and Drake's implicit step loses more as the "
                 "step grows")
    if fitted.value("k_v", material) > 0.0:
        notes.append("k_v (viscous contact friction) has no Drake counterpart: left out")
    return (k, d, fitted.value("mu_s", material), fitted.value("mu_k", material), notes)


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


def write(fitted, scene=None, timestep=None):
    """``(text, notes)``: the SDFormat of ``fitted`` (module docstring): a
    model of ``scene``'s ground and bodies (required: Drake's properties sit
    on collision geometries); ``timestep`` [s] (default :data:`TIMESTEP`) is
    the plant's step its comment names."""
    refuse(fitted)
    if scene is None:
        raise ValueError(f"{fitted.where}: Drake's contact properties sit on the bodies' "
                         "collision geometries: give --dataset for the bodies they go on")
    bodies = scene.bodies
    materials = sorted({b.material for b in bodies})
    mass_of = {m: next(b.mass for b in bodies if b.material == m) for m in materials}
    fits, notes = {}, []
    h = TIMESTEP if timestep is None else float(timestep)
    if not h > 0.0:
        raise ValueError(f"timestep {timestep!r}: expected a number of seconds > 0")
    for m in materials:
        *values, said = contact_values(fitted, mass_of[m], m)
        fits[m] = tuple(values)
        notes += said
    stiff = 2.0 * max(v[0] for v in fits.values())
    mu = (max(v[2] for v in fits.values()), max(v[3] for v in fits.values()))
    # the ground's dissipation the least of the materials': each body's, set
    # against it, then stays positive (and its friction the largest: harmonic means)
    ground = (stiff, min(v[1] for v in fits.values()), *mu)
    own = {m: against(ground, v) for m, v in fits.items()}
    if scene.walls:
        notes.append(f"{scene.name}'s walls and body-body contacts are not exported")
    notes.append(f"gravity {scene.gravity:g} m/s^2 along -z: a model file cannot carry it; set "
                 "plant.mutable_gravity_field().set_gravity_vector((0, 0, "
                 f"{-scene.gravity:g}))")
    lines = ['<?xml version="1.0"?>', '<sdf version="1.9" xmlns:drake="http://drake.mit.edu">',
             "  <!-- contactfit export to Drake: point contact, MultibodyPlantConfig("
             f"time_step={h:g}, contact_model='point', discrete_contact_approximation='tamsi') "
             "(Drake's solver of Hunt-Crossley point contact). Approximated: -->"]
    lines += [f"  <!--   {n.replace('--', '- -')} -->" for n in dict.fromkeys(notes)]
    lines.append(f"  <model name={quoteattr('contactfit ' + scene.name)}>")
    point = (0.0, 0.0, scene.ground)
    normal = np.asarray(scene.normal)
    # the plane's +z turned onto the normal: R_y(ty) R_x(tx), fixed-axis roll tx then pitch ty
    tilt = (float(np.arcsin(-normal[1])), float(np.arctan2(normal[0], normal[2])), 0.0)
    lines += ['    <link name="ground">',
              f'      <pose>{_vec((*point, *tilt))}</pose>',
              '      <collision name="ground">',
              "        <geometry><plane><normal>0 0 1</normal><size>100 100</size></plane>"
              "</geometry>",
              _properties(ground, 8), "      </collision>", "    </link>",
              '    <joint name="ground_weld" type="fixed"><parent>world</parent>'
              "<child>ground</child></joint>"]
    for b in bodies:
        label = f"body_{b.body_id}"
        ixx, iyy, izz = b.inertia
        if b.shape == "sphere":
            shapes = [(label, (0.0, 0.0, 0.0), f"<sphere><radius>{_num(b.size[0])}</radius>"
                                              "</sphere>")]
        else:  # contactfit's box meets the ground at its corners: a point sphere at each
            shapes = [(f"{label}_corner_{k}",
                       tuple(sx * e for sx, e in zip(((-1) ** (k & 1), (-1) ** (k >> 1 & 1),
                                                      (-1) ** (k >> 2 & 1)), b.size)),
                       f"<sphere><radius>{_num(CORNER_RADIUS)}</radius></sphere>")
                      for k in range(8)]
        lines += [f'    <link name="{label}">',
                  f'      <pose>{_vec((*b.pos, *_rpy(b.quat)))}</pose>',
                  "      <inertial>",
                  f'        <pose>{_vec((*b.com, 0, 0, 0))}</pose>',
                  f"        <mass>{_num(b.mass)}</mass>",
                  f"        <inertia><ixx>{_num(ixx)}</ixx><iyy>{_num(iyy)}</iyy>"
                  f"<izz>{_num(izz)}</izz><ixy>0</ixy><ixz>0</ixz><iyz>0</iyz></inertia>",
                  "      </inertial>"]
        for name, at, shape in shapes:
            lines += [f'      <collision name="{name}">',
                      f'        <pose>{_vec((*at, 0, 0, 0))}</pose>',
                      f"        <geometry>{shape}</geometry>",
                      _properties(own[b.material], 8), "      </collision>"]
        if b.shape != "sphere":
            lines += [f'      <visual name="{label}"><geometry><box><size>'
                      f"{_vec(2 * s for s in b.size)}</size></box></geometry></visual>"]
        lines.append("    </link>")
    lines += ["  </model>", "</sdf>"]
    return "\n".join(lines) + "\n", list(dict.fromkeys(notes))
