"""pooltool's frictional inelastic body-body law (``laws: {body_body: frictional_inelastic}``).

pooltool 0.6's ``FrictionalInelastic3D`` ball-ball model
(``physics/resolve/ball_ball/frictional_inelastic``), after Alciatore's
technical proofs TP A-5, A-6 and A-14, in the notation of :mod:`simcore.laws.impulse`
(normal ``n`` from i to j, ``u = v_j - v_i``, ``W = 1/m_i + 1/m_j``):

* normal: restitution ``e`` (``e_bb``), ``J_n = -(1 + e) u_n / W`` as in the
  impulse law;
* tangential: opposite the slip ``u_t``, a velocity change of each ball of at
  most ``mu e |u_n|``, where ``e |u_n|`` is the separation speed after the
  normal impulse (pooltool's ``D_v_n_magnitude``, not the normal impulse per
  mass), capped by the no-slip solution (where the bounded change would
  reverse the slip);
* friction coefficient ``mu = mu_bb + mu_bb_b exp(-mu_bb_c |u_t|)``
  (Alciatore's speed dependence, pooltool's ``AlciatoreBallBallFriction`` with
  ``a = mu_bb``, ``b = mu_bb_b``, ``c = mu_bb_c``), ``|u_t|`` the slip speed
  before the impact.

Reconstructions.  pooltool resolves equal masses only; the bound is written
here as an impulse, ``J_t <= 2 mu e |u_n| / W``, which is a velocity change of
``mu e |u_n|`` per ball when the masses are equal and conserves momentum when
they are not.  The bodies do not spin in the sliding model, so the slip is the
relative velocity of the centres and the no-slip impulse ``|u_t| / W``; with
spin the contact points' slip and the rotational inertia enter (pooltool's
``-1/7`` of the slip for equal spheres).  A sustained (Zeno-guarded) contact
has ``e = 0`` and so no friction impulse under this law; its sustained
friction is the contact solve's ``mu_bb``.
"""

import numpy as np

from ..kernel.config import jit
from ..kernel.parameter import Parameter

NAME = "frictional_inelastic"

#: The coefficients only this law reads (besides ``mu_bb`` and ``e_bb``).
PARAMETERS = (
    Parameter("mu_bb_b", 0.0, (0.0, np.inf), "1",
              "speed-dependent part of the body-body friction, "
              "mu_bb + mu_bb_b exp(-mu_bb_c |u_t|) (Alciatore)",
              "body-body impact that slipped", "body", -1, law=NAME),
    Parameter("mu_bb_c", 1.0, (0.0, np.inf), "s/m",
              "decay of the speed-dependent body-body friction with the slip speed",
              "body-body impact that slipped, with mu_bb_b > 0", "body", -1, law=NAME),
)


@jit
def slip_bound(e, mu, mu_b, mu_c, un, ut, inv_sum):
    """The largest friction impulse of a slipping impact,
    ``2 (mu + mu_b exp(-mu_c |u_t|)) e |u_n| / W`` (zero unless approaching;
    real or complex, for the spinning model's complex-step tangents)."""
    if un.real >= 0.0:
        return 0.0
    return 2.0 * (mu + mu_b * np.exp(-mu_c * ut)) * e * -un / inv_sum


@jit
def slip_bound_tangent(coef, un, ut, inv_sum, dcoef, dun, dut):
    """The directional derivative of :func:`slip_bound` along the tangents of
    its inputs: ``coef = (e, mu, mu_b, mu_c)`` and their tangents ``dcoef =
    (de, dmu, dmu_b, dmu_c)``; ``dun``, ``dut`` the normal velocity's and
    slip speed's."""
    e, mu, mu_b, mu_c = coef
    de, dmu, dmu_b, dmu_c = dcoef
    if un >= 0.0:
        return 0.0
    decay = np.exp(-mu_c * ut)
    mu_eff = mu + mu_b * decay
    dmu_eff = dmu + dmu_b * decay - mu_b * decay * (dmu_c * ut + mu_c * dut)
    return 2.0 / inv_sum * (dmu_eff * e * -un + mu_eff * (de * -un - e * dun))
