"""CI form of the load and fault test (tools/serve_load.py).

16 streaming clients for 30 s on the default (CI) model drafting for itself
(-d with the same file, so chain, tree and ssd run too), every fault kind
(hang-ups mid-stream, malformed and oversized bodies, max_tokens over the cap,
stalled bodies, idle connections, headers trickled a byte at a time, a burst
over --max-queue), then the idle,
RSS, /metrics and SIGTERM checks. About 1.5 minutes on 2 cores (4 prompts:
16 references first); the full run
(64 clients, minutes) is documented in README.md.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from conftest import DEFAULT_MODEL, REPO_ROOT, model_path

BIN = Path(os.environ.get("SPECDEC_BIN", REPO_ROOT / "build" / "release" / "specdec"))


def test_serve_load_small(tmp_path):
    model = str(model_path(DEFAULT_MODEL))
    out = tmp_path / "load.json"
    cmd = [sys.executable, str(REPO_ROOT / "tools" / "serve_load.py"), "--bin", str(BIN), "-m", model, "-d", model,
           "--clients", "16", "--duration", "30", "--prompts", "4", "--max-batch", "4", "--max-queue", "12",
           "--threads", "2",
           "--max-tokens", "64", "--client-timeout", "120", "--json", str(out)]
    t0 = time.monotonic()
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    took = time.monotonic() - t0
    print(r.stdout)
    print(r.stderr[-6000:])
    print(f"[serve_load] {took:.0f} s")
    assert r.returncode == 0, r.stderr[-6000:]
    res = json.loads(out.read_text())
    assert res["ok"] and res["mismatches"] == 0 and res["seeded_mismatches"] == 0
    assert res["crashes"] == 0 and res["hangs"] == 0
    assert res["greedy_checked"] > 0 and res["completed"] > 0
    # Every fault kind happened and was answered as it should be.
    kinds = res["errors_by_kind"]
    for k in ["abandoned", "bad_request", "over_cap", "too_large", "stalled", "idle_closed", "header_closed",
              "queue_full"]:
        assert kinds.get(k, 0) > 0, (k, kinds)
    assert res["metrics_agree"]
    assert res["shutdown"]["exit_code"] == 0 and res["shutdown"]["cancelled"] > 0
