"""Random scenario generators shared by the oracle, determinism and benchmark tests."""

import numpy as np

import simcore

BOX = 0.5  # half-size of the table [m]


def box_walls(half=BOX):
    """Four walls of a square table centred on the origin, normals inward."""
    return np.array([[1, 0, 0, -half], [-1, 0, 0, -half],
                     [0, 1, 0, -half], [0, -1, 0, -half]], float)


def random_scenario(rng, nbody=None, t_end=1.2, dt=1e-3, name=""):
    """2-4 spheres on a walled table: pushes, collisions, wall hits, stops.

    Some bodies start in the air (they fall and bounce), some pushes run
    across the motion (rotating friction directions), some stay below the
    static threshold.
    """
    nb = int(rng.integers(2, 5)) if nbody is None else nbody
    radius = rng.uniform(0.04, 0.08, nb)
    mass = rng.uniform(0.1, 0.4, nb)
    pos = np.zeros((nb, 3))
    for i in range(nb):
        for _ in range(1000):
            xy = rng.uniform(-BOX + radius[i], BOX - radius[i], 2)
            if all(np.hypot(*(xy - pos[j, :2])) > radius[i] + radius[j] + 1e-3 for j in range(i)):
                break
        pos[i, :2] = xy
        pos[i, 2] = radius[i]
    vel = np.zeros((nb, 3))
    vel[:, :2] = rng.normal(0.0, 0.8, (nb, 2))
    airborne = rng.random(nb) < 0.15
    pos[airborne, 2] += rng.uniform(0.01, 0.2, airborne.sum())
    vel[rng.random(nb) < 0.2] = 0.0
    controls = []
    for i in range(nb):
        if rng.random() < 0.4:
            t0 = rng.uniform(0.0, 0.6 * t_end)
            t1 = t0 + rng.uniform(0.05, 0.4)
            f = rng.normal(0.0, 1.0, 2) * mass[i] * 9.81 * rng.choice([0.2, 0.6, 1.5])
            controls.append([i, t0, t1, f[0], f[1], 0.0])
    return simcore.Scenario(radius=radius, mass=mass, pos=pos, vel=vel, t_end=t_end, dt=dt,
                            walls=box_walls(), controls=np.array(controls).reshape(-1, 6),
                            name=name)


def random_params(rng):
    """Coefficients spread around the defaults, always valid."""
    mu_k = rng.uniform(0.05, 0.3)
    return {"mu_k": mu_k, "mu_s": mu_k * rng.uniform(1.0, 1.6), "v_th": rng.uniform(0.01, 0.1),
            "mu_bb": rng.uniform(0.0, 0.3), "e_bb": rng.uniform(0.5, 1.0),
            "mu_w": rng.uniform(0.0, 0.4), "e_bw": rng.uniform(0.3, 1.0),
            "e_bg": rng.uniform(0.2, 0.8)}
