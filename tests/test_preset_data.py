"""The GPU presets read the prompt sets `solrl data fetch` writes: a missing file names the command,
and with the files in place a run gets past data loading and stops only on the missing weights."""
import logging
from pathlib import Path

import pytest
import yaml

from solrl.cli import main
from solrl.data.sets import match_known_file

CONFIGS = Path(__file__).resolve().parent.parent / "configs"
GPU_PRESETS = sorted(p for p in CONFIGS.glob("*.yaml") if not p.stem.startswith("toy_"))
PICKSCORE_LINES = "a red fox in fresh snow, national geographic photo\nan isometric city at night, neon, 4k\n"
OCR_LINES = 'A cafe chalkboard that says "Open Late" in white chalk.\nA neon sign reading "Night Owl" above a diner door.\n'


@pytest.fixture(autouse=True)
def fresh_log_handlers():
    """`solrl train` sets up logging on the stderr of its test; the next test's stderr is another."""
    root = logging.getLogger()
    before = list(root.handlers)
    yield
    for handler in root.handlers[:]:
        if handler not in before:
            root.removeHandler(handler)


@pytest.mark.parametrize("preset", GPU_PRESETS, ids=lambda p: p.stem)
def test_every_gpu_preset_reads_files_data_fetch_writes(preset):
    cfg = yaml.safe_load(preset.read_text())
    for value in (cfg["train"]["prompts"], cfg["eval"]["split"]):
        assert Path(value).parts[0] == "data" and match_known_file(value), f"{preset.stem}: {value}"
    assert "solrl data fetch" in preset.read_text()  # the preset's comment says where its prompts come from


def error_line(err: str) -> str:
    """The message `solrl train` prints for bad input, to the end (main() returning 2 means no exception
    escaped; library loggers may print above it)."""
    assert err.count("solrl train: error: ") == 1, err
    return err[err.index("solrl train: error: "):]


def place(root: Path, relative: str, text: str) -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


CPU = "model.device=cpu"   # past the trainer's CUDA gate on this machine, to what would stop the run next


def test_a_missing_prompt_file_names_the_fetch_command(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["train", str(CONFIGS / "sd35l_pickscore.yaml"), f"out_dir={tmp_path / 'run'}", CPU]) == 2
    err = error_line(capsys.readouterr().err)
    assert "'data/pickscore/train.txt' does not exist: it is the PickScore prompt set's train.txt" in err
    assert "`solrl data fetch pickscore`" in err and "--offline` says which file to place where" in err


def test_with_the_data_in_place_sd35l_fails_only_on_the_weights(tmp_path, monkeypatch, capsys, caplog):
    monkeypatch.chdir(tmp_path)
    place(tmp_path, "data/pickscore/train.txt", PICKSCORE_LINES)
    place(tmp_path, "data/pickscore/test.txt", PICKSCORE_LINES)
    preset = str(CONFIGS / "sd35l_pickscore.yaml")
    assert main(["train", preset, f"out_dir={tmp_path / 'run'}", CPU]) == 2
    err = error_line(capsys.readouterr().err)
    assert "reward pickscore: not found at 'yuvalkirstain/PickScore_v1'" in err and "Hugging Face cache" in err
    # these stand-ins are not the pinned set: said, not refused
    assert "data/pickscore/train.txt is not the pinned pickscore file" in caplog.text
    # a reward without weights: the next thing missing is the model's
    assert main(["train", preset, f"out_dir={tmp_path / 'run'}", CPU, "reward.name=jpeg_compressibility"]) == 2
    err = error_line(capsys.readouterr().err)
    assert "sd3: no StableDiffusion3Pipeline at 'stabilityai/stable-diffusion-3.5-large'" in err
    assert "Hugging Face cache" in err


def test_the_ocr_preset_hands_its_reward_prompts_with_a_target_text(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SOLRL_VLM_BASE_URL", "http://127.0.0.1:9/v1")  # nothing listens there
    place(tmp_path, "data/ocr/train.txt", OCR_LINES)
    place(tmp_path, "data/ocr/test.txt", OCR_LINES)
    place(tmp_path, "data/pickscore/train.txt", PICKSCORE_LINES)
    preset = str(CONFIGS / "qwen_image_ocr.yaml")
    # prompts that name no text: refused before any model is loaded
    assert main(["train", preset, f"out_dir={tmp_path / 'run'}", CPU, "train.prompts=data/pickscore/train.txt"]) == 2
    err = error_line(capsys.readouterr().err)
    assert "2 of 2 prompts name no text to render" in err and "solrl data fetch ocr" in err
    # with the OCR prompts in place the next stop is the judge, tried once before the model loads: nothing serves
    # the port the test names (rewards/base.py check_endpoint)
    assert main(["train", preset, f"out_dir={tmp_path / 'run'}", CPU]) == 2
    err = error_line(capsys.readouterr().err)
    assert "chat endpoint http://127.0.0.1:9/v1/chat/completions failed" in err and "qwen_image" not in err
