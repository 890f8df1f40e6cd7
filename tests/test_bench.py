"""`solrl bench convergence` in its quick mode: it runs all four families and writes its report."""
import json

import numpy as np
import pytest
from scipy import stats

from solrl.bench import (aggregate_seeds, convergence_table, final_metrics, mean_interval, metric_cell, referee_below_base,
                         run_convergence, separation, time_to_reach, write_convergence_report)


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
    assert next(r for r in rows if r["family"] == "naive_scaling")["rollout_speedup_vs_naive_scaling"] == 1.0
    assert (tmp_path / "convergence.png").stat().st_size > 0 and "sol_rl" in report.read_text()
    assert convergence_table(results) == rows


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


def test_the_relation_probe_reward_scores_renders():
    """bench/relation_probe.py's reward builds on the toy rewards' parts; it broke silently once (issue 33)."""
    import importlib.util
    from pathlib import Path

    from solrl.toyworld.grammar import parse_prompt
    from solrl.toyworld.render import render_scene

    spec = importlib.util.spec_from_file_location("relation_probe", Path(__file__).parent.parent / "bench" / "relation_probe.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    prompts = ["a red circle above a blue square", "two green triangles"]
    rng = np.random.default_rng(0)
    result = module.RelationProbeReward()(np.stack([render_scene(parse_prompt(p), rng) for p in prompts]), prompts)
    assert result.scores[0] == 1.0 and set(result.parts) == {"strict", "gold", "world_like", "referee"}
