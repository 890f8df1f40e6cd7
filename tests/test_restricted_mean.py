"""The convergence report's restricted-mean section (solrl/lab/restricted_mean.py), on histories made by hand."""
import pytest

from solrl.lab.restricted_mean import restricted_mean_lines, restricted_mean_rows


def history(*points):
    """(train_seconds, strict, referee) per evaluation, iterations 0, 3, 6, ..."""
    return [{"iteration": 3 * i, "train_seconds": t, "strict_accuracy": s, "referee_accuracy": r}
            for i, (t, s, r) in enumerate(points)]


def test_the_section_by_hand():
    config = {"train": {"time_budget_minutes": 3}}
    results = {
        # finals 0.40 and 0.46: target 0.43, which seed 0 never reaches (185 s) and seed 1 reaches after the
        # budget (183 s): both count 180
        "diffusionnft": {"config": config, "seed_evals": [
            history((0, 0.3, 0.5), (60, 0.35, 0.6), (120, 0.42, 0.6), (185, 0.40, 0.6)),
            history((0, 0.3, 0.5), (60, 0.3, 0.55), (120, 0.38, 0.6), (183, 0.46, 0.7))]},
        # 0.43 at 70 s and at 140 s
        "sol_rl": {"config": config, "seed_evals": [
            history((0, 0.3, 0.5), (70, 0.44, 0.66), (140, 0.5, 0.7), (190, 0.5, 0.7)),
            history((0, 0.3, 0.5), (70, 0.4, 0.5), (140, 0.43, 0.5), (190, 0.5, 0.5))]}}
    rows = restricted_mean_rows(results, resamples=500)
    strict, referee = rows
    assert (strict["metric"], referee["metric"]) == ("strict_accuracy", "referee_accuracy")
    assert strict["target"] == pytest.approx(0.43) and strict["ratio"] == pytest.approx(180 / 105)
    assert (strict["reached"], strict["reference_reached"]) == (2, 1)  # seed 1 of diffusionnft: after the horizon
    assert referee["ratio"] == pytest.approx(180 / 125)  # target 0.65: sol_rl at 70 s and never (180)
    text = "\n".join(restricted_mean_lines(rows))
    assert "| sol_rl | strict_accuracy | 0.430 | 1.71 |" in text and "180 s" in text


def test_no_section_without_what_it_needs():
    one_seed = {"diffusionnft": {"config": {"train": {"time_budget_minutes": 3}}, "seed_evals": [history((0, 0.3, 0.5))]}}
    assert restricted_mean_rows(one_seed) == [] and restricted_mean_lines([]) == []
    no_budget = {"diffusionnft": {"config": {"train": {}}, "seed_evals": [history((0, 0.3, 0.5))] * 2}}
    assert restricted_mean_rows(no_budget) == []
