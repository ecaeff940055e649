"""Which integrator runs a batch: ``002_*``'s rule, measured.

``002_*`` names two ways to integrate rigid contact: event-driven (exact
impact times; its cost grows with the events) and time-stepping in Moreau's
sense (a step's impulses from one complementarity problem; its cost grows
with the steps, however many contacts open and close inside one), with the
rule of thumb "few events: event-driven; about one event per step, or
persistent contacts: time-stepping".  :func:`by_events` applies it where a
batch has the choice: among the registered integrators that run its shapes
and laws (:func:`simcore.sliding.integrate.candidates`) there is an
event-driven one and a time-stepping one (today: the patent's sliding
spheres, ``exact`` and ``moreau``).  Boxes and penalty laws have only
time-steppers (``penalty`` first, then ``moreau``), the spinning balls and
the speed-dependent body-body law only the event-driven integrator.

The rule: a pilot runs the event-driven integrator on up to
:data:`PILOT_SCENARIOS` scenarios (spread evenly over the batch in the order
of their names, so that a batch's choice does not depend on its order) at
the batch's coefficients, and counts its events (impacts, stops, starts,
``v_th`` crossings) per step of the scenarios' ``dt``.  The time-stepper is
chosen when

* the event-driven integrator cannot run a pilot scenario (its event loop
  chatters or stalls on contacts that open and close faster than it
  resolves: persistent contacts, a Zeno cascade), or
* the pilot shows :data:`DENSE` events per step or more.

:data:`DENSE` is where the two integrators' costs cross on the benchmark's
sample scenes (``python -m benchmarks.integrators``): the event-exact engine
spends 3-10 us per event, the Moreau-Jean stepper 0.5-70 us per step (a
sliding ball alone: 0.7; a ball rattling between walls: 12-20; ten balls
colliding in a box: 4-70), so a scene's events must come several to a step
before a step is cheaper (a ball rattling in a channel: the stepper 1.75x
slower at 2.5 events per step, 2x faster, and 14 mm off, at 12.5).  Below
it the event-driven integrator is both faster and exact (the stepper's
error is first order in ``dt``).

A dataset's ``model: {integrator: NAME}`` or ``--integrator NAME`` overrides
the rule; :func:`by_events` says in one line what it chose and why.
"""

import numpy as np

from . import engine
from .geometry.collision import SHAPE_NAMES
from .laws import registry
from .sliding.integrate import BY_CODE, EVENT_DRIVEN, TIME_STEPPING, candidates

#: Events per step from which the time-stepper runs a batch (module docstring).
DENSE = 4.0
#: The scenarios a pilot runs at most.
PILOT_SCENARIOS = 8


def pilot(model, state, count=PILOT_SCENARIOS):
    """The event-driven pilot of ``model`` (an event-driven model) on up to
    ``count`` of its scenarios: ``(events per step, failure)``, ``failure``
    the first scenario's error message when a scenario does not run (None
    when all ran)."""
    order = np.argsort(np.asarray(model.names if model.names else range(model.nscen), str),
                       kind="stable")
    pick = np.unique(order[np.linspace(0, model.nscen - 1, min(count, model.nscen)).round()
                           .astype(np.int64)])
    sub, st = model.subset(pick), state.subset(pick)
    try:
        res = engine.simulate(sub, st, keep_samples=False)
    except RuntimeError as err:
        return np.inf, str(err)
    steps = float(np.sum((sub.scen_t_end - st.time) / sub.scen_dt))
    return float(res.event_count.sum()) / max(steps, 1.0), None


def by_events(model, state, rebuild):
    """``(model, state, line)``: the batch on the integrator ``002_*``'s rule
    chooses (module docstring), and one line saying which and why.
    ``model``, ``state``: the batch on the first registered integrator that
    runs it; ``rebuild(name)`` builds it on integrator ``name`` (a
    ``ValueError`` when that one does not run it after all)."""
    first = BY_CODE[model.integrator]
    shapes = {SHAPE_NAMES[c] for c in engine.shape_codes(model)}
    family = registry.family(model.layout.laws)
    steppers = [it for it in candidates(shapes, family) if it.kind == TIME_STEPPING]
    if first.kind == TIME_STEPPING:
        return model, state, (f"integrator {first.name} ({TIME_STEPPING}): the first registered "
                              f"that runs {', '.join(sorted(shapes))} under {family} laws "
                              "(no event-driven integrator does)")
    stepped = None
    for it in steppers:
        try:
            stepped = (it,) + tuple(rebuild(it.name))
            break
        except ValueError:
            continue
    if stepped is None:
        return model, state, (f"integrator {first.name} ({EVENT_DRIVEN}): the only kind that runs "
                              "these shapes and laws")
    density, failure = pilot(model, state)
    n = min(PILOT_SCENARIOS, model.nscen)
    if failure is None and density < DENSE:
        return model, state, (f"integrator {first.name} ({EVENT_DRIVEN}): {density:.3g} events "
                              f"per step on {n} pilot scenario(s), below {DENSE:g} (few events: "
                              "event-driven)")
    why = (f"the event-driven {first.name} does not run a pilot scenario ({failure})"
           if failure is not None else
           f"{density:.3g} events per step on {n} pilot scenario(s), {DENSE:g} or more")
    it, model, state = stepped
    return model, state, f"integrator {it.name} ({TIME_STEPPING}): {why}"
