"""The toy world's prompt grammar: counts of one object kind, or two objects in a relation.

A prompt is a pure function of a `Scene`; `parse_prompt` inverts it, so the verifier can
read any prompt of the grammar and refuse everything else with a clear message.
"""
from __future__ import annotations

import hashlib
import itertools
import re
from dataclasses import dataclass

# Colours as rendered (RGB 0-255). Chosen far apart so nearest-colour segmentation is robust.
COLORS: dict[str, tuple[int, int, int]] = {
    "red": (220, 40, 40),
    "green": (40, 170, 60),
    "blue": (40, 70, 220),
    "yellow": (235, 200, 30),
}
BACKGROUND = (255, 255, 255)
SHAPES = ("circle", "square", "triangle")
NUMBER_WORDS = {1: "one", 2: "two", 3: "three", 4: "four"}
RELATIONS = ("left of", "right of", "above", "below")
OPPOSITE_RELATION = {"left of": "right of", "right of": "left of", "above": "below", "below": "above"}
_RELATION_PHRASE = {"left of": "to the left of", "right of": "to the right of", "above": "above", "below": "below"}


@dataclass(frozen=True)
class ObjectSpec:
    color: str
    shape: str

    def phrase(self) -> str:
        return f"{self.color} {self.shape}"


@dataclass(frozen=True)
class Scene:
    """Either `count` copies of `first` (second is None), or `first` `relation` `second`."""

    first: ObjectSpec
    count: int = 1
    relation: str | None = None
    second: ObjectSpec | None = None

    @property
    def kind(self) -> str:
        return "count" if self.second is None else "relation"

    def prompt(self) -> str:
        if self.second is None:
            noun = self.first.shape + ("s" if self.count > 1 else "")
            return f"{NUMBER_WORDS[self.count]} {self.first.color} {noun}"
        return f"a {self.first.phrase()} {_RELATION_PHRASE[self.relation]} a {self.second.phrase()}"


_COLOR = "|".join(COLORS)
_SHAPE = "|".join(SHAPES)
_COUNT_RE = re.compile(rf"^({'|'.join(NUMBER_WORDS.values())}) ({_COLOR}) ({_SHAPE})s?$")
_REL_RE = re.compile(
    rf"^an? ({_COLOR}) ({_SHAPE}) (to the left of|to the right of|above|below) an? ({_COLOR}) ({_SHAPE})$"
)
_EXAMPLES = '"two red circles" or "a blue square to the left of a yellow triangle"'


class PromptGrammarError(ValueError):
    """A prompt the toy-world verifier cannot read."""


def parse_prompt(prompt: str) -> Scene:
    text = " ".join(prompt.lower().strip().rstrip(".").split())
    m = _COUNT_RE.match(text)
    if m:
        number = {w: n for n, w in NUMBER_WORDS.items()}[m.group(1)]
        plural = text.endswith("s") and not m.group(3).endswith("s")
        if (number > 1) != plural:
            raise PromptGrammarError(f"prompt {prompt!r}: number and plural disagree; e.g. 'one red circle', 'two red circles'")
        return Scene(ObjectSpec(m.group(2), m.group(3)), count=number)
    m = _REL_RE.match(text)
    if m:
        relation = {v: k for k, v in _RELATION_PHRASE.items()}[m.group(3)]
        first, second = ObjectSpec(m.group(1), m.group(2)), ObjectSpec(m.group(4), m.group(5))
        if first.color == second.color:
            raise PromptGrammarError(f"prompt {prompt!r}: the two objects must have different colours")
        return Scene(first, relation=relation, second=second)
    raise PromptGrammarError(
        f"prompt {prompt!r} is outside the toy-world grammar; valid prompts look like {_EXAMPLES} "
        f"(colours {', '.join(COLORS)}; shapes {', '.join(SHAPES)}; counts one to four; "
        f"relations {', '.join(_RELATION_PHRASE.values())})"
    )


def all_scenes() -> list[Scene]:
    objects = [ObjectSpec(c, s) for c in COLORS for s in SHAPES]
    scenes = [Scene(o, count=n) for o in objects for n in NUMBER_WORDS]
    for a, b in itertools.permutations(objects, 2):
        if a.color != b.color:
            scenes.extend(Scene(a, relation=r, second=b) for r in RELATIONS)
    return scenes


def _held_out(scene: Scene) -> bool:
    """Hold out whole combinations, so held-out prompts are unseen compositions, not unseen strings.

    Relations: an unordered object pair is held out with all its orders and relations.
    Counts: a (colour, shape, number) triple.
    """
    if scene.second is None:
        key = f"count:{scene.first.phrase()}:{scene.count}"
    else:
        key = "pair:" + "|".join(sorted([scene.first.phrase(), scene.second.phrase()]))
    return int(hashlib.sha1(key.encode()).hexdigest(), 16) % 5 == 0


def split_prompts(split: str) -> list[str]:
    """`train` or `heldout` prompts of the toy world, in a fixed order."""
    if split not in ("train", "heldout"):
        raise ValueError(f"unknown split {split!r}; use 'train' or 'heldout'")
    want_held = split == "heldout"
    return [s.prompt() for s in all_scenes() if _held_out(s) == want_held]
