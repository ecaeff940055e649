"""The numba cache (keyed by what each kernel can read), the compile policy
(entry points, no loop vectoriser) and the CLI's notice."""

import numpy as np
import pytest

from simcore.kernel import config


def test_a_kernel_is_keyed_by_the_modules_it_can_read():
    """The engine's kernels read the contact solve, the impulse law, tangents,
    collision, parameters, event kinds and tolerances; not the optimiser,
    the problem, the losses or the reader, so editing those recompiles nothing."""
    reads = config.closure_modules("engine")
    assert {"engine", "sliding.contact", "laws.impulse", "sliding.tangent", "geometry.collision",
            "sliding.integrate", "params", "kernel.config", "kernel.events"} <= reads
    assert not {m for m in reads if m.startswith("data.")}
    assert not reads & {"identify.fit", "identify.problem", "identify.losses",
                        "model", "data.synth"}
    assert "engine" in config.closure_modules("identify.problem")  # problem reads the engine
    assert config.source_closure("engine") != config.source_closure("sliding.contact")


def test_simcore_kernels_use_the_closure_stamp():
    from simcore.sliding import sliding_engine

    locator = sliding_engine._run_one._cache._impl.locator
    assert isinstance(locator, config._ClosureLocator)
    assert locator.get_source_stamp() == config.source_closure("sliding.sliding_engine")
    # One directory per source version: an index written by other sources
    # (which numba unpickles before it compares stamps) is never read.
    assert locator.get_cache_path().startswith(config.cache_root())
    assert locator.get_cache_path().endswith(config.source_closure("sliding.sliding_engine")[:16])


def test_kernels_in_subpackages_are_keyed_by_every_module_they_can_read(tmp_path, monkeypatch):
    """The locator serves kernels at any depth of simcore: editing a module
    in one subpackage (geometry/rigid.py) changes the stamp of a kernel in
    another that imports it (rigid/rigid_engine.py, through a relative
    ``..geometry`` import) and of nothing that cannot read it; two modules
    of one file name in different subpackages keep apart."""
    import shutil
    from pathlib import Path

    from simcore.rigid import rigid_engine

    locator = rigid_engine._run_one._cache._impl.locator
    assert isinstance(locator, config._ClosureLocator)
    assert locator.get_source_stamp() == config.source_closure("rigid.rigid_engine")
    assert "geometry.rigid" in config.closure_modules("rigid.rigid_engine")
    assert config.module_name(rigid_engine.__file__) == "rigid.rigid_engine"

    copy = tmp_path / "simcore"
    shutil.copytree(Path(config.__file__).parents[1], copy,
                    ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(config, "_PACKAGE", copy)
    config._source.cache_clear()
    config.source_closure.cache_clear()
    before = {m: config.source_closure(m) for m in
              ("rigid.rigid_engine", "geometry.faces", "laws.impulse", "spin.spin_impact",
               "kernel.drivers")}
    edited = copy / "geometry" / "rigid.py"
    edited.write_text(edited.read_text() + "\n# edited\n")
    config._source.cache_clear()
    config.source_closure.cache_clear()
    after = {m: config.source_closure(m) for m in before}
    assert after["rigid.rigid_engine"] != before["rigid.rigid_engine"]
    assert after["geometry.faces"] != before["geometry.faces"]  # faces imports .rigid
    assert after["laws.impulse"] == before["laws.impulse"]  # cannot read it
    # the drivers are compiled for every engine's records: any edit starts them afresh
    assert after["kernel.drivers"] != before["kernel.drivers"]
    # spin/spin.py and the spin package are told apart from geometry/rigid.py's neighbours
    assert config.module_name(copy / "spin" / "spin.py") == "spin.spin"
    assert config.module_name(copy / "spin" / "__init__.py") == "spin"
    assert config.module_name(tmp_path / "elsewhere.py") is None
    config._source.cache_clear()
    config.source_closure.cache_clear()


def test_cli_says_once_that_it_compiles(tmp_path, monkeypatch, capsys):
    from flows import cli

    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    assert config.cache_root() == str(tmp_path)
    assert cli._compile_notice("simulate")
    assert "compiling the engine, first run only, about" in capsys.readouterr().out
    config.mark_compiled("simulate")
    assert not cli._compile_notice("simulate") and capsys.readouterr().out == ""
    assert cli._compile_notice("calibrate")  # each command compiles its own kernels
    assert not cli._compile_notice("validate")
    # each engine has its own kernels, and the notice names it; a
    # recalibration runs a calibration's
    from pathlib import Path

    from simcore.data import dataset as D

    shipped = Path(__file__).resolve().parents[1] / "datasets"
    table, balls = D.read(shipped / "synthetic-table"), D.read(shipped / "billiards")
    marker = cli._compile_notice("calibrate", table)
    assert marker == "calibrate-sliding"
    capsys.readouterr()
    config.mark_compiled(marker)
    assert cli._compile_notice("recalibrate", table) is None
    assert cli._compile_notice("calibrate", balls) == "calibrate-spin"
    assert "compiling the spin engine, first run only" in capsys.readouterr().out


def test_cli_says_nothing_of_compiling_when_the_input_is_bad(tmp_path, monkeypatch, capsys):
    """The notice comes once the input was read and checked."""
    from flows import cli

    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "cache"))
    code = cli.main(["simulate", str(tmp_path / "missing"), "--out", str(tmp_path / "out")])
    out = capsys.readouterr()
    assert code == 1 and "compiling" not in out.out + out.err


def test_a_kernel_without_a_python_entry_point_says_so():
    """The borrowing kernels go without numba's CPython entry point unless
    marked ``python=True`` (the stages test_stages.py calls); called from
    Python they raise, naming themselves (numba itself would crash)."""
    from simcore.kernel import eventlog

    with pytest.raises(TypeError, match=r"simcore\.kernel\.eventlog\.log is called by other kernels only"):
        eventlog.log(np.zeros((1, 9)), np.zeros((1, 4), np.int64), 0, 0.0, 0, 0, -1, np.zeros(3),
                   0.0, 0.0, np.zeros(3), np.zeros(3), -1)


def test_kernels_compile_without_the_loop_vectoriser_and_leave_numbas_setting():
    """simcore's kernels compile without LLVM's loop vectoriser; numba's own
    setting is as it was before and after, for other code."""
    from numba.core import config as numba_config
    from numba.core import event

    seen = []

    class Listener(event.Listener):
        def on_start(self, ev):
            seen.append(numba_config.LOOP_VECTORIZE)

        def on_end(self, ev):
            pass

    def twice(x):
        return 2.0 * x

    kernel = config.jit(twice, cache=False)
    before = numba_config.LOOP_VECTORIZE
    with event.install_listener("numba:compile", Listener()):
        assert kernel(1.5) == 3.0
    assert seen and not any(seen)
    assert numba_config.LOOP_VECTORIZE == before
