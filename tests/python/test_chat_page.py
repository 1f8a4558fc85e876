"""The chat page of `specdec serve` (GET /) in a real browser: Debian's headless Chromium.

Starts the server on the CI model (drafting for itself, -d with the same file,
as test_server.py's speculative server does) on a free loopback port with an
API key, and
Chromium with a DevTools port; drives the page over the DevTools protocol
(websocket-client from PyPI): enters the API key, types a message, presses
Enter and waits for the streamed answer. Checks that the page shows the
server's own answer (equal to the non-streamed reply), that a drafting method
gives both token kinds in the DOM (span.tok.draft and span.tok.target) with
live tok/s and accept length, that AR gives only target tokens, and that a
request the server refuses (an unknown method) shows its 400 in the page.
Screenshots are kept under reports/ (gitignored); their paths are printed.
About 15 s on 2 cores.
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
import websocket  # websocket-client

from conftest import DEFAULT_MODEL, REPO_ROOT, model_path
from test_server import KEY, Server

PROMPT = "Name three colours of the rainbow and say one thing about each."
N = 48
REPORTS = REPO_ROOT / "reports"


def chromium_binary() -> str:
    path = shutil.which("chromium") or "/usr/bin/chromium"
    if not os.path.exists(path):
        pytest.fail("chromium is missing: install it with scripts/setup.sh test (Debian's chromium)", pytrace=False)
    return path


class Browser:
    """Headless Chromium and one page, driven over the DevTools protocol."""

    def __init__(self, profile: Path):
        # A file, not a pipe: nobody reads Chromium's log while it runs, and a full pipe would stall it.
        self.log = tempfile.TemporaryFile("w+b")
        self.proc = subprocess.Popen(
            [chromium_binary(), "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
             "--no-first-run", "--no-default-browser-check", "--no-proxy-server", "--disable-extensions",
             "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0", f"--user-data-dir={profile}",
             "--window-size=1280,900", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=self.log)
        self.ws = None
        self.next_id = 0
        try:
            # Chromium writes the port it took into the profile.
            port_file = profile / "DevToolsActivePort"
            deadline = time.time() + 30
            while not (port_file.exists() and port_file.read_text().count("\n") >= 1):
                if self.proc.poll() is not None:
                    self.log.seek(0)
                    pytest.fail(f"chromium exited: {self.log.read().decode(errors='replace')[-2000:]}", pytrace=False)
                if time.time() > deadline:
                    pytest.fail("chromium did not open its DevTools port within 30 s", pytrace=False)
                time.sleep(0.1)
            port = int(port_file.read_text().splitlines()[0])
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            conn.request("GET", "/json/list")
            targets = json.loads(conn.getresponse().read())
            conn.close()
            page = next(t for t in targets if t["type"] == "page")
            self.ws = websocket.create_connection(page["webSocketDebuggerUrl"], timeout=180, suppress_origin=True)
        except BaseException:
            self.close()  # nothing else would end it
            raise

    def call(self, method: str, **params) -> dict:
        self.next_id += 1
        my_id = self.next_id
        self.ws.send(json.dumps({"id": my_id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == my_id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg["result"]

    def js(self, expression: str):
        r = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in r:
            raise RuntimeError(f"{expression}: {r['exceptionDetails']}")
        return r["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 180) -> None:
        deadline = time.time() + timeout
        while not self.js(expression):
            if time.time() > deadline:
                state = self.js("document.body ? document.body.dataset.state + ': ' + "
                                "document.getElementById('log').innerText.slice(-1500) : ''")
                pytest.fail(f"timed out waiting for {expression}; page state and log:\n{state}", pytrace=False)
            time.sleep(0.1)

    def type_into(self, selector: str, text: str) -> None:
        self.js(f"document.querySelector({json.dumps(selector)}).focus()")
        self.call("Input.insertText", text=text)

    def press_enter(self) -> None:
        for kind in ("keyDown", "keyUp"):
            self.call("Input.dispatchKeyEvent", type=kind, key="Enter", code="Enter", windowsVirtualKeyCode=13,
                      nativeVirtualKeyCode=13, **({"text": "\r"} if kind == "keyDown" else {}))

    def screenshot(self, path: Path) -> None:
        data = self.call("Page.captureScreenshot", format="png")["data"]
        path.write_bytes(base64.b64decode(data))

    def close(self) -> None:
        try:
            if self.ws:
                self.ws.close()
        finally:
            if self.proc.poll() is None:
                self.proc.terminate()
                try:
                    self.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait(timeout=10)
            self.log.close()


# The last assistant message: its text, token spans by kind, and the live figures.
LAST_ANSWER = """(() => {
  const all = document.querySelectorAll('.msg.assistant');
  const m = all[all.length - 1];
  return { text: m.querySelector('.body').textContent,
           draft: m.querySelectorAll('span.tok.draft').length,
           target: m.querySelectorAll('span.tok.target').length,
           failed: m.classList.contains('failed'), meta: m.querySelector('.meta').textContent,
           tokens: document.getElementById('stat-tokens').textContent,
           tps: document.getElementById('stat-tps').textContent,
           accept: document.getElementById('stat-accept').textContent,
           error: document.getElementById('error').style.display === 'block'
                  ? document.getElementById('error').textContent : '' };
})()"""


def ask(b: Browser, method: str, text: str) -> dict:
    n_before = b.js("document.querySelectorAll('.msg.assistant').length")
    b.js(f"document.getElementById('method').value = {json.dumps(method)}")
    b.js(f"document.getElementById('max-tokens').value = '{N}'")
    b.js("document.getElementById('draft-k').value = '4'")
    b.type_into("#input", text)
    b.press_enter()
    b.wait_for(f"document.querySelectorAll('.msg.assistant').length > {n_before} && "
               "document.body.dataset.state === 'idle'")
    return b.js(LAST_ANSWER)


def reference_reply(srv: Server, messages: list[dict], method: str) -> str:
    body = {"messages": messages, "max_tokens": N, "temperature": 0, "specdec": {"method": method, "draft_k": 4}}
    status, raw = srv.request("POST", "/v1/chat/completions", json.dumps(body), timeout=120)
    assert status == 200, raw
    return json.loads(raw)["choices"][0]["message"]["content"]


def test_chat_page_streams_and_colours_tokens(tmp_path, monkeypatch):
    for var in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(var, raising=False)
    REPORTS.mkdir(exist_ok=True)
    t0 = time.time()
    srv = Server("--max-batch", "2", "-d", str(model_path(DEFAULT_MODEL)), "--method", "auto", "--draft-k", "4")
    b = None
    try:
        # The page itself needs no key; the API behind it does.
        status, html = srv.request("GET", "/", auth=False)
        assert status == 200 and b"specdec chat" in html
        t_server = time.time() - t0
        b = Browser(tmp_path / "chromium-profile")
        t_browser = time.time() - t0
        b.call("Page.enable")
        b.call("Page.navigate", url=f"http://127.0.0.1:{srv.port}/")
        b.wait_for("document.body && document.body.dataset.state === 'idle'")
        # Without the key the page says what the server answered.
        assert "HTTP 401" in b.js("document.getElementById('error').textContent")
        b.type_into("#api-key", KEY)
        b.js("document.getElementById('api-key').dispatchEvent(new Event('change'))")
        b.wait_for("document.getElementById('model').textContent.includes('context')")
        methods = b.js("[...document.querySelectorAll('#method option')].filter(o => !o.disabled).map(o => o.value)")
        assert set(methods) == {"", "auto", "ar", "chain", "tree", "ngram", "ssd"}

        # A drafting method: the answer streams in, both token kinds coloured.
        t_ready = time.time() - t0
        chain = ask(b, "chain", PROMPT)
        t_chain = time.time() - t0
        shot = REPORTS / "chat_page.png"
        b.screenshot(shot)
        print(f"\nscreenshot: {shot}")
        history = [{"role": "user", "content": PROMPT}]
        assert not chain["failed"] and not chain["error"], chain
        assert chain["text"] == reference_reply(srv, history, "chain")
        assert chain["draft"] > 0 and chain["target"] > 0, chain
        assert int(chain["tokens"]) == N
        assert float(chain["tps"]) > 0 and float(chain["accept"]) > 1.0, chain
        print(f"chain: {chain['draft']} draft spans, {chain['target']} target spans; {chain['meta']}")

        # AR: every token the target's (the conversation goes on: two turns of history).
        follow_up = "Now name one more."
        ar = ask(b, "ar", follow_up)
        history += [{"role": "assistant", "content": chain["text"]}, {"role": "user", "content": follow_up}]
        assert ar["text"] == reference_reply(srv, history, "ar")
        assert ar["draft"] == 0 and ar["target"] > 0, ar
        assert float(ar["accept"]) == 1.0

        # An unknown method (not offered by the page: added here as a hand-edited page could): the
        # server's 400 is shown, and the page stays usable.
        b.js("(() => { const o = document.createElement('option'); o.value = 'medusa'; o.textContent = 'medusa';"
             " document.getElementById('method').appendChild(o); })()")
        bad = ask(b, "medusa", "Hello?")
        assert bad["failed"], bad
        assert "HTTP 400" in bad["error"] and "method medusa not available" in bad["error"], bad
        assert "method_not_available" in bad["error"]
        shot_err = REPORTS / "chat_page_error.png"
        b.screenshot(shot_err)
        print(f"screenshot: {shot_err}")
        assert b.js("document.getElementById('send').disabled") is False
    finally:
        if b:
            b.close()
        srv.stop()
    print(f"chat page test: {time.time() - t0:.1f} s (server up {t_server:.1f} s, browser {t_browser:.1f} s, "
          f"page ready {t_ready:.1f} s, chain answer {t_chain:.1f} s)")
