"""Credentials never land in a run's files: settings whose name looks like one are redacted on writing.

The live config keeps every value (a reward still gets its api_key); what is written (config.yaml,
checkpoints, the report, W&B's config, a benchmark's recorded command) goes through `redact`. A
name looks like a credential when one of its words (split at `_`, `-`, `.` and camelCase) is
token, password, passwd, secret, authorization, credential(s) or apikey, or two neighbouring words
are api key / access key / private key: `api_key`, `hf_token`, `HF_TOKEN`, `apiKey`, `client_secret`,
but not `max_tokens` or `tokenizer`. docs/reliability.md tells users to pass secrets through the
environment instead (the VLM judge reads $SOLRL_VLM_API_KEY).
"""
from __future__ import annotations

import re

REDACTED = "<redacted>"
_WORDS = {"token", "password", "passwd", "secret", "authorization", "credential", "credentials", "apikey"}
_PAIRS = {("api", "key"), ("access", "key"), ("private", "key")}


def _words(name: str) -> list[str]:
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name))
    return [w for w in re.split(r"[^a-z0-9]+", spaced.lower()) if w]


def is_credential_name(name) -> bool:
    words = _words(str(name))
    return any(w in _WORDS for w in words) or any(pair in _PAIRS for pair in zip(words, words[1:]))


def redact(data):
    """A copy of nested dicts / lists with the value of every credential-like key replaced by REDACTED
    (an unset value, None or "", stays as it is: it tells the reader that nothing was given)."""
    if isinstance(data, dict):
        return {k: REDACTED if is_credential_name(k) and v not in (None, "") else redact(v) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return type(data)(redact(v) for v in data)
    return data


def redact_override(arg: str) -> str:
    """`reward.options.api_key=sk-...` -> `reward.options.api_key=<redacted>`; other arguments unchanged.
    A value that is itself a mapping (`reward.options={api_key: ...}`) is redacted inside."""
    if "=" not in arg or arg.startswith("-"):
        return arg
    key, value = arg.split("=", 1)
    if is_credential_name(key.split(".")[-1]):
        return f"{key}={REDACTED}"
    if ":" in value:  # maybe a YAML mapping
        import yaml

        try:
            parsed = yaml.safe_load(value)
        except yaml.YAMLError:
            return arg
        if isinstance(parsed, (dict, list)) and redact(parsed) != parsed:
            return f"{key}={yaml.safe_dump(redact(parsed), default_flow_style=True, width=10**6).strip()}"
    return arg
