"""A wheel builds offline from the repository (Debian's setuptools and wheel,
no build isolation, no index) and installs into a fresh venv, where a call
against a real leased works."""
import glob
import os
import shutil
import subprocess
import sys
import tempfile

from leased_proc import PROGRAM, TENANT

HERE = os.path.dirname(os.path.abspath(__file__))
PROJECT = os.path.dirname(HERE)


def run(argv, **kw):
    out = subprocess.run(argv, capture_output=True, text=True, timeout=300, **kw)
    assert out.returncode == 0, f"{argv} failed:\n{out.stdout}\n{out.stderr}"
    return out.stdout


def test_wheel_builds_offline_and_installs_into_a_fresh_venv(leased, tokens):
    with tempfile.TemporaryDirectory() as tmp:
        build_env = dict(os.environ, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
        # built from a copy: setuptools writes build/ and egg-info next to the sources
        src = os.path.join(tmp, "src")
        shutil.copytree(PROJECT, src, ignore=shutil.ignore_patterns(
            "tests", "build", "*.egg-info", "__pycache__", ".pytest_cache"))
        run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
             "--no-index", "-w", tmp, src], env=build_env)
        wheels = glob.glob(os.path.join(tmp, "leaseclient-*.whl"))
        assert len(wheels) == 1
        venv = os.path.join(tmp, "venv")
        run([sys.executable, "-m", "venv", venv])
        py = os.path.join(venv, "bin", "python")
        run([py, "-m", "pip", "install", "--no-index", "--no-deps", wheels[0]], env=build_env)
        program = f"""
import leaseclient, os, sys
assert os.path.dirname(leaseclient.__file__).startswith({venv!r}), leaseclient.__file__
assert os.path.exists(os.path.join(os.path.dirname(leaseclient.__file__), "py.typed"))
c = leaseclient.Client({leased.url!r}, {tokens['worker']!r})
ident = leaseclient.Identity({TENANT!r}, {PROGRAM!r}, "py-wheel", "w1", "pyworker", "default")
with c.hold(ident, ttl_ms=5000) as lease:
    lease.commit([leaseclient.document("py/wheel/" + lease.lease_id, {{"ok": True}})])
print("wheel ok", lease.fencing_token)
"""
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        out = run([py, "-c", program], env=env, cwd=tmp)
        assert out.startswith("wheel ok ")
