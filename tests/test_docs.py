"""docs/ as a guide: every link between the pages and every page the code names exists, the pages carry
no internal work labels, and docs/ holds pages for people, not raw bench outputs."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def test_every_relative_link_of_the_pages_resolves():
    broken = []
    for page in PAGES:
        for target in LINK.findall(page.read_text(encoding="utf-8")):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue
            path = (page.parent / target.split("#")[0]).resolve()
            if not path.exists():
                broken.append(f"{page.relative_to(ROOT)} -> {target}")
    assert not broken, broken


def test_every_docs_page_the_code_names_exists():
    missing = []
    for folder in ("solrl", "configs", "scripts", "bench"):  # tests may name pages that must not exist
        for path in (ROOT / folder).rglob("*"):
            if path.suffix not in (".py", ".yaml", ".sh") or not path.is_file():
                continue
            for name in re.findall(r"\bdocs/[\w./-]*\w", path.read_text(encoding="utf-8", errors="replace")):
                if not (ROOT / name).exists() and not (ROOT / (name + ".md")).exists():
                    missing.append(f"{path.relative_to(ROOT)}: {name}")
    assert not missing, missing


def test_docs_holds_pages_not_raw_outputs():
    raw = [p.relative_to(ROOT) for p in (ROOT / "docs").rglob("*") if p.suffix in (".json", ".jsonl", ".csv")]
    assert not raw, f"raw outputs belong under results/<topic>/ (results/README.md): {raw}"


def test_the_guide_pages_are_indexed():
    index = (ROOT / "docs" / "README.md").read_text(encoding="utf-8")
    pages = {p.name for p in (ROOT / "docs").glob("*.md")} - {"README.md"}
    assert pages <= set(LINK.findall(index)), pages - set(LINK.findall(index))


def test_the_distributed_page_states_the_tolerance_the_tests_hold():
    import ast

    tree = ast.parse((ROOT / "tests" / "test_distributed.py").read_text(encoding="utf-8"))
    atol = next(node.value.value for node in tree.body if isinstance(node, ast.Assign)
                and getattr(node.targets[0], "id", "") == "CROSS_PROCESS_ATOL")
    page = (ROOT / "docs" / "distributed.md").read_text(encoding="utf-8")
    stated = {float(x) for x in re.findall(r"to (\d(?:\.\d+)?e-\d+),\s+(?:to|as) (?:the )?one", page)} | {
        float(x) for x in re.findall(r"\((\d(?:\.\d+)?e-\d+) after two updates", page)}
    assert stated == {atol}, (stated, atol)
