"""The browser check must be able to fail: broken links, missing images, raw TeX, CDNs."""

from pathlib import Path

import pytest

from rankcollapse_book.sitecheck import check_page, check_site, chromium

GOOD = """<html><body><h1 id="top">Title</h1><a href="other.html#sec">ok</a>
<a href="#top">self</a><a href="https://arxiv.org/abs/2604.07925">external link is fine</a>
<link rel="canonical" href="https://example.org/book/page.html">
<img src="img.png"><code>\\(x\\) in code is fine</code><script src="local.js"></script>
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
    ('<script src="https://cdn.jsdelivr.net/npm/mathjax@3/es5/tex-mml-chtml.js"></script>',
     "from another host"),
    ('<img src="https://example.org/badge.svg">', "from another host"),
    ('<link rel="preload" href="https://fonts.example.org/f.woff2">', "from another host"),
    ('<p>\\(x^2\\) was not typeset</p>', "raw TeX"),
    ('<p>the residual $r(X)$ was not parsed</p>', "was not parsed"),
    ('<p>for n = &lt;IPython.core.display.Markdown object&gt; tokens</p>', "was glued"),
])
def test_each_kind_of_problem_is_reported(tmp_path, bad, expected):
    found = problems(tmp_path, GOOD.replace("</body>", bad + "</body>"))
    assert len(found) == 1 and expected in found[0]


@pytest.mark.skipif(chromium() is None, reason="needs Debian's chromium (CI installs it)")
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

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()


@pytest.mark.skipif(chromium() is None, reason="needs Debian's chromium (CI installs it)")
def test_nothing_is_ever_fetched_from_another_host_and_the_attempt_is_reported(tmp_path):
    with Recorder() as server:
        external = f"http://127.0.0.1:{server.port}"
        page = GOOD.replace("</body>", f'<script src="{external}/evil.js"></script>'
                                       f'<img src="{external}/pixel.png">'
                                       f'<link rel="stylesheet" href="{external}/s.css"></body>')
        found, _ = check_site(site(tmp_path, page))
    assert server.requests == []
    assert sorted(found) == sorted(f"book/page.html: loads {external}/{name} from another host "
                                   f"(the book must render offline)"
                                   for name in ("evil.js", "pixel.png", "s.css"))


def test_a_missing_or_empty_site_is_an_error(tmp_path):
    with pytest.raises(SystemExit, match="no site at"):
        check_site(tmp_path / "nowhere", browser="chromium")
    (tmp_path / "empty").mkdir()
    with pytest.raises(SystemExit, match="holds no HTML page"):
        check_site(tmp_path / "empty", browser="chromium")


def test_a_redirect_to_another_host_is_flagged(tmp_path):
    root = site(tmp_path, GOOD)
    (root / "index.html").write_text(
        '<meta http-equiv="Refresh" content="0; url=https://evil.example.org/" />')
    (root / "book" / "page.html").unlink()
    (root / "book" / "other.html").unlink()
    found, _ = check_site(root, browser="chromium")
    assert found == ["index.html: redirects to another host, https://evil.example.org/"]


@pytest.mark.skipif(chromium() is None, reason="needs Debian's chromium (CI installs it)")
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


@pytest.mark.skipif(chromium() is None, reason="needs Debian's chromium (CI installs it)")
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
