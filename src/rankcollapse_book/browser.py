"""A headless Chromium that opens the book's pages and records what they did (the browser half
of `rankcollapse_book.sitecheck`, which holds the rules a page is judged by).

The browser is driven through its DevTools protocol over a pipe (`--remote-debugging-pipe`),
with every host but the local files unreachable (no host name resolves, every connection goes
to a proxy port where nothing listens, WebRTC sends no UDP). A page counts as loaded once its
main frame's network has gone idle with no redirect pending (a meta refresh later than
`REFRESH_FOLLOWED` s is not waited for); then its fonts and MathJax are waited for
(`DevTools.rendered`). `DevTools.probe` opens the page a second time, in a tab of its own whose
clock runs as fast as the page can go (DevTools' virtual time), to see what other readers'
browsers ask for: on a phone's screen (400 px wide, 2 device pixels per CSS pixel) and,
resized in place, in windows 800 and 1300 px wide at 2 device pixels per CSS pixel and
1300 px at 1 (`SCREENS`: `srcset` 2x images, `<source media=...>`), scrolled to its end on
each until it grows no more and asks for nothing more (lazy images, an endless page), with
`LATE` s of the page's clock run after load (a request a few seconds after load). A `Visit`
records every request the page makes (`Network.requestWillBeSent`,
`Network.webSocketCreated`), from markup, scripts and the page's workers alike (the browser
attaches to every worker and frame the page starts, before it runs), and the page's final
address. `DevTools.screenshot` photographs the open page at its full height (at most
`MAX_HEIGHT` px): the protocol can size the viewport to the page once it has rendered;
`--screenshot` on the command line cannot.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update",
                  "--disable-sync", "--disable-quic", "--hide-scrollbars"]
# Nothing but the local files is reachable: every host name fails to resolve, and every
# connection (loopback and IP literals included) goes to a proxy port where nothing listens.
# WebRTC would send its UDP (STUN to an IP literal) past both, so it may use no UDP that does
# not go through the proxy, i.e. none: Chromium honours `--webrtc-ip-handling-policy`,
# content shell and the old headless shell `--force-webrtc-ip-handling-policy`.
# An external resource is then never fetched; the browser's events still tell that it was asked.
OFFLINE_FLAGS = ["--host-resolver-rules=MAP * ~NOTFOUND", "--proxy-server=127.0.0.1:9",
                 "--proxy-bypass-list=<-loopback>",
                 "--webrtc-ip-handling-policy=disable_non_proxied_udp",
                 "--force-webrtc-ip-handling-policy=disable_non_proxied_udp"]
STARTUP = 60  # s that Chromium may take to start
REFRESH_FOLLOWED = 5  # s: a sooner meta refresh is a redirect; a later one, a page that leaves
# The second look at every page: a phone's screen, then (the page resized in place) a narrow and
# a wide window on a screen of 2 device pixels per CSS pixel, and a wide one of 1.
SCREENS = ((400, 2), (800, 2), (1300, 2), (1300, 1))  # (width px, device pixels per CSS px)
LATE = 10  # s of the page's own clock after which it is no longer watched for requests
SCROLLS = 5  # times a page is scrolled to its end at most, for each screen
MAX_HEIGHT = 40000  # px; a longer page is cut there (the claims ledger at 800 px: about 34,000)


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@dataclass
class Visit:
    """What opening one page did, as the browser's events tell it."""

    frame: str  # id of the tab's main frame
    requests: list[str] = field(default_factory=list)  # URLs the page asked for, in order
    # URLs asked for by each later document of the main frame (the page redirected), by address
    redirected_requests: dict[str, list[str]] = field(default_factory=dict)
    address: str = ""  # main frame's address (a failed navigation: the one it failed to reach)
    document: str = ""  # loader id of the main frame's current document
    idle: str = ""  # loader id of the last main-frame document whose network went idle
    loading: bool = False  # the main frame is loading a document
    redirect_pending: bool = False  # a meta refresh or a script's navigation is scheduled
    redirected: bool = False  # the main frame holds another document than the page
    refresh: tuple[float, str] | None = None  # a later meta refresh than REFRESH_FOLLOWED: s, URL

    @property
    def asked(self) -> int:
        """How many requests have been recorded."""
        return len(self.requests) + sum(map(len, self.redirected_requests.values()))

    def add(self, other: Visit) -> None:
        """Count the requests of `other`, a second look at the same page, as this one's."""
        self.requests += other.requests
        for address, urls in other.redirected_requests.items():
            self.redirected_requests.setdefault(address, []).extend(urls)

    def record(self, event: dict) -> None:
        """Keep what `event` says about the page's requests or its main frame. The main
        frame's navigations are left out: they are judged by where the page ends up; so is
        what comes before the page's document (the previous page's last requests)."""
        method, params = event["method"], event.get("params", {})
        main = self.frame in (params.get("frameId"), params.get("frame", {}).get("id"))
        if method in ("Network.requestWillBeSent", "Network.webSocketCreated"):
            navigation = main and params.get("type") == "Document"
            url = params.get("request", params)["url"]
            if self.redirected and not navigation:
                self.redirected_requests.setdefault(self.address, []).append(url)
            elif self.document and not navigation:
                self.requests.append(url)
        elif main and method == "Page.frameNavigated":
            self.redirected = bool(self.document)  # a second document in the main frame
            self.address = params["frame"].get("unreachableUrl") or params["frame"]["url"]
            self.document = params["frame"]["loaderId"]
        elif main and method in ("Page.frameStartedLoading", "Page.frameStoppedLoading"):
            self.loading = method == "Page.frameStartedLoading"
        elif main and method == "Page.frameScheduledNavigation" \
                and params["reason"] == "metaTagRefresh" and params["delay"] > REFRESH_FOLLOWED:
            if not self.redirected:  # a refresh of the page it redirected to: reported there
                self.refresh = params["delay"], params["url"]  # the reader reads the page first
        elif main and method in ("Page.frameScheduledNavigation",
                                 "Page.frameClearedScheduledNavigation"):
            self.redirect_pending = method == "Page.frameScheduledNavigation"
        elif main and method == "Page.lifecycleEvent" and params["name"] == "networkIdle":
            self.idle = params["loaderId"]

    @property
    def loaded(self) -> bool:
        """The main frame's document has gone idle and nothing is about to replace it (a
        scheduled navigation is cleared only once the next one has started loading)."""
        return (bool(self.document) and self.idle == self.document and not self.loading
                and not self.redirect_pending)


class Tab(NamedTuple):
    """One tab of the browser: the session that drives it, its main frame."""

    session: str
    frame: str


class Unresponsive(RuntimeError):
    """The browser sent nothing before the deadline: a page's script never ends, say."""


class DevTools:
    """One headless Chromium driven through the DevTools protocol over a pipe (messages are
    JSON, each ended by a NUL byte; Chromium reads fd 3 and writes fd 4), with one tab whose
    requests and navigations are recorded in `visit`."""

    # Resolves once the page has loaded, its fonts are ready and MathJax has typeset.
    SETTLED = """new Promise(done => {
      const typeset = () => (window.MathJax && MathJax.startup && MathJax.startup.promise)
        || Promise.resolve();
      const settle = () => Promise.all([document.fonts.ready, typeset()]).then(
        () => requestAnimationFrame(() => requestAnimationFrame(() =>
          done(document.documentElement.scrollHeight))));
      document.readyState === "complete" ? settle() : addEventListener("load", settle);
    })"""

    def __init__(self, browser: str, profile: Path, timeout: float):
        self.timeout = timeout  # s that one page may take to load, or to be photographed
        self.deadline = time.monotonic() + STARTUP
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
        self._buffer, self._last, self.width = b"", 0, SCREENS[-1][0]
        self._tab_of: dict[str, str] = {}  # session -> session of the tab it belongs to
        self._tab_in: dict[str, str] = {}  # browser context -> session of its tab
        self.visits: dict[str, Visit] = {}  # tab's session -> what its current page does
        self._clock_stopped = False  # a probe's page has run the time it was given
        tab = self._new_tab()  # the tab that renders and photographs
        self.session, self.frame = tab.session, tab.frame
        # The probe's tab, in a browser context of its own: a page's clock is its renderer
        # process's, and no page of the other tab may share a process with a stopped clock.
        self.probe_tab = self._new_tab(self.call("Target.createBrowserContext")["browserContextId"])
        # A shared worker belongs to no page but to a browser context: the browser attaches
        # to it, and its requests count as those of the one tab in that context.
        self.call("Target.setAutoAttach", **self.AUTO_ATTACH,
                  filter=[{"type": "shared_worker"}, {"exclude": True}])

    def _new_tab(self, context: str | None = None) -> Tab:
        """Open a blank tab in a window of its own (a tab behind another renders no frame),
        in browser context `context` (None: the default one). Every worker and out-of-process
        frame it starts is attached to (see `_attach`)."""
        target = self.call("Target.createTarget", url="about:blank", newWindow=True,
                           **({"browserContextId": context} if context else {}))["targetId"]
        session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        self._tab_of[session] = session
        info = self.call("Target.getTargetInfo", targetId=target)["targetInfo"]
        self._tab_in[info["browserContextId"]] = session
        for method in ("Page.enable", "Network.enable"):
            self.call(method, session)
        self.call("Page.setLifecycleEventsEnabled", session, enabled=True)
        self.call("Target.setAutoAttach", session, **self.AUTO_ATTACH)
        frame = self.call("Page.getFrameTree", session)["frameTree"]["frame"]["id"]
        return Tab(session, frame)

    # A worker (blob: and data: ones too) or a frame of another process gets a session of its
    # own, and its requests are told only there: it waits before running its first line until
    # its network is watched.
    AUTO_ATTACH = {"autoAttach": True, "waitForDebuggerOnStart": True, "flatten": True}

    def _attach(self, tab: str | None, child: str) -> None:
        """Watch the network of `child`, a session just auto-attached for the tab whose
        session is `tab` (and of what it starts in turn), then let it run. The replies are not
        waited for: this runs while another command waits for its own."""
        self._tab_of[child] = tab
        self._send("Network.enable", child)
        self._send("Target.setAutoAttach", child, **self.AUTO_ATTACH)
        self._send("Runtime.runIfWaitingForDebugger", child)

    def _message(self) -> dict:
        """The next message from the browser; an event is recorded on the way in the visit of
        the tab it comes from (see `visits`)."""
        while b"\0" not in self._buffer:
            left = self.deadline - time.monotonic()
            if left <= 0 or not select.select([self._from_browser], [], [], left)[0]:
                raise Unresponsive("chromium sent nothing before the deadline")
            chunk = os.read(self._from_browser, 1 << 20)
            if not chunk:
                raise RuntimeError("chromium closed the DevTools pipe")
            self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        message = json.loads(raw)
        session, method = message.get("sessionId"), message.get("method")
        if method == "Target.attachedToTarget":
            child, target = message["params"]["sessionId"], message["params"]["targetInfo"]
            if session:  # a worker or frame of a tab
                self._attach(self._tab_of.get(session), child)
            elif target["type"] == "shared_worker":  # not a tab this class opened
                self._attach(self._tab_in.get(target.get("browserContextId")), child)
        elif method == "Target.detachedFromTarget":
            self._tab_of.pop(message["params"]["sessionId"], None)
        elif method == "Emulation.virtualTimeBudgetExpired":
            self._clock_stopped = True
        elif method and self._tab_of.get(session) in self.visits:
            self.visits[self._tab_of[session]].record(message)
        return message

    def _send(self, method: str, session: str | None = None, **params) -> int:
        """Send one command; return its id."""
        self._last += 1
        message = {"id": self._last, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        return self._last

    def call(self, method: str, session: str | None = None, **params) -> dict:
        """Send one command and return its result."""
        sent = self._send(method, session, **params)
        while True:
            reply = self._message()
            if reply.get("id") == sent:
                if "error" in reply:
                    raise RuntimeError(f"chromium: {method}: {reply['error']}")
                return reply["result"]

    def _viewport(self, height: int) -> None:
        self.call("Emulation.setDeviceMetricsOverride", self.session, width=self.width,
                  height=height, deviceScaleFactor=1, mobile=False)

    def _evaluate(self, expression: str, session: str | None = None):
        result = self.call("Runtime.evaluate", session or self.session, expression=expression,
                           awaitPromise=True, returnByValue=True)
        return result["result"].get("value")

    def open(self, page: Path, width: int) -> Visit:
        """Load `page` in a window `width` px wide, until it has loaded (see Visit.loaded);
        return what the loading did (further requests keep being recorded there)."""
        self.deadline = time.monotonic() + self.timeout
        self.width = width
        self._viewport(900)
        visit = self.visits[self.session] = Visit(self.frame)
        self.call("Page.navigate", self.session, url=page.resolve().as_uri())
        while not visit.loaded:
            self._message()
        return visit

    # Scrolls to the end, lets two frames render (lazy images start loading then), and
    # resolves to the page's height.
    TO_THE_END = """new Promise(done => {
      scrollTo(0, document.documentElement.scrollHeight);
      requestAnimationFrame(() => requestAnimationFrame(() =>
        done(document.documentElement.scrollHeight)));
    })"""

    def _run_clock(self, tab: Tab, seconds: float) -> None:
        """Let the page in `tab` run `seconds` of its own clock, then stop it: its timers
        fire without being waited for in real time, and the clock stands still while a
        request is pending."""
        self._clock_stopped = False
        self.call("Emulation.setVirtualTimePolicy", tab.session,
                  policy="pauseIfNetworkFetchesPending", budget=seconds * 1000)
        while not self._clock_stopped:
            self._message()

    def _scroll_to_end(self, tab: Tab, visit: Visit) -> None:
        """Scroll the page in `tab` to its end until it grows no more and asks for nothing
        more (an endless page: SCROLLS times)."""
        height = self._height(tab, "document.documentElement.scrollHeight")
        for _ in range(SCROLLS):
            asked = visit.asked
            grown = height != (height := self._height(tab, self.TO_THE_END))
            self._run_clock(tab, 0.5)
            if not grown and visit.asked == asked:
                return

    def _height(self, tab: Tab, expression: str) -> int | None:
        """What `expression` gives in `tab` (a page's height); None if the page was left
        meanwhile (a redirect)."""
        try:
            return self._evaluate(expression, tab.session)
        except RuntimeError:
            return None

    def probe(self, page: Path) -> Visit:
        """Look at `page` again as readers with other screens would, in a tab of its own
        whose clock runs as fast as the page can go: open it on the first of SCREENS and give
        it LATE s, then scroll it to its end on each screen in turn (resizing it in place);
        return what it requested."""
        self.deadline = time.monotonic() + self.timeout
        tab = self.probe_tab
        visit = self.visits[tab.session] = Visit(tab.frame)
        for n, (width, scale) in enumerate(SCREENS):
            # mobile=False: a phone's width even where a page says nothing of its viewport
            self.call("Emulation.setDeviceMetricsOverride", tab.session, width=width,
                      height=900, deviceScaleFactor=scale, mobile=False)
            if n == 0:
                self.call("Emulation.setVirtualTimePolicy", tab.session, policy="pause")
                self.call("Page.navigate", tab.session, url=page.resolve().as_uri())
                self._run_clock(tab, LATE)
            self._scroll_to_end(tab, visit)
        return visit

    def rendered(self) -> str:
        """The open page's DOM once its fonts are ready and MathJax has typeset."""
        self._evaluate(self.SETTLED)
        return self._evaluate("document.documentElement.outerHTML")

    def screenshot(self, path: Path) -> int:
        """Write a PNG of the open page, full height (at most MAX_HEIGHT); return its height
        in px."""
        self.deadline = time.monotonic() + self.timeout
        height = min(self._evaluate(self.SETTLED), MAX_HEIGHT)
        self._viewport(height)  # the whole page in the viewport: lazy content renders too
        height = min(self._evaluate(self.SETTLED), MAX_HEIGHT)
        self._viewport(height)
        data = self.call("Page.captureScreenshot", self.session, format="png")["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))
        return height

    def close(self) -> None:
        self.deadline = time.monotonic() + 10
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
