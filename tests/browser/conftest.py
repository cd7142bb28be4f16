"""Playwright driving Debian's chromium (`apt-get install -y chromium`); `playwright
install` is never needed nor called. CONSOLE_SCREENSHOTS=<dir> makes
test_console_screenshots.py save a screenshot of each main page there (docs/console/)."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from playwright.async_api import Browser, Page, async_playwright

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]
"""Without the background-networking flags this machine refuses many connections."""


@pytest.fixture
async def browser() -> AsyncIterator[Browser]:
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no chromium at {CHROMIUM} (apt-get install -y chromium)")
    async with async_playwright() as pw:
        b = await pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        try:
            yield b
        finally:
            await b.close()


@pytest.fixture
async def page(browser: Browser) -> AsyncIterator[Page]:
    context = await browser.new_context(viewport={"width": 1400, "height": 900})
    p = await context.new_page()
    errors: list[str] = []
    p.on("pageerror", lambda e: errors.append(str(e)))
    p.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    try:
        yield p
    finally:
        await context.close()
    # A script error in the console is a failure, whatever the assertions saw. The API's
    # refusals a test provokes on purpose are logged as failed resources, allowed here.
    real = [e for e in errors if "Failed to load resource" not in e]
    assert not real, real


async def shot(page: Page, name: str) -> None:
    folder = os.environ.get("CONSOLE_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        await page.screenshot(path=str(Path(folder) / f"{name}.png"), full_page=False)
