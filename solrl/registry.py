"""Plain-dict registries filled by a decorator; unknown names list the valid ones."""
from __future__ import annotations

import difflib


class UnknownName(KeyError):
    """A name that no registry entry has: a user's typo, reported as bad input (exit 2)."""


class Registry(dict):
    def __init__(self, kind: str):
        super().__init__()
        self.kind = kind

    def register(self, name: str):
        def wrap(obj):
            if name in self:
                raise ValueError(f"{self.kind} {name!r} registered twice")
            self[name] = obj
            return obj

        return wrap

    def get_or_raise(self, name: str):
        if name not in self:
            close = difflib.get_close_matches(name, list(self), n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            raise UnknownName(f"unknown {self.kind} {name!r}.{hint} Valid: {', '.join(sorted(self))}")
        return self[name]

    def __missing__(self, name):  # plain d[name] gets the same helpful message
        self.get_or_raise(name)
