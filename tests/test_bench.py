"""`solrl bench convergence` in its quick mode (it runs all four families and writes its report), its statistics and curves."""
import json
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from solrl.lab.convergence import run_convergence
from solrl.lab.convergence_report import metric_cell, peak_lines, write_convergence_report
from solrl.lab.statistics import (aggregate_seeds, final_metrics, mean_interval, referee_below_base, separation, time_to_reach,
                                  time_to_target)
from solrl.reporting.time_to_target import explore_cost_ratio, seed_times, speedup_bound, speedup_interval, time_verdict


def test_time_to_reach():
    history = [{"mean_score": 0.3, "wall_seconds": 0}, {"mean_score": 0.5, "wall_seconds": 60}, {"mean_score": 0.6, "wall_seconds": 90}]
    assert time_to_reach(history, 0.5) == 60
    assert time_to_reach(history, 0.7) is None


def test_quick_convergence_run_writes_table_and_plot(tiny_toy_dir, tmp_path):
    overrides = [f"model.path={tiny_toy_dir}", "train.iterations=1", "train.prompts_per_iter=1", "train.group_size=2",
                 "rollout.explore_seeds=4", "rollout.explore_steps=2", "sampling.steps=3", "sampling.batch_size=8",
                 "lora.rank=4", "lora.alpha=8", "eval.max_prompts=2", "eval.seeds_per_prompt=1", "eval.steps=2"]
    families = ["diffusionnft", "naive_scaling", "naive_quant", "sol_rl"]
    results = run_convergence(0.5, str(tmp_path), families, overrides)
    report = write_convergence_report(results, str(tmp_path), "test")
    written = json.loads((tmp_path / "convergence.json").read_text())
    rows = written["rows"]
    assert [r["family"] for r in rows] == families and set(written["histories"]) == set(families)
    assert all(r["iterations"] == 1 and r["rollout_seconds_per_iteration"] > 0 for r in rows)
    assert all(r["time_to_target"]["metric"] == "strict_accuracy" for r in rows)
    # only sol_rl explores and regenerates: the one row with an explore cost per image-step
    assert [r["family"] for r in rows if r["explore_cost_ratio"] is not None] == ["sol_rl"]
    assert next(r for r in rows if r["family"] == "naive_scaling")["rollout_speedup_vs_naive_scaling"] == 1.0
    assert (tmp_path / "convergence.png").stat().st_size > 0 and "sol_rl" in report.read_text()
    # each row says what its run's own logs say, read back from the run directory
    for row in rows:
        train = [json.loads(line) for line in (tmp_path / row["family"] / "train.jsonl").read_text().splitlines()]
        evals = [json.loads(line) for line in (tmp_path / row["family"] / "eval.jsonl").read_text().splitlines()]
        assert row["iterations"] == len(train) == 1 and row["seconds_per_iteration"] == train[0]["seconds_iteration"]
        assert row["final_strict"] == evals[-1]["strict_accuracy"] and row["base_strict"] == evals[0]["strict_accuracy"]
        assert row["strict_gain_by_seed"] == [evals[-1]["strict_accuracy"] - evals[0]["strict_accuracy"]]


def _stand_in_trainer(monkeypatch) -> dict:
    """Replaces the Trainer for run_convergence: each run notes its directory's name -> its config, in the
    order the runs went, and writes the logs run_convergence and the report read. Returns that record."""
    import dataclasses

    import yaml

    import solrl.training.trainer as trainer_module

    runs = {}

    class StandIn:
        def __init__(self, cfg, quiet):
            self.cfg, self.out = cfg, Path(cfg.out_dir)

        def train(self):
            runs[self.out.name] = self.cfg
            self.out.mkdir(parents=True)
            (self.out / "eval.jsonl").write_text('{"iteration": 0, "strict_accuracy": 0.5, "train_seconds": 0}\n')
            (self.out / "train.jsonl").write_text('{"seconds_iteration": 1.0, "seconds_rollout": 0.5}\n')
            (self.out / "config.yaml").write_text(yaml.safe_dump(dataclasses.asdict(self.cfg)))

    monkeypatch.setattr(trainer_module, "Trainer", StandIn)
    return runs


def test_runs_go_seed_by_seed_so_a_slow_stretch_falls_on_every_family(tmp_path, monkeypatch):
    runs = _stand_in_trainer(monkeypatch)
    results = run_convergence(0.1, str(tmp_path), ["diffusionnft", "sol_rl"], seeds=2)
    assert list(runs) == ["diffusionnft__seed0", "sol_rl__seed0", "diffusionnft__seed1", "sol_rl__seed1"]
    assert list(results) == ["diffusionnft", "sol_rl"] and len(results["sol_rl"]["seed_evals"]) == 2


def test_a_later_seed_start_runs_seeds_no_study_saw(tmp_path, monkeypatch):
    from solrl.cli import build_parser

    runs = _stand_in_trainer(monkeypatch)
    run_convergence(0.1, str(tmp_path / "a"), ["diffusionnft", "sol_rl"], seeds=2, seed_start=100)
    assert list(runs) == ["diffusionnft__seed100", "sol_rl__seed100", "diffusionnft__seed101", "sol_rl__seed101"]
    assert [cfg.seed for cfg in runs.values()] == [100, 100, 101, 101]
    runs.clear()
    run_convergence(0.1, str(tmp_path / "b"), ["sol_rl"], seeds=1, seed_start=7)  # one seed, still named by it
    assert list(runs) == ["sol_rl__seed7"]
    args = build_parser().parse_args(["bench", "convergence", "--seeds", "20", "--seed-start", "100"])
    assert (args.seeds, args.seed_start) == (20, 100)


def test_mean_interval_is_the_student_t_interval():
    mean, half = mean_interval([1.0, 2.0, 3.0])
    # sd 1, se 1/sqrt(3), t(0.975, 2) = 4.3027: half-width 2.4842
    assert mean == 2.0 and half == pytest.approx(4.302653 / 3 ** 0.5, rel=1e-5)
    assert half == pytest.approx(stats.t.interval(0.95, 2, scale=1 / 3 ** 0.5)[1], rel=1e-9)
    assert mean_interval([0.4])[0] == 0.4


def test_several_seeds_give_means_with_intervals(tiny_toy_dir, tmp_path):
    overrides = [f"model.path={tiny_toy_dir}", "train.iterations=1", "train.prompts_per_iter=1", "train.group_size=2",
                 "sampling.steps=2", "sampling.batch_size=4", "lora.rank=4", "lora.alpha=8", "eval.max_prompts=2",
                 "eval.seeds_per_prompt=1", "eval.steps=2", "train.eval_every=1", "reward.name=jpeg_compressibility",
                 "lora.init=default", "train.lr=1e-2"]
    results = run_convergence(0.5, str(tmp_path), ["diffusionnft"], overrides, seeds=3)
    runs = [json.loads(line) for seed in range(3) for line in
            (tmp_path / f"diffusionnft__seed{seed}" / "eval.jsonl").read_text().splitlines()[-1:]]
    final = results["diffusionnft"]["eval"][-1]
    assert final["seeds"] == 3 and final["mean_score"] == pytest.approx(sum(r["mean_score"] for r in runs) / 3)
    assert final["mean_score_ci"] == pytest.approx(mean_interval([r["mean_score"] for r in runs])[1])
    assert len({round(r["mean_score"], 6) for r in runs}) > 1  # the seeds differ, so the interval is not trivial
    report = write_convergence_report(results, str(tmp_path), "test").read_text()
    assert "±" in report and "3 seeds" in report
    assert aggregate_seeds([[{"iteration": 0, "mean_score": 0.2}], [{"iteration": 0, "mean_score": 0.4}]])[0]["mean_score"] == pytest.approx(0.3)


def test_aggregate_seeds_keeps_the_common_evaluations_and_each_seeds_final():
    """Seed a stopped at iteration 7, seed b ran to 10: iterations 0, 3, 6 are means over both; b's 9, which a
    did not reach, is left out; the last row is the two finals (0.5 at 7, 0.7 at 10) at their mean iteration."""
    a = [{"iteration": i, "train_seconds": t, "mean_score": m} for i, t, m in ((0, 0, 0.1), (3, 30, 0.2), (6, 60, 0.3), (7, 90, 0.5))]
    b = [{"iteration": i, "train_seconds": t, "mean_score": m}
         for i, t, m in ((0, 0, 0.1), (3, 25, 0.4), (6, 50, 0.5), (9, 75, 0.9), (10, 90, 0.7))]
    rows = aggregate_seeds([a, b])
    assert [r["iteration"] for r in rows] == [0, 3, 6, 8.5]
    assert [r["mean_score"] for r in rows] == pytest.approx([0.1, 0.3, 0.4, 0.6])
    assert [r.get("final", False) for r in rows] == [False, False, False, True] and all(r["seeds"] == 2 for r in rows)
    assert rows[-1]["train_seconds"] == 90
    # runs that end on the same evaluation need no extra row
    assert [r["iteration"] for r in aggregate_seeds([a, a])] == [0, 3, 6, 7]


def _evals(*rows):
    return [{"iteration": i * 10, "mean_score": m, "strict_accuracy": s, "gold_accuracy": g, "referee_accuracy": g}
            for i, (m, s, g) in enumerate(rows)]


def test_final_metrics_gains_and_referee_under_the_base_by_hand():
    seed0 = _evals((0.8, 0.5, 0.6), (0.9, 0.7, 0.55), (0.95, 0.9, 0.8))
    seed1 = _evals((0.8, 0.5, 0.6), (0.85, 0.6, 0.7), (0.90, 0.7, 0.6))
    row = final_metrics([seed0, seed1])
    # two seeds: mean 0.8, sd 0.1414, se 0.1, t(0.975, 1) = 12.706: half-width 1.2706
    assert row["final_strict"] == pytest.approx(0.8) and row["final_strict_ci"] == pytest.approx(1.27062, rel=1e-4)
    assert row["strict_gain_by_seed"] == pytest.approx([0.4, 0.2]) and row["base_gold"] == 0.6
    assert row["heldout_gain_by_seed"] == pytest.approx([0.15, 0.10])
    # seed 0 dips under its base's 0.6 at iteration 10; seed 1 ends at exactly the base: not under it
    assert referee_below_base([seed0, seed1]) == [{"seed": 0, "iteration": 10, "referee": 0.55}]


def test_metric_cell_names_gains_and_separation():
    base = {"seeds": 3, "final_strict": 0.90, "final_strict_ci": 0.01, "strict_gain_by_seed": [0.1, 0.1, 0.1]}
    high = {"seeds": 3, "final_strict": 0.95, "final_strict_ci": 0.02, "strict_gain_by_seed": [0.14, 0.15, 0.16]}
    near = dict(high, final_strict=0.92)
    assert separation(high, base, "strict") == "above" and separation(near, base, "strict") == "overlap"
    assert separation(base, high, "strict") == "below"
    assert metric_cell(high, "strict", base) == "0.950 ± 0.020 (gains +0.140, +0.150, +0.160; above)"
    assert metric_cell(base, "strict", base) == "0.900 ± 0.010 (gains +0.100, +0.100, +0.100)"
    assert metric_cell(high, "gold", base) == "-"


def test_the_referees_accuracy_gets_its_own_column_with_gains(tmp_path):
    """Hand-made histories: the referee's final 0.9 and 0.8 (base 0.7) give a column of its own, mean 0.85."""
    seed_evals = [[{"iteration": 0, "wall_seconds": 0, "mean_score": 0.5, "referee_accuracy": 0.7},
                   {"iteration": 10, "wall_seconds": 60, "mean_score": 0.6, "referee_accuracy": r}] for r in (0.9, 0.8)]
    train = [{"seconds_rollout": 1.0, "seconds_iteration": 2.0}]
    results = {"diffusionnft": {"eval": aggregate_seeds(seed_evals), "train": train, "seed_evals": seed_evals}}
    assert final_metrics(seed_evals)["final_referee"] == pytest.approx(0.85)
    assert final_metrics(seed_evals)["referee_gain_by_seed"] == pytest.approx([0.2, 0.1])
    report = write_convergence_report(results, str(tmp_path), "test").read_text()
    header = next(line for line in report.splitlines() if line.startswith("| family"))
    assert "| referee accuracy |" in header
    assert "0.850 ± " in report and "gains +0.200, +0.100" in report


def test_the_forward_profile_times_one_gemm_in_each_precision():
    """bench/forward_profile.py's GEMM table: fp32, bf16 and torch._int_mm on the same shape, each timed."""
    import importlib.util
    import math
    from pathlib import Path

    spec = importlib.util.spec_from_file_location("forward_profile", Path(__file__).parent.parent / "bench" / "forward_profile.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    rows = module.gemm_ceiling(rows=64, widths=(32, 64), reps=2)
    assert [r[0] for r in rows] == [32, 64]
    assert all(math.isfinite(ms) and ms > 0 for r in rows for ms in r[1:])


def test_the_forward_profile_swaps_in_contiguous_linear_layers_on_a_copy():
    import importlib.util
    from pathlib import Path

    import torch

    from conftest import linear_rounding_bound

    from solrl.precision.linear import ContiguousLinear

    spec = importlib.util.spec_from_file_location("forward_profile", Path(__file__).parent.parent / "bench" / "forward_profile.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    plain = torch.nn.Sequential(torch.nn.Linear(32, 8), torch.nn.ReLU())
    swapped = module.contiguous_linear_inputs(plain)
    assert [type(m) for m in swapped] == [ContiguousLinear, torch.nn.ReLU]
    assert [type(m) for m in plain] == [torch.nn.Linear, torch.nn.ReLU]
    x = torch.randn(4, 10, 32)[:, :6]
    # the same values up to another summation order (ReLU does not widen a difference): bounded on every CPU kind
    assert ((swapped(x) - plain(x)).abs() <= linear_rounding_bound(x, plain[0].weight, plain[0].bias)).all()


def _timed(*rows):
    """An evaluation history from (wall seconds, strict accuracy) pairs, ten iterations apart."""
    return [{"iteration": i * 10, "wall_seconds": w, "strict_accuracy": s, "mean_score": s} for i, (w, s) in enumerate(rows)]


def test_seed_times_keep_the_seeds_that_never_reach_the_target():
    seeds = [_timed((5, 0.5), (60, 0.7), (120, 0.9)), _timed((5, 0.5), (60, 0.6), (110, 0.65))]
    t = seed_times(seeds, 0.7, "strict_accuracy")
    # seed 0 first reaches 0.7 at its second evaluation; seed 1 never: it counts at its end (110 s, iteration 20)
    assert t == {"seconds_by_seed": [60.0, 110.0], "iterations_by_seed": [10, 20], "reached_by_seed": [True, False],
                 "reached": 1}
    assert seed_times(seeds, 0.5, "strict_accuracy")["seconds_by_seed"] == [5.0, 5.0]  # the base itself reaches it


def test_time_to_target_counts_training_seconds_not_evaluations():
    # wall-clock 60 s at the second evaluation, of which the two evaluations took 4 + 6 s: 50 s of training
    history = [{"iteration": 0, "wall_seconds": 4, "train_seconds": 0.0, "strict_accuracy": 0.5},
               {"iteration": 10, "wall_seconds": 60, "train_seconds": 50.0, "strict_accuracy": 0.8}]
    assert seed_times([history], 0.7, "strict_accuracy")["seconds_by_seed"] == [50.0]


def test_the_caveat_under_a_target_below_the_references_best_mean():
    # two seeds, evaluated at iterations 0, 10, 20; seed 1 also at 25 (its final), which seed 0 lacks
    seeds = [_timed((5, 0.5), (60, 0.8), (120, 0.6)), _timed((5, 0.5), (60, 0.7), (120, 0.7)) + [
        {"iteration": 25, "wall_seconds": 150, "strict_accuracy": 1.0, "mean_score": 1.0}]]
    # means over seeds: 0.75 at 10, 0.65 at 20; the base and the finals' row (0.6 and 1.0: 0.8) are left out
    results = {"diffusionnft": {"seed_evals": seeds}}
    target = {"reference": "diffusionnft", "metric": "strict_accuracy", "target": 0.65}
    line = peak_lines(results, target)[0]
    assert "0.100 under diffusionnft's best mean, 0.750 at iteration 10 " in line
    assert peak_lines(results, {**target, "target": 0.75}) == []  # a target at the peak needs no caveat
    assert peak_lines(results, None) == []
    base_only = {"diffusionnft": {"seed_evals": [[{"iteration": 0, "wall_seconds": 5, "strict_accuracy": 0.5}]]}}
    assert peak_lines(base_only, {**target, "target": 0.4}) == []  # the base is no peak


def test_speedup_interval_by_hand():
    # means 120 and 60: 2x sooner. var(log mean) = sd^2 / (n mean^2): 400 / (3 * 14400) = 100 / (3 * 3600) = 0.009259
    # each; se = sqrt(0.018519) = 0.136083; Welch df = 0.018519^2 / (2 * 0.009259^2 / 2) = 4; t(0.975, 4) = 2.776445;
    # bounds 2 * exp(-+2.776445 * 0.136083) = 1.37070, 2.91822
    ratio, low, high = speedup_interval([100, 120, 140], [50, 60, 70])
    assert ratio == 2.0 and low == pytest.approx(1.37070, rel=1e-5) and high == pytest.approx(2.91822, rel=1e-5)
    assert speedup_interval([100, 100], [50, 50]) == (2.0, 2.0, 2.0)  # no spread: no width
    assert speedup_interval([100], [50, 60]) == (100 / 55, None, None)
    assert speedup_interval([0.0, 0.0], [0.0, 0.0]) == (None, None, None)  # the base already meets the target


def test_time_verdict_needs_separated_intervals_and_every_seed_of_the_faster_family():
    def times(mean, half, reached=(True, True, True)):
        return {"seconds_mean": mean, "seconds_ci": half, "reached_by_seed": list(reached), "reached": sum(reached)}

    reference = times(300, 20)
    assert time_verdict(times(200, 30), reference) == "faster"
    assert time_verdict(times(260, 30), reference) == "no separation"       # 290 > 280: the intervals overlap
    assert time_verdict(times(400, 30), reference) == "slower"
    assert time_verdict(times(200, 30, (True, False, True)), reference) == "no separation"  # a lower bound among them
    assert time_verdict(times(400, 30, (False, False, False)), times(300, 20, (True, False, True))) == "no separation"
    assert time_verdict(times(200, None), reference) == "no separation"     # one seed: no interval


def test_speedup_bound_follows_whose_seeds_never_reached_the_target():
    def seeds(*reached):
        return {"reached_by_seed": list(reached), "reached": sum(reached)}

    assert speedup_bound(seeds(True, True), seeds(True, True)) == "exact"
    # the family's missing seeds would take longer than counted, so it is at most this much faster
    assert speedup_bound(seeds(True, False), seeds(True, True)) == "at most"
    assert speedup_bound(seeds(True, True), seeds(False, True)) == "at least"
    assert speedup_bound(seeds(False, False), seeds(False, True)) == "neither"


def test_explore_cost_ratio_by_hand():
    config = {"rollout": {"explore_seeds": 48, "explore_steps": 6}, "train": {"group_size": 12}, "sampling": {"steps": 10}}
    # explore 4.8 s / (48 x 6) = 0.016667 s per image-step; regenerate 3.0 s / (12 x 10) = 0.025: c = 0.6667;
    # the second iteration 2.4 s / 288 against 0.025: 0.3333; the median of the two is 0.5
    train = [{"seconds_explore": 4.8, "seconds_regenerate": 3.0}, {"seconds_explore": 2.4, "seconds_regenerate": 3.0},
             {"seconds_rollout": 1.0}]
    assert explore_cost_ratio(train, config) == pytest.approx(0.5)
    # an adaptive run logs how many seeds it explored per prompt: 24 instead of N = 48 doubles each image-step's cost
    assert explore_cost_ratio([dict(train[0], explored_seeds_mean=24.0)], config) == pytest.approx(4 / 3)
    assert explore_cost_ratio([{"seconds_rollout": 1.0}], config) is None and explore_cost_ratio(train, None) is None


def test_time_to_target_leads_the_report(tmp_path):
    """Hand-made histories: diffusionnft's finals 0.8 and 0.9 set the target 0.85 (strict accuracy); its seed 1
    reaches it at 200 s, seed 0 never (counted at 220 s); sol_rl's seeds reach it at 100 and 120 s."""
    dnft = [_timed((5, 0.5), (100, 0.7), (220, 0.8)), _timed((5, 0.5), (100, 0.8), (200, 0.9))]
    sol = [_timed((5, 0.5), (100, 0.85), (200, 0.9)), _timed((5, 0.5), (120, 0.86), (210, 0.9))]
    train = [{"seconds_rollout": 1.0, "seconds_iteration": 2.0}]
    results = {f: {"eval": aggregate_seeds(ev), "train": train, "seed_evals": ev} for f, ev in (("diffusionnft", dnft), ("sol_rl", sol))}
    t = time_to_target(results)
    assert t["diffusionnft"]["target"] == pytest.approx(0.85) and t["diffusionnft"]["metric"] == "strict_accuracy"
    assert t["diffusionnft"]["seconds_by_seed"] == [220.0, 200.0] and t["diffusionnft"]["reached"] == 1
    assert t["sol_rl"]["seconds_by_seed"] == [100.0, 120.0] and t["sol_rl"]["iterations_by_seed"] == [10, 10]
    assert t["sol_rl"]["speedup"] == pytest.approx(210 / 110) and t["sol_rl"]["seconds_mean"] == 110
    # two seeds 20 s apart: sd 14.142, se 10, t(0.975, 1) = 12.706: half-width 127.06 on each side, so they overlap
    assert t["sol_rl"]["seconds_ci"] == pytest.approx(127.062, rel=1e-4)
    assert t["sol_rl"]["verdict"] == "no separation" and t["diffusionnft"]["verdict"] == "reference"
    report = write_convergence_report(results, str(tmp_path), "test").read_text()
    table = [line for line in report.split("## The speed-up at other bars")[0].splitlines() if line.startswith("|")]
    assert table[0].startswith("| family | s to target | iterations to target | speed-up vs diffusionnft |")
    assert len({line.count("|") for line in table}) == 1  # every row has as many cells as the header
    assert "Target: held-out strict_accuracy 0.850" in report
    assert "| sol_rl | 110 ± 127 (2/2 reached: 100, 120) | 10 ± 0 (2/2 reached: 10, 10) | 1.91 [" in report
    # diffusionnft's seed 0 never reached 0.85, so sol_rl's 1.91x is a floor
    assert t["sol_rl"]["bound"] == "at least" and t["diffusionnft"]["bound"] == "exact"
    assert "(no separation; at least: 1/2 of diffusionnft's times are lower bounds) |" in report
    assert "(1/2 reached: >=220, 200)" in report


def test_the_sweep_times_every_family_at_shares_of_the_references_gain(tmp_path):
    """The histories above: base 0.5, target 0.85, so the bars are 0.5875, 0.675, 0.7625 and 0.85. Both
    diffusionnft seeds pass the two lower bars at 100 s (iteration 10), sol_rl's at 100 and 120 s: 100 / 110.
    At 0.7625 diffusionnft's seed 0 needs its 220 s evaluation (iteration 20): 160 / 110, iterations 15 / 10;
    at 0.85 the headline, 210 / 110 and 20 / 10, one diffusionnft seed a lower bound."""
    from solrl.lab.convergence_report import sweep_lines
    from solrl.lab.statistics import target_sweep

    dnft = [_timed((5, 0.5), (100, 0.7), (220, 0.8)), _timed((5, 0.5), (100, 0.8), (200, 0.9))]
    sol = [_timed((5, 0.5), (100, 0.85), (200, 0.9)), _timed((5, 0.5), (120, 0.86), (210, 0.9))]
    train = [{"seconds_rollout": 1.0, "seconds_iteration": 2.0}]
    results = {f: {"eval": aggregate_seeds(ev), "train": train, "seed_evals": ev} for f, ev in (("diffusionnft", dnft), ("sol_rl", sol))}
    sweep = target_sweep(results)
    assert [row["share"] for row in sweep] == [0.25, 0.5, 0.75, 1.0]
    assert [row["target"] for row in sweep] == pytest.approx([0.5875, 0.675, 0.7625, 0.85])
    sol_rows = [row["families"]["sol_rl"] for row in sweep]
    assert [t["speedup"] for t in sol_rows] == pytest.approx([100 / 110, 100 / 110, 160 / 110, 210 / 110])
    assert [t["iteration_ratio"] for t in sol_rows] == pytest.approx([1.0, 1.0, 1.5, 2.0])
    assert [row["families"]["diffusionnft"]["reached"] for row in sweep] == [2, 2, 2, 1]
    assert sweep[-1]["families"]["sol_rl"]["speedup"] == time_to_target(results)["sol_rl"]["speedup"]  # 1.0 is the headline
    lines = sweep_lines(sweep)
    assert lines[-2].startswith("| 0.75 | 0.76") and "| 1.45 [" in lines[-2] and "(2/2; 2/2); iterations 1.50x |" in lines[-2]
    # at the headline bar one diffusionnft seed is a lower bound, so 1.91x is a floor, and the cell says so
    assert lines[-1].startswith("| 1.00 | 0.850 | 1.91 [") and "(2/2; 1/2; at least); iterations 2.00x |" in lines[-1]
    assert [row["families"]["sol_rl"]["bound"] for row in sweep] == ["exact", "exact", "exact", "at least"]
    both_short = [{**sweep[-1], "families": {**sweep[-1]["families"], "sol_rl": {**sol_rows[-1], "bound": "neither"}}}]
    assert "(2/2; 1/2; neither bound); iterations 2.00x |" in sweep_lines(both_short)[-1]
    report = write_convergence_report(results, str(tmp_path), "test").read_text()
    assert "## The speed-up at other bars" in report and lines[-1] in report
    assert json.loads((tmp_path / "convergence.json").read_text())["target_sweep"][2]["target"] == pytest.approx(0.7625)
    # a given target replaces the headline's; one at or under the base leaves no gain to share out
    assert target_sweep(results, 0.7)[-1]["target"] == pytest.approx(0.7)
    assert target_sweep(results, 0.5) == [] and sweep_lines([]) == []
    assert target_sweep({"sol_rl": results["sol_rl"]}) == []  # no diffusionnft and no target: no headline


def test_a_given_target_times_families_without_diffusionnft_against_the_first(tmp_path):
    """--target 0.85 on a pair (sol_rl, sol_rl_adaptive): sol_rl reaches it at 100 and 120 s (the reference),
    adaptive at 50 and never (counted at 210 s): 110 / 130 = 0.846x."""
    sol = [_timed((5, 0.5), (100, 0.85), (200, 0.9)), _timed((5, 0.5), (120, 0.86), (210, 0.9))]
    adaptive = [_timed((5, 0.5), (50, 0.86), (200, 0.9)), _timed((5, 0.5), (120, 0.80), (210, 0.84))]
    train = [{"seconds_rollout": 1.0, "seconds_iteration": 2.0}]
    results = {f: {"eval": aggregate_seeds(ev), "train": train, "seed_evals": ev}
               for f, ev in (("sol_rl", sol), ("sol_rl_adaptive", adaptive))}
    assert time_to_target(results) == {}  # no diffusionnft and no target: nothing to time
    t = time_to_target(results, 0.85)
    assert t["sol_rl"]["verdict"] == "reference" and t["sol_rl_adaptive"]["reference"] == "sol_rl"
    assert t["sol_rl_adaptive"]["seconds_by_seed"] == [50.0, 210.0] and t["sol_rl_adaptive"]["reached"] == 1
    assert t["sol_rl_adaptive"]["speedup"] == pytest.approx(110 / 130)
    report = write_convergence_report(results, str(tmp_path), "test", 0.85).read_text()
    assert "Target: held-out strict_accuracy 0.850, given with --target; speed-ups against sol_rl." in report
    assert "| family | s to target | iterations to target | speed-up vs sol_rl |" in report
    assert "| sol_rl_adaptive | 130 ± " in report and "(1/2 reached: 50, >=210)" in report
    # final values are ranked against the same reference: sol_rl 0.90 both seeds, adaptive 0.90 and 0.84
    assert "0.870 ± 0.381 (gains +0.400, +0.340; overlap)" in report and '"above" / "below" sol_rl only' in report
    # with diffusionnft present a given target replaces its final value, and diffusionnft stays the reference
    dnft = [_timed((5, 0.5), (100, 0.7), (220, 0.8))]
    results["diffusionnft"] = {"eval": aggregate_seeds(dnft), "train": train, "seed_evals": dnft}
    t = time_to_target(results, 0.75)
    assert t["sol_rl"]["reference"] == "diffusionnft" and t["diffusionnft"]["seconds_by_seed"] == [220.0]
    assert t["sol_rl"]["seconds_by_seed"] == [100.0, 120.0]


def test_family_curves_run_on_training_time_where_every_evaluation_has_it(tmp_path, monkeypatch):
    import solrl.reporting.curves as curves

    figures = []
    finish = curves._finish
    monkeypatch.setattr(curves, "_finish", lambda fig, *a: figures.append(fig) or finish(fig, *a))
    timed = {"a": [{"iteration": 0, "wall_seconds": 30.0, "train_seconds": 0.0, "mean_score": 0.1},
                   {"iteration": 4, "wall_seconds": 120.0, "train_seconds": 60.0, "mean_score": 0.2}]}
    curves.plot_family_curves(timed, tmp_path / "timed.png")
    left = figures[-1].axes[0]
    assert list(left.lines[0].get_xdata()) == [0.0, 1.0] and "training time" in left.get_xlabel()
    older = {"a": [{k: v for k, v in e.items() if k != "train_seconds"} for e in timed["a"]]}  # logs from before the trainer timed its evaluations
    curves.plot_family_curves(older, tmp_path / "older.png")
    left = figures[-1].axes[0]
    assert list(left.lines[0].get_xdata()) == [0.5, 2.0] and left.get_xlabel() == "wall-clock (minutes)"


def test_a_variant_is_its_family_with_its_own_overrides_before_the_command_lines():
    from solrl.lab.families import family_config, parse_variant

    variants = dict([parse_variant(["sol_rl_n96", "sol_rl", "rollout.explore_seeds=96"]),
                     parse_variant(["adaptive_n96", "sol_rl_adaptive", "rollout.explore_seeds=96", "rollout.explore_steps=4"])])
    assert family_config("sol_rl", [], variants).rollout.explore_seeds == 48  # the shipped family is untouched
    assert family_config("sol_rl_n96", [], variants).rollout.explore_seeds == 96
    adaptive = family_config("adaptive_n96", [], variants).rollout
    assert adaptive.adaptive and adaptive.explore_seeds == 96 and adaptive.explore_steps == 4  # its family's own override kept
    assert family_config("sol_rl_n96", ["rollout.explore_seeds=24"], variants).rollout.explore_seeds == 24  # command line last


@pytest.mark.parametrize("tokens, names", [(["sol_rl_n96", "sol_rl"], "at least one override"),
                                           (["sol_rl", "sol_rl", "rollout.explore_seeds=96"], "shipped family"),
                                           (["n96", "sol_rll", "rollout.explore_seeds=96"], "unknown family 'sol_rll'"),
                                           (["n96", "sol_rl", "rollout.explore_seeds"], "not an override")])
def test_a_malformed_variant_is_refused_with_the_fix(tokens, names):
    from solrl.lab.families import parse_variant

    with pytest.raises(ValueError, match=names):
        parse_variant(tokens)


def test_the_cli_runs_a_variant_under_its_name(tmp_path, monkeypatch, capsys):
    from solrl.cli import main

    runs = _stand_in_trainer(monkeypatch)
    main(["bench", "convergence", "--minutes", "0.1", "--seeds", "1", "--families", "sol_rl", "sol_rl_n24",
          "--variant", "sol_rl_n24", "sol_rl", "rollout.explore_seeds=24", "--target", "0.4", "--out", str(tmp_path)])
    assert {name: cfg.rollout.explore_seeds for name, cfg in runs.items()} == {"sol_rl": 48, "sol_rl_n24": 24}
    assert "| sol_rl_n24 |" in (tmp_path / "convergence.md").read_text()
    assert main(["bench", "convergence", "--families", "sol_rl_n96", "--out", str(tmp_path / "x")]) == 2
    assert "unknown family 'sol_rl_n96'" in capsys.readouterr().err and not (tmp_path / "x").exists()


def test_per_image_step_cost_by_hand():
    from solrl.reporting.time_to_target import per_image_step_cost

    # 48 seeds x 6 steps explored in 3 s, 12 x 10 regenerated in 4 s: (3 / 288) / (4 / 120) = 0.3125
    assert per_image_step_cost(3.0, 48, 6, 4.0, 12, 10) == pytest.approx(0.3125)
    # the paper's FLUX rollout (79 s: 96 x 6 explored, 24 x 10 regenerated at about a quarter of naive's 184 s)
    assert per_image_step_cost(79 - 184 / 4, 96, 6, 184 / 4, 24, 10) == pytest.approx(0.30, abs=0.01)
