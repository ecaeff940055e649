"""A fit in pooltool's terms (pooltool 0.6): its ball parameters, its
resolver's models and constants, and the table's cushion height, as one
YAML file.

contactfit's spinning model is pooltool's physics (``billiards-notes``), so
the coefficients map one to one:

==================  ================================================================
contactfit          pooltool 0.6
==================  ================================================================
``mu_k``            ``BallParams.u_s`` (the cloth's sliding friction)
``mu_r``            ``u_r`` (rolling resistance)
``mu_sp`` [m]       ``u_sp_proportionality = mu_sp / R`` (pooltool's spinning
                    friction is that ratio times the radius)
``e_bb``            ``e_b``; pooltool uses the mean of the two balls'
``mu_bb``,          the resolver's ball-ball ``frictional_inelastic`` model with
``mu_bb_b``,        ``alciatore`` friction ``a``, ``b``, ``c`` (body-body law
``mu_bb_c``         ``frictional_inelastic``), or ``average`` friction of the balls'
                    ``u_b = mu_bb`` (law ``impulse``)
``e_bw``, ``mu_w``  ``e_c``, ``f_c``
``omega_ratio_w``   the ``stronge_compliant`` cushion models' ``omega_ratio`` (law
                    ``stronge_compliant``; law ``impulse``: pooltool's
                    ``impulse_frictional_inelastic``)
``gravity``         ``g``
walls' ``height``   ``BilliardTableSpecs.cushion_height``
==================  ================================================================

The file::

    ball_params: {m, R, u_s, u_r, u_sp_proportionality, u_b, e_b, e_c, f_c, g}
    resolver: {...}      # pooltool's resolver.yaml (version 9): Resolver.load reads it
    table: {cushion_height}

``m`` and ``R`` come from the dataset's balls (with ``--dataset``; else
pooltool's own stay), as does the cushion height.  pooltool has no static
friction: a fit's ``mu_s`` and ``v_th`` (its stiction switch) are said and
left out; ``e_bg`` has no counterpart (pooltool's balls stay on the cloth).
Refused: a fit without the spinning model (sliding spheres or boxes), a
pair's own coefficient (``NAME@A+B``: pooltool's ball-ball and cushion
values belong to a ball), and a scene whose balls are of several materials
or sizes (one ``ball_params``).
"""

import yaml

#: pooltool's resolver file version these models and keys are written for.
RESOLVER_VERSION = 9
#: contactfit's body-wall laws -> pooltool's ball-cushion models.
CUSHION_MODELS = {"stronge_compliant": "stronge_compliant",
                  "impulse": "impulse_frictional_inelastic"}
#: contactfit's body-body laws -> pooltool's ball-ball friction models.
BALL_FRICTION = {"frictional_inelastic": "alciatore", "impulse": "average"}


def refuse(fitted, scene=None):
    """Raise ``ValueError`` (one line) for a fit pooltool has no counterpart for."""
    where = fitted.where
    if not fitted.spin:
        raise ValueError(f"{where}: pooltool simulates billiard balls that roll and spin; a fit "
                         "of another model (sliding spheres, boxes) has no counterpart there "
                         "(export it --to mujoco)")
    pairs = sorted(k for k in fitted.params if "+" in k)
    if pairs:
        raise ValueError(f"{where}: {pairs[0]} is a pair's own coefficient; pooltool's ball-ball "
                         "and cushion values belong to each ball (fit it without the pair "
                         "address)")
    for kind, table in (("body_wall", CUSHION_MODELS), ("body_body", BALL_FRICTION)):
        if fitted.law(kind) not in table:
            raise ValueError(f"{where}: the {kind} law {fitted.law(kind)!r} has no pooltool "
                             f"model (pooltool's: {', '.join(table)})")
    if scene is not None:
        shapes = {b.shape for b in scene.bodies}
        if shapes != {"sphere"}:
            raise ValueError(f"{where}: {scene.name} has {', '.join(sorted(shapes - {'sphere'}))} "
                             "bodies; pooltool's are balls")
        balls = {(b.material, b.size, b.mass) for b in scene.bodies}
        if len(balls) > 1:
            raise ValueError(f"{where}: {scene.name}'s balls differ in material, size or mass; "
                             "the export writes one ball_params")


def write(fitted, scene=None, timestep=None):
    """``(text, notes)``: the pooltool parameter file of ``fitted`` (module
    docstring).  ``timestep`` is refused: pooltool is event-based."""
    if timestep is not None:
        raise ValueError("--timestep: pooltool is event-based and takes no timestep")
    refuse(fitted, scene)
    ball = scene.bodies[0] if scene is not None and scene.bodies else None
    mat = ball.material if ball is not None else ""
    v = lambda name: fitted.value(name, mat)  # noqa: E731 (every value is the ball's)
    notes = []
    params = {}
    if ball is not None:
        params.update(m=ball.mass, R=ball.size[0])
    else:
        notes.append("no dataset: the balls' m and R and the cushion height stay pooltool's "
                     "(give --dataset); u_sp_proportionality is mu_sp over pooltool's default "
                     "radius 0.028575 m")
    radius = ball.size[0] if ball is not None else 0.028575
    params.update(u_s=v("mu_k"), u_r=v("mu_r"), u_sp_proportionality=v("mu_sp") / radius,
                  u_b=v("mu_bb"), e_b=v("e_bb"), e_c=v("e_bw"), f_c=v("mu_w"))
    if scene is not None or "gravity" in fitted.params:
        params["g"] = scene.gravity if scene is not None else fitted.params["gravity"]
    friction = {"model": BALL_FRICTION[fitted.law("body_body")]}
    if friction["model"] == "alciatore":
        friction.update(a=v("mu_bb"), b=v("mu_bb_b"), c=v("mu_bb_c"))
    else:
        notes.append("body-body law impulse: pooltool's frictional_inelastic ball-ball model "
                     "with the balls' u_b (= mu_bb), which caps the throw by u_b times the "
                     "normal velocity change")
    cushion = {"model": CUSHION_MODELS[fitted.law("body_wall")]}
    if cushion["model"] == "stronge_compliant":
        cushion["omega_ratio"] = v("omega_ratio_w")
    resolver = {"ball_ball": {"friction": friction, "model": "frictional_inelastic"},
                "ball_linear_cushion": dict(cushion), "ball_circular_cushion": dict(cushion),
                "ball_pocket": {"model": "canonical"},
                "stick_ball": {"english_throttle": 1.0, "squirt_throttle": 1.0,
                               "model": "instantaneous_point"},
                "transition": {"model": "canonical"}, "version": RESOLVER_VERSION}
    doc = {"ball_params": {k: float(x) for k, x in params.items()}, "resolver": resolver}
    heights = sorted({w.height for w in scene.walls if w.height is not None}) if scene else []
    if heights:
        doc["table"] = {"cushion_height": heights[0]}
        if len(heights) > 1:
            notes.append(f"the cushions' heights differ ({heights[0]:g}-{heights[-1]:g} m): "
                         "pooltool's table has one; the lowest is exported")
    if v("mu_s") > v("mu_k") and v("v_th") > 1e-6:
        notes.append(f"mu_s {v('mu_s'):.4g} (static friction below v_th {v('v_th'):.3g} m/s): "
                     "pooltool has none; left out")
    head = "".join(f"# {line}\n" for line in
                   ["contactfit export to pooltool 0.6: BallParams(**ball_params), "
                    "Resolver from resolver (its resolver.yaml), the table's cushion_height",
                    *(f"approximated: {n}" for n in notes)])
    return head + yaml.safe_dump(doc, sort_keys=False), notes
