"""The generated parts of the docs: the configuration reference and the summary tables match what
`solrl docs` makes now, and the generator does what it says."""
import dataclasses
import typing

import pytest

from solrl.config import Config
from solrl.reporting import tables
from solrl.reporting.config_reference import field_comments, fields_without_help, reference_rows
from solrl.reporting.doc_tables import TABLES, markdown


def test_no_committed_page_differs_from_what_the_generator_makes():
    stale = tables.stale_pages()
    assert not stale, f"stale: {[str(p) for p in stale]}; run solrl docs"


def test_every_config_field_has_help_and_the_reference_lists_every_key():
    assert fields_without_help() == []
    keys = {r["key"] for r in reference_rows() if not r["section"]}

    def leaves(cls, prefix=""):
        for name, hint in typing.get_type_hints(cls).items():
            yield from leaves(hint, f"{prefix}{name}.") if dataclasses.is_dataclass(hint) else [prefix + name]

    assert keys == set(leaves(Config))


def test_field_comments_reads_trailing_and_continued_comments_only():
    source = '''
class A:
    # a comment above belongs to no field
    x: int = 1   # the x
    y: list[int] = field(
        default_factory=list)  # the y, on its last line
    z: float = 0.1  # starts here
                    # and goes on here
    w: str = "a"
    # not a continuation: at the field's own indent
'''
    found = field_comments(source)
    assert found == {("A", "x"): "the x", ("A", "y"): "the y, on its last line",
                     ("A", "z"): "starts here and goes on here", ("A", "w"): ""}


def test_a_region_is_filled_by_its_builder_and_bad_regions_are_named(monkeypatch):
    monkeypatch.setitem(TABLES, "demo", lambda results: markdown(["a", "b"], [["1", "x|y"]]))
    text = "before\n<!-- table:demo -->\nold body\n<!-- /table -->\nafter\n"
    out = tables.render_page(text, {})
    assert out == "before\n<!-- table:demo -->\n| a | b |\n|---|---|\n| 1 | x\\|y |\n<!-- /table -->\nafter\n"
    assert tables.render_page(out, {}) == out
    with pytest.raises(tables.TableError, match="no table named 'nope'"):
        tables.render_page("<!-- table:nope -->\n<!-- /table -->", {})
    with pytest.raises(tables.TableError, match="no '<!-- /table -->'"):
        tables.render_page("<!-- table:demo -->\nleft open\n", {})


@pytest.mark.parametrize("seconds, text", [(479.7, "8 min 00 s"), (59.4, "0 min 59 s"), (600.0, "10 min 00 s"), (728.3, "12 min 08 s")])
def test_durations_round_to_whole_seconds_before_splitting_minutes(seconds, text):
    from solrl.reporting.cpu_tables import minutes

    assert minutes(seconds) == text
