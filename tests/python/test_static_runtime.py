"""A C++ runtime linked statically into a shared library stays private to it.

With a toolchain whose libstdc++ is static (the lent GPU machine's image, docs/gpu-results.md),
libmate.so and the Python extension carry a copy of the runtime. Exported, its process-wide
(STB_GNU_UNIQUE) symbols — locale facet ids and the like — took over those of the libstdc++.so
that torch loads later: `import mate` then `import torch` crashed (free(): invalid pointer).
CMakeLists.txt links every shared library with --exclude-libs for the runtime's archives; the
probe is a shared library linked that way with -static-libstdc++, as the image's toolchain does.
Without that option the probe exports the runtime (the first test fails); the crash itself needs
libmate.so's larger share of the runtime, so here the import tests are smoke tests of the
scenario (a full build with -static-libstdc++ reproduced the crash before the fix, and not after).
"""

import os
import subprocess

from conftest import PYTHON

# Symbols of libstdc++ / libsupc++ that a static copy defines (mangled): exception handling,
# locale facet ids (unique), the classic locale.
RUNTIME_SYMBOLS = ("__cxa_throw", "__cxa_begin_catch", "__gxx_personality_v0", "_ZNSt7collateIcE2idE",
                   "_ZNSt7codecvtIcc11__mbstate_tE2idE", "_ZNSt6locale7classicEv")


def exported(library):
    out = subprocess.run(["nm", "-D", "--defined-only", library], capture_output=True, text=True, check=True).stdout
    return {line.split()[-1] for line in out.splitlines() if line.strip()}


def test_the_probe_carries_a_static_runtime_and_exports_none_of_it():
    probe = os.environ["TEST_MATE_STATIC_RUNTIME_PROBE"]
    needed = subprocess.run(["readelf", "-d", probe], capture_output=True, text=True, check=True).stdout
    assert "libstdc++" not in needed, "the probe must carry its own runtime (linked with -static-libstdc++)"
    assert not exported(probe) & set(RUNTIME_SYMBOLS)


def test_libmate_exports_no_runtime_symbol():
    assert not exported(os.environ["TEST_MATE_LIBRARY"]) & set(RUNTIME_SYMBOLS)


def test_torch_imported_after_a_static_runtime_library_works():
    probe = os.environ["TEST_MATE_STATIC_RUNTIME_PROBE"]
    code = f"""
import ctypes
lib = ctypes.CDLL({probe!r})               # RTLD_LOCAL, as Python loads an extension
assert lib.mate_static_runtime_probe(41) == 42 and lib.mate_static_runtime_probe(-1) == -1
import torch                              # loads libstdc++.so after the probe's copy
print(float(torch.ones(3).sum()))
"""
    p = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, f"exit {p.returncode}\n{p.stdout}\n{p.stderr}"
    assert p.stdout.strip() == "3.0"


def test_mate_imported_before_torch(run_python):
    p = run_python("""
        import mate
        from mate.api_logging import mate_api
        import torch
        print(float(torch.ones(2).sum()))
    """)
    assert p.stdout.strip() == "2.0"
