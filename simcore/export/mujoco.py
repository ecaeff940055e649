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
  ``timeconst`` under four timesteps (MuJoCo's own floor is two), nor so
  short that one impact's rebound depends on where its touch falls within
  a step by more than :data:`SPREAD` (:data:`STEPS`): a rigid law (the
  event-exact engines) or a stiff penalty law is exported at that floor,
  and the export says so;
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
carrying the body-wall contact.  MuJoCo's friction is itself a soft
constraint that relaxes the slip over the contact's ``timeconst``: within
a short impact it delivers less than Coulomb's impulse (a ball striking a
wall at 1.4 m/s with 0.6 m/s of slip keeps 0.31 m/s where ``mu (1 + e)
v_n`` leaves 0.17).  A ``<pair>``'s ``solreffriction`` (no geom has one)
makes the friction rows stiff; so in a scene every contact pair is an
explicit ``<pair>`` (body-ground, body-wall, body-body) with the values
above and ``solreffriction = (4 timesteps, 1)``, and the impulse is
Coulomb's.  ``mu_roll`` [m] is
MuJoCo's rolling friction (``condim 6``), the same torque bound; the
stiction speeds, viscous ``k_v`` and a speed-dependent body-body friction
have none (said when they act).  The ``cone`` (elliptic or pyramidal) is
the fit's dataset's.

Frames: a box's geom is centred on the body frame's origin, where the
dataset's positions are (the tracked centre); the centre of mass is the
``<inertial>`` element's ``pos``.  MuJoCo's free joint velocity is the
origin's world-frame velocity and the body-frame angular velocity.  A
sphere of the sliding model (the patent's: it slides and never turns) moves
on three slide joints (x, y, z), so its contacts rub as its point mass
does.
"""

import math
from dataclasses import dataclass
from xml.sax.saxutils import quoteattr

import numpy as np

from . import contact
from .source import number as _num
from .source import numbers as _vec

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
#: The ``timeconst`` floors tried in turn, in timesteps, until one impact's
#: rebound spreads over touch-down phases by at most :data:`SPREAD` (rms
#: over the mean).  MuJoCo's own floor is 2, but a contact that short spans
#: one or two steps, and one impact's rebound then depends on where the
#: touch falls within its step: from 0 to twice the fitted ratio at e =
#: 0.29 (right only on average: a spread of 60 %; at 4 steps 20 %, at 8
#: 10 %; more at higher e).
STEPS = (4.0, 6.0, 8.0, 12.0, 16.0, 24.0, 32.0)
SPREAD = 0.1
#: A compliant law's contact is softened for consistent rebounds only while
#: its ``timeconst`` stays within this many times the law's (its duration
#: is part of the fit; a rigid law has none to keep).
SOFTEN = 4.0


@dataclass(frozen=True)
class ContactSet:
    """One exported contact: ``friction`` (sliding, torsional, rolling),
    ``solref`` (timeconst, dampratio), the rebound ratio it reproduces,
    whether its duration was held at the floor (``floored``), the rms
    spread of one impact's rebound over touch-down phases over the ratio,
    and the fitted contact's rebound ratio and duration [s] it stands for."""

    friction: tuple
    solref: tuple
    rebound: float
    floored: bool
    spread: float = 0.0
    fitted: float = 0.0
    duration: float = 0.0

    def attrs(self):
        f = _vec(self.friction)
        s = _vec(self.solref)
        imp = f"{_num(IMPEDANCE)} {_num(IMPEDANCE)} 0.001 0.5 2"
        return f'friction="{f}" solref="{s}" solimp="{imp}"'


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


def _solve(e, timeconst, h, gravity):
    """The damping ratio at which :func:`rebound` is ``e`` when ``timeconst``
    is a function of it (bisection; rebound falls as the ratio grows)."""
    lo, hi = DAMPRATIO
    if rebound(lo, timeconst(lo), h, gravity) <= e:
        return lo
    for _ in range(60):
        mid = math.sqrt(lo * hi)
        if rebound(mid, timeconst(mid), h, gravity) > e:
            lo = mid
        else:
            hi = mid
    return math.sqrt(lo * hi)


def contact_set(mu, e, duration, timestep, gravity, rolling=0.0):
    """The :class:`ContactSet` of friction ``mu``, rebound ratio ``e`` and
    contact ``duration`` [s] at MuJoCo's ``timestep`` (module docstring):
    ``timeconst`` the law's (``1 / (w dampratio)``, ``w = pi / duration``)
    but at least :data:`STEPS` steps and at least ``timestep /
    dampratio`` (the contact's frequency at most one radian per step), and
    raised through :data:`STEPS` until one impact's rebound varies with its
    touch-down phase by at most :data:`SPREAD` (rms over the mean), so that
    each impact rebounds near ``e``, not only their average, while a
    compliant law's ``timeconst`` stays within :data:`SOFTEN` times its
    own; ``dampratio`` by bisection on :func:`rebound`."""
    h = timestep
    omega = math.pi / duration if duration > 0.0 else math.inf  # the law's undamped frequency

    def law(zeta):
        return 1.0 / (omega * zeta) if math.isfinite(omega) else 0.0

    found = None
    for steps in STEPS:
        if found is not None and math.isfinite(omega) and steps * h > SOFTEN * law(found[0]):
            break  # softer still would lose the fitted contact's duration

        def timeconst(zeta, steps=steps):
            return max(steps * h, h / zeta, law(zeta))

        zeta = _solve(e, timeconst, h, gravity)
        each = rebounds(zeta, timeconst(zeta), h, gravity)
        found = (zeta, timeconst(zeta), each, float(np.std(each) / max(np.mean(each), 1e-12)))
        if found[3] <= SPREAD:
            break
    zeta, tc, each, spread = found
    return ContactSet((mu, 0.0, rolling), (tc, zeta), float(np.mean(each)),
                      tc > law(zeta) * (1 + 1e-12) and duration > 0.0, spread, e, duration)


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
    for label, s in sets:
        e, duration = s.fitted, s.duration
        if s.floored and duration > 0.0:
            law = duration / (math.pi * s.solref[1])  # the timeconst that would keep it
            need = min(law / STEPS[0], law * s.solref[1])
            out.append(f"{label}: the fitted contact lasts {1e3 * duration:.3g} ms at "
                       f"{SPEED:g} m/s; at timestep {_num(timestep)} s the stiffest MuJoCo "
                       f"keeps stable and consistent (timeconst {_num(s.solref[0])} s) lasts "
                       f"longer; a timestep of {need:.2g} s or less would keep it")
        if abs(s.rebound - e) > 0.01 * max(e, 0.01):
            out.append(f"{label}: rebound ratio {e:.4g} is out of MuJoCo's reach at this "
                       f"timestep; the closest, {s.rebound:.4g}, is exported")
    if sets:
        worst = max(s.spread for _, s in sets)
        out.append(f"restitution: MuJoCo has none; each contact's solref damping ratio rebounds a "
                   f"ball dropped at {SPEED:g} m/s at the fitted ratio in MuJoCo's own step at "
                   f"this timestep, on average over where the touch falls within a step (one "
                   f"impact's varies by up to {100 * worst:.0f} % rms; a box's flat drop "
                   "within a few per cent)")
    return out


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
    sets, said = [], []  # (label, ContactSet) for the notes
    memo = {}  # a contact's set, by its kind and arguments: scenes repeat them

    def cached(make, *args):
        if (make, args) not in memo:
            memo[make, args] = make(fitted, *args)
        return memo[make, args]

    def remember(label, s):
        sets.append((label, s))
        return s

    # body classes: each material's contact with the ground, at its first body's mass
    materials = sorted({b.material for b in bodies}) if bodies else sorted(
        {""} | {k.partition("@")[2] for k in fitted.params if "@" in k and "+" not in k})
    mass_of = {m: next((b.mass for b in bodies if b.material == m), MASS) for m in materials}
    ground = {m: remember(f"body-ground{' ' + m if m else ''}",
                          cached(_ground_set, mass_of[m], h, gravity, m)) for m in materials}
    wall_mats = sorted({w.material for w in walls}) if walls else [""]
    wall = {w: cached(_wall_set, mass_of[materials[0]], h, gravity, materials[0], w)
            for w in wall_mats}
    if walls:
        for w, ws in wall.items():
            remember(f"body-wall{' ' + w if w else ''}", ws)
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
            s = cached(_ground_set, b.mass, h, gravity, b.material)
            if s.solref != ground[b.material].solref:  # another mass than its class's
                remember(f"{name}-ground", s)
            pairs.append((name, "ground", s))
            lines.append(f'    <body name="{name}" pos="{_vec(b.pos)}" quat="{_vec(b.quat)}">')
            if b.shape == "sphere" and not fitted.spin:  # the sliding model: it never turns
                lines += [f'      <joint name="{name}_{a}" type="slide" axis="{axis}"/>'
                          for a, axis in zip("xyz", ("1 0 0", "0 1 0", "0 0 1"))]
            else:
                lines.append(f'      <freejoint name="{name}"/>')
            lines.append(f'      <inertial pos="{_vec(b.com)}" mass="{_num(b.mass)}" '
                         f'diaginertia="{_vec(b.inertia)}"/>')
            lines.append(f'      <geom name="{name}" class="{_cls("cf_body", b.material)}" '
                         f'type="{kind}" size="{_vec(b.size)}" mass="0"/>')
            lines.append("    </body>")
            for w in walls:
                ws = cached(_wall_set, b.mass, h, gravity, b.material, w.material)
                if ws != wall[w.material]:  # a wall whose coefficient depends on the body's
                    remember(f"{name}-wall {w.wall_id}", ws)
                pairs.append((name, f"wall_{w.wall_id}", ws))
        for i, a in enumerate(bodies):
            for b in bodies[i + 1:]:
                m = a.mass * b.mass / (a.mass + b.mass)
                pairs.append((f"body_{a.body_id}", f"body_{b.body_id}", remember(
                    f"body {a.body_id}-body {b.body_id}",
                    cached(_pair_set, m, h, gravity, a.material, b.material))))
        lines.append("  </worldbody>")
        lines.append("  <contact>")  # every pair explicit: its friction rows stiff too
        for g1, g2, s in pairs:
            mu, _, roll = s.friction
            lines.append(f'    <pair geom1="{g1}" geom2="{g2}" condim="{condim}" '
                         f'friction="{_vec((mu, mu, 0.0, roll, roll))}" '
                         f'solref="{_vec(s.solref)}" solreffriction="{_vec((STEPS[0] * h, 1.0))}" '
                         f'solimp="{_num(IMPEDANCE)} {_num(IMPEDANCE)} 0.001 0.5 2"/>')
        lines.append("  </contact>")
    else:
        said.append(f"no dataset: contact durations are matched for a {MASS:g} kg body; "
                    "body-body and per-material wall contacts need <pair>s, and so does "
                    "friction that acts fully within an impact (solreffriction: give --dataset)")
    lines.append("</mujoco>")
    said = list((scene.notes if scene is not None else ())) + said + notes(fitted, sets, h)
    said = list(dict.fromkeys(said))
    text = "\n".join(lines).replace(
        "NOTES", "\n".join(f"  <!--   {n.replace('--', '- -')} -->" for n in said))
    return text + "\n", said
