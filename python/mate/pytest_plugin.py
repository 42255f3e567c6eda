"""MATE's pytest plugin (seed 001 "Pytest Integration", seed 000's MATE_PYTEST_* variables).

Opt-in, never installed as a general plugin: `pytest -p mate.pytest_plugin`, or
`pytest_plugins = ["mate.pytest_plugin"]` in a conftest.py. It changes nothing in a run that does
not ask for guard mode or shards.

Guard mode (--guard-alloc, or MATE_PYTEST_GUARD_ALLOC=1; --no-guard-alloc wins over both):
host memory needs the guard's preload from the process's start, so before collecting, pytest is
run again under `mate guard-run` with the same arguments (once: `mate guard-run` marks its child
with MATE_GUARD_ALLOCATOR_AUTO_INSTALL). Under the preload device allocations are guarded by its
interposition too, so the plugin never also installs mate.memory_debug's allocator. Tests marked
@pytest.mark.guard_incompatible and parametrized cases with use_graph=True are skipped.

Shards (MATE_PYTEST_SHARD_TOTAL=N > 1, MATE_PYTEST_SHARD_INDEX=i, MATE_PYTEST_SHARD_MODE=file):
each test file goes to one shard, split as MATE's C++ test programs split theirs.
"""

import os
import sys

import pytest

from . import _mate

_GUARD_INCOMPATIBLE = "guard_incompatible"


def pytest_addoption(parser):
    group = parser.getgroup("mate", "MATE: guarded allocator (docs/python.md)")
    group.addoption("--guard-alloc", action="store_true", dest="mate_guard_alloc", default=None,
                    help="run the tests on MATE's guarded allocator (default: MATE_PYTEST_GUARD_ALLOC)")
    group.addoption("--no-guard-alloc", action="store_false", dest="mate_guard_alloc",
                    help="run on the regular allocator even if MATE_PYTEST_GUARD_ALLOC or addopts ask for guard mode")
    group.addoption("--guard-mode", choices=("tail", "head"), dest="mate_guard_mode", default=None,
                    help="which side of each allocation faults at once (default: MATE_PYTEST_GUARD_MODE, tail)")
    group.addoption("--guard-log-allocations", action="store_true", dest="mate_guard_log_allocations", default=None,
                    help="print each guarded allocation and free (default: MATE_PYTEST_GUARD_LOG_ALLOCATIONS)")
    group.addoption("--no-guard-log-allocations", action="store_false", dest="mate_guard_log_allocations")


def _registry(name):
    try:
        return _mate.config_value(name)
    except _mate.ConfigError as e:
        raise pytest.UsageError(str(e)) from None


class _Settings:
    def __init__(self, config):
        option = config.option
        self.guard = option.mate_guard_alloc
        if self.guard is None:
            self.guard = _registry("MATE_PYTEST_GUARD_ALLOC")
        self.mode = option.mate_guard_mode or _registry("MATE_PYTEST_GUARD_MODE")
        self.log_allocations = option.mate_guard_log_allocations
        if self.log_allocations is None:
            self.log_allocations = _registry("MATE_PYTEST_GUARD_LOG_ALLOCATIONS")
        # Already running under `mate guard-run` (ours or the user's).
        self.under_guard_run = bool(_mate.config_is_set("MATE_GUARD_ALLOCATOR_AUTO_INSTALL")
                                    and _registry("MATE_GUARD_ALLOCATOR_AUTO_INSTALL"))
        self.mode_in_force = _registry("MATE_GUARD_ALLOCATOR_MODE") if self.under_guard_run else self.mode
        self.shard_total = _registry("MATE_PYTEST_SHARD_TOTAL")
        self.shard_index = _registry("MATE_PYTEST_SHARD_INDEX")
        self.shard_mode = _registry("MATE_PYTEST_SHARD_MODE")
        if self.shard_total > 1:
            error = _mate.shard_index_error(self.shard_index, self.shard_total)
            if error:
                raise pytest.UsageError(error)


def _pytest_is_the_entry_point():
    argv = getattr(sys, "orig_argv", None) or []
    if "-m" in argv:
        i = argv.index("-m")
        return i + 1 < len(argv) and argv[i + 1] in ("pytest", "py.test")
    return bool(sys.argv) and os.path.basename(sys.argv[0]) in ("pytest", "py.test", "pytest-3")


def _reexecute_under_guard_run(config, settings):
    if not _pytest_is_the_entry_point():
        raise pytest.UsageError(
            "--guard-alloc: host memory is guarded from the process's start, so this pytest would have to be "
            "started again under `mate guard-run`, and it is not the process's entry point (pytest.main() in a "
            "larger program, or pytester). Run the whole program under `mate guard-run -- ...` instead.")
    mate = os.path.join(_mate.install_tree(), "bin", "mate")
    if not os.access(mate, os.X_OK):
        raise pytest.UsageError(f"--guard-alloc: the mate program is not at {mate} (next to libmate.so)")
    # Stop pytest's capture first: the new process must get the terminal, not our capture files.
    capture = config.pluginmanager.getplugin("capturemanager")
    if capture is not None:
        capture.stop_global_capturing()
    sys.stdout.flush()
    sys.stderr.flush()
    command = [mate, "guard-run", "--mode", settings.mode]
    if settings.log_allocations:
        command.append("--log-allocations")
    os.execv(mate, command + ["--", *sys.orig_argv])


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    config.addinivalue_line("markers", f"{_GUARD_INCOMPATIBLE}: skipped in MATE's guard mode (--guard-alloc): "
                                       "the test cannot run on the guarded allocator (graph capture, ...)")
    settings = _Settings(config)
    config._mate_settings = settings
    worker = hasattr(config, "workerinput")  # a pytest-xdist worker: its controller re-executed
    if settings.guard and not settings.under_guard_run and not worker:
        _reexecute_under_guard_run(config, settings)


def pytest_report_header(config):
    s = config._mate_settings
    lines = []
    if s.under_guard_run:
        lines.append(f"mate: guarded allocator in force, mode {s.mode_in_force} (mate guard-run: host and device memory)")
    if s.shard_total > 1:
        lines.append(f"mate: shard {s.shard_index} of {s.shard_total} (mode {s.shard_mode}, MATE_PYTEST_SHARD_*)")
    return lines


def _graph_vendor():
    torch = sys.modules.get("torch")
    return "MUSA" if torch is not None and hasattr(torch, "musa") else "CUDA"


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(session, config, items):
    s = config._mate_settings
    if s.under_guard_run:
        skip = pytest.mark.skip(reason=f"guard allocator debug mode does not support {_graph_vendor()} graph capture")
        for item in items:
            callspec = getattr(item, "callspec", None)
            if item.get_closest_marker(_GUARD_INCOMPATIBLE) or (callspec is not None and callspec.params.get("use_graph") is True):
                item.add_marker(skip)
    if s.shard_total > 1:
        kept, dropped, files = [], [], set()
        for item in items:
            path = str(item.path)
            if _mate.shard_of_test_file(path, s.shard_total) == s.shard_index:
                kept.append(item)
                files.add(path)
            else:
                dropped.append(item)
        if dropped:
            config.hook.pytest_deselected(items=dropped)
        items[:] = kept
        s.shard_summary = (f"mate: shard {s.shard_index} of {s.shard_total} kept {len(files)} files, "
                           f"{len(kept)} tests ({len(dropped)} in other shards)")


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    summary = getattr(config._mate_settings, "shard_summary", None)
    if summary:
        terminalreporter.write_line(summary)


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session, exitstatus):
    s = session.config._mate_settings
    # A shard that got no file did its part: not pytest's "no tests collected" (5).
    if s.shard_total > 1 and exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED:
        session.exitstatus = pytest.ExitCode.OK
