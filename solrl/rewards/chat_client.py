"""Minimal OpenAI-compatible chat-completions client: standard library only, timeouts and retries.

Transient failures (connection errors, timeouts, HTTP 429 and 5xx) are retried with exponential
backoff; other HTTP errors (bad request, auth) fail at once since repeating them cannot help.
"""
from __future__ import annotations

import json
import socket
import time
import urllib.error
import urllib.request


class ChatError(RuntimeError):
    pass


def _transient(err: Exception) -> bool:
    if isinstance(err, urllib.error.HTTPError):
        return err.code == 429 or err.code >= 500
    return isinstance(err, (urllib.error.URLError, TimeoutError, socket.timeout, ConnectionError))


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
        except Exception as err:
            if not _transient(err):
                detail = err.read().decode(errors="replace")[:300] if isinstance(err, urllib.error.HTTPError) else ""
                raise ChatError(f"chat endpoint {url} refused the request: {err} {detail}".strip()) from err
            last = err
            continue
        try:
            return body["choices"][0]["message"]["content"] or ""
        except (KeyError, IndexError, TypeError) as err:
            raise ChatError(f"chat endpoint {url} answered without choices[0].message.content: {str(body)[:300]}") from err
    reason = "timed out" if isinstance(last, (TimeoutError, socket.timeout)) or "timed out" in str(last) else str(last)
    raise ChatError(f"chat endpoint {url} failed after {retries} attempts (timeout {timeout}s each): {reason}") from last
