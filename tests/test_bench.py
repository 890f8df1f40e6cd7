"""`solrl bench convergence` in its quick mode: it runs all four families and writes its report."""
import json

from solrl.bench import convergence_table, run_convergence, time_to_reach, write_convergence_report


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
    rows = json.loads((tmp_path / "convergence.json").read_text())
    assert [r["family"] for r in rows] == families
    assert all(r["iterations"] == 1 and r["rollout_seconds_per_iteration"] > 0 for r in rows)
    assert next(r for r in rows if r["family"] == "naive_scaling")["rollout_speedup_vs_naive_scaling"] == 1.0
    assert (tmp_path / "convergence.png").stat().st_size > 0 and "sol_rl" in report.read_text()
    assert convergence_table(results) == rows
