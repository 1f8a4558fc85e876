// The chat page's document (see chat_page.h). Kept as one raw string so the
// binary serves it with no file next to it; plain JavaScript, no framework.
//
// What the page relies on from the server: GET /v1/models (model id, context,
// and the `specdec` extension listing the methods a request may name), and
// POST /v1/chat/completions with stream: true, stream_options.include_usage
// and `specdec: {method, draft_k, provenance: true}`. Each chunk then carries
// specdec.provenance (the delta's text split by token, each part "draft" or
// "target") and specdec.tokens (completion tokens of each kind since the last
// chunk): the page colours the parts and counts the tokens.
//
// Hooks the browser test reads (tests/python/test_chat_page.py): body's
// data-state (loading, idle, streaming), #method, #draft-k, #max-tokens,
// #input, #send, .msg.assistant with span.tok.draft / span.tok.target,
// #stat-tokens, #stat-tps, #stat-accept and #error.
#include "server/chat_page.h"

namespace specdec::server {

namespace {
constexpr std::string_view kPage = R"specdec_page(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>specdec chat</title>
<style>
  :root { --draft: #c8efcf; --draft-edge: #2e9e4a; --target: #dfe7fb; --target-edge: #4a6fd1; --fg: #1d2330;
          --muted: #6b7385; --line: #dde1ea; --bg: #f6f7fa; }
  * { box-sizing: border-box; }
  body { margin: 0; font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--fg);
         background: var(--bg); display: flex; flex-direction: column; height: 100vh; }
  header { display: flex; align-items: center; gap: 16px; padding: 10px 18px; background: #fff;
           border-bottom: 1px solid var(--line); flex-wrap: wrap; }
  header h1 { font-size: 17px; margin: 0; }
  header .model { color: var(--muted); font-size: 13px; }
  .stats { margin-left: auto; display: flex; gap: 18px; font-size: 13px; }
  .stats div { text-align: right; }
  .stats b { display: block; font-size: 18px; font-variant-numeric: tabular-nums; }
  .legend { display: flex; gap: 10px; font-size: 13px; color: var(--muted); align-items: center; }
  .legend span.tok { padding: 1px 6px; }
  main { flex: 1; overflow-y: auto; padding: 18px; }
  .msg { max-width: 860px; margin: 0 auto 14px; padding: 10px 14px; border-radius: 10px; background: #fff;
         border: 1px solid var(--line); white-space: pre-wrap; word-wrap: break-word; }
  .msg.user { background: #eef0f5; }
  .msg .who { font-size: 12px; color: var(--muted); margin-bottom: 4px; white-space: normal; }
  .msg .meta { font-size: 12px; color: var(--muted); margin-top: 6px; white-space: normal; }
  .msg.failed { border-color: #d33; }
  span.tok { border-radius: 3px; }
  span.tok.draft { background: var(--draft); box-shadow: inset 0 -2px 0 var(--draft-edge); }
  span.tok.target { background: var(--target); box-shadow: inset 0 -2px 0 var(--target-edge); }
  body.plain span.tok { background: none; box-shadow: none; }
  #error { display: none; max-width: 860px; margin: 0 auto 14px; padding: 10px 14px; border-radius: 10px;
           background: #fde8e8; border: 1px solid #d33; color: #8a1111; white-space: pre-wrap; }
  footer { background: #fff; border-top: 1px solid var(--line); padding: 10px 18px; }
  .controls { max-width: 860px; margin: 0 auto; display: flex; flex-wrap: wrap; gap: 10px; align-items: center;
              font-size: 13px; color: var(--muted); }
  .controls label { display: flex; gap: 6px; align-items: center; }
  .controls input[type=number] { width: 72px; }
  .controls input[type=password] { width: 120px; }
  .compose { max-width: 860px; margin: 8px auto 0; display: flex; gap: 8px; }
  textarea { flex: 1; resize: vertical; min-height: 44px; font: inherit; padding: 8px 10px; border-radius: 8px;
             border: 1px solid var(--line); }
  button { font: inherit; padding: 8px 16px; border-radius: 8px; border: 1px solid var(--target-edge);
           background: var(--target-edge); color: #fff; cursor: pointer; }
  button.secondary { background: #fff; color: var(--fg); border-color: var(--line); }
  button:disabled { opacity: .5; cursor: default; }
</style>
</head>
<body data-state="loading">
<header>
  <h1>specdec chat</h1>
  <span class="model" id="model">connecting...</span>
  <span class="legend">tokens: <span class="tok draft">accepted draft</span>
    <span class="tok target">target</span></span>
  <div class="stats">
    <div>tokens<b id="stat-tokens">0</b></div>
    <div>draft-accepted<b id="stat-draft">0</b></div>
    <div>tok/s<b id="stat-tps">-</b></div>
    <div>accept length<b id="stat-accept">-</b></div>
  </div>
</header>
<main id="log">
  <div id="error" role="alert"></div>
</main>
<footer>
  <div class="controls">
    <label>method <select id="method"></select></label>
    <label title="chain and ngram: draft length; ssd: K (empty: the server's default)">draft k
      <input id="draft-k" type="number" min="1" max="64" placeholder="server"></label>
    <label>max tokens <input id="max-tokens" type="number" min="1" value="256"></label>
    <label>temperature <input id="temperature" type="number" min="0" max="2" step="0.1" value="0"></label>
    <label><input id="colours" type="checkbox" checked> colour tokens</label>
    <label>API key <input id="api-key" type="password" placeholder="(none)"></label>
    <button class="secondary" id="clear" type="button">New chat</button>
  </div>
  <div class="compose">
    <textarea id="input" rows="2" placeholder="Message (Enter sends, Shift+Enter: new line)"></textarea>
    <button id="send" type="button">Send</button>
    <button class="secondary" id="stop" type="button" disabled>Stop</button>
  </div>
</footer>
<script>
"use strict";
const $ = (id) => document.getElementById(id);
const ALL_METHODS = ["auto", "ar", "chain", "tree", "ngram", "ssd"];
let modelId = null;
let history = [];      // the conversation sent with each request
let controller = null; // aborts the running request

function setState(s) { document.body.dataset.state = s; }

function headers() {
  const h = { "Content-Type": "application/json" };
  const key = $("api-key").value.trim();
  if (key) h["Authorization"] = "Bearer " + key;
  return h;
}

function showError(text) {
  const e = $("error");
  e.textContent = text;
  e.style.display = text ? "block" : "none";
  if (text) {
    $("log").appendChild(e);  // under the message it belongs to
    e.scrollIntoView({ block: "end" });
  }
}

// An error answer ({"error": {...}}) as one line: status, message, code.
async function errorText(res) {
  let msg = res.statusText, code = "";
  try {
    const j = await res.json();
    if (j && j.error) { msg = j.error.message; code = j.error.code || ""; }
  } catch (_) { /* not JSON: keep the status text */ }
  return "HTTP " + res.status + ": " + msg + (code ? " (" + code + ")" : "");
}

async function loadModel() {
  try {
    const res = await fetch("/v1/models", { headers: headers() });
    if (!res.ok) throw new Error(await errorText(res));
    const m = (await res.json()).data[0];
    modelId = m.id;
    const ext = m.specdec || { methods: ["ar"], default_method: "ar" };
    $("model").textContent = m.id + " \u00b7 context " + m.context_length + " tokens";
    const sel = $("method");
    const keep = sel.value;  // a reload (new API key) keeps the user's choice
    sel.textContent = "";
    const def = document.createElement("option");
    def.value = "";
    def.textContent = "server default (" + ext.default_method + ")";
    sel.appendChild(def);
    for (const name of ALL_METHODS) {
      const o = document.createElement("option");
      o.value = name;
      const ok = ext.methods.includes(name);
      o.textContent = ok ? name : name + " (needs a draft: -d)";
      o.disabled = !ok;
      sel.appendChild(o);
    }
    if (keep && ext.methods.includes(keep)) sel.value = keep;
    showError("");
    setState("idle");
  } catch (e) {
    $("model").textContent = "not connected";
    showError(String(e.message || e) + "\n(an API key? enter it below, then reload)");
    setState("idle");
  }
}

function addMessage(role, text) {
  const div = document.createElement("div");
  div.className = "msg " + role;
  const who = document.createElement("div");
  who.className = "who";
  who.textContent = role === "user" ? "you" : "assistant";
  const body = document.createElement("div");
  body.className = "body";
  body.textContent = text;
  div.append(who, body);
  $("log").appendChild(div);
  return div;
}

function addSpan(body, text, source) {
  const s = document.createElement("span");
  s.className = "tok " + source;
  s.textContent = text;
  s.title = source === "draft" ? "accepted draft token" : "target token";
  body.appendChild(s);
}

function fmt(x, digits) { return Number.isFinite(x) ? x.toFixed(digits) : "-"; }

async function send() {
  const text = $("input").value;
  if (!text.trim() || controller) return;
  showError("");
  $("input").value = "";
  history.push({ role: "user", content: text });
  addMessage("user", text);
  const msg = addMessage("assistant", "");
  const body = msg.querySelector(".body");
  const meta = document.createElement("div");
  meta.className = "meta";
  msg.appendChild(meta);

  const method = $("method").value;
  const spec = { provenance: true };
  if (method) spec.method = method;
  const k = parseInt($("draft-k").value, 10);
  if (Number.isFinite(k)) spec.draft_k = k;
  const req = {
    messages: history, stream: true, stream_options: { include_usage: true },
    max_tokens: parseInt($("max-tokens").value, 10) || 256,
    temperature: parseFloat($("temperature").value) || 0, specdec: spec,
  };
  if (modelId) req.model = modelId;

  const st = { draft: 0, target: 0, text: "", tFirst: 0, tLast: 0, finish: "", usage: null, failed: false };
  const t0 = performance.now();
  const update = () => {
    const n = st.draft + st.target;
    $("stat-tokens").textContent = n;
    $("stat-draft").textContent = st.draft;
    // Decode rate: the tokens after the first over the time since it came.
    const tps = n > 1 && st.tLast > st.tFirst ? (n - 1) / ((st.tLast - st.tFirst) / 1000) : NaN;
    $("stat-tps").textContent = fmt(tps, 1);
    // Tokens per target forward: each forward (the prefill's too) gives one target token.
    $("stat-accept").textContent = st.target ? fmt(n / st.target, 2) : "-";
    if (st.failed && n === 0) {
      meta.textContent = (method || "server default") + " \u00b7 no answer (the error is below)";
      return;
    }
    meta.textContent = (method || "server default") + " \u00b7 " + n + " tokens (" + st.draft +
      " accepted draft, " + st.target + " target) \u00b7 " + fmt(tps, 1) + " tok/s \u00b7 accept length " +
      (st.target ? fmt(n / st.target, 2) : "-") + " \u00b7 first token " + fmt((st.tFirst - t0) / 1000, 2) + " s" +
      (st.finish ? " \u00b7 finish: " + st.finish : "");
  };
  const fail = (text) => {
    st.failed = true;
    msg.classList.add("failed");
    showError(text);
  };

  controller = new AbortController();
  setState("streaming");
  $("send").disabled = true;
  $("stop").disabled = false;
  try {
    const res = await fetch("/v1/chat/completions",
                            { method: "POST", headers: headers(), body: JSON.stringify(req), signal: controller.signal });
    if (!res.ok) {
      history.pop();  // the server refused it: not part of the conversation
      fail(await errorText(res));
      return;
    }
    const reader = res.body.getReader();
    const dec = new TextDecoder();
    let buf = "", done = false;
    while (!done) {
      const r = await reader.read();
      if (r.done) break;
      buf += dec.decode(r.value, { stream: true });
      let cut;
      while ((cut = buf.indexOf("\n\n")) >= 0) {
        const event = buf.slice(0, cut);
        buf = buf.slice(cut + 2);
        for (const line of event.split("\n")) {
          if (!line.startsWith("data: ")) continue;
          const data = line.slice(6);
          if (data === "[DONE]") { done = true; break; }
          const j = JSON.parse(data);
          if (j.error) { fail("stream error: " + j.error.message + (j.error.code ? " (" + j.error.code + ")" : "")); continue; }
          if (j.usage) st.usage = j.usage;
          const c = j.choices && j.choices[0];
          if (!c) continue;
          const content = (c.delta && c.delta.content) || "";
          const ext = j.specdec;
          if (ext) {
            for (const p of ext.provenance) addSpan(body, p.text, p.source);
            st.draft += ext.tokens.draft;
            st.target += ext.tokens.target;
          } else if (content) {
            body.appendChild(document.createTextNode(content));
          }
          st.text += content;
          if (c.finish_reason) st.finish = c.finish_reason;
          const now = performance.now();
          if (!st.tFirst && st.draft + st.target > 0) st.tFirst = now;
          st.tLast = now;
          update();
          $("log").scrollTop = $("log").scrollHeight;
        }
      }
    }
    history.push({ role: "assistant", content: st.text });
  } catch (e) {
    if (e.name === "AbortError") {
      st.finish = "stopped";
      history.push({ role: "assistant", content: st.text });
    } else {
      fail(String(e.message || e));
    }
  } finally {
    update();
    if (st.failed) $("log").scrollTop = $("log").scrollHeight;  // the error in view
    controller = null;
    $("send").disabled = false;
    $("stop").disabled = true;
    setState("idle");
  }
}

$("send").addEventListener("click", send);
$("stop").addEventListener("click", () => { if (controller) controller.abort(); });
$("input").addEventListener("keydown", (e) => {
  if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); send(); }
});
$("clear").addEventListener("click", () => {
  if (controller) controller.abort();
  history = [];
  for (const m of document.querySelectorAll(".msg")) m.remove();
  showError("");
});
$("colours").addEventListener("change", (e) => { document.body.classList.toggle("plain", !e.target.checked); });
$("api-key").value = localStorage.getItem("specdec-api-key") || "";
$("api-key").addEventListener("change", () => {
  if (localStorage.getItem("specdec-api-key") === $("api-key").value) return;
  localStorage.setItem("specdec-api-key", $("api-key").value);
  loadModel();
});
loadModel();
</script>
</body>
</html>
)specdec_page";
}  // namespace

std::string_view chat_page_html() { return kPage; }

}  // namespace specdec::server
