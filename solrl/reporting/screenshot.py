"""Render an HTML file to a PNG with headless Chromium (Debian's `chromium`, or any Chrome on PATH)."""
from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "chrome")
# Offline machines refuse Chromium's background connections; these flags stop it from trying.
_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
          "--disable-component-update", "--disable-sync", "--hide-scrollbars")


def find_browser() -> str | None:
    return next((path for path in map(shutil.which, BROWSERS) if path), None)


def screenshot(page: str | Path, out: str | Path, width: int = 1200, height: int = 2600, timeout: float = 120.0) -> Path:
    browser = find_browser()
    if browser is None:
        raise FileNotFoundError(f"no headless browser found (looked for {', '.join(BROWSERS)}); install one, "
                                "e.g. `apt-get install chromium`")
    out = Path(out).resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="solrl-chromium-") as profile:
        cmd = [browser, *_FLAGS, f"--user-data-dir={profile}", f"--screenshot={out}", f"--window-size={width},{height}",
               Path(page).resolve().as_uri()]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0 or not out.exists():
        raise RuntimeError(f"{browser} could not render {page} (exit {done.returncode}): {done.stderr[-500:]}")
    return out
