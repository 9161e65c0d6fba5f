"""Screenshots and page load times of a running explorer, in headless Chromium.

    python scripts/explorer_shots.py http://127.0.0.1:8600 /jobs /jobs/1 /workers /flows \\
        --out docs/screenshots --loads 5

Each page is loaded ``--loads`` times; the median of the browser's navigation timing (request
sent to load event) and of the server's answer alone (its JSON twin, by HTTP) are printed as
a Markdown table. One full-page PNG of each goes to ``--out`` (named after the path).
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import requests
from selenium import webdriver
from selenium.webdriver.chrome.service import Service


def browser(width: int) -> webdriver.Chrome:
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 f"--window-size={width},900", "--hide-scrollbars"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url")
    parser.add_argument("paths", nargs="+")
    parser.add_argument("--out", type=Path, help="folder for the PNGs (none: timings only)")
    parser.add_argument("--loads", type=int, default=5)
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--prefix", default="", help="prefix of the PNG names")
    args = parser.parse_args()
    chrome = browser(args.width)
    rows = []
    try:
        for path in args.paths:
            page, server = [], []
            for _ in range(args.loads):
                chrome.get(args.url + path)
                page.append(chrome.execute_script(
                    "const n = performance.getEntriesByType('navigation')[0]; return n.loadEventEnd - n.startTime;"))
                started = time.perf_counter()
                requests.get(args.url + "/api" + (path if path != "/" else "/jobs"), timeout=60).raise_for_status()
                server.append((time.perf_counter() - started) * 1000)
            errors = [e for e in chrome.get_log("browser") if e["level"] in ("SEVERE", "WARNING")]
            if args.out:
                height = chrome.execute_script("return document.documentElement.scrollHeight")
                chrome.set_window_size(args.width, min(height, 4000))
                name = args.prefix + (path.strip("/").replace("/", "-") or "index") + ".png"
                args.out.mkdir(parents=True, exist_ok=True)
                chrome.save_screenshot(str(args.out / name))
                chrome.set_window_size(args.width, 900)
            rows.append((path, statistics.median(page), statistics.median(server), len(errors)))
    finally:
        chrome.quit()
    print(f"| page | load in the browser (median of {args.loads}) | its JSON from the server | console errors |")
    print("|---|---:|---:|---:|")
    for path, page, server, errors in rows:
        print(f"| `{path}` | {page:.0f} ms | {server:.0f} ms | {errors} |")


if __name__ == "__main__":
    main()
