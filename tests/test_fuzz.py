"""The fuzz corpus (tests/fuzz_corpus.py) in the suite: every one of its ~960 hostile and good
inputs, run as a user runs them, gives no traceback, no hang, no bad input accepted, no good one
refused, no unclear message, no half-written output, no input destroyed and nothing left in its
temporary folder."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def test_the_fuzz_corpus_finds_no_defect():
    script = Path(__file__).with_name("fuzz_corpus.py")
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=1200)
    total = result.stdout.strip().splitlines()[-1].split()
    assert total[0] == "total" and int(total[1]) >= 900, result.stdout
    assert result.returncode == 0, result.stdout + result.stderr
    assert all(count == "0" for count in total[2:]), result.stdout
