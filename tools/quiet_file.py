"""A shared machine's "hands off" flag for the long EAGLE-3 stages
(tools/eagle3_data.py, tools/eagle3_train.py): with SPECDEC_QUIET_FILE set,
they wait at their safe points while that file exists, so a benchmark can have
the cores. No default path: a fixed one would pause a run on any machine that
happens to have that file."""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

QUIET = Path(os.environ["SPECDEC_QUIET_FILE"]) if os.environ.get("SPECDEC_QUIET_FILE") else None


def wait_quiet(stage: str, stream=None) -> None:
    """Returns at once unless the flag file exists; else says so once on
    `stream` (stdout by default) as "[stage] ... paused" and polls every 2 s."""
    if QUIET is None or not QUIET.exists():
        return
    print(f"[{stage}] {QUIET} exists: paused", file=stream or sys.stdout, flush=True)
    while QUIET.exists():
        time.sleep(2)
