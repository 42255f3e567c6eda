"""mate.pytest_plugin, run as users run it: pytest in a child process on a small project."""

import os
import re
import subprocess
import textwrap
import xml.etree.ElementTree as ET

import pytest

PYTHON = "/usr/bin/python3"

PROBE = """
import os, pytest

def test_guarded():
    print("GUARDED" if "libmate_guard_preload" in os.environ.get("LD_PRELOAD", "") else "PLAIN")

@pytest.mark.guard_incompatible
def test_incompatible():
    pass

@pytest.mark.parametrize("use_graph", [False, True])
def test_graph(use_graph):
    pass

def test_fails():
    assert False, "expected failure"
"""


def project(tmp_path, files):
    for name, text in files.items():
        (tmp_path / name).write_text(textwrap.dedent(text))
    return tmp_path


def pytest_run(tmp_path, *args, env=None):
    full = {k: v for k, v in os.environ.items() if not k.startswith("MATE_") and k != "PYTEST_ADDOPTS"}
    full["PYTHONPATH"] = os.environ["TEST_MATE_PYTHONPATH"]
    full.update(env or {})
    return subprocess.run([PYTHON, "-m", "pytest", "-p", "mate.pytest_plugin", "-p", "no:cacheprovider", *args],
                          cwd=tmp_path, env=full, capture_output=True, text=True, timeout=300)


def outcomes(p):
    """{test id: outcome} from `-rA` short summary lines."""
    found = {}
    for line in p.stdout.splitlines():
        m = re.match(r"^(PASSED|FAILED|SKIPPED|ERROR) (\S+)", line)
        if m:
            found[m.group(2)] = m.group(1)
    return found


def test_guard_alloc_reruns_under_guard_run_with_skips_and_the_same_exit_status(tmp_path):
    project(tmp_path, {"test_probe.py": PROBE})
    p = pytest_run(tmp_path, "-rA", "-s", "--strict-markers", "--guard-alloc", "--junitxml", "out.xml")
    assert p.returncode == 1, p.stdout + p.stderr  # test_fails, as without the guard
    assert "mate: guarded allocator in force, mode tail" in p.stdout
    assert "GUARDED" in p.stdout
    skips = re.findall(r"SKIPPED \[1\] test_probe.py:\d+: guard allocator debug mode does not support CUDA graph capture", p.stdout)
    assert len(skips) == 2, p.stdout  # the marked test and the use_graph=True case
    assert "1 failed, 2 passed, 2 skipped" in p.stdout
    cases = ET.parse(tmp_path / "out.xml").getroot().iter("testcase")
    assert len(list(cases)) == 5


def test_keyword_and_exitfirst_reach_the_rerun(tmp_path):
    project(tmp_path, {"test_probe.py": PROBE})
    p = pytest_run(tmp_path, "-s", "--guard-alloc", "--guard-mode", "head", "-k", "guarded or fails", "-x")
    assert p.returncode == 1
    assert "mode head" in p.stdout and "GUARDED" in p.stdout
    assert "1 failed, 1 passed" in p.stdout


def test_no_guard_alloc_wins_over_the_variable_and_addopts(tmp_path):
    project(tmp_path, {"test_probe.py": PROBE})
    p = pytest_run(tmp_path, "-s", "-k", "guarded", "--no-guard-alloc",
                   env={"MATE_PYTEST_GUARD_ALLOC": "1", "PYTEST_ADDOPTS": "--guard-alloc"})
    assert p.returncode == 0, p.stdout + p.stderr
    assert "PLAIN" in p.stdout and "guarded allocator in force" not in p.stdout


def test_the_variables_give_the_defaults(tmp_path):
    project(tmp_path, {"test_probe.py": PROBE})
    p = pytest_run(tmp_path, "-s", "-k", "guarded",
                   env={"MATE_PYTEST_GUARD_ALLOC": "1", "MATE_PYTEST_GUARD_MODE": "head"})
    assert p.returncode == 0, p.stdout + p.stderr
    assert "mode head" in p.stdout and "GUARDED" in p.stdout


def test_without_options_nothing_changes(tmp_path):
    project(tmp_path, {"test_probe.py": PROBE})
    p = pytest_run(tmp_path, "-s", "-rA")
    assert p.returncode == 1
    assert "PLAIN" in p.stdout and "mate:" not in p.stdout
    assert "1 failed, 4 passed" in p.stdout


@pytest.mark.parametrize("variable,value", [("MATE_PYTEST_GUARD_MODE", "middle"), ("MATE_PYTEST_GUARD_ALLOC", "maybe"),
                                            ("MATE_PYTEST_SHARD_MODE", "test")])
def test_invalid_variables_are_usage_errors(tmp_path, variable, value):
    project(tmp_path, {"test_probe.py": PROBE})
    p = pytest_run(tmp_path, env={variable: value})
    assert p.returncode == pytest.ExitCode.USAGE_ERROR
    assert variable in p.stderr


def test_an_invalid_guard_mode_option_is_a_usage_error(tmp_path):
    project(tmp_path, {"test_probe.py": PROBE})
    p = pytest_run(tmp_path, "--guard-mode", "middle")
    assert p.returncode == pytest.ExitCode.USAGE_ERROR
    assert "--guard-mode" in p.stderr and "tail" in p.stderr


def test_pytest_main_in_a_larger_program_is_told_to_use_guard_run(tmp_path):
    project(tmp_path, {"test_probe.py": PROBE, "runner.py": """
        import sys, pytest
        sys.exit(pytest.main(["-p", "mate.pytest_plugin", "--guard-alloc", "test_probe.py"]))
    """})
    env = {k: v for k, v in os.environ.items() if not k.startswith("MATE_")}
    env["PYTHONPATH"] = os.environ["TEST_MATE_PYTHONPATH"]
    p = subprocess.run([PYTHON, "runner.py"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == pytest.ExitCode.USAGE_ERROR
    assert "Run the whole program under `mate guard-run -- ...`" in p.stderr


def test_shards_cover_every_test_exactly_once(tmp_path):
    files = {f"test_file{i}.py": f"def test_a{i}():\n    pass\n\ndef test_b{i}():\n    pass\n" for i in range(9)}
    project(tmp_path, files)
    every = set(outcomes(pytest_run(tmp_path, "-rA")))
    assert len(every) == 18
    for total in (1, 2, 3, 7):
        seen = []
        for index in range(total):
            p = pytest_run(tmp_path, "-rA", env={"MATE_PYTEST_SHARD_TOTAL": str(total), "MATE_PYTEST_SHARD_INDEX": str(index)})
            assert p.returncode == 0, p.stdout + p.stderr  # an empty shard too
            seen += list(outcomes(p))
            if total > 1:
                assert f"mate: shard {index} of {total} kept" in p.stdout
        assert sorted(seen) == sorted(every), total


def test_a_shard_index_out_of_range_is_a_usage_error(tmp_path):
    project(tmp_path, {"test_probe.py": PROBE})
    p = pytest_run(tmp_path, env={"MATE_PYTEST_SHARD_TOTAL": "3", "MATE_PYTEST_SHARD_INDEX": "3"})
    assert p.returncode == pytest.ExitCode.USAGE_ERROR
    assert "MATE_PYTEST_SHARD_INDEX=3 is not below MATE_PYTEST_SHARD_TOTAL=3" in p.stderr


XDIST_PROBE = """
import os

def test_guarded_worker():
    assert "libmate_guard_preload" in os.environ.get("LD_PRELOAD", "")
"""


def test_xdist_workers_are_guarded_and_sharded(tmp_path):
    pytest.importorskip("xdist")
    files = {f"test_w{i}.py": XDIST_PROBE.replace("test_guarded_worker", f"test_guarded_worker{i}") for i in range(6)}
    project(tmp_path, files)
    guarded = pytest_run(tmp_path, "-n", "2", "--guard-alloc")
    assert guarded.returncode == 0, guarded.stdout + guarded.stderr
    assert "6 passed" in guarded.stdout
    seen = []
    for index in range(2):
        p = pytest_run(tmp_path, "-n", "2", "-rA", "--no-guard-alloc",
                       env={"MATE_PYTEST_SHARD_TOTAL": "2", "MATE_PYTEST_SHARD_INDEX": str(index)})
        assert p.returncode in (0, 1), p.stdout + p.stderr  # unguarded: the probes fail, wherever they run
        seen += list(outcomes(p))
    assert len(seen) == 6 and len(set(seen)) == 6


OVERFLOW = """
import ctypes
import numpy as np

def test_numpy_overflow():
    a = np.zeros(1024)                       # 8 KiB: ends at the guard page in tail mode
    one = ctypes.c_double(1.0)
    ctypes.memmove(a.ctypes.data + a.nbytes, ctypes.byref(one), 8)
"""


@pytest.mark.parametrize("faulthandler", [True, False])
def test_a_fault_inside_a_test_shows_the_report_and_the_test(tmp_path, faulthandler):
    project(tmp_path, {"test_overflow.py": OVERFLOW})
    args = ["--guard-alloc"] + ([] if faulthandler else ["-p", "no:faulthandler"])
    p = pytest_run(tmp_path, *args)  # default capture
    assert p.returncode != 0
    assert "overflow: SIGSEGV on a write" in p.stderr, p.stderr
    assert "pytest test: test_overflow.py::test_numpy_overflow (call)" in p.stderr
