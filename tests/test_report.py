"""`solrl report`: the page a user looks at, checked in a real headless browser."""
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from solrl.cli import main
from solrl.config import load_config
from solrl.reporting.screenshot import find_browser, screenshot
from solrl.training.trainer import Trainer


@pytest.fixture(scope="module")
def sol_rl_run(tiny_toy_dir, tmp_path_factory):
    run = tmp_path_factory.mktemp("report_run")
    cfg = load_config(None, [
        f"model.path={tiny_toy_dir}", f"out_dir={run}", "reward.name=jpeg_compressibility", "sampling.steps=3",
        "sampling.batch_size=16", "lora.rank=2", "lora.alpha=4", "rollout.family=sol_rl", "rollout.explore_seeds=6",
        "rollout.explore_steps=2", "rollout.explore_precision=fp8", "train.iterations=3", "train.prompts_per_iter=2",
        "train.group_size=4", "train.eval_every=1", "eval.max_prompts=2", "eval.seeds_per_prompt=1", "eval.steps=2",
    ])
    Trainer(cfg, quiet=True).train()
    return run


def test_report_holds_every_section_of_a_sol_rl_run(sol_rl_run, capsys):
    assert main(["report", str(sol_rl_run)]) == 0
    out = sol_rl_run / "report"
    page = (out / "index.html").read_text()
    for section in ("Reward", "Losses", "Timings", "Proxy fidelity and selection", "Held-out samples over training", "Configuration"):
        assert f"<h2>{section}</h2>" in page, section
    assert page.count("data:image/png;base64,") == 4 + 4  # four plots, four evaluation grids (iterations 0-3)
    assert "rollout_family" not in page and "sol_rl" in page and "explore_precision: fp8" in page
    assert "iter_000003.safetensors (safetensors + JSON; its SHA-256 matches its seal)" in page
    for png in json.loads((out / "report.json").read_text())["figures"]:
        assert Image.open(out / png).size[0] > 400
    selection = [json.loads(line) for line in (sol_rl_run / "selection.jsonl").read_text().splitlines()]
    assert [r["step"] for r in selection] == [1, 2, 3] and all(len(r["proxy"]) == len(r["full"]) == 8 for r in selection)


def test_report_redacts_an_old_config_and_flags_a_damaged_checkpoint(tmp_path):
    """A config.yaml written before redaction (or by hand) still shows no credential; a checkpoint that no
    longer matches its seal is named on the page rather than vouched for."""
    from solrl.training.checkpoint import save_checkpoint

    (tmp_path / "train.jsonl").write_text(json.dumps({"step": 1, "reward_mean": 0.5, "seconds_iteration": 1.0}) + "\n")
    (tmp_path / "config.yaml").write_text("reward:\n  name: vlm_ocr\n  options: {api_key: sk-abc123, model: judge}\n")
    path = save_checkpoint({"iteration": 1, "w": torch.zeros(4)}, tmp_path / "checkpoints", 1)
    path.write_bytes(path.read_bytes()[:-1] + b"\x01")  # the last byte of the tensor's data
    assert main(["report", str(tmp_path)]) == 0
    page = (tmp_path / "report" / "index.html").read_text()
    assert "sk-abc123" not in page and "api_key: &lt;redacted&gt;" in page and "model: judge" in page
    assert "WARNING: checkpoint" in page and "iter_000001.safetensors is corrupted" in page


def test_report_on_a_directory_without_logs_says_what_it_needs(tmp_path, capsys):
    assert main(["report", str(tmp_path)]) == 2
    assert "holds no train.jsonl or eval.jsonl" in capsys.readouterr().err


@pytest.mark.skipif(find_browser() is None, reason="no headless Chromium on this machine (.ci/run installs Debian's chromium)")
def test_report_renders_in_headless_chromium(sol_rl_run, tmp_path):
    from solrl.reporting.report import write_report

    page = write_report(sol_rl_run, tmp_path / "report")
    shot = np.asarray(Image.open(screenshot(page, tmp_path / "shot.png", height=1800)).convert("RGB"))
    assert shot.shape[:2] == (1800, 1200)
    ink = (shot.min(axis=2) < 200).mean()  # share of pixels that are not (near) white
    colours = len(np.unique(shot.reshape(-1, 3)[::7], axis=0))
    assert ink > 0.03 and colours > 100, (ink, colours)


def test_the_report_warns_when_the_reward_rises_while_the_referee_falls():
    from solrl.reporting.report import _referee_row, _summary_rows

    hacked = [{"iteration": 0, "mean_score": 0.35, "referee_accuracy": 0.10, "world_likeness": 0.60},
              {"iteration": 10, "mean_score": 0.45, "referee_accuracy": 0.02, "world_likeness": 0.70}]
    assert "WARNING" in _referee_row(hacked) and "0.100 -> 0.020" in _referee_row(hacked)
    honest = [{"iteration": 0, "mean_score": 0.35, "referee_accuracy": 0.10, "world_likeness": 0.60},
              {"iteration": 10, "mean_score": 0.45, "referee_accuracy": 0.20, "world_likeness": 0.70}]
    assert "WARNING" not in _referee_row(honest)
    # the words say what is measured: under geneval_gold the strict accuracy is the gold check, the reward's own form
    toy = [dict(e, strict_accuracy=0.5) for e in honest]
    rows = dict(_summary_rows(Path("."), [], toy, {"reward": {"name": "geneval_gold"}}))
    assert "held-out strict accuracy (the gold check: the training reward's own strict form)" in rows
    assert not any("never trained on" in k for k in rows) and "held-out referee accuracy (a fixed CNN nothing trains on)" in rows


def test_the_reward_plot_draws_the_gold_check_beside_the_reward(tmp_path, monkeypatch):
    from solrl.reporting import report

    drawn = {}
    monkeypatch.setattr(report, "_save", lambda plt, fig, path: drawn.setdefault(path.name, fig) and path)
    train = [{"step": 1, "wall_seconds": 5.0, "reward_mean": 0.4}]
    toy = [{"iteration": 0, "wall_seconds": 1.0, "mean_score": 0.35, "strict_accuracy": 0.1, "gold_accuracy": 0.1},
           {"iteration": 10, "wall_seconds": 60.0, "mean_score": 0.45, "strict_accuracy": 0.2, "gold_accuracy": 0.02}]
    report.plot_rewards(train, toy, tmp_path / "toy.png")
    report.plot_rewards(train, [{k: e[k] for k in ("iteration", "wall_seconds", "mean_score")} for e in toy], tmp_path / "real.png")
    for name, lines in (("toy.png", 4), ("real.png", 2)):
        for ax in drawn[name].axes:
            assert len(ax.get_lines()) == lines
    gold = [line for line in drawn["toy.png"].axes[0].get_lines() if line.get_label() == "held-out gold accuracy"]
    assert list(gold[0].get_ydata()) == [0.1, 0.02]
