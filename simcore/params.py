"""The coefficient vector: the registry of parameters, and per-material layouts.

The registry (:data:`REGISTRY`) gathers what each physics module declares
(``PARAMETERS`` of :mod:`contact`, :mod:`impulse` and the set-up offsets
:data:`simcore.kernel.parameter.SETUP_PARAMETERS`, see
:class:`simcore.kernel.parameter.Parameter`); the names, defaults, bounds, units and
the identifiability report's wording all come from it.  Defaults are typical
of phenolic billiard balls on cloth with rubber cushions: starting points for
a fit, not measured truth.  ``contactfit params`` prints the table.

Per-material coefficients
-------------------------
A coefficient vector has the ten global entries (:data:`NAMES`, fixed slots
the kernels know), then the coefficients of the contact laws its layout uses
(``mu_bb_b``, ``mu_bb_c`` with ``frictional_inelastic``, see
:mod:`simcore.laws.registry`), then the per-material entries its :class:`Layout`
names.  Materials are the names of the ``material`` column of ``bodies`` and
``walls``; a body or wall without one has none.

* ``NAME@MAT``: the coefficient of contacts between a body of material MAT
  and the ground (``mu_s``, ``mu_k``, ``v_th``, ``e_bg``), or a wall without
  a material (``mu_w``, ``e_bw``);
* ``NAME@A+B``: the pair of materials A and B, in either order: body-body
  (``mu_bb``, ``e_bb``), or body A against a wall of material B (``mu_w``,
  ``e_bw``).  Pairs are written in alphabetical order (``mu_bb@resin+rubber``);
* plain ``NAME`` is the value of every contact that no addressed entry covers.

* the body's own coefficients (``com_x``, ``com_y``, ``com_z``,
  ``inertia_scale``) as ``NAME@MAT`` (the bodies of material MAT); they and
  the recording's (``gravity``, ``tilt_x``, ``tilt_y``) are held only when
  named (:data:`NAMED_PARAMETERS`).

``NAME@MAT`` for a pair coefficient, ``NAME@A+B`` for a ground one, and any
address on an offset are errors, as is a material the dataset does not have.
An addressed entry that is not given takes its plain name's value.

The kernels never read a contact coefficient by slot.  They read
``params[bb[mat_a, mat_b, k]]`` (k = 0 friction, 1 restitution, 2 and 3
the speed-dependent friction ``mu_bb_b``, ``mu_bb_c``: -1 where the layout
does not hold them, as its body-body law does not read them),
``params[bw[mat_body, mat_wall, k]]`` and ``params[bg[mat_body, k]]``
(k = mu_s, mu_k, v_th, e_bg), with material id 0 for "no material" and the
named materials from 1 on; :class:`Layout` builds those tables.
"""

import difflib
import re
from dataclasses import dataclass

import numpy as np

from .kernel.parameter import (  # noqa: F401  (the slots, re-exported)
    BODY_COLUMNS,
    BODY_PARAMETERS,
    E_BB,
    E_BG,
    E_BW,
    GROUND_COLUMNS,
    GROUND_OFFSET,
    MASS_COLUMNS,
    MU_BB,
    MU_K,
    MU_S,
    MU_W,
    NPARAM,
    SCENE_COLUMNS,
    SCENE_PARAMETERS,
    SETUP_PARAMETERS,
    TIME_OFFSET,
    V_TH,
    WALL_COLUMNS,
)
from .laws import frictional_inelastic, impulse, penalty, stronge
from .laws import registry as contact_laws
from .sliding import contact
from .spin import spin as spin_model

#: The parameters every model reads, in slot order.
FIXED = tuple(sorted(contact.PARAMETERS + impulse.PARAMETERS + SETUP_PARAMETERS,
                     key=lambda p: p.slot))
assert [p.slot for p in FIXED] == list(range(NPARAM)), "parameter slots must be 0..NPARAM-1"
#: The coefficients a contact law reads besides its kind's own (no slot: a
#: layout holds them when it uses the law).
LAW_PARAMETERS = frictional_inelastic.PARAMETERS + stronge.PARAMETERS + penalty.PARAMETERS
assert all(p.slot == -1 and (p.law in contact_laws.BY_NAME or p.law in contact_laws.FAMILIES)
           for p in LAW_PARAMETERS)
#: The coefficients only the spinning model reads (a layout holds them when
#: its model spins, ``dataset.yaml`` ``model: {spin: true}``).
SPIN_PARAMETERS = spin_model.PARAMETERS
assert all(p.slot == -1 and p.model == spin_model.NAME for p in SPIN_PARAMETERS)
#: The coefficients a vector holds only when named (the body's own, the
#: recording's): :data:`simcore.kernel.parameter.BODY_PARAMETERS`, ``SCENE_PARAMETERS``.
NAMED_PARAMETERS = BODY_PARAMETERS + SCENE_PARAMETERS
assert all(p.slot == -1 and p.named for p in NAMED_PARAMETERS)
#: Every parameter: the fixed slots, then the laws' own, then the spinning
#: model's, then those held only when named.
REGISTRY = FIXED + LAW_PARAMETERS + SPIN_PARAMETERS + NAMED_PARAMETERS
BY_NAME = {p.name: p for p in REGISTRY}

#: The fixed slots' names: the entries every vector starts with.
NAMES = tuple(p.name for p in FIXED)
#: The contact coefficients of the fixed slots: what a fit frees unless told
#: otherwise, with the laws' own that a layout holds (:attr:`Layout.coefficients`).
COEFFICIENTS = tuple(p.name for p in FIXED if p.contact != "global")
#: The global offsets of the measurement set-up (nuisance unknowns).
OFFSETS = tuple(p.name for p in REGISTRY if p.contact == "global")
#: The defaults of the fixed slots (a law's own coefficients have theirs in
#: :data:`BY_NAME`, and a layout that uses the law starts them there).
DEFAULTS = {p.name: p.default for p in FIXED}
#: Coefficients whose default is another one's value at the same address
#: (the penalty laws' static friction defaults to the kind's kinetic one).
DEFAULT_FROM = penalty.DEFAULT_FROM
#: Closed bounds of each parameter; ``v_th`` must also be strictly positive and
#: ``mu_s >= mu_k`` (checked in :meth:`Layout.validate`).
BOUNDS = {p.name: p.bounds for p in REGISTRY}
UNITS = {p.name: p.unit for p in REGISTRY}
#: What carries each coefficient's signal (for the identifiability report).
SIGNAL_OF = {p.name: p.signal for p in REGISTRY}
#: The natural size of the offsets and of the body's and the recording's
#: coefficients: relative measures (a weak-identifiability threshold,
#: multi-start spreads) are taken against ``max(|value|, scale)``, since an
#: offset's true value may be zero, and a multi-start draws them within ``+-2
#: scale`` of their start.
OFFSET_SCALE = {p.name: p.scale for p in REGISTRY if p.scale > 0.0}

#: What a material name may be made of (it becomes part of parameter names
#: and of MLflow keys).
MATERIAL_NAME = re.compile(r"^[A-Za-z0-9_-]+$")
#: The coefficients of a body material in the columns of ``Layout.bg``, ``bw``
#: and ``bb`` (declared where the kernels read them).
_GROUND, _WALL, _BODY = GROUND_COLUMNS, WALL_COLUMNS, BODY_COLUMNS


def unit(name, values=None):
    """The SI unit of coefficient ``name``, with a stiffness's exponent
    resolved from ``values`` (``{name: value}``; the exponent's entry at the
    same address, then its plain one, then its default): ``k_hc`` with
    ``n_hc = 1.5`` is in ``N/m^1.5``."""
    root = base(name)
    text = BY_NAME[root].unit
    head, caret, exponent = text.partition("^")
    if not caret or exponent not in BY_NAME:
        return text
    values = values or {}
    address = name[len(root):]
    n = values.get(exponent + address, values.get(exponent, BY_NAME[exponent].default))
    return f"{head}^{float(n):g}"


def base(name):
    """The registry name of ``name`` (``mu_bb@a+b`` -> ``mu_bb``)."""
    return name.split("@", 1)[0]


def named(name):
    """Whether ``name`` (any address) is one of the body's or the recording's
    own coefficients, held only when named (:data:`NAMED_PARAMETERS`); False
    for a name the registry does not know."""
    entry = BY_NAME.get(base(name))
    return bool(entry is not None and entry.named)


def did_you_mean(word, choices):
    """`` (did you mean 'x'?)`` for the choices closest to a misspelt
    ``word`` (:func:`difflib.get_close_matches`), or ``""``."""
    close = difflib.get_close_matches(str(word), [str(c) for c in choices], n=2, cutoff=0.6)
    return f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""


def parse(name):
    """Split a parameter name into ``(base, materials)`` and check its address.

    ``materials`` is ``()`` for a plain name, ``(MAT,)`` for ``NAME@MAT`` and
    the sorted pair for ``NAME@A+B``.  Raises ``ValueError`` naming the
    parameter and what was expected."""
    if not isinstance(name, str):
        raise ValueError(f"parameter name {name!r}: expected a string")
    root, at, address = name.partition("@")
    if root not in BY_NAME:
        raise ValueError(f"unknown coefficient {name!r}{did_you_mean(root, NAMES)}; expected one "
                         f"of {list(NAMES)}, optionally addressed per material as NAME@MAT or "
                         "NAME@A+B")
    if not at:
        return root, ()
    mats = tuple(address.split("+"))
    bad = [m for m in mats if not MATERIAL_NAME.match(m)]
    if len(mats) > 2 or bad:
        raise ValueError(f"parameter {name!r}: expected NAME@MAT or NAME@A+B with material "
                         "names of letters, digits, '_' and '-'")
    contact_kind = BY_NAME[root].contact
    if contact_kind == "mass" and len(mats) == 2:
        raise ValueError(f"parameter {name!r}: {root} is a body's own coefficient; write "
                         f"{root}@MAT (the bodies' material)")
    if contact_kind == "global":
        raise ValueError(f"parameter {name!r}: {root} is a global offset of the measurement "
                         "set-up, not a material property: it takes no @ address")
    if contact_kind == "any":
        return root, tuple(sorted(mats))
    if contact_kind == "body" and len(mats) == 1:
        raise ValueError(f"parameter {name!r}: {root} is a body-body pair coefficient; "
                         f"write {root}@A+B (the materials of both bodies)")
    if contact_kind == "ground" and len(mats) == 2:
        raise ValueError(f"parameter {name!r}: {root} is a body-ground coefficient and the "
                         f"ground has no material; write {root}@MAT (the body's material)")
    return root, tuple(sorted(mats))


def canonical(name):
    """``name`` in its one spelling: pairs in alphabetical order."""
    root, mats = parse(name)
    return f"{root}@{'+'.join(mats)}" if mats else root


def check(name, laws=None, spin=False):
    """:func:`parse` ``name``, and check that a model under ``laws`` (``{kind:
    name}``; None: the default law everywhere) and ``spin`` reads it: a
    contact law's own coefficient needs its law, the spinning model's needs
    spin.  Raises ``ValueError`` saying how to choose it."""
    root, mats = parse(name)
    law = BY_NAME[root].law
    resolved = contact_laws.resolve(laws)
    if law and law not in _in_use(resolved):
        _unused_law(name, resolved)
    if BY_NAME[root].model == spin_model.NAME and not spin:
        _unused_spin(name)
    return root, mats


def _unused_spin(name):
    """Raise the error for the spinning model's coefficient in a model that does not spin."""
    raise ValueError(f"parameter {name!r}: {base(name)} is read by the spinning model only; "
                     "turn it on in dataset.yaml with model: {spin: true}")


def _in_use(laws):
    """The laws of a resolved ``{kind: name}`` and their families."""
    return set(laws.values()) | {contact_laws.BY_NAME[n].family for n in laws.values()}


def _unused_law(name, laws):
    """Raise the error for a law's coefficient under a layout without the law."""
    law = BY_NAME[base(name)].law
    if law in contact_laws.FAMILIES:
        names = contact_laws.family_names()[law]
        raise ValueError(f"parameter {name!r}: {base(name)} is read by the {law} laws "
                         f"({', '.join(names)}), which this model does not use (laws: {laws}); "
                         f"choose one in dataset.yaml, e.g. laws: {{body_ground: {names[1]}}}")
    kinds = contact_laws.BY_NAME[law].kinds
    raise ValueError(f"parameter {name!r}: {base(name)} is read by the contact law {law!r}, "
                     f"which this model does not use (laws: {laws}); choose it in "
                     f"dataset.yaml as laws: {{{kinds[0]}: {law}}}")


def mlflow_key(name):
    """``name`` as MLflow allows keys (no ``@`` or ``+``): ``mu_bb@resin+rubber``
    becomes ``mu_bb.resin.rubber`` and ``mu_s@felt`` ``mu_s.felt``.  Names and
    materials hold no ``.``, so :func:`from_mlflow_key` reverses it."""
    root, mats = parse(name)
    return ".".join((root,) + mats)


def from_mlflow_key(key):
    """The parameter name of an MLflow key written by :func:`mlflow_key`."""
    root, *mats = key.split(".")
    if len(mats) == 1:
        return canonical(f"{root}@{mats[0]}")
    return canonical(f"{root}@{mats[0]}+{mats[1]}") if mats else canonical(root)


@dataclass(frozen=True, eq=False)
class Layout:
    """Which entries a coefficient vector has, and where each contact reads.

    ``materials``: the material names; material id ``k >= 1`` is
    ``materials[k - 1]``, id 0 is "no material".  ``laws``: the contact law
    of each kind (``{kind: name}``, :func:`simcore.laws.registry.resolve`), and
    ``law_codes`` the kernels' array of them.  ``names``: the vector's
    entries, :data:`NAMES` first, then the plain coefficients of the laws in
    use, then the per-material ones (canonical).  Tables (int64, rows of the
    vector): ``bb (nmat, nmat, 4)``: (friction, restitution, ``mu_bb_b``,
    ``mu_bb_c``) of a body-body pair; ``bw (nmat, nmat, 2)``: (friction,
    restitution) of a body (first index) against a wall (second index, 0: a
    wall without a material); ``bg (nmat, 4)``: (mu_s, mu_k, v_th, e_bg) of a
    body on the ground; ``nmat = len(materials) + 1``; -1 for a law's
    coefficient the layout does not hold.  ``mass (nmat, 4)``: the rows of a
    body's own coefficients by its material (``com_x, com_y, com_z,
    inertia_scale``) and ``scene (3,)`` those of the recording's (``gravity,
    tilt_x, tilt_y``), -1 where not held (they are held only when named);
    ``declared``: the defaults a dataset gives those (``(name, value)``
    pairs: its ``gravity``).  Derived once: ``static_kinetic``,
    the distinct ``(mu_s row, mu_k row)`` pairs that must keep ``mu_s >=
    mu_k``, and ``vth_rows``, the rows that must stay > 0.
    """

    materials: tuple
    names: tuple
    bb: np.ndarray
    bw: np.ndarray
    bg: np.ndarray
    laws: dict
    law_codes: np.ndarray
    static_kinetic: tuple = ()
    vth_rows: tuple = ()
    spin: bool = False
    mass: np.ndarray = None
    scene: np.ndarray = None
    declared: tuple = ()

    @classmethod
    def build(cls, materials=(), names=(), laws=None, spin=False, declared=None):
        """The layout of the named ``materials`` under the contact ``laws``
        (a ``{kind: name}`` mapping; absent kinds take the default law) and,
        with ``spin``, the spinning model (:mod:`simcore.spin.spin`), with the
        per-material entries ``names`` and the coefficients held only when
        named (:data:`NAMED_PARAMETERS`; other plain names among ``names`` are
        ignored: they are always there).  ``declared``: ``{name: value}``, the
        defaults a dataset declares for coefficients held only when named
        (``gravity``: its recording's)."""
        materials = tuple(materials)
        for m in materials:
            if not isinstance(m, str) or not MATERIAL_NAME.match(m):
                raise ValueError(f"material {m!r}: expected a name of letters, digits, '_' "
                                 "and '-'")
        if len(set(materials)) != len(materials):
            raise ValueError(f"materials {list(materials)}: each name once")
        spin = bool(spin)
        laws = contact_laws.resolve(laws, spin)
        used = _in_use(laws)
        plain = (NAMES + tuple(p.name for p in LAW_PARAMETERS if p.law in used)
                 + (tuple(p.name for p in SPIN_PARAMETERS) if spin else ()))
        extra = []
        for name in names:
            root, mats = check(name, laws, spin)
            missing = [m for m in mats if m not in materials]
            if missing:
                raise ValueError(f"parameter {name!r}: no material {missing[0]!r} in this "
                                 f"dataset (materials: {', '.join(materials) or 'none'})")
            full = canonical(name)
            if BY_NAME[root].named and root not in extra:
                extra.append(root)  # the value of every material no address covers
            if mats and full not in extra:
                extra.append(full)
        if penalty.FAMILY in used:  # an addressed kinetic friction brings its static twin
            twins = {kinetic: static for static, kinetic in DEFAULT_FROM.items()}
            for full in list(extra):
                root = base(full)
                twin = twins.get(root, "") + full[len(root):]
                if root in twins and twin not in extra:
                    extra.append(twin)
        all_names = plain + tuple(extra)
        row = {n: k for k, n in enumerate(all_names)}
        labels = ("",) + materials

        def pick(root, *mats):
            return _pick(row, root, *mats)

        nmat = len(labels)
        bb = np.empty((nmat, nmat, len(_BODY)), np.int64)
        bw = np.empty((nmat, nmat, len(_WALL)), np.int64)
        bg = np.empty((nmat, len(_GROUND)), np.int64)
        for a in range(nmat):
            bg[a] = [pick(r, labels[a]) for r in _GROUND]
            for b in range(nmat):
                bb[a, b] = [pick(r, labels[a], labels[b]) for r in _BODY]
                if not a:
                    bw[a, b] = [pick(r) for r in _WALL]
                elif not b:
                    bw[a, b] = [pick(r, labels[a]) for r in _WALL]
                else:
                    bw[a, b] = [pick(r, labels[a], labels[b]) for r in _WALL]
        # (the impact maps read one ground friction, mu_k: no static twin to order)
        static_kinetic = (() if contact_laws.family(laws) == "rigid_impact" else
                          tuple(sorted({(int(r[0]), int(r[1])) for r in bg})))
        vth_rows = tuple(q for q, n in enumerate(all_names) if base(n) == "v_th")
        mass = np.array([[pick(r, labels[a]) for r in MASS_COLUMNS] for a in range(nmat)],
                        np.int64).reshape(nmat, len(MASS_COLUMNS))
        scene = np.array([pick(r) for r in SCENE_COLUMNS], np.int64)
        declared = tuple(sorted((str(k), float(v)) for k, v in dict(declared or {}).items()))
        for k, _ in declared:
            if k not in BY_NAME or not BY_NAME[k].named:
                raise ValueError(f"declared default {k!r}: only a coefficient held when named "
                                 f"takes a dataset's default ({[p.name for p in NAMED_PARAMETERS]})")
        return cls(materials, all_names, bb, bw, bg, laws, contact_laws.codes(laws),
                   static_kinetic, vth_rows, spin, mass, scene, declared)

    def penalty_rows(self):
        """The vector rows of the penalty laws' coefficient columns
        (:data:`simcore.laws.penalty.OWN` of the kind, then ``SHARED``; -1: not
        held): ``(ground (nmat, 15), body (nmat, nmat, 15), wall (nmat, nmat,
        15))``, indexed by material ids as ``bg``, ``bb``, ``bw``.  A layout
        of the patent's impulse law (no ``v_e2``: the Moreau-Jean stepper's
        sliding spheres) has the ground's ``v_e1`` and ``v_e2`` at ``v_th``:
        the step from ``mu_s`` to ``mu_k`` at ``v_th`` of claim 9."""
        row = {n: k for k, n in enumerate(self.names)}
        labels = ("",) + self.materials
        nmat = len(labels)
        cols = {kind: own + penalty.SHARED for kind, own in penalty.OWN.items()}
        if "v_e2" not in row:
            cols["body_ground"] = tuple("v_th" if r in ("v_e1", "v_e2") else r
                                        for r in cols["body_ground"])
        ground = np.array([[_pick(row, r, labels[a]) for r in cols["body_ground"]]
                           for a in range(nmat)], np.int64)
        body = np.array([[[_pick(row, r, labels[a], labels[b]) for r in cols["body_body"]]
                          for b in range(nmat)] for a in range(nmat)], np.int64)
        wall = np.array([[[_pick(row, r, *((labels[a], labels[b]) if a and b else
                                           (labels[a],) if a else ()))
                           for r in cols["body_wall"]] for b in range(nmat)]
                         for a in range(nmat)], np.int64)
        return ground, body, wall

    @property
    def coefficients(self):
        """The plain contact coefficients of this layout (the fixed slots' and
        those of the laws in use): what a fit frees unless told otherwise."""
        return tuple(n for n in self.names
                     if "@" not in n and BY_NAME[n].contact != "global" and not BY_NAME[n].named)

    @property
    def extra(self):
        """The entries beyond those every layout of these laws holds: the
        per-material ones and those held only when named, in their order
        (what :meth:`build` takes as ``names`` to make this layout again)."""
        return tuple(n for n in self.names if "@" in n or BY_NAME[base(n)].named)

    @property
    def named(self):
        """The entries held only when named (:data:`NAMED_PARAMETERS`, plain
        or addressed) of this layout."""
        return tuple(n for n in self.names if BY_NAME[base(n)].named)

    def __eq__(self, other):
        return (isinstance(other, Layout) and self.materials == other.materials
                and self.names == other.names and self.laws == other.laws
                and self.spin == other.spin and self.declared == other.declared)

    __hash__ = None

    @property
    def size(self):
        return len(self.names)

    @property
    def per_material(self):
        """The per-material entries (``NAME@MAT``, ``NAME@A+B``) of this layout."""
        return tuple(n for n in self.names if "@" in n)

    def material_id(self, name):
        """The id of material ``name`` (None or "": 0, no material)."""
        if name in (None, ""):
            return 0
        if name not in self.materials:
            raise ValueError(f"material {name!r}: not one of {list(self.materials)}")
        return self.materials.index(name) + 1

    def extend(self, names):
        """This layout with the per-material entries ``names`` added (the
        existing entries keep their rows)."""
        new = [canonical(n) for n in names]
        if all(n in self.names or ("@" not in n and not BY_NAME[n].named) for n in new):
            return self
        return Layout.build(self.materials, self.extra + tuple(new), self.laws, self.spin,
                            dict(self.declared))

    def index(self, name):
        """The row of parameter ``name`` in this layout's vector."""
        full = canonical(name)
        if full not in self.names:
            if base(full) not in self.names:
                if BY_NAME[base(full)].named:
                    raise ValueError(f"parameter {name!r} is not in this model's coefficients: "
                                     "a body's own coefficient or the recording's is held only "
                                     "when named (give it a value, or free it in fit:)")
                if BY_NAME[base(full)].model:
                    _unused_spin(name)
                _unused_law(name, self.laws)
            raise ValueError(f"parameter {name!r} is not in this model's coefficients "
                             f"{list(self.names)}")
        return self.names.index(full)

    def bounds(self, q):
        """Closed bounds of row ``q``."""
        return BY_NAME[base(self.names[q])].bounds

    def vector(self, values=None):
        """The float64 vector of ``values`` (names to numbers; a per-material
        entry not given takes its plain name's value, a plain one its
        default), validated."""
        given = {}
        for name, v in dict(values or {}).items():
            full = canonical(name)
            if full not in self.names:
                self.index(name)  # raises, naming the layout's entries
            given[full] = v
        def value(n):
            root = base(n)
            if n in given or root in given:
                return given.get(n, given.get(root))
            if root in DEFAULT_FROM:  # the same address of the coefficient it defaults to
                return value(DEFAULT_FROM[root] + n[len(root):])
            return dict(self.declared).get(root, BY_NAME[root].default)

        vec = np.array([value(n) for n in self.names], dtype=np.float64)
        self.validate(vec)
        return vec

    def as_dict(self, vec):
        """Map a vector of this layout back to ``{name: float}``."""
        vec = np.asarray(vec, dtype=np.float64)
        return {n: float(vec[i]) for i, n in enumerate(self.names)}

    def validate(self, vec):
        """Raise ``ValueError`` naming the first parameter that is out of range."""
        vec = np.asarray(vec, dtype=np.float64)
        if vec.shape != (self.size,):
            raise ValueError(f"parameter vector has shape {vec.shape}, expected ({self.size},)")
        for i, name in enumerate(self.names):
            x = vec[i]
            lo, hi = self.bounds(i)
            if not np.isfinite(x):
                raise ValueError(f"parameter {name} = {x}: expected a finite number")
            if x < lo or x > hi:
                raise ValueError(f"parameter {name} = {x}: expected {lo} <= {name} <= {hi}")
            if x <= 0.0 and i in self.vth_rows:
                raise ValueError(f"parameter {name} = {x}: expected {name} > 0")
        for qs, qk in self.static_kinetic:
            if vec[qs] < vec[qk]:
                s, k = self.names[qs], self.names[qk]
                raise ValueError(f"parameter {s} = {vec[qs]} < {k} = {vec[qk]}: "
                                 f"expected {s} >= {k}")

    def validate_rows(self, values, nscen=None):
        """:meth:`validate` a vector, or each distinct row of an ``(n, size)``
        array once (the finite differences' copies repeat a few rows many
        times); with ``nscen``, such an array must have that many rows."""
        vec = np.asarray(values, dtype=np.float64)
        if vec.ndim != 2:
            self.validate(vec)
            return
        if nscen is not None and vec.shape[0] != nscen:
            raise ValueError(f"parameter rows: {vec.shape[0]} for {nscen} scenarios")
        for row in np.unique(vec, axis=0):
            self.validate(row)

    def project(self, theta, free):
        """``theta`` with its free rows moved into the feasible set: each into
        its bounds, ``v_th >= 1e-9``, and every material's ``mu_s >= mu_k``
        (both free: onto their mean, the Euclidean projection; one free: it
        moves onto the fixed one)."""
        x = np.array(theta, dtype=np.float64)
        for q in free:
            lo, hi = self.bounds(q)
            x[q] = min(max(x[q], lo), hi)
        for q in self.vth_rows:
            x[q] = max(x[q], 1e-9)
        for qs, qk in self.static_kinetic:
            if x[qs] < x[qk]:
                fs, fk = qs in free, qk in free
                if fs and fk:
                    x[qs] = x[qk] = 0.5 * (x[qs] + x[qk])
                elif fs:
                    x[qs] = x[qk]
                elif fk:
                    x[qk] = x[qs]
        return x


def _pick(row, root, *mats):
    """The row of ``root`` addressed to ``mats`` in ``row`` (names to rows):
    the addressed entry, else the plain one; -1 when the layout lacks it."""
    if root not in row:
        return -1
    if not all(mats):
        return row[root]
    return row.get(f"{root}@{'+'.join(sorted(mats))}", row[root])


#: The layout without materials: the ten global entries.
GLOBAL = Layout.build()


def vector(values=None):
    """The global vector (:data:`NAMES`) of ``values``; see :meth:`Layout.vector`.
    Per-material names need a model's layout (``model.layout.vector``)."""
    return GLOBAL.vector(values)


def as_dict(vec):
    """Map a global vector back to ``{name: float}``."""
    return GLOBAL.as_dict(vec)


def validate(vec):
    """Raise ``ValueError`` naming the first parameter of a global vector out of range."""
    GLOBAL.validate(vec)


def validate_rows(values, nscen=None):
    """:meth:`Layout.validate_rows` of the global layout."""
    GLOBAL.validate_rows(values, nscen)
