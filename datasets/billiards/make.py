"""Convert pooltool 0.6's reference shots into the contactfit dataset ``datasets/billiards``.

Usage: ``python datasets/billiards/make.py SOURCE_DIR [OUT_DIR]`` where
SOURCE_DIR holds pooltool-dev's ``params.json``, ``trajectories.parquet``
and ``events.parquet`` (60 noiseless two-ball shots, every parameter and
event; see that directory's README).  What is kept:

* every shot, each ball's samples at 50 Hz (every 4th of pooltool's 200 Hz,
  and the last one, at or just after rest);
* the initial states (``x0 .. vz0``, ``wx0 .. wz0``) as pooltool set them;
* the four cushions as walls through the cushion noses, with their height;
* the velocity changes of the ball-ball and ball-cushion impacts as the
  ``events`` table;
* pooltool's coefficients as ``truth``, under its laws (``dataset.yaml``);
  pooltool has no static friction, so ``v_th`` is fixed at 1e-9 m/s (the
  switch off) and ``mu_s`` at 0.5 (out of the way).
"""

import json
import sys
from pathlib import Path

import pandas as pd
import yaml

EVERY = 4


def convert(src, out):
    src, out = Path(src), Path(out)
    par = json.loads((src / "params.json").read_text())
    bp, table = par["ball_params"], par["table"]
    traj = pd.read_parquet(src / "trajectories.parquet")
    events = pd.read_parquet(src / "events.parquet")
    sid = lambda k: f"shot_{int(k):02d}"  # noqa: E731
    body = {"cue": 0, "1": 1}

    bodies = []
    for shot in par["shots"]:
        for name, key in (("cue", "cue_ball_initial"), ("1", "object_ball_initial")):
            init = shot[key]
            bodies.append({"scenario_id": sid(shot["shot_id"]), "body_id": body[name],
                           "shape": "sphere", "radius": bp["R"], "mass": bp["m"],
                           **dict(zip(("x0", "y0", "z0"), init["r"])),
                           **dict(zip(("vx0", "vy0", "vz0"), init["v"])),
                           **dict(zip(("wx0", "wy0", "wz0"), init["w"]))})

    traj = traj.sort_values(["shot_id", "ball_id", "t"])
    k = traj.groupby(["shot_id", "ball_id"]).cumcount()
    last = traj.groupby(["shot_id", "ball_id"])["t"].transform("max") == traj["t"]
    keep = traj[(k % EVERY == 0) | last]
    trajectories = pd.DataFrame({
        "scenario_id": keep["shot_id"].map(sid), "body_id": keep["ball_id"].map(body),
        "t": keep["t"], "x": keep["x"], "y": keep["y"], "z": bp["R"],
        "vx": keep["vx"], "vy": keep["vy"], "vz": 0.0,
        "wx": keep["wx"], "wy": keep["wy"], "wz": keep["wz"]})

    w, length = table["w"], table["l"]
    walls = pd.DataFrame({"scenario_id": "*", "wall_id": [0, 1, 2, 3],
                          "nx": [1.0, -1.0, 0.0, 0.0], "ny": [0.0, 0.0, 1.0, -1.0],
                          "nz": 0.0, "d": [0.0, -w, 0.0, -length],
                          "height": table["cushion_height"]})
    # pooltool's cushion segment ids -> the walls above.
    cushion = {"3": 0, "12": 1, "18": 2, "9": 3}

    rows = []
    for _, e in events[events.event_type.isin(["ball_ball", "ball_linear_cushion"])].iterrows():
        pairs = [(e.agent1_id, e.agent2_id)]
        if e.event_type == "ball_ball":
            pairs.append((e.agent2_id, e.agent1_id))
        for me, other in pairs:
            a = "agent1" if me == e.agent1_id else "agent2"
            dv = [e[f"{a}_post_v{c}"] - e[f"{a}_pre_v{c}"] for c in "xyz"]
            rows.append({"scenario_id": sid(e.shot_id), "t": e.time, "body_id": body[me],
                         "other": (f"body:{body[other]}" if e.event_type == "ball_ball"
                                   else f"wall:{cushion[str(other)]}"),
                         "dvx": dv[0], "dvy": dv[1], "dvz": dv[2]})
    impacts = pd.DataFrame(rows)

    out.mkdir(parents=True, exist_ok=True)
    for name, frame in (("bodies", pd.DataFrame(bodies)), ("trajectories", trajectories),
                        ("walls", walls), ("events", impacts)):
        frame.to_parquet(out / f"{name}.parquet", index=False, compression="zstd")
    truth = {"mu_k": bp["u_s"], "mu_r": bp["u_r"], "mu_sp": bp["u_sp"],
             "e_bb": bp["e_b"], "mu_bb": par["resolver"]["ball_ball"]["friction"]["a"],
             "mu_bb_b": par["resolver"]["ball_ball"]["friction"]["b"],
             "mu_bb_c": par["resolver"]["ball_ball"]["friction"]["c"],
             "e_bw": bp["e_c"], "mu_w": bp["f_c"],
             "omega_ratio_w": par["resolver"]["ball_linear_cushion"]["omega_ratio"]}
    meta = {
        "name": "billiards",
        "description": "60 two-ball billiards shots from pooltool 0.6 (slide, roll, spin, "
                       "ball-ball throw, cushions with a nose), noiseless; a ball struck with a "
                       "stated speed and spin hits a ball at rest",
        "source": f"pooltool-billiards {par['versions']['pooltool-billiards']} "
                  "(github.com/ekiefl/pooltool, default resolver), converted by "
                  "datasets/billiards/make.py; samples at 50 Hz",
        "license": "CC0-1.0 (simulated data; pooltool itself is Apache-2.0)",
        "units": {"length": "m", "time": "s"},
        "gravity": bp["g"],
        "ground_z": 0.0,
        "model": {"spin": True},
        "laws": {"body_body": "frictional_inelastic", "body_wall": "stronge_compliant"},
        # pooltool has no static friction: a v_th of 1e-9 m/s turns the
        # patent's switch off, and mu_s (then read over the last nm/s of a
        # slide) is fixed out of the way.
        "params": {"v_th": 1e-9, "mu_s": 0.5},
        "truth": truth,
        "noise": "none: exact evaluations of pooltool's analytic motion",
    }
    (out / "dataset.yaml").write_text(yaml.safe_dump(meta, sort_keys=False))


if __name__ == "__main__":
    convert(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else Path(__file__).parent)
