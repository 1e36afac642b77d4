"""Check the built book as a reader's browser sees it.

    python -m rankcollapse_book.sitecheck _build/html [--screenshots _build/screenshots]

Every HTML page is loaded in headless Chromium (after its scripts, MathJax included, have run:
`--dump-dom` with a virtual-time budget), with every host but the local files unreachable (no
UDP either: WebRTC may not send STUN to an address a page names). In
the rendered page: every internal link and image must resolve to a file of the site (and a
`#fragment` to an element id of that page), no script or stylesheet may come from another
host (the book must render offline), no raw TeX may be left (`\\(`, `\\[`, `$$` outside
code), no Python object stood in for a glued value (`<IPython.core.display.Markdown
object>`), and a redirect must stay on the site. Exit status 1 when anything is wrong, with
one line per problem; a missing or empty site is an error too.

With `--screenshots DIR`, every page (redirects aside) is also photographed at two window
widths, 1300 px (a laptop: the sidebars beside the text) and 800 px (a narrow window: no
sidebars), at its full height (at most `MAX_HEIGHT` px): the page `book/claims.html` gives
`DIR/book/claims-1300.png` and `DIR/book/claims-800.png`. The screenshots are taken through
Chromium's DevTools protocol over a pipe (`--remote-debugging-pipe`), which can size the
viewport to the page once it has rendered; `--screenshot` on the command line cannot.
"""

from __future__ import annotations

import argparse
import base64
import fcntl
import json
import os
import re
import select
import shutil
import subprocess
import sys
import tempfile
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update",
                  "--disable-sync", "--disable-quic", "--hide-scrollbars"]
# Nothing but the local files is reachable: every host name fails to resolve, and every
# connection (loopback and IP literals included) goes to a proxy port where nothing listens.
# WebRTC would send its UDP (STUN to an IP literal) past both, so it may use no UDP that does
# not go through the proxy, i.e. none: Chromium honours `--webrtc-ip-handling-policy`,
# content shell and the old headless shell `--force-webrtc-ip-handling-policy`.
# An external resource is then never fetched; the page scan still reports that it was asked.
OFFLINE_FLAGS = ["--host-resolver-rules=MAP * ~NOTFOUND", "--proxy-server=127.0.0.1:9",
                 "--proxy-bypass-list=<-loopback>",
                 "--webrtc-ip-handling-policy=disable_non_proxied_udp",
                 "--force-webrtc-ip-handling-policy=disable_non_proxied_udp"]
WIDTHS = (1300, 800)  # window widths of the screenshots, px
MAX_HEIGHT = 40000  # px; a longer page is cut there (the claims ledger at 800 px: about 34,000)
RAW_TEX = ("\\(", "\\[", "$$")
RAW_DOLLAR = re.compile(r"\$[^$\s][^$\n]{0,80}\$")  # $x^2$ left as text
LEAKED_REPR = re.compile(r"<[\w.]+ object(?: at 0x[0-9a-f]+)?>")  # a repr, not a value
REDIRECT = re.compile(r'<meta http-equiv="Refresh" content="\d+; url=([^"]+)"', re.I)


class PageScan(HTMLParser):
    """Links, images, external resources, element ids and visible text of one page."""

    SKIP = ("code", "pre", "script", "style", "textarea")  # text inside is not prose
    NAVIGATION = {"canonical", "alternate", "next", "prev", "index", "search", "author",
                  "license", "help"}  # <link rel> values the browser does not fetch

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.links: list[str] = []
        self.images: list[str] = []
        self.resources: list[str] = []  # scripts and stylesheets
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
        if tag in ("script", "img", "iframe", "source", "video", "audio", "embed") \
                and a.get("src"):
            self.resources.append(a["src"])
        rel = set((a.get("rel") or "").split())
        if tag == "link" and a.get("href") and not rel <= self.NAVIGATION:
            self.resources.append(a["href"])  # stylesheets, icons, fonts, preloads
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
    """Problems of one rendered page, and counts of what was checked."""
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
    problems += [f"{where}: loads {url} from another host (the book must render offline)"
                 for url in found.resources if not _internal(url)]
    text = "\n".join(found.text)  # no raw-TeX match across two elements
    problems += [f"{where}: raw TeX {tex!r} left in the page (math did not render)"
                 for tex in RAW_TEX if tex in text]
    problems += [f"{where}: raw TeX {m[0]!r} left in the page (math was not parsed)"
                 for m in RAW_DOLLAR.finditer(text)][:3]
    problems += [f"{where}: {m[0]!r} in the page (an object was glued where text was meant)"
                 for m in LEAKED_REPR.finditer(text)][:3]
    return problems, {"links": len(found.links), "images": len(found.images),
                      "math": html.count("<mjx-container")}


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def render(browser: str, page: Path, profile: Path) -> str:
    """The page's DOM after its scripts ran."""
    args = [browser, *CHROMIUM_FLAGS, *OFFLINE_FLAGS, f"--user-data-dir={profile}",
            "--virtual-time-budget=10000", "--dump-dom"]
    done = subprocess.run([*args, page.resolve().as_uri()], capture_output=True, text=True,
                          timeout=120)
    if done.returncode != 0:
        raise RuntimeError(f"chromium failed on {page}: {done.stderr[-500:]}")
    return done.stdout


def screenshot_name(page: Path, site: Path, width: int) -> Path:
    """Where the screenshot of `page` at `width` goes, relative to the screenshot folder:
    book/chapters/05_trained_models.html -> book/chapters/05_trained_models-1300.png."""
    relative = page.relative_to(site)
    return relative.with_name(f"{relative.stem}-{width}.png")


class DevTools:
    """One headless Chromium driven through the DevTools protocol over a pipe (messages are
    JSON, each ended by a NUL byte; Chromium reads fd 3 and writes fd 4)."""

    TIMEOUT = 120  # s without a message from the browser: it hangs

    # Resolves once the page has loaded, its fonts are ready and MathJax has typeset.
    SETTLED = """new Promise(done => {
      const typeset = () => (window.MathJax && MathJax.startup && MathJax.startup.promise)
        || Promise.resolve();
      const settle = () => Promise.all([document.fonts.ready, typeset()]).then(
        () => requestAnimationFrame(() => requestAnimationFrame(() =>
          done(document.documentElement.scrollHeight))));
      document.readyState === "complete" ? settle() : addEventListener("load", settle);
    })"""

    def __init__(self, browser: str, profile: Path):
        read_end, self._to_browser = os.pipe()
        self._from_browser, write_end = os.pipe()
        # above fd 10 first, so that moving them to 3 and 4 in the child clobbers neither
        high = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10) for fd in (read_end, write_end)]
        os.close(read_end)
        os.close(write_end)

        def pipes_at_3_and_4():
            os.dup2(high[0], 3)
            os.dup2(high[1], 4)

        self.process = subprocess.Popen(
            [browser, *CHROMIUM_FLAGS, *OFFLINE_FLAGS, f"--user-data-dir={profile}",
             "--remote-debugging-pipe", "about:blank"],
            pass_fds=(3, 4), preexec_fn=pipes_at_3_and_4,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for fd in high:
            os.close(fd)
        self._buffer, self._last, self._events = b"", 0, []
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target,
                                 flatten=True)["sessionId"]
        self.call("Page.enable", self.session)

    def _message(self) -> dict:
        while b"\0" not in self._buffer:
            if not select.select([self._from_browser], [], [], self.TIMEOUT)[0]:
                raise RuntimeError(f"chromium sent nothing for {self.TIMEOUT} s")
            chunk = os.read(self._from_browser, 1 << 20)
            if not chunk:
                raise RuntimeError("chromium closed the DevTools pipe")
            self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(raw)

    def call(self, method: str, session: str | None = None, **params) -> dict:
        """Send one command and return its result; events that arrive meanwhile are kept
        for `wait_for`."""
        self._last += 1
        message = {"id": self._last, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        while True:
            reply = self._message()
            if "method" in reply:
                self._events.append(reply["method"])
            elif reply.get("id") == self._last:
                if "error" in reply:
                    raise RuntimeError(f"chromium: {method}: {reply['error']}")
                return reply["result"]

    def wait_for(self, event: str) -> None:
        """Wait until the event `event` (e.g. Page.loadEventFired) has arrived."""
        while event not in self._events:
            reply = self._message()
            if "method" in reply:
                self._events.append(reply["method"])

    def _settled_height(self) -> int:
        result = self.call("Runtime.evaluate", self.session, expression=self.SETTLED,
                           awaitPromise=True, returnByValue=True, timeout=60000)
        return int(result["result"]["value"])

    def screenshot(self, page: Path, width: int, path: Path) -> int:
        """Write a PNG of `page` at window width `width`, full height (at most MAX_HEIGHT);
        return its height in px."""
        def viewport(height: int) -> None:
            self.call("Emulation.setDeviceMetricsOverride", self.session, width=width,
                      height=height, deviceScaleFactor=1, mobile=False)

        viewport(900)
        self._events.clear()
        self.call("Page.navigate", self.session, url=page.resolve().as_uri())
        self.wait_for("Page.loadEventFired")
        height = min(self._settled_height(), MAX_HEIGHT)
        viewport(height)  # the whole page in the viewport: lazy content renders too
        height = min(self._settled_height(), MAX_HEIGHT)
        viewport(height)
        data = self.call("Page.captureScreenshot", self.session, format="png")["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))
        return height

    def close(self) -> None:
        try:
            self.call("Browser.close")
        except RuntimeError:
            pass
        for fd in (self._to_browser, self._from_browser):
            os.close(fd)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def take_screenshots(browser: str, site: Path, pages: list[Path], folder: Path,
                     profile: Path) -> list[Path]:
    """Screenshots of `pages` at every width of WIDTHS into `folder` (see module doc)."""
    shots = []
    tools = DevTools(browser, profile)
    try:
        for page in pages:
            for width in WIDTHS:
                path = folder / screenshot_name(page, site, width)
                tools.screenshot(page, width, path)
                shots.append(path)
    finally:
        tools.close()
    return shots


def check_site(site: Path, screenshots: Path | None = None, browser: str | None = None
               ) -> tuple[list[str], dict]:
    """Load every page of `site` in the browser and check it (see module doc); with
    `screenshots`, photograph every rendered page there (totals["screenshots"]: the files)."""
    browser = browser or chromium()
    if browser is None:
        raise SystemExit("chromium not found: install Debian's `chromium` package "
                         "(apt-get install chromium)")
    if not site.is_dir():
        raise SystemExit(f"no site at {site}: build the book first (make book)")
    pages = sorted(p for p in site.rglob("*.html")
                   if not p.relative_to(site).parts[0].startswith(("_", ".")))
    if not pages:
        raise SystemExit(f"{site} holds no HTML page: the build is empty or incomplete")
    problems, totals, ids_cache = [], {"pages": 0, "links": 0, "images": 0, "math": 0}, {}
    rendered = []
    with tempfile.TemporaryDirectory() as profile:
        for page in pages:
            redirect = REDIRECT.search(page.read_text(errors="replace"))
            if redirect:  # e.g. index.html: check its target instead of rendering it
                if not _internal(redirect[1]):
                    problems.append(f"{page.relative_to(site)}: redirects to another host, "
                                    f"{redirect[1]}")
                    continue
                page_problems, _ = check_page(page, f'<a href="{redirect[1]}"></a>', site,
                                              ids_cache)
                problems += page_problems
                continue
            html = render(browser, page, Path(profile))
            rendered.append(page)
            page_problems, counts = check_page(page, html, site, ids_cache)
            problems += page_problems
            totals["pages"] += 1
            for key, value in counts.items():
                totals[key] += value
        if screenshots:
            totals["screenshots"] = take_screenshots(browser, site, rendered, screenshots,
                                                     Path(profile))
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
