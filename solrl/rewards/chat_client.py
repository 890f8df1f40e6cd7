"""Minimal OpenAI-compatible chat-completions client: standard library only, timeouts and retries.

Transient failures (connection errors, timeouts, HTTP 429 and 5xx) are retried with exponential
backoff; other HTTP errors (bad request, auth) fail at once since repeating them cannot help. Every
failure is a `ChatError` of one line that names the endpoint, what went wrong and what to change.
"""
from __future__ import annotations

import json
import socket
import time
import urllib.error
import urllib.request

from .guard import RewardFault

_OPTIONS = "reward.options"   # where a run sets the endpoint (base_url, model, api_key, timeout, retries)


class ChatError(RewardFault):
    """A chat endpoint that cannot be reached, refuses a request or answers something else than a chat
    completion. A RewardFault: the CLI prints its one line, never a traceback."""


def _one_line(text: str, limit: int = 200) -> str:
    return " ".join(str(text).split())[:limit]


def _timed_out(err: Exception | None) -> bool:
    return isinstance(err, (TimeoutError, socket.timeout)) or "timed out" in str(err)


def _transient(err: Exception) -> bool:
    if isinstance(err, urllib.error.HTTPError):
        return err.code == 429 or err.code >= 500
    return isinstance(err, (urllib.error.URLError, TimeoutError, socket.timeout, ConnectionError))


def advice(err: Exception | None) -> str:
    """What to change for a failed request, by what failed."""
    if isinstance(err, urllib.error.HTTPError):
        if err.code in (401, 403):
            return f"check {_OPTIONS}.api_key (or $SOLRL_VLM_API_KEY)"
        if err.code == 404:
            return f"check that {_OPTIONS}.base_url ends in /v1 and that {_OPTIONS}.model names a model the server serves"
        if err.code == 429 or err.code >= 500:
            return f"the server is failing or overloaded: read its log, or raise {_OPTIONS}.retries"
        return f"the server refused the request: check {_OPTIONS}.model and the server's log"
    if _timed_out(err):
        return f"the server did not answer in time: raise {_OPTIONS}.timeout, or check that it is not stuck"
    return (f"is an OpenAI-compatible server running there? start it, or point {_OPTIONS}.base_url "
            "(or $SOLRL_VLM_BASE_URL) at one")


def _post(url: str, payload: dict, api_key: str | None, timeout: float) -> dict:
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    request = urllib.request.Request(url, data=json.dumps(payload).encode(), headers=headers, method="POST")
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.loads(response.read())


def chat_completion(base_url: str, payload: dict, api_key: str | None = None, timeout: float = 60.0,
                    retries: int = 3, backoff: float = 1.0) -> str:
    """POST `payload` to `{base_url}/chat/completions`; the first choice's message text."""
    url = base_url.rstrip("/") + "/chat/completions"
    last: Exception | None = None
    for attempt in range(retries):
        if attempt:
            time.sleep(backoff * 2 ** (attempt - 1))
        try:
            body = _post(url, payload, api_key, timeout)
        except json.JSONDecodeError as err:   # a web page, not an API
            raise ChatError(f"chat endpoint {url} answered with something other than JSON ({_one_line(err)}); is "
                            f"{_OPTIONS}.base_url an OpenAI-compatible API (ending in /v1)?") from err
        except ValueError as err:   # urllib's word for an address it cannot use
            raise ChatError(f"chat endpoint {url!r} is no http(s) address ({_one_line(err)}); set {_OPTIONS}.base_url "
                            "to one such as http://localhost:8000/v1") from err
        except Exception as err:
            if not _transient(err):
                detail = _one_line(err.read().decode(errors="replace")) if isinstance(err, urllib.error.HTTPError) else ""
                raise ChatError(f"chat endpoint {url} refused the request ({_one_line(err)}{': ' + detail if detail else ''}); "
                                f"{advice(err)}") from err
            last = err
            continue
        try:
            return body["choices"][0]["message"]["content"] or ""
        except (KeyError, IndexError, TypeError) as err:
            raise ChatError(f"chat endpoint {url} answered without choices[0].message.content ({_one_line(body)}); is "
                            f"{_OPTIONS}.base_url an OpenAI-compatible chat endpoint?") from err
    reason = "timed out" if _timed_out(last) else _one_line(last)
    raise ChatError(f"chat endpoint {url} failed after {retries} attempt{'s' if retries > 1 else ''} (timeout {timeout:g}s "
                    f"each): {reason}; {advice(last)}") from last
