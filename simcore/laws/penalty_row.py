"""The penalty family's coefficient row: what the time-stepper's kernels
read of a contact (:mod:`simcore.laws.penalty`).

Per contact kind, the kind's own static, kinetic and restitution
coefficients (``OWN``), then the family's and its laws' shared ones
(``SHARED``), then the derived columns the laws fill at set-up from the
others (``C_ALPHA``: Hunt-Crossley's ``a(e)``, :mod:`simcore.laws.hunt_crossley`).
"""

SHARED = ("v_e1", "v_e2", "k_v", "mu_roll", "k_sd", "c_sd", "k_hc", "n_hc", "k_imp",
          "n1_imp", "d_max", "p_max")
OWN = {"body_ground": ("mu_s", "mu_k", "e_bg"),
       "body_body": ("mu_bb_s", "mu_bb", "e_bb"),
       "body_wall": ("mu_w_s", "mu_w", "e_bw")}
(C_MU_S, C_MU_K, C_E, C_VE1, C_VE2, C_KV, C_MU_ROLL, C_K_SD, C_C_SD, C_K_HC, C_N_HC,
 C_K_IMP, C_N1_IMP, C_D_MAX, C_P_MAX) = range(15)
#: A derived column, filled at set-up: Hunt-Crossley's ``a(e)`` of the row.
C_ALPHA = 15
NCOEF = 16

#: Slowest approach speed [m/s] a damping scaled by the approach speed is
#: scaled to (the damping of a touch at zero speed is unbounded).
V_IMPACT_MIN = 1e-4
