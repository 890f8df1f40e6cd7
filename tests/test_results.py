"""results/: every file follows the schema of results/README.md, and the checker catches what breaks it."""
import json
import re

import pytest

from solrl.reporting.results import ResultError, all_results, check_result, load_result, values

GOOD = {"schema": 1, "title": "t", "command": "bash scripts/run_default.sh", "machine": "2-core AMD EPYC (AVX2 only)",
        "date": "2026-12-07", "source": "measured",
        "records": [{"group": "diffusionnft", "seed": 0, "strict_accuracy": 0.9, "seconds_to_target": None,
                     "curve": [[0.0, 0.5], [10.0, 0.7]]},
                    {"group": "sol_rl", "seed": 0, "strict_accuracy": 0.8}]}


def test_every_committed_result_follows_the_schema_and_carries_no_work_labels():
    for name, result in all_results().items():  # load_result checks the schema and the figure beside it
        text = json.dumps({k: v for k, v in result.items() if k != "_path"})
        assert not re.search(r"\b(stops?|issues?) [0-9]+", text, re.I), name


@pytest.mark.parametrize("change, message", [
    (lambda d: d.pop("machine"), "missing key 'machine'"),
    (lambda d: d.update(date="Dec 7"), "YYYY-MM-DD"),
    (lambda d: d.update(extra=1), "unknown key 'extra'"),
    (lambda d: d["records"][0].update(strict_accuracy=float("nan")), "write null"),
    (lambda d: d["records"][0].pop("seed"), "'seed'"),
    (lambda d: d["records"][1].update(seed=True), "'seed'"),
    (lambda d: d["records"][0].update(group=3), "'group'"),
    (lambda d: d["records"][0].update(curve={"a": 1}), "a metric is a number"),
    (lambda d: d.update(records=[]), "no records and no summary"),
    (lambda d: d.update(schema=2), "schema 2"),
])
def test_the_checker_names_what_breaks_the_schema(change, message):
    data = json.loads(json.dumps(GOOD))
    change(data)
    with pytest.raises(ResultError, match=message.replace("(", r"\(").replace(")", r"\)")):
        check_result(data, "x.json")


def test_a_good_file_loads_with_its_path_and_its_values_by_group(tmp_path):
    path = tmp_path / "topic" / "r.json"
    path.parent.mkdir()
    path.write_text(json.dumps(GOOD))
    result = load_result(path)
    assert result["_path"] == path
    assert values(result, "strict_accuracy") == [0.9, 0.8]
    assert values(result, "strict_accuracy", "sol_rl") == [0.8]
    assert list(all_results(tmp_path)) == ["topic/r"]
    path.write_text(json.dumps({**GOOD, "figure": "missing.png"}))
    with pytest.raises(ResultError, match="not beside it"):
        load_result(path)


def test_mean_interval_is_the_student_t_half_width_worked_by_hand():
    from solrl.reporting.results import mean_interval

    # 0.9, 0.8, 1.0: mean 0.9, sd 0.1, t(0.975, 2 df) = 4.302653 -> 4.302653 * 0.1 / sqrt(3) = 0.248414
    mean, half = mean_interval([0.9, 0.8, 1.0])
    assert mean == pytest.approx(0.9) and half == pytest.approx(0.248414, abs=1e-6)
    assert mean_interval([0.5])[0] == 0.5 and mean_interval([0.5])[1] != mean_interval([0.5])[1]  # nan for one value
