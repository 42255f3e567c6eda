"""A C++ runtime linked statically into a shared library stays private to it.

With a toolchain whose libstdc++ is static (the lent GPU machine's image, docs/gpu-results.md),
libmate.so and the Python extension carry a copy of the runtime. Exported, its process-wide
(STB_GNU_UNIQUE) symbols — locale facet ids and the like — took over those of the libstdc++.so
that torch loads later: `import mate` then `import torch` crashed (free(): invalid pointer).
CMakeLists.txt links every shared library with --exclude-libs for the runtime's archives; the
probe is a shared library linked that way with -static-libstdc++, as the image's toolchain does.
Without that option the probe exports the runtime and its copy of a unique symbol takes over
libstdc++.so's (the first and third tests fail). Where the toolchain's runtime is shared (Debian,
CI), libmate.so has no copy to export and the last test (the crash's scenario) passes either way;
they fail on a static-runtime build without the fix (a full build with -static-libstdc++ crashed
on `import mate; import torch` before it, and not after).
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


def test_the_probes_runtime_does_not_take_over_libstdcxx():
    # A process-wide (STB_GNU_UNIQUE) symbol of libstdc++, looked up after the probe was loaded:
    # exported by the probe, it would be the probe's copy; kept private, libstdc++.so's own.
    probe = os.environ["TEST_MATE_STATIC_RUNTIME_PROBE"]
    code = f"""
import ctypes
probe = ctypes.CDLL({probe!r})              # RTLD_LOCAL, as Python loads an extension
assert probe.mate_static_runtime_probe(41) == 42 and probe.mate_static_runtime_probe(-1) == -1
cxx = ctypes.CDLL("libstdc++.so.6")          # loaded after it, as torch's libraries are
address = ctypes.addressof(ctypes.c_char.in_dll(cxx, "_ZNSt7collateIcE2idE"))
class DlInfo(ctypes.Structure):
    _fields_ = [("fname", ctypes.c_char_p), ("fbase", ctypes.c_void_p), ("sname", ctypes.c_char_p), ("saddr", ctypes.c_void_p)]
info = DlInfo()
assert ctypes.CDLL(None).dladdr(ctypes.c_void_p(address), ctypes.byref(info)) != 0
print(info.fname.decode())
"""
    p = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, f"exit {p.returncode}\n{p.stdout}\n{p.stderr}"
    assert os.path.basename(p.stdout.strip()).startswith("libstdc++.so"), p.stdout


def test_mate_imported_before_torch(run_python):
    p = run_python("""
        import mate
        from mate.api_logging import mate_api
        import torch
        print(float(torch.ones(2).sum()))
    """)
    assert p.stdout.strip() == "2.0"
