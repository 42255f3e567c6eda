"""Shared helpers of MATE's Python tests: each test runs Python programs in child processes with
the environment it chooses (MATE reads its configuration once per process, as users run it).

ctest sets TEST_MATE_PYTHONPATH (the build tree's python/ folder), TEST_MATE_BIN (the `mate`
program) and TEST_MATE_OPS_DEMO (a C++ program that logs, for comparing records)."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

# MATE's own Python tests load its plugin like any kernel library's would (opt-in).
pytest_plugins = ["mate.pytest_plugin"]

PYTHON = "/usr/bin/python3"


def _require(name):
    value = os.environ.get(name)
    if not value:
        pytest.fail(f"{name} is not set: run these tests through ctest (tests/python/CMakeLists.txt)")
    return value


@pytest.fixture
def run_python(tmp_path):
    """run_python(code, env={...}, args=[...]) -> CompletedProcess; code is a script's text,
    written to tmp_path/script.py (so functions defined in it can be replayed)."""

    def run(code, env=None, args=(), script_name="script.py", check=True, cwd=None):
        script = tmp_path / script_name
        script.write_text(textwrap.dedent(code))
        full_env = {k: v for k, v in os.environ.items() if not k.startswith("MATE_")}
        full_env["PYTHONPATH"] = _require("TEST_MATE_PYTHONPATH") + os.pathsep + str(tmp_path)
        full_env.update(env or {})
        p = subprocess.run([PYTHON, str(script), *args], env=full_env, capture_output=True, text=True,
                           cwd=cwd or tmp_path, timeout=120)
        if check and p.returncode != 0:
            raise AssertionError(f"script failed with {p.returncode}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}")
        return p

    return run


@pytest.fixture
def run_mate_module(tmp_path):
    """python -m mate ARGS -> CompletedProcess."""

    def run(*args, env=None):
        full_env = {k: v for k, v in os.environ.items() if not k.startswith("MATE_")}
        full_env["PYTHONPATH"] = _require("TEST_MATE_PYTHONPATH") + os.pathsep + str(tmp_path)
        full_env.update(env or {})
        return subprocess.run([PYTHON, "-m", "mate", *args], env=full_env, capture_output=True, text=True,
                              cwd=tmp_path, timeout=120)

    return run


def json_records(path):
    return [json.loads(line) for line in open(path) if line.strip()]


@pytest.fixture
def mate_bin():
    return _require("TEST_MATE_BIN")


@pytest.fixture
def ops_demo():
    return _require("TEST_MATE_OPS_DEMO")


@pytest.fixture
def fake_driver():
    """The fake CUDA/MUSA driver library (tests/fake_driver), for MATE_FAKE_DRIVER_PATH."""
    return _require("TEST_MATE_FAKE_DRIVER")
