"""README.md's "A Python worker", run as written (the text of its shell
block, piped to a child python3 as the README does) against a real leased:
the example must keep working when holds use a session by default."""
import os
import re
import subprocess
import sys

from test_sessions import own_leased, requests_of  # noqa: F401  (the fixture)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))


def readme_python_worker() -> str:
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        text = f.read()
    section = text[text.index("## A Python worker"):text.index("## A worker in Go")]
    m = re.search(r"python3 - <<'EOF'\n(.*?)\nEOF\n", section, re.S)
    assert m, "README.md's Python worker has no heredoc"
    return m.group(1)


def test_the_readme_python_worker_runs_as_written(own_leased, tokens):  # noqa: F811
    code = readme_python_worker()
    opens = requests_of(own_leased, "session_open")
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEASE_")}
    env.update(PYTHONPATH=os.path.join(ROOT, "clients", "python"), LEASE_URL=own_leased.url,
               LEASE_TOKEN=tokens["worker"])
    out = subprocess.run([sys.executable, "-"], input=code, env=env, cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    print(f"\nREADME worker: {out.stdout.strip()} {out.stderr.strip()}")
    assert out.returncode == 0, out.stderr
    assert re.search(r"python worker: fencing token \d+ committed py-result/target_01/\d+",
                     out.stdout)
    # it held its lease in a session (the default)
    assert requests_of(own_leased, "session_open") == opens + 1
