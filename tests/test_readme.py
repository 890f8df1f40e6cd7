"""The README as a user meets it: short, the two commands first, the GPU section early, and every command
in it still runs as written (parsed by the CLI's own parser; the scripts and config files it names exist and load)."""
import contextlib
import importlib
import io
import itertools
import re
import shlex
from pathlib import Path

import pytest

from solrl.cli import build_parser
from solrl.config import load_config

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def command_lines(text: str) -> list[str]:
    """Each command of the page: the lines of its bash blocks (comments and continuations joined) and the
    inline code spans that start like a command."""
    lines = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split(" #", 1)[0].strip()
            if line and not line.startswith("#"):
                lines.append(line)
    for span in re.findall(r"`([^`\n]+)`", text):
        if re.match(r"(\w+=\S+ )*(solrl |bash |python -m |torchrun )", span):
            lines.append(span.strip())
    return lines


def solrl_argv(line: str) -> list[str] | None:
    """The arguments a line hands to the solrl CLI (directly, through torchrun's -m solrl), else None."""
    words = shlex.split(line)
    while words and re.match(r"^\w+=", words[0]):  # VAR=value prefixes
        words = words[1:]
    if words[:1] == ["solrl"]:
        return words[1:]
    if words[:1] == ["torchrun"] and "-m" in words and words[words.index("-m") + 1] == "solrl":
        return words[words.index("-m") + 2:]
    return None


COMMANDS = command_lines(README)
SOLRL = [(line, argv) for line in COMMANDS if (argv := solrl_argv(line)) is not None]


def test_the_readme_is_short_and_says_the_essentials_first():
    lines = README.splitlines()
    assert len(README.encode()) <= 12 * 1024
    first = "\n".join(lines[:40])
    assert "bash scripts/run_default.sh" in first and "bash scripts/test.sh" in first
    gpu = next(i for i, line in enumerate(lines) if line.startswith("## ") and "GPU" in line)
    assert gpu < 200
    # the venv is on the PATH before the first `solrl` command of the page
    activate = next(i for i, line in enumerate(lines) if "source .venv/bin/activate" in line)
    first_solrl = next(i for i, line in enumerate(lines) if re.match(r"\s*(solrl|torchrun) ", line))
    assert activate < first_solrl


def test_the_readme_has_commands_of_every_kind():
    assert len(SOLRL) >= 15
    assert {argv[0] for _, argv in SOLRL} >= {"train", "check", "eval", "report", "export", "data", "bench", "probe"}


@pytest.mark.parametrize("line, argv", SOLRL, ids=[line[:60] for line, _ in SOLRL])
def test_every_solrl_command_parses(line, argv):
    parser = build_parser()
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()) as err:
            parser.parse_args(argv)
    except SystemExit as exc:
        if exc.code != 0:  # `solrl --help` exits 0
            pytest.fail(f"README command does not parse: {line}\n{err.getvalue()}")


@pytest.mark.parametrize("verb", sorted({argv[0] for _, argv in SOLRL if argv and not argv[0].startswith("-")}))
def test_every_verb_the_readme_names_has_help(verb):
    with pytest.raises(SystemExit) as exc, contextlib.redirect_stdout(io.StringIO()) as out:
        build_parser().parse_args([verb, "--help"])
    assert exc.value.code == 0 and "usage:" in out.getvalue()


def test_the_scripts_and_modules_the_readme_runs_exist():
    checked = 0
    for line in COMMANDS:
        words = [w for w in shlex.split(line) if not re.match(r"^\w+=", w)]
        if words[:1] == ["bash"]:
            assert (ROOT / words[1]).is_file(), line
            checked += 1
        elif words[:2] == ["python", "-m"]:
            assert hasattr(importlib.import_module(words[2]), "main"), line
            checked += 1
    assert checked >= 3


def expand_braces(pattern: str) -> list[str]:
    parts = re.split(r"\{([^}]*)\}", pattern)
    choices = [[p] if i % 2 == 0 else p.split(",") for i, p in enumerate(parts)]
    return ["".join(c) for c in itertools.product(*choices)]


def test_every_config_file_the_readme_names_loads():
    names = sorted({path for pattern in re.findall(r"configs/[\w{},]+\.yaml", README) for path in expand_braces(pattern)})
    assert len(names) >= 15  # the brace pattern alone names the twelve GPU presets
    for name in names:
        assert (ROOT / name).is_file(), name
        load_config(ROOT / name)


def test_the_key_measurements_are_at_most_ten_rows_each_linking_its_results_file():
    region = README.split("<!-- table:key-measurements -->", 1)[1].split("<!-- /table -->", 1)[0]
    rows = [line for line in region.splitlines() if line.startswith("| ") and not line.startswith("| what ")]
    assert 5 <= len(rows) <= 10
    for row in rows:
        target = re.search(r"\]\((results/[\w./-]+\.json)\)", row)
        assert target and (ROOT / target.group(1)).is_file(), row
