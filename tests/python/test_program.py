"""python -m mate: the `mate` program in the interpreter; mate.env(); mate.__version__."""


def test_env_check_passes_and_fails_like_the_program(run_mate_module):
    ok = run_mate_module("env", "--check")
    assert ok.returncode == 0, ok.stderr
    bad = run_mate_module("env", "--check", env={"MATE_LOGLEVEL": "loud"})
    assert bad.returncode != 0
    assert "MATE_LOGLEVEL" in bad.stdout + bad.stderr


def test_unknown_command_is_a_usage_error(run_mate_module):
    p = run_mate_module("frobnicate")
    assert p.returncode == 2
    assert "unknown command 'frobnicate'" in p.stderr


def test_version_and_module_status(run_mate_module, mate_bin):
    import subprocess
    v = run_mate_module("version")
    assert v.returncode == 0 and v.stdout.startswith("mate 0.")
    assert v.stdout.splitlines()[0] == subprocess.run([mate_bin, "version"], capture_output=True, text=True).stdout.splitlines()[0]
    s = run_mate_module("module-status")
    assert s.returncode == 0 and "mate_ops_gemm_nt_f32" in s.stdout


def test_env_returns_the_registry(run_python):
    p = run_python("""
        import mate
        v = mate.env()
        print(mate.__version__, v["MATE_LOGLEVEL"].value, v["MATE_LOGLEVEL"].source, v["MATE_LOGLEVEL"].valid)
        print(v["MATE_DUMP_DIR"].doc != "")
    """, env={"MATE_LOGLEVEL": "3"})
    first, second = p.stdout.splitlines()
    version, value, source, valid = first.split()
    assert version.startswith("0.") and value == "3" and source == "environment" and valid == "True"
    assert second == "True"


def test_guard_run_finds_the_preload_from_the_library(run_mate_module, tmp_path):
    # /proc/self/exe is python here: the preload must be found next to libmate.so.
    p = run_mate_module("guard-run", "--", "/bin/echo", "guarded")
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "guarded"
