"""Check the built book as a reader's browser sees it.

    python -m rankcollapse_book.sitecheck _build/html [--screenshots _build/screenshots]

Every HTML page is opened in one headless Chromium that can reach nothing but the local
files (`rankcollapse_book.browser`: how a page counts as loaded, and the second look at it
on a phone's screen and in narrow and wide windows, scrolled to its end, with its clock
run on after load). For each page the check records

- every request the page makes (`Network.requestWillBeSent`, `Network.webSocketCreated`):
  scripts, stylesheets, CSS `@import`, fonts, `url()` in a style, images of any kind
  (`srcset`, `poster`, SVG `<image>`, `<input type=image>`), frames, objects, `fetch()`,
  XMLHttpRequest, WebSockets, from markup and scripts alike, and from the page's workers
  (`fetch()` and `importScripts()` of a dedicated or shared worker made from a `blob:` or
  `data:` URL: the browser attaches to every worker and frame the page starts, before it
  runs);
- the page's final address once it has loaded (after any meta refresh or script redirect);
- the rendered DOM,

and reports, one line each:

- a request that leaves the site folder: anything but a `file:` URL inside the site and
  `data:`, `blob:` or `about:` (the book must render offline; no other host is reached),
  also one of a file the page redirects to that is no page checked on its own (`_static/`);
- a final address outside the site folder, or a redirect to a page that does not exist;
- a meta refresh later than `browser.REFRESH_FOLLOWED` s (the page is checked as one the reader reads,
  and leaves): `page redirects by meta refresh after 60 s to URL`; a sooner one is a redirect;
- a page that does not finish loading within `PAGE_TIMEOUT` s (a script that never ends,
  say), after which the check goes on with the next page;
- in the rendered page: an internal link or image that resolves to no file of the site (or
  a `#fragment` to no element id of that page), raw TeX (`\\(`, `\\[`, `$$` outside code),
  a Python object where a glued value was meant (`<IPython.core.display.Markdown object>`).

Exit status 1 when anything is wrong; a missing or empty site is an error too.

With `--screenshots DIR`, every page (redirects aside) is also photographed at two window
widths, 1300 px (a laptop: the sidebars beside the text) and 800 px (a narrow window: no
sidebars), at its full height (at most `browser.MAX_HEIGHT` px): the page `book/claims.html` gives
`DIR/book/claims-1300.png` and `DIR/book/claims-800.png`. The protocol can size the viewport
to the page once it has rendered; `--screenshot` on the command line cannot.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

from .browser import DevTools, Unresponsive, Visit, chromium

LOCAL_SCHEMES = ("data", "blob", "about")  # URLs that fetch nothing from outside the page
PAGE_TIMEOUT = 30  # s that one page may take to load, or to be photographed
WIDTHS = (1300, 800)  # window widths of the screenshots, px
RAW_TEX = ("\\(", "\\[", "$$")
RAW_DOLLAR = re.compile(r"\$[^$\s][^$\n]{0,80}\$")  # $x^2$ left as text
LEAKED_REPR = re.compile(r"<[\w.]+ object(?: at 0x[0-9a-f]+)?>")  # a repr, not a value


class PageScan(HTMLParser):
    """Links, images, element ids and visible text of one page."""

    SKIP = ("code", "pre", "script", "style", "textarea")  # text inside is not prose

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.links: list[str] = []
        self.images: list[str] = []
        self.ids: set[str] = set()
        self.text: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "id" in a:
            self.ids.add(a["id"])
        if tag == "a" and a.get("href"):
            self.links.append(a["href"])
        if tag == "img" and a.get("src"):
            self.images.append(a["src"])
        if tag in self.SKIP:
            self._skip += 1

    def handle_endtag(self, tag):
        if tag in self.SKIP and self._skip:
            self._skip -= 1

    def handle_data(self, data):
        if not self._skip:
            self.text.append(data)


def scan(html: str) -> PageScan:
    parser = PageScan()
    parser.feed(html)
    return parser


def _internal(url: str) -> bool:
    parts = urlsplit(url)
    return not parts.scheme and not parts.netloc and not url.startswith(("mailto:", "data:"))


def _ids(path: Path, cache: dict[Path, set[str]]) -> set[str]:
    if path not in cache:
        cache[path] = scan(path.read_text(errors="replace")).ids
    return cache[path]


def check_page(page: Path, html: str, site: Path, ids_cache: dict) -> tuple[list[str], dict]:
    """Problems of one rendered page (links, images, TeX, glued objects), and counts of
    what was checked."""
    found = scan(html)
    problems, where = [], page.relative_to(site)
    for url in found.links + found.images:
        if not _internal(url):
            continue
        parts = urlsplit(url)
        target = (page.parent / unquote(parts.path)).resolve() if parts.path else page
        if target.is_dir():
            target = target / "index.html"
        if not target.is_file() or site.resolve() not in target.resolve().parents:
            problems.append(f"{where}: broken {'image' if url in found.images else 'link'} {url}")
        elif parts.fragment and target.suffix == ".html" \
                and unquote(parts.fragment) not in _ids(target, ids_cache):
            problems.append(f"{where}: link {url} points to a missing anchor")
    text = "\n".join(found.text)  # no raw-TeX match across two elements
    problems += [f"{where}: raw TeX {tex!r} left in the page (math did not render)"
                 for tex in RAW_TEX if tex in text]
    problems += [f"{where}: raw TeX {m[0]!r} left in the page (math was not parsed)"
                 for m in RAW_DOLLAR.finditer(text)][:3]
    problems += [f"{where}: {m[0]!r} in the page (an object was glued where text was meant)"
                 for m in LEAKED_REPR.finditer(text)][:3]
    return problems, {"links": len(found.links), "images": len(found.images),
                      "math": html.count("<mjx-container")}


def site_path(url: str, site: Path) -> Path | None:
    """The path inside the site folder that a `file:` URL names; None for any other URL (one
    of another scheme, or a file outside the folder)."""
    parts = urlsplit(url)
    if parts.scheme != "file" or parts.netloc not in ("", "localhost"):
        return None
    path, root = Path(unquote(parts.path)).resolve(), site.resolve()
    return path if path == root or root in path.parents else None


def is_page(path: Path, site: Path) -> bool:
    """Whether the check opens `path` (inside `site`) as a page of its own: an HTML file
    outside the site's top folders `_*` and `.*` (`_static/`, `_sources/`)."""
    return (path.suffix == ".html" and path.is_file()
            and not path.relative_to(site).parts[0].startswith(("_", ".")))


def shown(url: str, site: Path) -> str:
    """`url` as a report names it: a file of the site by its path inside the site folder."""
    path = site_path(url, site)
    return url if path is None else path.relative_to(site.resolve()).as_posix()


def leaves_site(url: str, site: Path) -> bool:
    """Whether fetching `url` reaches outside the site folder (data:, blob: and about: URLs
    are made in the page itself)."""
    return urlsplit(url).scheme not in LOCAL_SCHEMES and site_path(url, site) is None


def check_visit(page: Path, visit: Visit, site: Path) -> list[str]:
    """Problems of what opening `page` did: requests that left the site folder (those of a
    page it redirected to as well, unless that page is checked on its own), and a final
    address outside it or missing."""
    where = page.relative_to(site)
    problems = [f"{where}: loads {url} from outside the site (the book must render offline)"
                for url in dict.fromkeys(visit.requests) if leaves_site(url, site)]
    for address, urls in visit.redirected_requests.items():
        target = site_path(address, site)
        if target is None or not is_page(target, site.resolve()):  # _static/x.html, say
            problems += [f"{where}: redirects to {shown(address, site)}, which loads {url} "
                         f"from outside the site (the book must render offline)"
                         for url in dict.fromkeys(urls) if leaves_site(url, site)]
    if visit.refresh:
        delay, url = visit.refresh
        problems.append(f"{where}: redirects by meta refresh after {delay:g} s to "
                        f"{shown(url, site)}")
    target = site_path(visit.address, site)
    if target is None:
        problems.append(f"{where}: ends up at {visit.address}, outside the site")
    elif not target.is_file():
        problems.append(f"{where}: redirects to {target.relative_to(site.resolve())}, "
                        f"which does not exist")
    return problems


def screenshot_name(page: Path, site: Path, width: int) -> Path:
    """Where the screenshot of `page` at `width` goes, relative to the screenshot folder:
    book/chapters/05_trained_models.html -> book/chapters/05_trained_models-1300.png."""
    relative = page.relative_to(site)
    return relative.with_name(f"{relative.stem}-{width}.png")


def check_in_browser(tools: DevTools, page: Path, site: Path, ids_cache: dict,
                     screenshots: Path | None) -> tuple[list[str], dict | None, list[Path]]:
    """Open `page` and check what it requested, where it ended up and what it rendered;
    photograph it into `screenshots` at every width of WIDTHS. The counts are None for a
    page that redirects (its target is checked as a page of its own)."""
    visit = tools.open(page, WIDTHS[0])
    redirects = site_path(visit.address, site) != page.resolve()
    html = None if redirects else tools.rendered()
    visit.add(tools.probe(page))
    problems = check_visit(page, visit, site)  # after rendering: MathJax may fetch fonts
    if redirects:
        return problems, None, []
    page_problems, counts = check_page(page, html, site, ids_cache)
    shots = []
    for width in WIDTHS if screenshots else ():
        if width != WIDTHS[0]:
            tools.open(page, width)
        shots.append(screenshots / screenshot_name(page, site, width))
        tools.screenshot(shots[-1])
    return problems + page_problems, counts, shots


def check_site(site: Path, screenshots: Path | None = None, browser: str | None = None,
               page_timeout: float = PAGE_TIMEOUT) -> tuple[list[str], dict]:
    """Open every page of `site` in the browser and check it (see module doc); with
    `screenshots`, photograph every rendered page there (totals["screenshots"]: the files).
    A page that takes over `page_timeout` s to load (or to be photographed) is reported, and
    the check goes on with the next page."""
    browser = browser or chromium()
    if browser is None:
        raise SystemExit("chromium not found: install Debian's `chromium` package "
                         "(apt-get install chromium)")
    if not site.is_dir():
        raise SystemExit(f"no site at {site}: build the book first (make book)")
    pages = sorted(p for p in site.rglob("*.html") if is_page(p, site))
    if not pages:
        raise SystemExit(f"{site} holds no HTML page: the build is empty or incomplete")
    problems, ids_cache = [], {}
    totals = {"pages": 0, "links": 0, "images": 0, "math": 0, "screenshots": []}
    with tempfile.TemporaryDirectory() as profile:
        tools = DevTools(browser, Path(profile), page_timeout)
        try:
            for page in pages:
                try:
                    page_problems, counts, shots = check_in_browser(tools, page, site,
                                                                    ids_cache, screenshots)
                except Unresponsive:
                    page_problems, counts, shots = [
                        f"{page.relative_to(site)}: did not finish loading within "
                        f"{page_timeout:g} s (a script that never ends?)"], None, []
                    tools.close()  # its tab hangs: go on in a fresh browser
                    tools = DevTools(browser, Path(profile), page_timeout)
                problems += page_problems
                totals["screenshots"] += shots
                if counts is not None:
                    totals["pages"] += 1
                    for key, value in counts.items():
                        totals[key] += value
        finally:
            tools.close()
    return problems, totals


def main(argv: list[str] | None = None) -> int:
    cli = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cli.add_argument("site", type=Path, help="the built HTML folder, e.g. _build/html")
    cli.add_argument("--screenshots", type=Path, default=None, metavar="DIR",
                     help="also write every page's screenshots at 1300 and 800 px there, "
                          "e.g. DIR/book/claims-1300.png")
    args = cli.parse_args(argv)
    problems, totals = check_site(args.site, args.screenshots)
    print("\n".join(problems))
    if args.screenshots:
        print(f"sitecheck: {len(totals['screenshots'])} screenshots "
              f"({', '.join(f'<page>-{w}.png' for w in WIDTHS)}) in {args.screenshots}")
    print(f"sitecheck: {totals['pages']} pages, {totals['links']} links, {totals['images']} "
          f"images, {totals['math']} rendered formulas; {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
