"""A fit in MuJoCo's terms: an MJCF fragment (or, with a dataset, a whole
scene) whose contacts reproduce the fitted friction, restitution and
contact duration, and whose bodies and ground carry the fitted centre of
mass, inertia, free fall, ground height and tilt.

MuJoCo's contact (its documentation, "Computation: soft constraints") is a
constraint whose acceleration along the normal obeys ``a1 + d (b v + k r) =
(1 - d) a0`` (``r`` the signed distance, ``v`` its rate, ``a0`` the
unconstrained acceleration), clamped so the contact never pulls, with the
impedance ``d`` from ``solimp`` and, from ``solref = (timeconst,
dampratio)``, ``b = 2 / (dmax timeconst)`` and ``k = d / (dmax^2
timeconst^2 dampratio^2)``.  With ``solimp``'s ``dmin = dmax =``
:data:`IMPEDANCE` the impedance is constant and the contact is, per unit
mass, a linear spring-damper of natural frequency ``1 / (timeconst
dampratio)`` and damping ratio ``dampratio``, stepped by MuJoCo's
semi-implicit Euler step.  MuJoCo has no restitution coefficient; the export
sets the two ``solref`` numbers so that:

* the contact lasts as long as the fitted law's for the body's mass at
  :data:`SPEED` (:func:`simcore.export.contact.drop`), but never with a
  ``timeconst`` under :data:`FLOOR_STEPS` timesteps (MuJoCo's own floor is
  two: see the constant): a rigid law (the event-exact engines) or a stiff
  penalty law is exported at that floor, and the export says so;
* a point mass dropped at :data:`SPEED` rebounds at the fitted rebound ratio
  *in MuJoCo's discrete step at the export's timestep*
  (:func:`rebound`, the step written out in NumPy and averaged over
  :data:`PHASES` touch-down phases within a step; ``dampratio`` by
  bisection).  The linear contact's rebound hardly depends on the speed,
  as Hunt-Crossley's does not at all.

Friction: MuJoCo's cone has one coefficient per geom, combined by the
maximum of the two geoms' (unless their ``priority`` differs: the higher
one's is taken).  The export gives each body material a ``<default>`` class
(``cf_body``, ``cf_body_MAT``) of priority 1 carrying its contact with the
ground (the kinetic coefficient ``mu_k``: a static one ``mu_s`` above it
has no counterpart and is said), a wall class (``cf_wall``, priority 2)
carrying the body-wall contact, and, in a scene, a ``<pair>`` for every
pair whose coefficients neither rule gives (body-body contacts, a wall
whose coefficient depends on the body's material).  ``mu_roll`` [m] is
MuJoCo's rolling friction (``condim 6``), the same torque bound; the
stiction speeds, viscous ``k_v`` and a speed-dependent body-body friction
have none (said when they act).  The ``cone`` (elliptic or pyramidal) is
the fit's dataset's.

Frames: a box's geom is centred on the body frame's origin, where the
dataset's positions are (the tracked centre); the centre of mass is the
``<inertial>`` element's ``pos``.  MuJoCo's free joint velocity is the
origin's world-frame velocity and the body-frame angular velocity:
:func:`free_state` turns a dataset's state into it.
"""

import math
from dataclasses import dataclass
from xml.sax.saxutils import quoteattr

import numpy as np

from . import contact

#: solimp's dmin = dmax: a constant impedance, near MuJoCo's hard limit (at
#: its default 0.95 a box's four corner contacts share their regularisation
#: unevenly and a flat drop rebounds about 12 % above a ball's; at 0.99, 1-3 %).
IMPEDANCE = 0.99
#: The impact speed [m/s] the contact's duration and rebound are matched at.
SPEED = 1.0
#: Touch-down phases within a step the discrete rebound is averaged over.
PHASES = 16
#: The timestep [s] of an export without a dataset or a --timestep (MuJoCo's default).
TIMESTEP = 0.002
#: The mass [kg] whose contact duration an export without a dataset matches.
MASS = 1.0
#: The damping ratios the bisection searches.
DAMPRATIO = (0.005, 20.0)
#: The least ``timeconst`` in timesteps.  MuJoCo's own floor is 2, but a
#: contact that short spans one or two steps, and one impact's rebound then
#: depends on where the touch falls within its step: from 0 to twice the
#: fitted ratio at e = 0.29 (right only on average; the spread over phases
#: 60 % of e).  At 4 steps it stays within about 20 %, and tumbling bodies
#: keep their fitted behaviour (``benchmarks.export``).
FLOOR_STEPS = 4.0


@dataclass(frozen=True)
class ContactSet:
    """One exported contact: ``friction`` (sliding, torsional, rolling),
    ``solref`` (timeconst, dampratio), the rebound ratio it reproduces,
    whether its duration was held at the floor (``floored``) and the rms
    spread of one impact's rebound over touch-down phases, over the ratio."""

    friction: tuple
    solref: tuple
    rebound: float
    floored: bool
    spread: float = 0.0

    def attrs(self):
        f = " ".join(_num(x) for x in self.friction)
        s = " ".join(_num(x) for x in self.solref)
        imp = f"{_num(IMPEDANCE)} {_num(IMPEDANCE)} 0.001 0.5 2"
        return f'friction="{f}" solref="{s}" solimp="{imp}"'


def _num(x):
    return f"{float(x) + 0.0:.10g}"  # (no "-0")


def rebounds(dampratio, timeconst, timestep, gravity=9.81, speed=SPEED, phases=PHASES):
    """The rebound ratios of a point mass met at ``speed`` [m/s] by a plane
    under MuJoCo's soft contact with ``solref = (timeconst, dampratio)`` and
    the constant impedance :data:`IMPEDANCE`, stepped as MuJoCo's Euler
    integrator steps (``v += h a1``, ``r += h v``; the contact active while
    ``r < 0``, its force per unit mass ``d max(a_ref - a0, 0)``), for
    ``phases`` touch-down times spread evenly within one step ``(phases,)``:
    the separation speeds over ``speed`` (0 for a phase that never leaves)."""
    d = dmax = IMPEDANCE
    b = 2.0 / (dmax * timeconst)
    k = d / (dmax * dmax * timeconst * timeconst * dampratio * dampratio)
    h = timestep
    r = (np.arange(phases) + 0.5) / phases * speed * h  # above the plane by a fraction of a step
    v = np.full(phases, -speed)
    out = np.zeros(phases)
    touched = np.zeros(phases, dtype=bool)
    left = np.zeros(phases, dtype=bool)
    for _ in range(int(40.0 * timeconst / h) + 20):  # long past any contact's end
        active = r < 0.0
        touched |= active
        a0 = -gravity
        a_ref = -b * v - k * r
        a1 = np.where(active, a0 + d * np.maximum(a_ref - a0, 0.0), a0)
        v = v + h * a1
        r = r + h * v
        done = touched & ~left & (r >= 0.0) & (v > 0.0)
        out[done] = v[done]
        left |= done
        if left.all():
            break
    return out / speed


def rebound(dampratio, timeconst, timestep, gravity=9.81, speed=SPEED, phases=PHASES):
    """The mean of :func:`rebounds`: the rebound ratio of impacts that touch
    down anywhere within a step."""
    return float(np.mean(rebounds(dampratio, timeconst, timestep, gravity, speed, phases)))


def contact_set(mu, e, duration, timestep, gravity, rolling=0.0):
    """The :class:`ContactSet` of friction ``mu``, rebound ratio ``e`` and
    contact ``duration`` [s] at MuJoCo's ``timestep`` (module docstring):
    ``timeconst`` the law's (``1 / (w dampratio)``, ``w = pi / duration``)
    but at least :data:`FLOOR_STEPS` steps and at least ``timestep /
    dampratio`` (the contact's frequency at most one radian per step: a
    bouncy contact needs little damping, and MuJoCo's explicit step then
    needs a softer spring), ``dampratio`` by bisection on :func:`rebound`."""
    h = timestep
    omega = math.pi / duration if duration > 0.0 else math.inf  # the law's undamped frequency

    def timeconst(zeta):
        law = 1.0 / (omega * zeta) if math.isfinite(omega) else 0.0
        return max(FLOOR_STEPS * h, h / zeta, law)

    lo, hi = DAMPRATIO
    if rebound(lo, timeconst(lo), h, gravity) <= e:
        zeta = lo
    else:
        for _ in range(60):  # rebound falls as the damping ratio grows
            mid = math.sqrt(lo * hi)
            if rebound(mid, timeconst(mid), h, gravity) > e:
                lo = mid
            else:
                hi = mid
        zeta = math.sqrt(lo * hi)
    tc = timeconst(zeta)
    each = rebounds(zeta, tc, h, gravity)
    law = 1.0 / (omega * zeta) if math.isfinite(omega) else 0.0
    return ContactSet((mu, 0.0, rolling), (tc, zeta), float(np.mean(each)),
                      tc > law * (1 + 1e-12) and duration > 0.0,
                      float(np.std(each) / max(np.mean(each), 1e-12)))


def _ground_set(fitted, mass, timestep, gravity, material=""):
    e, duration = contact.drop(fitted, "body_ground", mass, SPEED, material)
    return contact_set(fitted.value("mu_k", material), e, duration, timestep, gravity,
                       fitted.value("mu_roll"))


def _wall_set(fitted, mass, timestep, gravity, body="", wall=""):
    e, duration = contact.drop(fitted, "body_wall", mass, SPEED, body, wall)
    return contact_set(fitted.value("mu_w", body, wall), e, duration, timestep, gravity,
                       fitted.value("mu_roll"))


def _pair_set(fitted, mass, timestep, gravity, a="", b=""):
    e, duration = contact.drop(fitted, "body_body", mass, SPEED, a, b)
    mu = fitted.value("mu_bb", a, b)
    if fitted.law("body_body") == "frictional_inelastic":  # its friction falls with the slip
        mu += fitted.value("mu_bb_b", a, b) * math.exp(-fitted.value("mu_bb_c", a, b) * SPEED)
    return contact_set(mu, e, duration, timestep, gravity, fitted.value("mu_roll"))


def refuse(fitted):
    """Raise ``ValueError`` (one line) for a fit MuJoCo has no counterpart for."""
    if fitted.spin:
        raise ValueError(f"{fitted.where}: a fit of the spinning model (billiard balls: cloth, "
                         "spin and cushion coefficients) has no MuJoCo counterpart; export it "
                         "--to pooltool")


def notes(fitted, sets, timestep):
    """The one-line statements of what the export approximates."""
    out = []
    for name, kinetic in (("mu_s", "mu_k"), ("mu_bb_s", "mu_bb"), ("mu_w_s", "mu_w")):
        for key, v in fitted.params.items():
            if key.split("@")[0] == name and v > fitted.value(kinetic, *key.partition("@")[2]
                                                                .split("+")) + 1e-12:
                out.append(f"{key} {v:.4g} (static) above its kinetic value: MuJoCo's friction "
                           "has one coefficient; the kinetic one is exported")
    if fitted.value("k_v") > 0.0:
        out.append(f"k_v {fitted.value('k_v'):.4g} N s/m (viscous contact friction) has no "
                   "MuJoCo counterpart: left out")
    if fitted.law("body_body") == "frictional_inelastic":
        out.append(f"the body-body friction falls with the slip (mu_bb_b, mu_bb_c): exported at "
                   f"{SPEED:g} m/s")
    for label, s, (e, duration) in sets:
        if s.floored and duration > 0.0:
            law = duration / (math.pi * s.solref[1])  # the timeconst that would keep it
            need = min(law / FLOOR_STEPS, law * s.solref[1])
            out.append(f"{label}: the fitted contact lasts {1e3 * duration:.3g} ms at "
                       f"{SPEED:g} m/s; at timestep {_num(timestep)} s the stiffest MuJoCo "
                       f"keeps stable and consistent (timeconst {_num(s.solref[0])} s) lasts "
                       f"longer; a timestep of {need:.2g} s or less would keep it")
        if abs(s.rebound - e) > 0.01 * max(e, 0.01):
            out.append(f"{label}: rebound ratio {e:.4g} is out of MuJoCo's reach at this "
                       f"timestep; the closest, {s.rebound:.4g}, is exported")
    if sets:
        worst = max(s.spread for _, s, _ in sets)
        out.append(f"restitution: MuJoCo has none; each contact's solref damping ratio rebounds a "
                   f"ball dropped at {SPEED:g} m/s at the fitted ratio in MuJoCo's own step at "
                   f"this timestep, on average over where the touch falls within a step (one "
                   f"impact's varies by up to {100 * worst:.0f} % rms; a box's flat drop "
                   "within a few per cent)")
    return out


def _vec(xs):
    return " ".join(_num(x) for x in xs)


def _cls(prefix, material):
    return f"{prefix}_{material}" if material else prefix


def _plane(name, point, normal, extra=""):
    return (f'    <geom name={quoteattr(name)} type="plane" size="0 0 1" pos="{_vec(point)}" '
            f'zaxis="{_vec(normal)}"{extra}/>')


def write(fitted, scene=None, timestep=None):
    """``(text, notes)``: the MJCF of ``fitted`` (:class:`~.source.Fitted`)
    at MuJoCo ``timestep`` [s] (default :data:`TIMESTEP`): ``<default>``
    classes, and with ``scene`` (:class:`~.source.Scene`) the whole scene
    (ground, walls, bodies on free joints at its scenario's start, the
    ``<pair>``\\ s its classes cannot give).  Raises ``ValueError`` for a fit
    MuJoCo cannot take (:func:`refuse`)."""
    refuse(fitted)
    h = TIMESTEP if timestep is None else float(timestep)
    if not h > 0.0:
        raise ValueError(f"timestep {timestep!r}: expected a number of seconds > 0")
    known = scene is not None or "gravity" in fitted.params  # else the user's model's
    gravity = scene.gravity if scene is not None else fitted.params.get("gravity", 9.81)
    bodies = scene.bodies if scene is not None else ()
    walls = scene.walls if scene is not None else ()
    condim = 6 if fitted.value("mu_roll") > 0.0 else 3
    sets, said = [], []  # (label, ContactSet, (e, duration)) for the notes

    def remember(label, s, kind, mass, *mats):
        sets.append((label, s, contact.drop(fitted, kind, mass, SPEED, *mats)))
        return s

    # body classes: each material's contact with the ground, at its first body's mass
    materials = sorted({b.material for b in bodies}) if bodies else sorted(
        {""} | {k.partition("@")[2] for k in fitted.params if "@" in k and "+" not in k})
    mass_of = {m: next((b.mass for b in bodies if b.material == m), MASS) for m in materials}
    ground = {m: remember(f"body-ground{' ' + m if m else ''}",
                          _ground_set(fitted, mass_of[m], h, gravity, m), "body_ground",
                          mass_of[m], m) for m in materials}
    wall_mats = sorted({w.material for w in walls}) if walls else [""]
    wall = {w: _wall_set(fitted, mass_of[materials[0]], h, gravity, materials[0], w)
            for w in wall_mats}
    lines = [f'<mujoco model={quoteattr("contactfit " + (scene.name if scene else "fit"))}>',
             "  <!-- contactfit export to MuJoCo; what it approximates: -->"]
    lines.append("NOTES")
    cone = scene.cone if scene is not None else "elliptic"
    fall = f' gravity="0 0 {_num(-gravity)}"' if known else ""
    lines.append(f'  <option timestep="{_num(h)}"{fall} cone="{cone}"/>')
    lines.append("  <default>")
    for m in materials:
        lines.append(f'    <default class="{_cls("cf_body", m)}">')
        lines.append(f'      <geom condim="{condim}" priority="1" {ground[m].attrs()}/>')
        lines.append("    </default>")
    for w in wall_mats:
        lines.append(f'    <default class="{_cls("cf_wall", w)}">')
        lines.append(f'      <geom condim="{condim}" priority="2" {wall[w].attrs()}/>')
        lines.append("    </default>")
    lines.append("  </default>")
    pairs = []
    if scene is not None:
        lines.append("  <worldbody>")
        lines.append(_plane("ground", (0.0, 0.0, scene.ground), scene.normal,
                            ' friction="0 0 0"'))
        for w in walls:
            point = tuple(c * w.d for c in w.normal)
            lines.append(_plane(f"wall_{w.wall_id}", point, w.normal,
                                f' class="{_cls("cf_wall", w.material)}"'))
        for b in bodies:
            name = f"body_{b.body_id}"
            kind = "sphere" if b.shape == "sphere" else "box"
            s = _ground_set(fitted, b.mass, h, gravity, b.material)
            own = ""
            if s.solref != ground[b.material].solref:  # another mass than its class's
                own = f' solref="{_vec(s.solref)}"'
                remember(f"{name}-ground", s, "body_ground", b.mass, b.material)
            lines.append(f'    <body name="{name}" pos="{_vec(b.pos)}" quat="{_vec(b.quat)}">')
            lines.append(f'      <freejoint name="{name}"/>')
            lines.append(f'      <inertial pos="{_vec(b.com)}" mass="{_num(b.mass)}" '
                         f'diaginertia="{_vec(b.inertia)}"/>')
            lines.append(f'      <geom name="{name}" class="{_cls("cf_body", b.material)}" '
                         f'type="{kind}" size="{_vec(b.size)}" mass="0"{own}/>')
            lines.append("    </body>")
            for w in walls:  # a wall whose coefficient depends on the body's material
                ws = _wall_set(fitted, b.mass, h, gravity, b.material, w.material)
                if ws != wall[w.material]:
                    pairs.append((name, f"wall_{w.wall_id}", remember(
                        f"{name}-wall {w.wall_id}", ws, "body_wall", b.mass, b.material,
                        w.material)))
        for i, a in enumerate(bodies):
            for b in bodies[i + 1:]:
                m = a.mass * b.mass / (a.mass + b.mass)
                pairs.append((f"body_{a.body_id}", f"body_{b.body_id}", remember(
                    f"body {a.body_id}-body {b.body_id}",
                    _pair_set(fitted, m, h, gravity, a.material, b.material), "body_body", m,
                    a.material, b.material)))
        lines.append("  </worldbody>")
        if pairs:
            lines.append("  <contact>")
            for g1, g2, s in pairs:
                mu, _, roll = s.friction
                lines.append(f'    <pair geom1="{g1}" geom2="{g2}" condim="{condim}" '
                             f'friction="{_vec((mu, mu, 0.0, roll, roll))}" '
                             f'solref="{_vec(s.solref)}" '
                             f'solimp="{_num(IMPEDANCE)} {_num(IMPEDANCE)} 0.001 0.5 2"/>')
            lines.append("  </contact>")
    else:
        said.append(f"no dataset: contact durations are matched for a {MASS:g} kg body; "
                    "body-body and per-material wall contacts need <pair>s (give --dataset)")
    lines.append("</mujoco>")
    said = list((scene.notes if scene is not None else ())) + said + notes(fitted, sets, h)
    said = list(dict.fromkeys(said))
    text = "\n".join(lines).replace(
        "NOTES", "\n".join(f"  <!--   {n.replace('--', '- -')} -->" for n in said))
    return text + "\n", said
