"""The digits examples end to end: DDP+ringsync, DistributedOptimizer and DDP+gloo with 4
ranks each; its own verdict (identical ranks, accuracy >= 0.95, ringsync == gloo within
tolerance) must be OK. The elastic one (a worker and its process killed mid-run, a new
process taken in) likewise (identical ranks, accuracy >= 0.95, epochs on 4, 3, 4 ranks)."""

import os
import re
import subprocess
import sys

EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples")
EXAMPLE = os.path.join(EXAMPLES, "train_digits.py")


def test_train_digits_verdict_is_ok():
    run = subprocess.run([sys.executable, EXAMPLE, "--world-size=4"], capture_output=True,
                         text=True, timeout=900)
    assert run.returncode == 0 and "VERDICT: OK" in run.stdout, run.stdout + run.stderr
    for mode in ("ddp-ringsync", "optimizer", "ddp-gloo"):
        assert f"[{mode}] epoch  9" in run.stdout


def test_train_digits_elastic_verdict_is_ok():
    run = subprocess.run([sys.executable, os.path.join(EXAMPLES, "train_digits_elastic.py")],
                         capture_output=True, text=True, timeout=900)
    assert run.returncode == 0 and "VERDICT: OK" in run.stdout, run.stdout + run.stderr
    assert re.search(r"reset: rank \d+ of 3", run.stdout), run.stdout
    assert re.search(r"reset: rank \d+ of 4", run.stdout), run.stdout
