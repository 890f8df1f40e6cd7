"""The `solrl` command on the shipped toy base model: real loading, sampling, evaluation, errors."""
import json

import pytest

from solrl.cli import main


def test_sample_writes_a_grid(tmp_path):
    out = tmp_path / "grid.png"
    assert main(["sample", "two red circles", "a blue square above a yellow triangle", "--seeds", "0", "1",
                 "--steps", "4", "--out", str(out)]) == 0
    from PIL import Image

    image = Image.open(out)
    # 2 rows x 2 columns of 32 px images, upscaled 4x, with 1 px padding
    assert image.size == (2 * 128 + 3, 2 * 128 + 3)


def test_eval_writes_summary_and_grid(tmp_path):
    assert main(["eval", "--prompts", "heldout", "--max-prompts", "6", "--seeds-per-prompt", "2", "--steps", "4",
                 "--out", str(tmp_path), "--tag", "t"]) == 0
    summary = json.loads((tmp_path / "t.json").read_text())
    assert summary["num_images"] == 12
    # the summary is the reward of the images the grid shows: cut them back out (8 columns of 2x-upscaled
    # 32 px images, 1 px padding) and score them with the default reward against the listed prompts
    import numpy as np
    from PIL import Image

    from solrl.rewards import build_reward

    grid = np.asarray(Image.open(tmp_path / "t_grid.png").convert("RGB"))
    images = np.stack([grid[1 + r * 65:1 + r * 65 + 64:2, 1 + c * 65:1 + c * 65 + 64:2] for r in range(2) for c in range(8)][:12])
    prompts, listed = zip(*(line.rsplit("\t", 1) for line in (tmp_path / "t_prompts.txt").read_text().splitlines()))
    result = build_reward("geneval_gold")(images, list(prompts))
    assert [f"{score:.3f}" for score in result.scores.tolist()] == list(listed)
    assert summary["mean_score"] == pytest.approx(result.scores.mean().item(), abs=1e-6)
    assert summary["strict_accuracy"] == pytest.approx(result.parts["strict"].mean().item(), abs=1e-6)


@pytest.mark.parametrize("argv, message", [
    (["eval", "--reward", "pickscor", "--max-prompts", "1"], "unknown reward 'pickscor'"),
    (["eval", "--model", "sdxl", "--max-prompts", "1"], "unknown model 'sdxl'"),
    (["sample", "x", "--model-path", "/nonexistent/dir"], "no toy model at /nonexistent/dir"),
    (["train", "configs/nope.yaml"], "does not exist"),
    (["train", "configs/toy_nft.yaml", "train.lrr=1"], "did you mean 'lr'"),
])
def test_bad_input_exits_2_with_a_clear_message(argv, message, capsys):
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_empty_prompt_file_and_prompts_outside_the_grammar(tmp_path, capsys):
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    assert main(["eval", "--prompts", str(empty)]) == 2
    assert "empty" in capsys.readouterr().err
    odd = tmp_path / "odd.txt"
    odd.write_text("a photograph of an astronaut\n")
    assert main(["eval", "--prompts", str(odd), "--steps", "1", "--seeds-per-prompt", "1"]) == 2
    assert "outside the toy-world grammar" in capsys.readouterr().err


def test_a_bug_is_not_dressed_up_as_bad_input(monkeypatch, capsys):
    """Exit 2 with one line is for mistakes the user can fix; a KeyError from inside solrl (a bug)
    keeps its traceback instead of turning into `error: mean_score`."""
    import solrl.cli.sample

    def broken(args):
        return {}["mean_score"]

    monkeypatch.setattr(solrl.cli.sample, "run", broken)
    with pytest.raises(KeyError, match="mean_score"):
        main(["sample", "a red circle"])
    assert main(["eval", "--reward", "genevel"]) == 2
    assert "unknown reward 'genevel'" in capsys.readouterr().err


# every verb `solrl --help` listed on 2026-12-07, before the command became a package: none may go missing
VERBS_OF_2026_12_07 = ["sample", "eval", "train", "check", "export", "data", "probe", "bench", "report",
                       "convert-checkpoint", "pretrain-toy", "widen-toy", "toy-split", "pretrain-toy-autoencoder",
                       "pretrain-toy-referee"]


def test_help_lists_every_verb(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--help"])
    assert exit_.value.code == 0
    listed = capsys.readouterr().out.split("{", 1)[1].split("}", 1)[0].split(",")  # usage: solrl [-h] {a,b,...}
    assert [verb for verb in listed if verb in VERBS_OF_2026_12_07] == VERBS_OF_2026_12_07  # all there, in order
    assert "docs" in listed


def test_docs_verb_checks_the_generated_pages_and_writes_nothing(monkeypatch, capsys):
    from solrl.reporting import tables

    assert main(["docs", "--check"]) == 0  # the committed pages are what the generator makes
    page = tables.ROOT / "docs" / "no-such-generated-page.md"
    monkeypatch.setattr(tables, "generated", lambda *a: {page: "text\n"})
    assert main(["docs", "--check"]) == 1
    assert "stale: docs/no-such-generated-page.md" in capsys.readouterr().out and not page.exists()


def test_overrides_after_options_are_overrides_and_anything_else_is_refused(capsys):
    # a typo in an override placed after an option still reaches the config check, not argparse
    assert main(["train", "configs/toy_nft.yaml", "--quiet", "train.lrr=1"]) == 2
    assert "did you mean 'lr'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["train", "configs/toy_nft.yaml", "--quiet", "stray"])
    assert "unrecognized arguments: stray" in capsys.readouterr().err


def test_a_gpu_preset_on_a_cpu_machine_stops_before_loading_anything(monkeypatch, capsys):
    """`solrl train configs/sd35l_pickscore.yaml` without a CUDA device: exit 2 with one line naming the missing
    device and `solrl check` on this preset; no prompt file read, no reward built, no model loaded first."""
    import solrl.data
    import solrl.models
    import solrl.rewards
    import solrl.training.trainer

    def loaded(what):
        def refuse(*args, **kwargs):
            raise AssertionError(f"{what} was loaded before the CUDA check")
        return refuse

    monkeypatch.setattr(solrl.training.trainer, "build_reward", loaded("the reward"))
    monkeypatch.setattr(solrl.training.trainer, "load_policy", loaded("the model"))
    monkeypatch.setattr(solrl.training.trainer.PromptSet, "load", loaded("a prompt file"))
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    assert main(["train", "configs/sd35l_pickscore.yaml"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("solrl train: error: model.device=cuda")
    assert "no CUDA device" in err[0] and "`solrl check configs/sd35l_pickscore.yaml`" in err[0]


def test_check_prints_the_cost_for_one_gpu_and_for_eight(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path / "hub"))
    assert main(["check", "configs/sd35l_pickscore.yaml", "--gpus", "8"]) == 2   # no CUDA, no weights here: exit 2
    out = capsys.readouterr().out
    assert "Traceback" not in out
    cost = out[out.index("cost "):]
    assert "ESTIMATES" in cost and "1 GPU: 48 prompt group(s) each" in cost and "8 GPUs: 6 prompt group(s) each" in cost
    assert "min per iteration (estimate)" in cost and "the run " in cost and "peak memory per GPU" in cost
