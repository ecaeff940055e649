"""The terminal's progress display (flows/progress.py) and the quiet default
of the command line: what shows while a command waits, and what it hides
unless ``-v``."""

import io
import logging
import os

import pytest
from rich.console import Console

from flows import cli, progress


class FakeHandler(logging.Handler):
    """A console handler as Prefect's is: it prints through ``.console``."""

    def __init__(self):
        super().__init__()
        self.console = Console(file=io.StringIO())

    def emit(self, record):
        self.console.print(self.format(record))


@pytest.fixture
def live(monkeypatch):
    monkeypatch.setattr(progress, "live", lambda: True)
    handler = FakeHandler()
    logging.getLogger().addHandler(handler)
    yield handler
    progress.done()
    logging.getLogger().removeHandler(handler)


def _tasks():
    return {t.id: t for t in progress._state["progress"].tasks}


def test_a_wait_then_each_stage_of_the_fit_gets_its_own_bar(live):
    original = live.console
    progress.waiting("compiling the rigid engine, first run only, about 70 s")
    (wait,) = _tasks().values()
    assert wait.total is None and "compiling the rigid engine" in wait.description
    # Prefect's console handlers print through the display's console meanwhile.
    assert live.console is progress._state["progress"].console
    progress.iteration({"iter": 0, "loss": 1.5e-3, "part": "segments", "horizon": 1.0}, 40)
    (bar,) = _tasks().values()  # the wait is over
    assert bar.total == 40 and bar.completed == 1
    assert bar.description == "segments · iteration 1 · loss 1.500e-03"
    assert bar.fields["left"].startswith("≤") and bar.fields["left"].endswith(" left")
    progress.iteration({"iter": 1, "loss": 1.2e-3, "part": "segments", "horizon": 1.0}, 40)
    assert _tasks()[bar.id].completed == 2
    # A new stage (the rollouts after the segments) starts its count again.
    progress.iteration({"iter": 2, "loss": 9e-4, "part": "rollouts", "horizon": 0.25}, 40,
                       " · 4 shards, dask")
    (stage,) = _tasks().values()
    assert stage.id != bar.id and stage.completed == 1
    assert stage.description == "rollouts h0.25 · iteration 1 · loss 9.000e-04 · 4 shards, dask"
    progress.done()
    assert progress._state["progress"] is None and live.console is original
    progress.done()  # (twice: nothing to end)


def test_nothing_draws_off_a_terminal(monkeypatch):
    monkeypatch.setattr(progress, "live", lambda: False)
    progress.waiting("compiling")
    progress.iteration({"iter": 0, "loss": 1.0, "part": "rollouts", "horizon": 1.0}, 10)
    assert progress._state["progress"] is None


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_off_a_terminal_or_when_turned_off_it_is_not_live(monkeypatch):
    """Under pytest the streams are captured (not a TTY); on a terminal it
    is live unless turned off, or unless either stream or TERM says no."""
    assert not progress.live()
    monkeypatch.delenv(progress.OFF_ENV, raising=False)
    monkeypatch.setenv("TERM", "xterm")
    monkeypatch.setattr("sys.stdout", Terminal())
    monkeypatch.setattr("sys.stderr", Terminal())
    assert progress.live()
    monkeypatch.setenv("TERM", "dumb")
    assert not progress.live()
    monkeypatch.setenv("TERM", "xterm")
    monkeypatch.setenv(progress.OFF_ENV, "1")
    assert not progress.live()
    monkeypatch.delenv(progress.OFF_ENV)
    monkeypatch.setattr("sys.stderr", io.StringIO())
    assert not progress.live()


def test_mlflow_store_lines_are_quiet_unless_verbose(monkeypatch, tmp_path, capsys):
    for name in cli.CHATTY:
        logging.getLogger(name).setLevel(logging.NOTSET)
    monkeypatch.setenv(cli.VERBOSE_ENV, "")  # (restored, unset, after the test)
    cli.main(["params"])
    assert all(logging.getLogger(n).level == logging.WARNING for n in cli.CHATTY)
    assert cli.build_parser().parse_args(["params", "-v"]).verbose
    assert cli.build_parser().parse_args(["-v", "params"]).verbose
    assert not cli.build_parser().parse_args(["params"]).verbose
    for name in cli.CHATTY:
        logging.getLogger(name).setLevel(logging.NOTSET)
    cli.main(["-v", "params"])
    assert logging.getLogger(cli.CHATTY[0]).level == logging.NOTSET
    assert os.environ.get(cli.VERBOSE_ENV) == "1"
