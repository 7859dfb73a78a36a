"""The tenant portal in a real browser (G14).

Starts `hooklane serve` (the debug build the test command made) on a free
loopback port with a receiver beside it, mints portal links through the
API, and drives Debian's Chromium through Playwright: create an endpoint,
publish an event and see its delivery and attempt, replay a dead letter,
rotate and reveal a secret, set a content filter, a header and a bearer
token (never shown back) and see them at work, send a test event and
start a recovery, re-enable a suspended endpoint, and check that
a read-only session has no write controls and its writes are refused, that
an expired session says so and stops, and that a receiver's response
holding `<script>` and `<img onerror>` shows as text and nothing runs.
Then every page (endpoints, an endpoint, events, an event, dead letters)
at 1280 and 390 px: no text reading `null`, `undefined`, `NaN` or
`[object Object]`, no sideways scroll, no button over three lines of its
text, no console error or failed request on load, every in-portal link
leading to a page that is not an error; and the notice after Add and
Save is in view. A screenshot of each page at each width goes to the
folder given as the first argument.

Usage: python tests/browser/portal_test.py SCREENSHOT_DIR [aws]

With `aws`, `serve --backend aws` runs over the local AWS-compatible server
named in HOOKLANE_TEST_AWS_ENDPOINT (tests/run.sh starts it), with
resources of its own.
"""

import base64
import hashlib
import hmac
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from playwright.sync_api import expect, sync_playwright

TOKEN = "browser-test-token-0123456789"
PORTAL_KEY = "browser-test-portal-key-0123456789abcdef"
HOSTILE = '<script>window.__owned = 1</script><img src=x onerror="window.__owned = 2">'
DEADLINE = 30  # seconds any one wait may take


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Receiver(BaseHTTPRequestHandler):
    """`/ok` answers 204, `/hostile` 500 with markup in its body, `/gone`
    410 until `healed` is set (then 204)."""

    healed = threading.Event()
    seen = []
    # (path, authorization header, x-api-key header, JSON body) of each
    received = []

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length", 0)))
        Receiver.seen.append(self.path)
        try:
            doc = json.loads(body)
        except ValueError:
            doc = None
        Receiver.received.append((self.path, self.headers.get("authorization"),
                                  self.headers.get("x-api-key"), doc))
        if self.path == "/hostile":
            body = HOSTILE.encode()
            self.send_response(500)
            self.send_header("content-type", "text/html")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        gone = self.path == "/gone" and not Receiver.healed.is_set()
        self.send_response(410 if gone else 204)
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


class Api:
    def __init__(self, base):
        self.base = base

    def call(self, method, path, body=None, token=TOKEN):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.base + path, data=data, method=method)
        req.add_header("authorization", f"Bearer {token}")
        if data:
            req.add_header("content-type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                text = r.read()
                return r.status, json.loads(text) if text else None
        except urllib.error.HTTPError as e:
            text = e.read()
            return e.code, json.loads(text) if text else None

    def ok(self, method, path, body=None):
        status, out = self.call(method, path, body)
        assert 200 <= status < 300, f"{method} {path}: {status} {out}"
        return out

    def wait(self, what, check):
        end = time.monotonic() + DEADLINE
        while time.monotonic() < end:
            got = check()
            if got:
                return got
            time.sleep(0.2)
        raise AssertionError(f"timed out waiting for {what}")


def expired_link(base, tenant):
    payload = json.dumps({"t": tenant, "ro": False, "exp": int(time.time()) - 5}).encode()
    b64 = lambda b: base64.urlsafe_b64encode(b).rstrip(b"=").decode()
    p = b64(payload)
    tag = b64(hmac.new(PORTAL_KEY.encode(), p.encode(), hashlib.sha256).digest())
    return f"{base}/portal/#session=hlp_{p}.{tag}"


def start_server(workdir, backend):
    port = free_port()
    env = dict(os.environ)
    args = ["target/debug/hooklane", "serve"]
    if backend == "aws":
        endpoint = os.environ["HOOKLANE_TEST_AWS_ENDPOINT"]
        env.update({"AWS_ENDPOINT_URL": endpoint, "AWS_REGION": "us-east-1",
                    "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test"})
        args += ["--backend", "aws", "--create-resources",
                 "--resource-prefix", f"portal{port}"]
    env.update({
        "HOOKLANE_API_TOKEN": TOKEN,
        "HOOKLANE_PORTAL_KEY": PORTAL_KEY,
        "HOOKLANE_ALLOW_HTTP": "true",
        "HOOKLANE_ALLOW_PRIVATE_TARGETS": "true",
        "HOOKLANE_RETRY_SCHEDULE": "0s,1s",
        "HOOKLANE_RETRY_JITTER": "0",
        "HOOKLANE_SUSPEND_POLICY": "permanent=1/0s",
        "HOOKLANE_LISTEN": f"127.0.0.1:{port}",
        "HOOKLANE_DB": os.path.join(workdir, "portal.db"),
    })
    proc = subprocess.Popen(args, env=env,
                            stdout=open(os.path.join(workdir, "serve.log"), "w"), stderr=subprocess.STDOUT)
    api = Api(f"http://127.0.0.1:{port}")

    def healthy():
        try:
            with urllib.request.urlopen(api.base + "/healthz", timeout=1) as r:
                return r.status == 200
        except OSError:
            return False

    api.wait("serve to start", healthy)
    return proc, api


TOKEN_SECRET = "portal-bearer-never-shown"
WIDTHS = (1280, 390)
PAGES = ("endpoints", "new-endpoint", "endpoint", "attempt", "events", "event", "event-types", "dead-letters")

# Text nodes outside payloads and responses that a page must never show.
BAD_TEXT = r"""() => {
  const bad = [];
  const walk = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let n = walk.nextNode(); n; n = walk.nextNode()) {
    if (n.parentElement.closest("pre, code, script, style")) continue;
    if (/\b(null|undefined|NaN)\b|\[object Object\]/.test(n.textContent)) bad.push(n.textContent.trim());
  }
  return bad;
}"""

# Buttons taller than three lines of their own text.
TALL_BUTTONS = r"""() => [...document.querySelectorAll("button")].filter((b) => {
  const r = b.getBoundingClientRect();
  if (!r.height) return false;
  const cs = getComputedStyle(b);
  const line = parseFloat(cs.lineHeight) || parseFloat(cs.fontSize) * 1.45;
  const extra = parseFloat(cs.paddingTop) + parseFloat(cs.paddingBottom)
    + parseFloat(cs.borderTopWidth) + parseFloat(cs.borderBottomWidth);
  return r.height > 3 * line + extra + 1;
}).map((b) => b.textContent)"""


class Watch:
    """Console errors and failed requests of a page (4xx and 5xx answers
    included), since the last `clear`."""

    def __init__(self, page):
        self.problems = []
        page.on("console", lambda m: m.type == "error" and self.problems.append(f"console: {m.text}"))
        page.on("pageerror", lambda e: self.problems.append(f"page error: {e}"))
        page.on("requestfailed", lambda r: self.problems.append(f"failed: {r.url}"))
        page.on("response", lambda r: r.status >= 400 and self.problems.append(f"{r.status}: {r.url}"))

    def clear(self):
        self.problems.clear()


def load(page, watch, url):
    """Opens a portal page and waits for it to be drawn; nothing failed on
    the way."""
    watch.clear()
    page.goto(url)
    # A change of the address's fragment draws the page anew, after the
    # calls it makes: wait for the page drawn for this address.
    page.wait_for_function("() => document.getElementById('main').dataset.drawn === location.hash")
    expect(page.locator("main h1")).to_be_visible()
    expect(page.locator("main")).not_to_contain_text("Loading…")
    page.wait_for_load_state("networkidle")
    assert watch.problems == [], f"{url}: {watch.problems}"


# Buttons not wholly in the window without scrolling (a table's own
# sideways scroll included).
OFF_SCREEN_BUTTONS = r"""() => [...document.querySelectorAll("main button")].filter((b) => {
  const r = b.getBoundingClientRect();
  return r.width && (r.left < 0 || r.right > window.innerWidth + 1);
}).map((b) => b.textContent)"""


def look(page, watch, name, shots, width):
    """The visual checks of the page on screen, and its screenshot."""
    heading = page.locator("main h1").inner_text()
    assert heading != "Something went wrong", f"{name}: {page.locator('main').inner_text()}"
    assert page.evaluate(BAD_TEXT) == [], f"{name} at {width}px shows {page.evaluate(BAD_TEXT)}"
    wide = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    assert wide <= 0, f"{name} at {width}px scrolls sideways by {wide}px"
    assert page.evaluate(TALL_BUTTONS) == [], f"{name} at {width}px: buttons over three lines {page.evaluate(TALL_BUTTONS)}"
    assert page.evaluate(OFF_SCREEN_BUTTONS) == [], f"{name} at {width}px: buttons out of view {page.evaluate(OFF_SCREEN_BUTTONS)}"
    assert watch.problems == [], f"{name}: {watch.problems}"
    page.screenshot(path=f"{shots}/{name}-{width}.png", full_page=True)


def links_lead_somewhere(page, watch, base, name):
    """Every in-portal link on the page opens a page that is not an error."""
    hrefs = sorted(set(page.eval_on_selector_all("main a[href^='#/'], header a[href^='#/']",
                                                  "as => as.map((a) => a.getAttribute('href'))")))
    for href in hrefs:
        load(page, watch, base + href)
        heading = page.locator("main h1").inner_text()
        assert heading != "Something went wrong", f"{name}'s link {href}: {page.locator('main').inner_text()}"


def in_view(page, what):
    """The notice an action just brought is inside the viewport."""
    box = page.locator("#notice").bounding_box()
    height = page.evaluate("window.innerHeight")
    assert box and box["y"] >= 0 and box["y"] + box["height"] <= height, f"{what}: the notice is out of view ({box})"


def every_page(browser, shots, api, tenant, ids):
    """Each page at 1280 and 390 px: drawn without an error, a stray
    `null`, sideways scroll, a button over three lines, a console error or
    a failed request; every link on it leads to a page that is not an
    error; a screenshot of each."""
    link = session_link(api, tenant, False)
    attempt = api.ok("GET", f"/v1/tenants/{tenant}/subscriptions/{ids['endpoint']}/attempts?limit=1")["items"][0]["id"]
    for width in WIDTHS:
        page = browser.new_page(viewport={"width": width, "height": 900})
        watch = Watch(page)
        load(page, watch, link)
        base = page.url.split("#")[0]
        hashes = {"endpoints": "#/endpoints", "new-endpoint": "#/endpoints/new",
                  "endpoint": f"#/endpoints/{ids['endpoint']}",
                  "attempt": f"#/endpoints/{ids['endpoint']}/attempts/{attempt}",
                  "events": "#/events", "event": f"#/events/{ids['event']}", "dead-letters": "#/dead-letters",
                  "event-types": "#/event-types"}
        load(page, watch, base + "#/event-types")
        expect(page.locator("#event-types")).to_contain_text("An order was paid")
        assert "webhook.test" not in page.locator("#event-types").inner_text(), "a test event's type is listed"
        for name in PAGES:
            load(page, watch, base + hashes[name])
            look(page, watch, name, shots, width)
            links_lead_somewhere(page, watch, base, name)
        # An end time before every event lists none; an id opens its event.
        load(page, watch, base + "#/events")
        page.fill("#until", "2020-01-01 00:00")
        page.click("button:text('Filter')")
        expect(page.locator("main")).to_contain_text("No events.")
        load(page, watch, base + "#/events")
        page.fill("#event-id", ids["event"])
        page.click("button:text('Filter')")
        expect(page.locator("#payload")).to_be_visible()
        # The attempt log by outcome.
        load(page, watch, base + f"#/endpoints/{ids['endpoint']}")
        page.select_option("#attempt-outcome", "failed")
        expect(page.locator("#attempts tbody")).not_to_contain_text("delivered 204")
        expect(page.locator("#attempts tbody")).to_contain_text("410")
        page.select_option("#attempt-outcome", "delivered")
        expect(page.locator("#attempts tbody")).not_to_contain_text("410")
        # An event search by a pattern says what to write instead.
        load(page, watch, base + "#/events")
        page.fill("#type", "invoice.*")
        page.click("button:text('Filter')")
        expect(page.locator("#notice")).to_contain_text("one exact type")
        expect(page.get_by_role("heading", name="Events")).to_be_visible()
        page.close()


def ok_requests(kind=None):
    return [r for r in Receiver.received if r[0] == "/ok" and (kind is None or (r[3] or {}).get("type") == kind)]


def endpoint_options(page, shots, api, tenant):
    """On the /ok endpoint's page: a filter, a header and a bearer token set
    through the edit form, shown back without the token, and at work; then
    a test event and a recovery from the Tools section."""
    page.fill("#filter", '{"data": {"total": {"$gte": 100}}}')
    page.fill("#headers", "X-Api-Key: k_portal_1")
    page.select_option("#auth-type", "bearer")
    page.fill("#auth-secret", TOKEN_SECRET)
    page.click("button:text('Save')")
    expect(page.locator("#notice")).to_contain_text("Saved")
    in_view(page, "Save")
    expect(page.locator("main")).to_contain_text("Authorization: bearer")
    expect(page.locator("#filter-view")).to_contain_text('"$gte": 100')
    assert TOKEN_SECRET not in page.content(), "the token is shown back"
    assert page.input_value("#auth-secret") == "", "the token is put back in its field"
    before = len(ok_requests("order.paid"))
    api.ok("POST", f"/v1/tenants/{tenant}/events", {"type": "order.paid", "data": {"total": 7}})
    api.ok("POST", f"/v1/tenants/{tenant}/events", {"type": "order.paid", "data": {"total": 700}})
    api.wait("the filtered delivery", lambda: len(ok_requests("order.paid")) > before)
    page.click("#send-test")
    expect(page.locator("#notice")).to_contain_text("Test event evt_")
    api.wait("the test event", lambda: ok_requests("webhook.test"))
    time.sleep(0.5)
    paid = ok_requests("order.paid")[before:]
    assert [r[3]["data"]["total"] for r in paid] == [700], f"the filter let through {paid}"
    for r in paid + ok_requests("webhook.test"):
        assert r[1] == f"Bearer {TOKEN_SECRET}" and r[2] == "k_portal_1", f"sent without them: {r[:3]}"
    # A test event of a catalog type, its example as the data to start from.
    page.select_option("#test-type", "order.paid")
    assert json.loads(page.input_value("#test-data")) == {"order": "or_1", "total": 42}
    page.fill("#test-data", '{"order": "or_9", "total": 9}')
    seen = len(ok_requests("order.paid"))
    page.click("#send-test")
    expect(page.locator("#notice")).to_contain_text("Test event evt_")
    api.wait("the typed test event", lambda: len(ok_requests("order.paid")) > seen)
    assert ok_requests("order.paid")[-1][3]["data"] == {"order": "or_9", "total": 9}
    page.fill("#test-data", "{not json")
    page.click("#send-test")
    expect(page.locator("#notice")).to_contain_text("Test data: write it as JSON")
    page.click("#recover")
    expect(page.locator("#notice")).to_contain_text("Recovering:")
    page.reload()
    expect(page.locator("#tools")).to_be_visible()
    page.screenshot(path=f"{shots}/endpoint-options.png", full_page=True)


def paging(browser, api, tenant, receiver_base):
    """Past a page of 50 endpoints, "More endpoints" brings the next page,
    and the pages' rows are each endpoint once."""
    before = len(api.ok("GET", f"/v1/tenants/{tenant}/subscriptions?limit=250")["items"])
    for n in range(55):
        api.ok("POST", f"/v1/tenants/{tenant}/subscriptions",
               {"url": f"{receiver_base}/page/{n}", "event_types": ["paging.none"]})
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    watch = Watch(page)
    load(page, watch, session_link(api, tenant, True))
    rows = page.locator("#endpoints tbody tr")
    expect(rows).to_have_count(50)
    page.click("button:text('More endpoints')")
    expect(rows).to_have_count(before + 55)
    assert not page.locator("button:text('More endpoints')").is_visible(), "a third page of nothing"
    urls = page.eval_on_selector_all("#endpoints tbody a", "as => as.map((a) => a.textContent)")
    assert len(set(urls)) == len(urls) == before + 55, f"{len(urls)} rows, {len(set(urls))} endpoints"
    assert watch.problems == [], watch.problems
    page.close()


def session_link(api, tenant, read_only, looks=None):
    body = dict({"read_only": read_only}, **(looks or {}))
    return api.ok("POST", f"/v1/tenants/{tenant}/portal-sessions", body)["url"]


def themed(browser, shots, api, tenant, endpoint):
    """The looks a portal link asks for: dark, the platform's brand colour
    on buttons, compact for an iframe; each page still passes the visual
    checks, with no console error (the colours are set without inline
    style or script, under the strict CSP)."""
    link = session_link(api, tenant, False, {"theme": "dark", "brand_color": "#E0457B"})
    for width in WIDTHS:
        page = browser.new_page(viewport={"width": width, "height": 900})
        watch = Watch(page)
        load(page, watch, link.replace("#session=", "&compact=1#session="))
        base = page.url.split("#")[0]
        assert "theme=dark" in base, base
        for name, at in (("endpoints", "#/endpoints"), ("endpoint", f"#/endpoints/{endpoint}")):
            load(page, watch, base + at)
            background = page.evaluate("getComputedStyle(document.body).backgroundColor")
            assert background == "rgb(16, 20, 29)", f"dark {name}: the background is {background}"
            button = page.evaluate("getComputedStyle(document.querySelector('main button, main a.button')).backgroundColor")
            assert button == "rgb(224, 69, 123)", f"the brand colour: buttons are {button}"
            assert not page.locator("header > strong").is_visible(), "compact keeps the title"
            look(page, watch, f"dark-{name}", shots, width)
        page.close()
    # A link without looks is light.
    page = browser.new_page()
    watch = Watch(page)
    load(page, watch, session_link(api, tenant, True))
    assert page.evaluate("getComputedStyle(document.body).backgroundColor") == "rgb(246, 247, 250)"
    page.close()


def run(shots, api, receiver_base):
    tenant = "acme"
    api.ok("PUT", f"/v1/tenants/{tenant}/event-types/order.paid",
           {"description": "An order was paid", "example": {"order": "or_1", "total": 42}})
    hostile = api.ok("POST", f"/v1/tenants/{tenant}/subscriptions",
                     {"url": f"{receiver_base}/hostile", "event_types": ["hostile.*"]})
    gone = api.ok("POST", f"/v1/tenants/{tenant}/subscriptions",
                  {"url": f"{receiver_base}/gone", "event_types": ["gone.*"]})
    api.ok("POST", f"/v1/tenants/{tenant}/events", {"type": "hostile.sent", "data": {"note": HOSTILE}})
    api.ok("POST", f"/v1/tenants/{tenant}/events", {"type": "gone.sent", "data": {}})
    # Behind it on the lane: held once the first failure suspends the endpoint.
    held = api.ok("POST", f"/v1/tenants/{tenant}/events", {"type": "gone.sent", "data": {"n": 2}})
    api.wait("the hostile delivery to park", lambda: api.ok(
        "GET", f"/v1/tenants/{tenant}/dead-letters?subscription_id={hostile['id']}")["items"])
    api.wait("the gone endpoint to be suspended", lambda: api.ok(
        "GET", f"/v1/tenants/{tenant}/subscriptions/{gone['id']}")["status"] == "suspended")

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=os.environ.get("HOOKLANE_CHROMIUM", "/usr/bin/chromium"),
                                    args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        dialogs = []
        page.on("dialog", lambda d: (dialogs.append(d.message), d.accept()))
        page.goto(session_link(api, tenant, False))
        expect(page.get_by_role("heading", name="Endpoints")).to_be_visible()
        assert "session=" not in page.url, "the session left the address bar"
        page.screenshot(path=f"{shots}/endpoints.png", full_page=True)

        # The list is a list: the add form is a page of its own.
        assert page.locator("#create-endpoint").count() == 0, "the add form takes over the list"
        page.click("#add-endpoint")
        expect(page.get_by_role("heading", name="Add an endpoint")).to_be_visible()
        # The catalog's types to pick from, with their descriptions.
        expect(page.locator("#type-picker")).to_contain_text("order.paid — An order was paid")
        page.check("#pick-order\\.paid")
        assert page.input_value("#types") == "order.paid", page.input_value("#types")
        page.uncheck("#pick-order\\.paid")
        assert page.input_value("#types") == "", page.input_value("#types")
        # Create an endpoint, by keyboard: Tab moves through the form (the
        # picker's boxes included) and Enter submits it.
        page.focus("#url")
        page.keyboard.type(f"{receiver_base}/ok")
        page.keyboard.press("Tab")
        page.keyboard.press("Control+A")
        page.keyboard.type("order.*")
        for _ in range(10):
            page.keyboard.press("Tab")
            if page.evaluate("document.activeElement.id") == "description":
                break
        page.keyboard.type("orders")
        page.keyboard.press("Enter")
        # Its page, with its signing secret shown this once.
        expect(page.get_by_role("heading", name=f"{receiver_base}/ok")).to_be_visible()
        expect(page.locator("#notice")).to_contain_text("Endpoint added")
        in_view(page, "Add endpoint")
        shown = page.locator("#new-secret code").inner_text()
        new_id = page.url.split("#/endpoints/")[1]
        kept = api.ok("GET", f"/v1/tenants/{tenant}/subscriptions/{new_id}/secret")["secret"]
        assert shown.startswith("whsec_") and shown == kept, f"shown {shown!r}, kept {kept!r}"
        page.screenshot(path=f"{shots}/new-endpoint-secret.png", full_page=True)
        page.reload()
        expect(page.get_by_role("heading", name=f"{receiver_base}/ok")).to_be_visible()
        assert page.locator("#new-secret").count() == 0, "the secret is shown again"
        page.goto(page.url.split("#")[0] + "#/endpoints")
        expect(page.get_by_role("link", name=f"{receiver_base}/ok")).to_be_visible()

        # Publish an event; see its delivery and attempt.
        event = api.ok("POST", f"/v1/tenants/{tenant}/events", {"type": "order.paid", "data": {"total": 42}})
        api.wait("the delivery", lambda: "/ok" in Receiver.seen)
        page.click(f"text={receiver_base}/ok")
        expect(page.locator("#attempts")).to_contain_text("delivered")
        expect(page.locator("#attempts")).to_contain_text("order.paid")
        # Its statistics: the summary, a bar per hour, a row per day.
        expect(page.locator("#stats")).to_contain_text("Last 24 hours: 1 attempt, 100 % delivered")
        assert page.locator("#stats svg g").count() == 24, "a bar per hour"
        assert page.locator("#stats svg text").count() >= 6, "the axes' labels"
        assert page.locator("#daily tbody tr").count() == 7, "a row per day"
        page.screenshot(path=f"{shots}/endpoint.png", full_page=True)
        # An attempt's page: the request sent and the response.
        page.locator("#attempts tbody a[href*='/attempts/']").first.click()
        expect(page.get_by_role("heading", name="Attempt 1 of order.paid")).to_be_visible()
        expect(page.locator("#request-body")).to_contain_text('"total": 42')
        expect(page.locator("#request-headers")).to_contain_text("webhook-id")
        expect(page.locator("#response-headers")).to_contain_text("kept for failed attempts only")
        page.screenshot(path=f"{shots}/attempt.png", full_page=True)
        page.go_back()
        expect(page.locator("#attempts")).to_be_visible()

        # Rotate, then reveal, the secret.
        page.click("button:text('Rotate')")
        expect(page.locator("#secret")).to_contain_text("whsec_")
        rotated = page.locator("#secret").inner_text()
        page.click("button:text('Reveal')")
        expect(page.locator("#secret")).to_have_text(rotated)

        endpoint_options(page, shots, api, tenant)

        # The event and its delivery.
        page.goto(page.url.split("#")[0] + "#/events")
        expect(page.get_by_role("heading", name="Events")).to_be_visible()
        expect(page.locator("main")).to_contain_text("hostile.sent")
        page.screenshot(path=f"{shots}/events.png", full_page=True)
        page.click(f"text={event['id']}")
        expect(page.locator("#payload")).to_contain_text('"total": 42')
        expect(page.locator("main")).to_contain_text("delivered")
        page.screenshot(path=f"{shots}/event.png", full_page=True)

        # The hostile endpoint's attempts show its response as text.
        page.goto(page.url.split("#")[0] + f"#/endpoints/{hostile['id']}")
        expect(page.locator("#attempts")).to_contain_text("<script>window.__owned = 1</script>")
        assert page.evaluate("window.__owned") is None, "markup from a response ran"
        assert page.locator("main img").count() == 0, "markup from a response became an element"
        page.screenshot(path=f"{shots}/hostile-endpoint.png", full_page=True)

        # Replay the dead letter.
        page.goto(page.url.split("#")[0] + "#/dead-letters")
        expect(page.locator("#dead-letters")).to_contain_text("hostile.sent")
        page.screenshot(path=f"{shots}/dead-letters.png", full_page=True)
        seen = Receiver.seen.count("/hostile")
        row = page.locator("#dead-letters tr", has_text="hostile.sent")
        row.get_by_role("button", name="Replay", exact=True).click()
        expect(page.locator("#notice")).to_contain_text("replayed")
        api.wait("the replayed attempt", lambda: Receiver.seen.count("/hostile") > seen)

        # Re-enable the suspended endpoint once it answers again.
        # The delivery behind the failure shows as held, not as a retry due.
        page.goto(page.url.split("#")[0] + f"#/events/{held['id']}")
        expect(page.locator("main")).to_contain_text("held (endpoint suspended)")
        expect(page.locator("main")).not_to_contain_text("retrying")
        page.goto(page.url.split("#")[0] + f"#/endpoints/{gone['id']}")
        expect(page.locator("#suspended")).to_contain_text("Suspended")
        page.screenshot(path=f"{shots}/suspended.png", full_page=True)
        page.click("button:text('Re-enable')")
        # The probe's result: refused with the receiver's status.
        expect(page.locator("#notice")).to_contain_text("410")
        expect(page.locator("#suspended")).to_be_visible()
        Receiver.healed.set()
        page.click("button:text('Re-enable')")
        expect(page.locator("#notice")).to_contain_text("active again")
        expect(page.locator("main")).to_contain_text("active")
        assert dialogs == [], f"dialogs opened: {dialogs}"

        # The probe's row in the attempt log names the probe and links
        # nowhere.
        attempts = page.locator("#attempts")
        expect(attempts).to_contain_text("endpoint.probe")
        assert attempts.locator("a[href*='probe_']").count() == 0, "the probe's row links to an event"
        every_page(browser, shots, api, tenant, {"endpoint": gone["id"], "event": event["id"]})

        themed(browser, shots, api, tenant, gone["id"])
        paging(browser, api, tenant, receiver_base)

        # A read-only session: no write controls, and writes refused.
        ro = browser.new_page(viewport={"width": 390, "height": 844})
        ro.goto(session_link(api, tenant, True))
        expect(ro.get_by_role("heading", name="Endpoints")).to_be_visible()
        assert ro.locator("#add-endpoint").count() == 0, "a read-only session can add endpoints"
        ro.screenshot(path=f"{shots}/read-only-phone.png", full_page=True)
        ro.goto(ro.url.split("#")[0] + f"#/endpoints/{hostile['id']}")
        expect(ro.locator("#attempts")).to_be_visible()
        for label in ("Rotate", "Reveal", "Delete endpoint", "Save", "Send test event", "Recover"):
            assert ro.locator(f"button:text('{label}')").count() == 0, f"read-only shows {label}"
        status = ro.evaluate("""async (tenant) => {
            const token = sessionStorage.getItem('hooklane.session');
            const r = await fetch(`/portal/api/v1/tenants/${tenant}/subscriptions`, {method: 'POST',
              headers: {authorization: `Bearer ${token}`, 'content-type': 'application/json'},
              body: JSON.stringify({url: 'https://example.com/x', event_types: ['*']})});
            return r.status;
        }""", tenant)
        assert status == 403, f"a read-only session's write answered {status}"

        # An expired session says so and stops.
        old = browser.new_page()
        old.goto(expired_link(api.base, tenant))
        expect(old.get_by_role("heading", name="Session ended")).to_be_visible()
        expect(old.locator("#notice")).to_contain_text("expired")
        old.screenshot(path=f"{shots}/expired.png")
        browser.close()


def main():
    shots = sys.argv[1] if len(sys.argv) > 1 else "target/portal-screenshots"
    backend = sys.argv[2] if len(sys.argv) > 2 else "embedded"
    os.makedirs(shots, exist_ok=True)
    receiver = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    receiver_base = f"http://127.0.0.1:{receiver.server_address[1]}"
    with tempfile.TemporaryDirectory() as workdir:
        proc, api = start_server(workdir, backend)
        try:
            run(shots, api, receiver_base)
        except Exception:
            print(open(os.path.join(workdir, "serve.log")).read()[-4000:], file=sys.stderr)
            raise
        finally:
            proc.terminate()
            proc.wait(timeout=10)
    print(f"portal browser test passed on the {backend} backend; screenshots in {shots}")


if __name__ == "__main__":
    main()
