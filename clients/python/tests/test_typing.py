"""The package's type hints hold (mypy --strict, Debian's python3-mypy), for
the oldest Python it supports: the standard library as of 3.9."""
import os
import subprocess
import sys

PROJECT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_mypy_strict_for_python_3_9():
    out = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--python-version", "3.9",
                          "--no-incremental", "--cache-dir", os.devnull, "leaseclient"],
                         cwd=PROJECT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert os.path.exists(os.path.join(PROJECT, "leaseclient", "py.typed"))
