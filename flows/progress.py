"""Progress on the terminal while a command waits (rich, which ships with
Prefect).

On a terminal (standard output and error both a TTY) one live display
shows, in turn: a spinner with the elapsed time while the engine's kernels
compile and the fit starts (:func:`waiting`), then a bar per stage of the
fit (:func:`iteration`: the stage, the iteration, its loss, the elapsed time
and, against the stage's iteration budget, the most it may still take:
``≤0:01:20 left``),
and Prefect's log lines print above it.  Anywhere else (a pipe, a log file,
CI) nothing here draws: the command prints its notice line and
:func:`flows.pipeline._progress` its throttled lines.  :func:`done` ends the
display; it is safe to call when none is live.
"""

import logging
import os
import sys
import threading
import time

#: Set to any value to turn the live display off on a terminal too.
OFF_ENV = "CONTACTFIT_NO_PROGRESS"

_lock = threading.Lock()
_state = {"progress": None, "wait": None, "bar": None, "stage": None, "first": 0,
          "budget": 0, "t0": 0.0, "consoles": []}


def live():
    """True when the display draws: both streams a terminal, not turned off."""
    return (not os.environ.get(OFF_ENV) and sys.stdout.isatty() and sys.stderr.isatty()
            and os.environ.get("TERM") != "dumb")


def _start():
    """The live :class:`rich.progress.Progress` (started once), with
    Prefect's console handlers printing above it."""
    from rich.progress import (
        BarColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
    )

    if _state["progress"] is None:
        _state["progress"] = Progress(SpinnerColumn(), TextColumn("{task.description}"),
                                      BarColumn(bar_width=10), TimeElapsedColumn(),
                                      TextColumn("{task.fields[left]}"), transient=True)
        _state["progress"].start()
    # Prefect's handlers (made when Prefect sets its logging up, perhaps after
    # the display started) hold the terminal's stream: their lines go through
    # the display's console, which prints them above it.
    for handler in _console_handlers():
        if all(h is not handler for h, _ in _state["consoles"]):
            _state["consoles"].append((handler, handler.console))
            handler.console = _state["progress"].console
    return _state["progress"]


def _console_handlers():
    seen = []
    for name in ("prefect", ""):
        for h in logging.getLogger(name).handlers:
            if hasattr(h, "console") and h not in seen:
                seen.append(h)
    return seen


def _clock(seconds):
    m, s = divmod(int(round(seconds)), 60)
    return f"{m // 60}:{m % 60:02d}:{s:02d}"


def waiting(text):
    """A spinner with the elapsed time: ``text`` (e.g. the compile notice)
    until the fit's first iteration or :func:`done`."""
    if not live():
        return
    with _lock:
        progress = _start()
        _end_wait(progress)
        _state["wait"] = progress.add_task(text, total=None, left="")


def _end_wait(progress):
    if _state["wait"] is not None:
        progress.remove_task(_state["wait"])
        _state["wait"] = None


def iteration(rec, budget, note=""):
    """The fit's iteration ``rec`` (a history record: ``iter``, ``loss``,
    ``horizon``, ``part``) on its stage's bar; ``budget``: the stage's
    iteration limit (``max_iter``), against which the bar's estimate is the
    most the stage may still take; ``note``: how it runs (its shards)."""
    if not live():
        return
    with _lock:
        progress = _start()
        _end_wait(progress)
        stage = (rec.get("part"), rec.get("horizon"))
        if stage != _state["stage"]:
            if _state["bar"] is not None:
                progress.remove_task(_state["bar"])
            _state.update(stage=stage, first=int(rec["iter"]), budget=max(int(budget), 1),
                          t0=time.perf_counter())
            _state["bar"] = progress.add_task("", total=_state["budget"], left="")
        n = int(rec["iter"]) - _state["first"] + 1
        part = rec.get("part") or "fit"
        horizon = rec.get("horizon")
        where = f"{part} h{horizon:.2f}" if horizon not in (None, 1.0) else part
        per = (time.perf_counter() - _state["t0"]) / n
        progress.update(_state["bar"], completed=min(n, _state["budget"]),
                        description=f"{where} · iteration {n} · loss {rec['loss']:.3e}{note}",
                        left=f"≤{_clock(per * max(_state['budget'] - n, 0))} left")


def done():
    """End the live display (and give Prefect's handlers their console back)."""
    with _lock:
        progress = _state["progress"]
        if progress is None:
            return
        progress.stop()
        for handler, console in _state["consoles"]:
            handler.console = console
        _state.update(progress=None, wait=None, bar=None, stage=None, consoles=[])
