"""The pre-registered confirmation's analysis (solrl/reporting/confirmation.py) on runs made by hand."""
import dataclasses
import json

import pytest
import yaml

from solrl.reporting import confirmation
from solrl.reporting.confirmation import (REGISTERED, analyse, machine_deviations, read_records, settings_deviations,
                                          verdict)
from solrl.reporting.results import check_result

SMALL = dataclasses.replace(REGISTERED, seeds=2, resamples=2000)


def write_run(root, family, seed, seconds, strict, referee, **changes):
    d = root / f"{family}__seed{seed}"
    d.mkdir(parents=True)
    rows = [{"iteration": 3 * i, "train_seconds": t, "strict_accuracy": s, "referee_accuracy": r, "mean_score": s}
            for i, (t, s, r) in enumerate(zip(seconds, strict, referee))]
    (d / "eval.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    cfg = {"seed": seed, "train": {"prompts": "hard_train", "eval_every": 3, "timestep_fraction": 0.6,
                                   "time_budget_minutes": 3.0}, "eval": {"split": "hard_heldout", "seeds_per_prompt": 16}}
    for key, value in changes.items():
        section, name = key.split("__")
        cfg[section][name] = value
    (d / "config.yaml").write_text(yaml.safe_dump(cfg))


@pytest.fixture
def runs(tmp_path):
    # diffusionnft: finals 0.40 and 0.46, so the target is 0.43; seed 100 never gets there (censored, 185 s),
    # seed 101 only at its last evaluation, after the budget (183 s): both count the 180 s horizon
    write_run(tmp_path, "diffusionnft", 100, (0, 60, 120, 185), (0.3, 0.35, 0.42, 0.40), (0.5, 0.6, 0.6, 0.6))
    write_run(tmp_path, "diffusionnft", 101, (0, 60, 120, 183), (0.3, 0.3, 0.38, 0.46), (0.5, 0.55, 0.6, 0.7))
    # sol_rl reaches 0.43 at 70 s and at 140 s: a restricted mean of 105 s
    write_run(tmp_path, "sol_rl", 100, (0, 70, 140, 190), (0.3, 0.44, 0.5, 0.5), (0.5, 0.66, 0.7, 0.7))
    write_run(tmp_path, "sol_rl", 101, (0, 70, 140, 190), (0.3, 0.4, 0.43, 0.5), (0.5, 0.5, 0.5, 0.5))
    return tmp_path


def test_the_registered_analysis_by_hand(runs):
    records, configs = read_records(runs, SMALL)
    assert [(r["group"], r["seed"]) for r in records] == [("diffusionnft", 100), ("diffusionnft", 101), ("sol_rl", 100), ("sol_rl", 101)]
    assert settings_deviations(configs, SMALL) == []
    out = analyse(records, SMALL)
    strict = out["strict_accuracy"]
    assert strict["target"] == pytest.approx(0.43)
    assert strict["reference_times"] == [185.0, 183.0] and strict["family_times"] == [70.0, 140.0]
    assert strict["ratio"] == pytest.approx(180 / 105)
    assert strict["finals"]["diffusionnft"][0] == pytest.approx(0.43)
    # the referee: target 0.65 (finals 0.6, 0.7); diffusionnft 180 and 180 (183 is past the horizon); sol_rl
    # 70 and never (190, so 180): 180 / 125
    assert out["referee_accuracy"]["ratio"] == pytest.approx(180 / 125)
    assert out["confirmation"] == strict["verdict"] in ("confirmed", "not confirmed", "contradicted")
    assert strict["base"] == pytest.approx(0.3) and strict["target_above_base"]
    # a target at the base (here: the runs' finals fell back to it) is met at once by every seed: flagged
    flat = [dict(r, curve=[[i, t, 0.3, 0.5] for i, t, _, _ in r["curve"]]) for r in records]
    assert analyse(flat, SMALL)["strict_accuracy"]["target_above_base"] is False


def test_deviations_from_the_registration_are_named(runs):
    write_run(runs, "sol_rl", 102, (0, 60), (0.3, 0.5), (0.5, 0.6), train__timestep_fraction=0.3)
    _, configs = read_records(runs, SMALL)
    found = settings_deviations(configs, SMALL)
    assert any("sol_rl ran seeds [100, 101, 102] (3)" in d for d in found)
    assert any("train.timestep_fraction=0.3, registered 0.6" in d for d in found)


def test_the_machine_kind():
    epyc = "AMD EPYC 9R14 96-Core Processor"
    assert machine_deviations(epyc, {"avx2", "avx512_bf16"}, 2, 2) == []
    this_session = machine_deviations("AMD EPYC 7B13", {"avx2"}, 2, 2)  # AVX2 only: bf16 explore is emulated-slow
    assert this_session == ["no avx512_bf16 on this CPU"]
    xeon = machine_deviations("Intel(R) Xeon(R) Platinum 8481C", {"avx512_bf16", "amx_bf16"}, 2, 2)
    assert len(xeon) == 2 and "amx_bf16 on this CPU" in xeon
    assert machine_deviations(epyc, {"avx512_bf16"}, 16, 16) == ["16 cores, not 2", "16 torch threads, not 2"]


def test_the_rule_fixed_in_advance():
    assert verdict([1.02, 1.9], 0.95) == "confirmed"
    assert verdict([0.98, 1.9], 0.95) == "not confirmed"
    assert verdict([0.5, 0.97], 0.95) == "contradicted"


def test_a_run_short_of_the_registration_is_written_as_such(runs, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(confirmation, "REGISTERED", dataclasses.replace(REGISTERED, resamples=500))
    out = tmp_path / "confirmation.json"
    assert confirmation.main(["--runs", str(runs), "--out", str(out), "--started", "2026-12-07",
                              "--extra", "eval.max_prompts=2"]) == 0
    result = check_result(json.loads(out.read_text()))
    assert result["settings"]["registered_run"] is False  # 2 seeds a family, not 16; and this machine's kind
    assert "NOT as registered" in result["title"]
    assert any("ran seeds [100, 101] (2)" in d for d in result["settings"]["deviations"])
    assert "an override beyond the registration: eval.max_prompts=2" in result["settings"]["deviations"]
    assert len(result["records"]) == 4 and result["records"][0]["curve"][0] == [0, 0.0, 0.3, 0.5]
    assert "Not the registered confirmation" in capsys.readouterr().out
    # the docs' regions: the page's status and the README's sentence say what ran, and that it was not as registered
    status = confirmation.confirmation_status({"exploration/confirmation": result})
    assert "Not the registered confirmation" in status and result["summary"]["confirmation"] in status
    sentence = confirmation.confirmation_sentence({"exploration/confirmation": result})
    assert "not on the registered machine kind or settings" in sentence and "by the referee" in sentence
    assert "not run yet" in confirmation.confirmation_sentence({}) and "Not yet run" in confirmation.confirmation_status({})


def test_missing_runs_are_one_line(tmp_path, capsys):
    assert confirmation.main(["--runs", str(tmp_path), "--out", str(tmp_path / "x.json")]) == 2
    assert "no diffusionnft run" in capsys.readouterr().err
