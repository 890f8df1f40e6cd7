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


GENEVAL_RECORDS = [
    {"tag": "counting", "include": [{"class": "apple", "count": 3}], "exclude": [{"class": "apple", "count": 4}],
     "prompt": "a photo of three apples"},
    {"tag": "position", "include": [{"class": "cat", "count": 1}, {"class": "sofa", "count": 1, "position": ["left of", 0]}],
     "prompt": "a photo of a sofa left of a cat"},
]


def test_geneval_metadata_is_read_as_prompts_carrying_their_records(tmp_path):
    path = tmp_path / "test_metadata.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in GENEVAL_RECORDS))  # upstream's last line has no newline
    prompts = PromptSet.load(str(path))
    assert list(prompts) == ["a photo of three apples", "a photo of a sofa left of a cat"]
    assert prompts.metadata == tuple(GENEVAL_RECORDS)  # the whole record, as the reference's GenevalPromptDataset
    assert PromptSet.load(str(path), max_prompts=1).metadata == (GENEVAL_RECORDS[0],)
    (tmp_path / "p.txt").write_text("a\nb\n")
    assert PromptSet.load(str(tmp_path / "p.txt")).metadata == ({}, {})
    with pytest.raises(ValueError, match="2 prompts but 1 metadata"):
        PromptSet(["a", "b"], "x", [{}])


def test_set_readers_refuse_what_the_reference_could_not_use():
    from solrl.data.verify import read_set_file

    good = "\n".join(json.dumps(r) for r in GENEVAL_RECORDS).encode()
    assert [p for p, _ in read_set_file(good, "geneval_metadata", "g")] == [r["prompt"] for r in GENEVAL_RECORDS]
    cases = [
        (json.dumps({**GENEVAL_RECORDS[0], "tag": "counts"}), "geneval_metadata", "g:1: tag 'counts' is not one of GenEval's"),
        (json.dumps({"tag": "colors", "prompt": "a photo of a cup"}), "geneval_metadata", "needs a non-empty 'include'"),
        (json.dumps({**GENEVAL_RECORDS[0], "include": [{"class": "apple"}]}), "geneval_metadata", "'class' and 'count'"),
        ('{"tag": "colors",', "geneval_metadata", "g:1: not valid JSON"),
        ('a sign that says "open"\na blank wall', "ocr", 'g:2: OCR reward: prompt .a blank wall. has no text in double quotes'),
        ("\n \n", "prompts", "g: no prompts in it"),
        ("x", "csv", "unknown prompt-set format 'csv'"),
    ]
    for text, fmt, message in cases:
        with pytest.raises(ValueError, match=message):
            read_set_file(text.encode(), fmt, "g")
    with pytest.raises(ValueError, match="not UTF-8"):
        read_set_file(b"caf\xe9 sign\n", "prompts", "g")


def test_the_ocr_target_is_the_one_the_reference_takes():
    from solrl.rewards.ocr import ocr_target

    prompts = ['A bakery window with a chalkboard sign reading "Fresh Bread Daily", morning light.',
               'A poster: "Summer Sale" in red, and "50% off" below it.']
    assert [ocr_target(p) for p in prompts] == [p.split('"')[1] for p in prompts] == ["Fresh Bread Daily", "Summer Sale"]


def test_a_missing_file_of_a_known_set_names_the_command_that_fetches_it(tmp_path, monkeypatch):
    with pytest.raises(FileNotFoundError, match=f"`solrl data fetch geneval --out {tmp_path / 'sets'}`"):
        load_prompts(str(tmp_path / "sets" / "geneval" / "test_metadata.jsonl"))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileNotFoundError, match="`solrl data fetch pickscore` .without network"):
        load_prompts("data/pickscore/test.txt")


def test_a_known_file_that_is_not_the_pinned_one_is_used_and_said_so(tmp_path, caplog):
    path = tmp_path / "drawbench" / "test.txt"
    path.parent.mkdir()
    path.write_text("a cat on a mat\n")
    assert load_prompts(str(path)) == ["a cat on a mat"]
    assert f"{path} is not the pinned drawbench file (sha256 " in caplog.text and "--force" in caplog.text
