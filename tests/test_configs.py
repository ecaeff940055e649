"""Bad calibration configs through the CLI: each exits 1 with one line naming
the config file and the key, no traceback, and no MLflow run or registered
version on the store (checked before any flow starts)."""

from pathlib import Path

import pytest

from flows.cli import main
from simcore.data import impacts  # (the shipped trajectory datasets' configs, below)

TABLE = str(Path("datasets/synthetic-table").resolve())
SHIPPED = Path(__file__).resolve().parents[1] / "datasets"

#: (config text, words the message must hold).
BAD = [
    ("integrator: rk4\n", "integrator = 'rk4': expected one of"),
    ("integrator: penalty\n", "integrator: integrator 'penalty' runs sphere, box under penalty "
                              "laws; this model's laws are impulse laws"),
    ("shards: -1\n", "shards = -1: expected >= 0"),
    ("method: newton\n", "method = 'newton'"),
    ("fit: [mu_x]\n", "unknown coefficient 'mu_x'"),
    ("colour: red\n", "unknown key(s) ['colour']"),
    ("max_iter: ten\n", "max_iter = 'ten': expected int"),
    ("lr: -0.5\n", "lr = -0.5: expected a finite number > 0"),
    ("lr: 0\n", "lr = 0: expected a finite number > 0"),
    ("ftol: -1\n", "ftol = -1: expected a finite number >= 0"),
    ("gtol: .nan\n", "gtol = nan: expected a finite number >= 0"),
    ("step_sigma: -1\n", "step_sigma = -1: expected a finite number >= 0"),
    ("patience: 0\n", "patience = 0: expected >= 1"),
    ("max_iter: 0\n", "max_iter = 0: expected >= 1"),
    ("starts: 0\n", "starts = 0: expected >= 1"),
    ("robust: -1\n", "robust = -1: expected a finite number >= 0"),
    ("horizons: [0.5, 0.25, 1.0]\n", "horizons"),
    ("horizons: [0.5]\n", "ending with 1.0"),
    ("horizons: all\n", "horizons = 'all': expected list"),
    ("secant: [0.003, 0.01]\n", "secant = [0.003, 0.01]: secant [0.003, 0.01]: expected decreasing"),
    ("secant: 0.01\n", "secant = 0.01: expected list"),
    ("nuisance: wind\n", "nuisance = 'wind'"),
    ("workers: 0\n", "workers = 0: expected >= 1"),
    ("task_runner: slurm\n", "task_runner = 'slurm'"),
    ("test_fraction: 1.5\n", "test_fraction = 1.5: expected in (0, 1)"),
    ("promote_margin: 1\n", "promote_margin = 1: expected in [0, 1)"),
    ("overlays: -2\n", "overlays = -2: expected >= 0"),
    ("gate_k: 0\n", "gate_k = 0: expected a finite number > 0"),
    ("gate_floor_m: -1\n", "gate_floor_m = -1: expected a finite number >= 0"),
    ("weights: {smell: 1}\n", "weights: loss weight 'smell'"),
    ("weights: {trajectory: -1}\n", "weights:"),
    ("start: {mu_k: -0.5}\n", "start: mu_k = -0.5: expected 0.0 <= mu_k"),
    ("start: {mu_k: fast}\n", "start: mu_k = 'fast': expected a number"),
    ("start: {mu_s: 0.1, mu_k: 0.2}\n", "expected mu_s >= mu_k"),
    ("fit: [mu_r]\n", "mu_r is read by the spinning model only"),
    ("fit: [mu_bb_b]\n", "read by the contact law 'frictional_inelastic'"),
    ("fit: ['mu_bb@resin+steel']\n", "no material 'resin'"),
    ("fit: []\n", "fit = []: expected at least one coefficient"),
    ("nuisance: spin\n", "nuisance 'spin'"),
    ("- a\n- list\n", "expected a mapping"),
    ("method: [lm\n", "c.yaml"),
    ("dask_address: 5\n", "dask_address = 5: expected str"),
    ("seed: 1.5\n", "seed = 1.5: expected int"),
    ("fit: mu_k\n", "fit = 'mu_k': expected list"),
    ("gate_flor_m: 0.02\n", "unknown key(s) ['gate_flor_m'] (did you mean 'gate_floor_m'?)"),
    ("fit: [mu_kk]\n", "unknown coefficient 'mu_kk' (did you mean 'mu_k'"),
    ("scan: {k_hc: [1.0e+7]}\n", "scan: parameter 'k_hc': k_hc is read by the contact law"),
    ("scan: {mu_k: [0.1, slow]}\n", "scan 'mu_k': [0.1, 'slow']: expected a list of finite"),
    ("scan: {mu_k: 0.1}\n", "scan 'mu_k': 0.1: expected a list"),
    ("scan: [mu_k]\n", "scan = ['mu_k']: expected dict"),
    ("scan: {mu_r: [0.1]}\n", "scan: parameter 'mu_r': mu_r is read by the spinning model only"),
]


@pytest.fixture(scope="module")
def one_store(tmp_path_factory):
    """One fresh store for the whole corpus (creating one takes seconds):
    every case must leave it as empty as it found it."""
    from flows import settings, tracking

    root = tmp_path_factory.mktemp("store")
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(root)
        mp.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{root}/mlflow.db")
        mp.delenv("MLFLOW_REGISTRY_URI", raising=False)
        c, exp = tracking.client(settings.tracking())
        yield c, exp


@pytest.mark.parametrize("text, words", BAD)
def test_a_bad_config_is_named_before_any_run(one_store, tmp_path, capsys, text, words):
    c, exp = one_store
    cfg = tmp_path / "c.yaml"
    cfg.write_text(text)
    assert main(["calibrate", TABLE, "--config", str(cfg), "--out", str(tmp_path / "o")]) == 1
    err = capsys.readouterr().err
    assert str(cfg) in err and words in err and "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1, err
    assert c.search_runs([exp]) == []
    assert c.search_registered_models() == []


def test_the_corpus_is_the_size_the_issue_asks():
    assert len(BAD) >= 30


def test_a_dataset_path_that_does_not_exist_is_named_with_the_nearest(tmp_path, capsys):
    """A misspelt dataset directory is not a directory without a dataset.yaml."""
    (tmp_path / "cube-toss").mkdir()
    assert main(["validate", str(tmp_path / "cube-tos")]) == 1
    out = capsys.readouterr()
    text = out.out + out.err
    assert "no such directory (did you mean 'cube-toss'?)" in text, text
    assert main(["validate", str(tmp_path / "cube-toss")]) == 1
    out = capsys.readouterr()
    assert "no dataset.yaml" in out.out + out.err


@pytest.mark.parametrize("name", sorted(p.parent.name for p in SHIPPED.glob("*/calibrate.yaml")
                                         if not impacts.is_impacts(p.parent)))
def test_every_shipped_config_passes_the_check_the_cli_makes(name):
    """The README's calibration of each shipped trajectory dataset gets past
    the CLI's check against its dataset (a body's own coefficient in
    ``fit:``, such as the cube's ``com_z``, included)."""
    from flows import settings
    from simcore.data import dataset as D

    root = SHIPPED / name
    cfg = settings.calibration(root / "calibrate.yaml")
    settings.check_against(cfg, D.read(root), str(root / "calibrate.yaml"))
