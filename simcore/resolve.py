"""Stage 6 of the event loop: resolve the event the search found.

Impacts go through the impulse law (:mod:`simcore.impulse`): restitution and
a Coulomb impulse against a plane (:func:`impact_plane`) or another body
(:func:`impact_body`), with the Zeno guard: an approach slower than
``V_CONTACT`` between surfaces pressed together is plastic and the pair
enters sustained contact.  Impulses then propagate through contacts that the
impact drove together (:func:`propagate`).  Mode events change no velocity
but a flag: a stop zeroes the body's velocity (logged), a ``v_th`` crossing
flips the speed regime, a body-body stick removes the relative tangential
velocity.  Every impulse maps the tangents with the same e, mu and sustained
decision (:mod:`simcore.tangent`), and they are logged with the event.
"""

from . import impulse, tangent
from .collision import contact_normal_body_body
from .config import V_CONTACT, V_STOP, jit
from .events import EventKind, log_event, log_tangent
from .stages import IMPACT_BODY, IMPACT_PLANE, STICK, STOP, V_ROUND, VTH, horizontal_speed, rel_normal


@jit
def impact_plane(i, k, t, sc, w, tw, sens, ev, pos, vel, propagated):
    """Impact of body i on plane k (0 = ground), logged.

    ``propagated``: the plane was already in contact and another impulse drove
    the body into it.  Newton's law per contact gives the rebound ``-e`` times
    the approach speed *before* the event, which was zero: the response is
    plastic and the contact stays.  The ground's friction is that of the
    body's speed regime (``mu_k`` at or above ``v_th``, else ``mu_s``).
    """
    n = w.plane_n[k]
    vn = vel[i, 0] * n[0] + vel[i, 1] * n[1] + vel[i, 2] * n[2]
    an = w.acc[i, 0] * n[0] + w.acc[i, 1] * n[1] + w.acc[i, 2] * n[2]
    # Zeno guard: a slow approach while pressed becomes sustained contact.
    sustained = propagated or (-vn < V_CONTACT and an <= 0.0)
    e = 0.0 if sustained else w.pl_e[i, k]
    mi = sc.mat[i]
    if k == 0:
        fast = horizontal_speed(vel[i]) >= w.g_vth[i]
        mu = w.g_mu_k[i] if fast else w.g_mu_s[i]
        p_mu = tw.pdir[sc.bg_idx[mi, 1 if fast else 0]]
        p_e = tw.pdir[sc.bg_idx[mi, 3]]
    else:
        mu = w.pl_mu[i, k]
        p_mu = tw.pdir[sc.bw_idx[mi, sc.wall_mat[k - 1], 0]]
        p_e = tw.pdir[sc.bw_idx[mi, sc.wall_mat[k - 1], 1]]
    if tw.tvel.shape[2] > 0:  # tangents first: they read the velocity before the impulse
        tangent.impact_plane(i, vel[i], n, e, mu, sustained, p_e, p_mu, tw.tvel, tw.tdva,
                             sens.signal)
        tw.tdvb[:] = 0.0
    jn, jt, slipped = impulse.body_plane(vel[i], n, e, mu, w.dva)
    if sustained:
        w.plane_contact[i, k] = True
        vn = vel[i, 0] * n[0] + vel[i, 1] * n[1] + vel[i, 2] * n[2]
        for d in range(3):
            vel[i, d] -= vn * n[d]
        if k == 0:
            pos[i, 2] = w.plane_d[0] + sc.radius[i]
    kind = EventKind.BODY_GROUND if k == 0 else EventKind.BODY_WALL
    for d in range(3):
        w.dvb[d] = 0.0  # a plane does not move
    log_event(ev, t, kind, i, k - 1, n, jn * sc.mass[i], jt * sc.mass[i], w.dva, w.dvb,
              1 if slipped else 0)
    log_tangent(ev, tw.ttau, tw.tdva, tw.tdvb)
    after_velocity_change(i, w, vel)


@jit
def impact_body(i, j, t, sc, w, tw, sens, ev, pos, vel):
    """Impact between bodies i < j at the time-of-impact configuration, logged."""
    nrm = w.nrm
    contact_normal_body_body(sc.shape[i], sc.shape[j], pos[i], pos[j], nrm)
    un, an = rel_normal(i, j, vel, w.acc, nrm)
    sustained = -un < V_CONTACT and an <= 0.0
    e = 0.0 if sustained else w.b_e[i, j]
    if tw.tvel.shape[2] > 0:
        pair = sc.bb_idx[sc.mat[i], sc.mat[j]]
        tangent.impact_body(i, j, vel, pos, w.inv_m, e, w.b_mu[i, j], sustained,
                            tw.pdir[pair[1]], tw.pdir[pair[0]], tw, sens.signal)
    jn, jt, slipped = impulse.body_body(vel[i], vel[j], w.inv_m[i], w.inv_m[j], nrm, e,
                                        w.b_mu[i, j], w.dva, w.dvb)
    if sustained:
        w.body_contact[i, j] = True
        w.body_contact[j, i] = True
        un = 0.0
        for d in range(3):
            un += (vel[j, d] - vel[i, d]) * nrm[d]
        zero_normal_velocity(i, j, vel, w.inv_m, nrm, un)
    log_event(ev, t, EventKind.BODY_BODY, i, j, nrm, jn, jt, w.dva, w.dvb,
              1 if slipped else 0)
    log_tangent(ev, tw.ttau, tw.tdva, tw.tdvb)


@jit
def zero_normal_velocity(i, j, vel, inv_m, nrm, un):
    """Remove the relative normal velocity ``un`` of bodies i, j (momentum kept)."""
    wsum = inv_m[i] + inv_m[j]
    for d in range(3):
        vel[j, d] -= un * nrm[d] * inv_m[j] / wsum
        vel[i, d] += un * nrm[d] * inv_m[i] / wsum


@jit
def after_velocity_change(i, w, vel):
    """Refresh the ground mode flags of body i after an impulse."""
    w.starting[i] = False
    if w.plane_contact[i, 0]:
        vh = horizontal_speed(vel[i])
        w.resting[i] = vh <= V_STOP
        if w.resting[i]:
            vel[i, 0] = 0.0
            vel[i, 1] = 0.0
        w.above[i] = vh >= w.g_vth[i]
    else:
        w.resting[i] = False


@jit
def _propagate_planes(i, t, sc, w, tw, sens, ev, pos, vel):
    """One pass over body i's plane contacts; returns whether an impulse was applied."""
    changed = False
    for k in range(sc.wall_n.shape[0] + 1):
        if not w.plane_contact[i, k]:
            continue
        n = w.plane_n[k]
        vn = vel[i, 0] * n[0] + vel[i, 1] * n[1] + vel[i, 2] * n[2]
        if vn < -V_ROUND:
            w.plane_contact[i, k] = False
            impact_plane(i, k, t, sc, w, tw, sens, ev, pos, vel, True)
            changed = True
            w.work[i] = True
        elif vn > V_ROUND and (vn >= V_CONTACT or
                               w.acc[i, 0] * n[0] + w.acc[i, 1] * n[1] + w.acc[i, 2] * n[2]
                               > 0.0):
            w.plane_contact[i, k] = False
            if k == 0:
                w.resting[i] = False
                w.starting[i] = False
        else:
            # Still in contact: the normal velocity is rounding.
            for d in range(3):
                vel[i, d] -= vn * n[d]
            tangent.project_plane(i, n, tw.tvel)
    return changed


@jit
def _propagate_bodies(i, t, sc, w, tw, sens, ev, pos, vel):
    """One pass over body i's body contacts; returns whether an impulse was applied."""
    changed = False
    for j in range(sc.radius.shape[0]):
        if j == i or not w.body_contact[i, j]:
            continue
        lo = min(i, j)
        hi = max(i, j)
        contact_normal_body_body(sc.shape[lo], sc.shape[hi], pos[lo], pos[hi], w.nrm)
        un, an = rel_normal(lo, hi, vel, w.acc, w.nrm)
        if un < -V_ROUND:
            w.body_contact[lo, hi] = False
            w.body_contact[hi, lo] = False
            impact_body(lo, hi, t, sc, w, tw, sens, ev, pos, vel)
            after_velocity_change(lo, w, vel)
            after_velocity_change(hi, w, vel)
            w.work[lo] = True
            w.work[hi] = True
            changed = True
        elif un > V_ROUND and (un >= V_CONTACT or an > 0.0):
            w.body_contact[lo, hi] = False
            w.body_contact[hi, lo] = False
        else:
            zero_normal_velocity(lo, hi, vel, w.inv_m, w.nrm, un)
    return changed


@jit
def propagate(t, sc, w, tw, sens, ev, pos, vel):
    """Sequential impulses through the contacts of the bodies in ``w.work``.

    An active contact that now approaches faster than ``V_ROUND`` gets an
    impact impulse (logged): plastic against a plane (see :func:`impact_plane`),
    with restitution between bodies (so a Newton's cradle passes the impulse
    along, as sequential impulses do).  One that separates is released, unless
    it separates slower than ``V_CONTACT`` while its accelerations do not pull
    it apart: the mirror of the Zeno guard, the contact stays and that small
    normal velocity is removed.  Passes repeat until nothing changes
    (at most ``4 nb`` passes).
    """
    nb = sc.radius.shape[0]
    for _pass in range(4 * nb):
        changed = False
        for i in range(nb):
            if not w.work[i]:
                continue
            w.work[i] = False
            if _propagate_planes(i, t, sc, w, tw, sens, ev, pos, vel):
                changed = True
            if _propagate_bodies(i, t, sc, w, tw, sens, ev, pos, vel):
                changed = True
        if not changed:
            break
    for i in range(nb):
        after_velocity_change(i, w, vel)


@jit
def _stop(i, t, w, tw, ev, vel):
    """The slide has reached zero speed along its (frozen) direction: the
    body stops.  (Where a push rotates the direction, any sideways velocity
    is dropped too: first order in dt there.)"""
    for d in range(3):
        w.dva[d] = -vel[i, d]
        vel[i, d] = 0.0
        for p in range(tw.ttau.shape[0]):
            tw.tdva[d, p] = -tw.tvel[i, d, p]
            tw.tvel[i, d, p] = 0.0
    if w.plane_contact[i, 0]:
        w.resting[i] = True
        w.starting[i] = False
        w.above[i] = False
        log_event(ev, t, EventKind.STOP, i, -1, w.zero3, 0.0, 0.0, w.dva, w.zero3, -1)
        tw.tdvb[:] = 0.0
        log_tangent(ev, tw.ttau, tw.tdva, tw.tdvb)


@jit
def _stick(i, j, sc, w, pos, vel):
    """Remove the relative tangential velocity of bodies i, j, conserving momentum."""
    contact_normal_body_body(sc.shape[i], sc.shape[j], pos[i], pos[j], w.nrm)
    un = 0.0
    for d in range(3):
        un += (vel[j, d] - vel[i, d]) * w.nrm[d]
    wsum = w.inv_m[i] + w.inv_m[j]
    for d in range(3):
        ut = (vel[j, d] - vel[i, d]) - un * w.nrm[d]
        vel[j, d] -= ut * w.inv_m[j] / wsum
        vel[i, d] += ut * w.inv_m[i] / wsum


@jit
def _tangents_on_contacts(w, tw):
    """Keep the tangents on the active planes, and at rest for resting bodies."""
    for i in range(w.inv_m.shape[0]):
        for k in range(w.plane_n.shape[0]):
            if w.plane_contact[i, k]:
                tangent.project_plane(i, w.plane_n[k], tw.tvel)
        if w.plane_contact[i, 0] and w.resting[i]:
            tw.tvel[i, :2] = 0.0


@jit
def resolve(code, i, j, t, sc, w, tw, sens, ev, pos, vel):
    """Stage 6: apply the event ``code`` (a :mod:`simcore.stages` code) of
    body ``i`` and plane or body ``j`` at time ``t``; returns the nondiff
    flags it raises."""
    nt = sens.t_param.shape[0]
    for q in range(sc.radius.shape[0]):
        w.work[q] = False
    if code == IMPACT_PLANE:
        impact_plane(i, j, t, sc, w, tw, sens, ev, pos, vel, False)
        w.work[i] = True
    elif code == IMPACT_BODY:
        impact_body(i, j, t, sc, w, tw, sens, ev, pos, vel)
        w.work[i] = True
        w.work[j] = True
    elif code == STOP:
        _stop(i, t, w, tw, ev, vel)
        return 0
    elif code == VTH:
        w.above[i] = not w.above[i]
        return 0
    elif code == STICK:
        _stick(i, j, sc, w, pos, vel)
        return tangent.ND_STICK if nt > 0 else 0
    # Impulses propagate through contacts the impact drove together.
    propagate(t, sc, w, tw, sens, ev, pos, vel)
    if nt > 0:
        _tangents_on_contacts(w, tw)
    return 0
