"""What every engine's sensitivities share: the flags of a scenario whose
tangents are not exact, the seeds of the initial-velocity directions, and
the accumulation of trajectory residuals with their tangents."""

from .config import jit

#: Reasons a scenario's tangents are not exact (bit flags of ``nondiff``).
ND_GENERAL = 1      # sustained wall or body contact (general solve)
ND_STICK = 4        # body-body stick event
ND_SYMPLECTIC = 8   # symplectic integrator
ND_GRAZING = 16     # impact with zero normal speed (event time not differentiable)
ND_BODY_PENALTY = 64   # body-body contact point in the time-stepper (simcore.rigid.rigid_tangent)
ND_LAG_STEPPED = 128   # time-offset direction with control windows in the time-stepper
ND_STIFF = 256         # tangents blown up: an expanding step (simcore.engine._mark_blown)
NONDIFF_REASONS = (
    (ND_GENERAL, "sustained wall or body-body contact"),
    (ND_STICK, "body-body stick event"),
    (ND_SYMPLECTIC, "symplectic integrator"),
    (ND_GRAZING, "grazing impact"),
    (ND_BODY_PENALTY, "body-body contact in the time-stepper"),
    (ND_LAG_STEPPED, "time offset of control windows in the time-stepper"),
    (ND_STIFF, "expanding step in the time-stepper (tangents blew up)"),
)


@jit
def seed(nb, t_vel, tvel):
    """Unit tangents of the initial velocities: direction p moves ``vel[i, d]``
    where ``t_vel[p] = 3 i + d`` (``-1``: not an initial-velocity direction)."""
    for p in range(t_vel.shape[0]):
        q = t_vel[p]
        if q >= 0 and q // 3 < nb:
            tvel[q // 3, q % 3, p] = 1.0


@jit
def accumulate(nb, pos_s, meas_s, tpos_s, sse, grad, gn):
    """Add one sample's trajectory residuals ``r = p - p*`` (NaN in ``p*``:
    missing) to ``sse[0] += r.r``, ``grad += J^T r`` and ``gn += J^T J``
    (``J`` the tangent of ``p``).  ``gn`` of shape ``(0, 0)`` is skipped."""
    nt = grad.shape[0]
    full = gn.shape[0] == nt
    for i in range(nb):
        for d in range(3):
            m = meas_s[i, d]
            if m != m:
                continue
            r = pos_s[i, d] - m
            sse[0] += r * r
            for p in range(nt):
                jp = tpos_s[i, d, p]
                grad[p] += jp * r
                if full:
                    for q in range(p, nt):
                        gn[p, q] += jp * tpos_s[i, d, q]
