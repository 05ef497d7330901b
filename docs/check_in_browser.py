"""Open the built documentation site in Chromium (``make test-browser``): the index and a notebook
page must load with no console error and no page error, their images decoded and inside the
content column of a 1 280 x 900 window, their mathematics typeset by the site's own MathJax (served
locally, like every other asset). The site is served over HTTP from a local port, as a reader's
browser would get it; a screenshot of each page's top goes to ``build/docs-browser/``.

Usage: python docs/check_in_browser.py [--site docs/_build/html] [--chromium /usr/bin/chromium]
"""

from __future__ import annotations

import argparse
import functools
import sys
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

PAGES = ["index.html", "api/models.html"]  # and every notebook's page


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--site", default="docs/_build/html")
    parser.add_argument("--chromium", default=None)
    args = parser.parse_args()
    site = Path(args.site).resolve()
    if not (site / "index.html").exists():
        print(f"check_in_browser: {site}/index.html not found: run make docs first")
        return 1
    from playwright.sync_api import sync_playwright

    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(site)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    failures = []
    pages = PAGES + sorted(f"notebooks/{p.name}" for p in (site / "notebooks").glob("*.html"))
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=args.chromium, args=["--no-sandbox"])
        for name in pages:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            errors = []
            page.on("console", lambda m, e=errors: m.type == "error" and e.append(f"console error: {m.text}"))
            page.on("pageerror", lambda exc, e=errors: e.append(f"page error: {exc}"))
            page.on("requestfailed", lambda r, e=errors: e.append(f"request failed: {r.url}"))
            page.goto(base + name, wait_until="networkidle")
            title = page.title()
            images = page.eval_on_selector_all("img", "els => els.map(e => [e.src, e.complete && e.naturalWidth > 0])")
            broken = [src for src, ok in images if not ok]
            # how far each image passes the right edge of the article it is in
            overflow = page.eval_on_selector_all("article img", """els => els.map(e =>
                [e.src, e.getBoundingClientRect().right - e.closest('article').getBoundingClientRect().right])""")
            shots = Path(__file__).resolve().parents[1] / "build" / "docs-browser"
            shots.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(shots / (name.replace("/", "-").replace(".html", ".png"))))
            math = page.eval_on_selector_all("mjx-container", "els => els.length")
            raw_math = page.eval_on_selector_all(".math", "els => els.length")
            problems = errors + [f"image not decoded: {src}" for src in broken]
            problems += [f"image passes the content column by {px:.0f} px: {src}" for src, px in overflow if px > 0.5]
            if "spherelab" not in title:
                problems.append(f"title {title!r}")
            if raw_math and not math:
                problems.append(f"{raw_math} formulas not typeset")
            print(f"{name}: title {title!r}, {len(images)} images, {math} formulas typeset, "
                  f"{len(problems)} problems")
            failures += [f"{name}: {p_}" for p_ in problems]
            page.close()
        browser.close()
    server.shutdown()
    for line in failures:
        print(line)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
