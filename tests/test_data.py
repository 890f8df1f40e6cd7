import json

import pytest

from solrl.data import PromptSet, load_prompts


def test_toy_splits_by_name():
    assert len(load_prompts("heldout")) > 0 and len(load_prompts("train")) > 0


def test_prompt_files_of_each_format(tmp_path):
    txt = tmp_path / "p.txt"
    txt.write_text("two red circles\n\n  one blue square  \n")
    assert load_prompts(str(txt)) == ["two red circles", "one blue square"]
    jsonl = tmp_path / "p.jsonl"
    jsonl.write_text("\n".join(json.dumps({"prompt": p, "id": i}) for i, p in enumerate(["a", "b"])) + "\n")
    assert load_prompts(str(jsonl)) == ["a", "b"]
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"prompt": ["x", "y", "z"]}), tmp_path / "p.parquet")
    assert load_prompts(str(tmp_path / "p.parquet")) == ["x", "y", "z"]


def test_bad_prompt_files_are_explained(tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_text("\n \n")
    with pytest.raises(ValueError, match="empty"):
        load_prompts(str(empty))
    with pytest.raises(FileNotFoundError, match="neither a toy split"):
        load_prompts(str(tmp_path / "missing.txt"))
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "x"}\n')
    with pytest.raises(ValueError, match="no 'prompt' field"):
        load_prompts(str(bad))
    with pytest.raises(ValueError, match="unsupported"):
        (tmp_path / "p.csv").write_text("a\n")
        load_prompts(str(tmp_path / "p.csv"))


def test_a_run_visits_every_prompt_once_per_epoch_in_a_seeded_order(tmp_path):
    names = [f"prompt {i}" for i in range(10)]
    (tmp_path / "p.txt").write_text("\n".join(names))
    prompts = PromptSet.load(str(tmp_path / "p.txt"))
    assert list(prompts) == names and prompts.source == str(tmp_path / "p.txt")
    assert list(PromptSet.load(str(tmp_path / "p.txt"), max_prompts=3)) == names[:3]
    # 4 per iteration over 10 prompts: iterations 0-4 cover two epochs; iteration 2 straddles them
    visits = [prompts.for_iteration(7, i, 4) for i in range(5)]
    flat = [p for v in visits for p in v]
    assert sorted(flat[:10]) == names and sorted(flat[10:]) == names
    assert flat[:10] != flat[10:] and flat[:10] != names  # each epoch shuffled anew
    assert visits == [prompts.for_iteration(7, i, 4) for i in range(5)]  # a resumed run sees the same order
    assert [prompts.for_iteration(8, i, 4) for i in range(5)] != visits
