"""Contact laws: the registry, and the seam through which impacts call them.

A dataset chooses a law per contact kind in ``dataset.yaml``::

    laws: {body_ground: impulse, body_body: frictional_inelastic, body_wall: impulse}

(absent kinds, or no ``laws`` key: ``impulse``, the patent's law of
:mod:`simcore.laws.impulse`).  Each :class:`Law` declares the contact kinds it
serves, the coefficients it reads besides the kind's own (declared in its
module's ``PARAMETERS`` with ``law=`` its name, so a coefficient vector holds
them only when its layout uses the law, see :class:`simcore.params.Layout`),
whether its sensitivities are exact, and what it is.

Kernels see a law as its code in the batch's ``laws`` array (one per kind,
:data:`BODY_GROUND`, :data:`BODY_BODY`, :data:`BODY_WALL`) and, at an impact,
a :class:`PairLaw` record of the code and the pair's coefficients; the
impact is an :class:`simcore.laws.impulse.Impact` record, which the sensitivities
read before it is applied.  The laws
of today differ in the bound on a slipping friction impulse
(:func:`slip_bound`, :func:`slip_bound_tangent`); the impulse's normal part,
its stick cap and its application are shared (:func:`pair_impact`,
``impulse.apply_pair``).

Sustained contacts (resting, sliding, pressed together) are the contact
solve's (:mod:`simcore.sliding.contact`) under every law: a law governs impacts.
"""

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from ..kernel.config import jit
from . import frictional_inelastic, impact_maps, impulse, penalty, stronge

#: The contact kinds, in the order of a batch's ``laws`` array.
KINDS = ("body_ground", "body_body", "body_wall")
BODY_GROUND, BODY_BODY, BODY_WALL = range(3)
#: The kinds the impact maps serve: a body against a fixed surface (a
#: dataset of measured impacts holds no body-body contact).
IMPACT_KINDS = ("body_ground", "body_wall")

LAW_IMPULSE = 0
LAW_FRICTIONAL_INELASTIC = 1
LAW_STRONGE_COMPLIANT = 2
LAW_SPRING_DAMPER = penalty.LAW_SPRING_DAMPER
LAW_HUNT_CROSSLEY = penalty.LAW_HUNT_CROSSLEY
LAW_IMPACT = penalty.LAW_IMPACT
LAW_NEWTON_LCP = impact_maps.LAW_NEWTON_LCP
LAW_POISSON_LCP = impact_maps.LAW_POISSON_LCP
LAW_STRONGE_ENERGETIC = impact_maps.LAW_STRONGE_ENERGETIC
#: The codes the impact seam (:func:`slip_bound`, :func:`pair_impact`) has
#: kernels for; any other gives NaN, never another law's impulse.
IMPACT_CODES = (LAW_IMPULSE, LAW_FRICTIONAL_INELASTIC)


@dataclass(frozen=True)
class Law:
    """A registered contact law: its name (``dataset.yaml`` ``laws:``), its
    code in the kernels, the contact kinds it serves, whether its
    sensitivities are exact, what it is, where it comes from, whether it
    needs the spinning model (``dataset.yaml`` ``model: {spin: true}``), and
    its family: ``impulse`` (impacts, the event-exact integrators) or
    ``penalty`` (forces from penetration, the time-stepper) or
    ``rigid_impact`` (impact maps of rigid bodies, for measured impacts:
    :mod:`simcore.laws.impact_maps`).  One model's laws are all of one
    family."""

    name: str
    code: int
    kinds: tuple
    differentiable: bool
    meaning: str
    source: str
    spin_only: bool = False
    family: str = "impulse"


REGISTRY = (
    Law("impulse", LAW_IMPULSE, KINDS, True,
        "restitution and a Coulomb friction impulse mu J_n, capped at stick",
        "the source patent, claims 6, 7 and 10 (simcore/impulse.py)"),
    Law(frictional_inelastic.NAME, LAW_FRICTIONAL_INELASTIC, ("body_body",), True,
        "restitution and a friction impulse of at most 2 mu e |u_n| / W, "
        "mu = mu_bb + mu_bb_b exp(-mu_bb_c |u_t|), capped at stick",
        "pooltool 0.6 FrictionalInelastic3D; Alciatore TP A-5, A-6, A-14 "
        "(simcore/frictional_inelastic.py)"),
    Law(stronge.NAME, LAW_STRONGE_COMPLIANT, ("body_wall",), False,
        "Stronge's compliant frictional impact of a spinning sphere on a cushion: "
        "restitution, Coulomb friction and the ratio of tangential to normal compliance "
        "frequencies; gross slip, stick-slip and slip-stick-slip in closed form",
        "Stronge, Impact Mechanics (2018) ch. 5; pooltool 0.6 StrongeCompliantLinear "
        "(simcore/stronge.py)", spin_only=True),
    Law(penalty.SPRING_DAMPER, LAW_SPRING_DAMPER, KINDS, False,
        "linear spring-damper F = k_sd x + c_sd x', clamped at >= 0",
        "001 (robot manipulation tutorial), simcore/penalty.py", family=penalty.FAMILY),
    Law(penalty.HUNT_CROSSLEY, LAW_HUNT_CROSSLEY, KINDS, False,
        "Hunt-Crossley F = k_hc x^n_hc (1 + chi x'), chi from the pair's restitution "
        "(exact for the law), clamped at >= 0",
        "001; Hunt and Crossley 1975 (simcore/penalty.py)", family=penalty.FAMILY),
    Law(penalty.IMPACT, LAW_IMPACT, KINDS, False,
        "k_imp x^n1_imp with damping ramped to d_max by a cubic step up to p_max, "
        "clamped at >= 0",
        "003 (rectangle face contact), simcore/penalty.py", family=penalty.FAMILY),
    Law(impact_maps.NEWTON, LAW_NEWTON_LCP, IMPACT_KINDS, True,
        "Newton's kinematic restitution with Coulomb friction over a pyramidal cone, an LCP "
        "at one or several points (can create energy on eccentric impacts)",
        "002; Stewart and Trinkle 1996, Anitescu and Potra 1997 (simcore/laws/impact_maps.py)",
        family=impact_maps.FAMILY),
    Law(impact_maps.POISSON, LAW_POISSON_LCP, IMPACT_KINDS, True,
        "Poisson's restitution: a compression LCP, then e times its normal impulses with the "
        "friction they allow",
        "002; Anitescu and Potra 1997 (simcore/laws/impact_maps.py)", family=impact_maps.FAMILY),
    Law(impact_maps.STRONGE, LAW_STRONGE_ENERGETIC, IMPACT_KINDS, True,
        "Stronge's energetic restitution with slip, stick and slip reversal at one point "
        "(never creates energy)",
        "Stronge, Impact Mechanics (2018) ch. 4-5 (simcore/laws/impact_maps.py)",
        family=impact_maps.FAMILY),
)
BY_NAME = {law.name: law for law in REGISTRY}
DEFAULT = "impulse"
#: The law of the kinds a model leaves unnamed when its laws are penalty
#: laws, or when it has boxes.
DEFAULT_PENALTY = penalty.HUNT_CROSSLEY
#: The law of the kinds an impact dataset leaves unnamed.
DEFAULT_IMPACT = impact_maps.POISSON
FAMILIES = ("impulse", penalty.FAMILY, impact_maps.FAMILY)


def resolve(laws=None, spin=None, boxes=False, impacts=None):
    """The law of every contact kind, ``{kind: name}``, from a ``laws``
    mapping (absent kinds: :data:`DEFAULT`, or :data:`DEFAULT_PENALTY` when
    the named laws are penalty laws or the model has ``boxes``, or
    :data:`DEFAULT_IMPACT` for measured impacts).  Raises
    ``ValueError`` naming the key or the law and what is allowed; with
    ``spin=False``, also for a law that needs the spinning model (None: not
    checked); for laws of two families, or impulse laws on boxes;
    ``impacts``: True for a dataset of measured impacts (its laws are
    impact maps), False for trajectories (no impact map), None unchecked."""
    if laws is None:
        laws = {}
    if not isinstance(laws, dict):
        raise ValueError(f"laws = {laws!r}: expected a mapping of contact kinds "
                         f"({', '.join(KINDS)}) to law names")
    named = {BY_NAME[n].family for n in laws.values() if isinstance(n, str) and n in BY_NAME}
    if len(named) > 1:
        raise ValueError(f"laws = {laws}: laws of different families (impulse: impacts, "
                         "event-exact; penalty: forces, time-stepping; rigid_impact: impact "
                         "maps of measured impacts) cannot be mixed in one model; "
                         f"name laws of one family: {family_names()}")
    maps = impact_maps.FAMILY
    if impacts is False and named == {maps}:
        raise ValueError(f"laws = {laws}: {family_names()[maps]} are impact maps for datasets "
                         "of measured impacts (dataset.yaml kind: impacts); trajectories need "
                         f"a law of {family_names()['impulse'] + family_names()[penalty.FAMILY]}")
    if impacts and named - {maps}:
        raise ValueError(f"laws = {laws}: a dataset of measured impacts takes impact maps, "
                         f"one of {family_names()[maps]}")
    if impacts or named == {maps}:
        out = dict.fromkeys(KINDS, DEFAULT_IMPACT)
        for kind, name in laws.items():
            if kind not in KINDS:
                raise ValueError(f"laws: unknown contact kind {kind!r}; expected one of "
                                 f"{list(KINDS)}")
            if impacts and kind not in IMPACT_KINDS:
                raise ValueError(f"laws.{kind}: measured impacts are of a body against fixed "
                                 f"surfaces; name laws of {list(IMPACT_KINDS)}")
            if not isinstance(name, str) or name not in BY_NAME:
                raise ValueError(f"laws.{kind} = {name!r}: expected one of "
                                 f"{family_names()[maps]}")
            out[kind] = name
        return out
    penalty_model = boxes or named == {penalty.FAMILY}
    if boxes and named == {"impulse"}:
        raise ValueError(f"laws = {laws}: boxes need a penalty law, one of "
                         f"{family_names()[penalty.FAMILY]}")
    if spin and penalty_model:
        raise ValueError("the spinning model runs spheres on impulse laws; penalty laws "
                         "and boxes need model: {spin: false}")
    out = dict.fromkeys(KINDS, DEFAULT_PENALTY if penalty_model else DEFAULT)
    for kind, name in laws.items():
        if kind not in KINDS:
            raise ValueError(f"laws: unknown contact kind {kind!r}; expected one of "
                             f"{list(KINDS)}")
        serving = [law.name for law in REGISTRY if kind in law.kinds and law.family != maps]
        if not isinstance(name, str) or name not in BY_NAME:
            raise ValueError(f"laws.{kind} = {name!r}: expected one of {serving}")
        if kind not in BY_NAME[name].kinds:
            raise ValueError(f"laws.{kind} = {name!r}: {name} serves "
                             f"{list(BY_NAME[name].kinds)}; for {kind} use one of {serving}")
        if spin is False and BY_NAME[name].spin_only:
            raise ValueError(f"laws.{kind} = {name!r}: {name} needs the spinning model; "
                             "add model: {spin: true} to dataset.yaml")
        out[kind] = name
    return out


def family(laws):
    """The family of a resolved ``{kind: name}`` (``impulse`` or ``penalty``)."""
    return BY_NAME[next(iter(laws.values()))].family


def family_names():
    """``{family: [law names]}``, for messages."""
    return {f: [law.name for law in REGISTRY if law.family == f] for f in FAMILIES}


def codes(laws):
    """The kernels' ``laws`` array (int64, one code per kind of :data:`KINDS`)
    of a resolved ``{kind: name}``."""
    return np.array([BY_NAME[laws[kind]].code for kind in KINDS], np.int64)


def spelled(laws):
    """The non-default entries of a resolved ``{kind: name}`` (what a
    ``dataset.yaml`` would write; empty for today's law everywhere, every
    kind for penalty laws)."""
    return {k: v for k, v in laws.items() if v != DEFAULT}


class PairLaw(NamedTuple):
    """The law of one impact and the pair's coefficients: restitution ``e``,
    friction ``mu`` and the law's own (``mu_b``, ``mu_c``: the speed-dependent
    friction of :mod:`simcore.laws.frictional_inelastic`; unread by other laws)."""

    code: int
    e: float
    mu: float
    mu_b: float
    mu_c: float


@jit
def slip_bound(law, un, jn, ut, inv_sum):
    """The largest friction impulse of a slipping impact under ``law``
    (:class:`PairLaw`), with normal velocity ``un``, normal impulse ``jn``,
    slip speed ``ut`` and ``inv_sum = 1/m_i + 1/m_j``."""
    if law.code == LAW_FRICTIONAL_INELASTIC:
        return frictional_inelastic.slip_bound(law.e, law.mu, law.mu_b, law.mu_c, un, ut,
                                               inv_sum)
    if law.code == LAW_IMPULSE:
        return law.mu * jn
    return np.nan  # a code without a kernel: never another law's impulse


@jit
def slip_bound_tangent(law, un, jn, ut, inv_sum, dcoef, dun, djn, dut):
    """The tangent of :func:`slip_bound` along one direction: ``dcoef`` the
    tuple of the coefficients' tangents ``(de, dmu, dmu_b, dmu_c)``, ``dun``,
    ``djn``, ``dut`` those of the normal velocity, normal impulse and slip speed."""
    if law.code == LAW_FRICTIONAL_INELASTIC:
        return frictional_inelastic.slip_bound_tangent((law.e, law.mu, law.mu_b, law.mu_c), un,
                                                       ut, inv_sum, dcoef, dun, dut)
    if law.code == LAW_IMPULSE:
        return dcoef[1] * jn + law.mu * djn
    return np.nan


@jit
def pair_impact(law, vi, vj, inv_mi, inv_mj, n):
    """The :class:`simcore.laws.impulse.Impact` of bodies i and j under ``law``
    (:class:`PairLaw`), before it is applied (``impulse.apply_pair``): normal
    impulse with restitution, friction impulse the smaller of the stick
    impulse and the law's slip bound."""
    inv_sum = inv_mi + inv_mj
    un, jn, t0, t1, t2, ut = impulse.pair_split(vi, vj, n, law.e, inv_sum)
    jt, slipped = impulse.capped(ut / inv_sum, slip_bound(law, un, jn, ut, inv_sum))
    return impulse.Impact(un, jn, jt, t0, t1, t2, ut, slipped)
