"""Link check of the built documentation site (``make docs``): every relative ``href`` and ``src`` of
every page resolves to a file of the site, and every ``#fragment`` to an ``id`` on its page.
External links are listed, not fetched (CI reaches package registries only). Exit status 1 with
one line per broken link."""

from __future__ import annotations

import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit


class _Page(HTMLParser):
    def __init__(self):
        super().__init__()
        self.links, self.ids = [], set()

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if attrs.get("id"):
            self.ids.add(attrs["id"])
        if tag == "a" and attrs.get("name"):
            self.ids.add(attrs["name"])
        for key in ("href", "src"):
            if attrs.get(key) and not (tag == "link" and attrs.get("rel") == "preconnect"):
                self.links.append(attrs[key])


def _parse(path: Path) -> _Page:
    page = _Page()
    page.feed(path.read_text(encoding="utf-8", errors="replace"))
    return page


def check(site: Path) -> tuple[list[str], int, set[str]]:
    pages = {p.resolve(): _parse(p) for p in site.rglob("*.html")}
    broken, checked, external = [], 0, set()
    for path, page in pages.items():
        for link in page.links:
            parts = urlsplit(link)
            if parts.scheme in ("http", "https"):
                external.add(link)
                continue
            if parts.scheme or link.startswith("//"):
                continue  # mailto:, data:, javascript:
            checked += 1
            target = path if not parts.path else (path.parent / unquote(parts.path)).resolve()
            if target.is_dir():
                target = target / "index.html"
            if not target.exists():
                broken.append(f"{path.relative_to(site.resolve())}: {link} (no such file)")
                continue
            if parts.fragment and target.suffix == ".html":
                ids = pages[target].ids if target in pages else _parse(target).ids
                if unquote(parts.fragment) not in ids:
                    broken.append(f"{path.relative_to(site.resolve())}: {link} (no such anchor)")
    return broken, checked, external


def main() -> int:
    site = Path(sys.argv[1] if len(sys.argv) > 1 else "docs/_build/html")
    if not (site / "index.html").exists():
        print(f"check_links: {site}/index.html not found: run make docs first")
        return 1
    broken, checked, external = check(site)
    for line in broken:
        print(f"broken link: {line}")
    print(f"check_links: {checked} internal links checked, {len(broken)} broken; "
          f"{len(external)} external links not fetched")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
