"""mate.memory_debug on this machine's CPU-only torch: the config, and the errors that point to
guard-run (the CUDA/MUSA paths run in tests/gpu when a GPU is lent)."""

import pytest


def test_config_validates(run_python):
    p = run_python("""
        from mate.memory_debug import GuardAllocatorConfig
        print(GuardAllocatorConfig())
        for bad in (dict(mode="middle"), dict(sync_on_free="yes")):
            try:
                GuardAllocatorConfig(**bad)
            except (ValueError, TypeError) as e:
                print(type(e).__name__, e)
    """)
    lines = p.stdout.splitlines()
    assert lines[0] == "GuardAllocatorConfig(mode='tail', sync_on_free=True, log_allocations=False)"
    assert lines[1] == "ValueError GuardAllocatorConfig: mode 'middle' is not accepted; accepted: 'tail', 'head'"
    assert lines[2].startswith("TypeError GuardAllocatorConfig: sync_on_free must be a bool")


def test_cpu_only_torch_points_to_guard_run(run_python):
    p = run_python("""
        import torch
        from mate import memory_debug as md
        try:
            md.install_guard_allocator(md.GuardAllocatorConfig(mode="head"))
        except md.GuardError as e:
            print(e)
        print(md.installed_config(), md.check_all(), md.describe(torch.zeros(4)))
    """)
    lines = p.stdout.splitlines()
    assert "is CPU-only" in lines[0] and "mate guard-run -- python" in lines[0]
    assert lines[1] == "None 0 None"


def test_describe_rejects_other_objects(run_python):
    p = run_python("""
        from mate import memory_debug as md
        try:
            md.describe("x")
        except TypeError as e:
            print(e)
    """)
    assert p.stdout.strip() == "describe takes a tensor, an array or an address (int), got str"


def test_check_all_covers_every_device_the_hooks_serve(run_python, fake_driver):
    # The pluggable hooks (what torch's CUDAPluggableAllocator calls) make one guarded allocator
    # per device; check_all() reads the canaries of all of them, not only device 0's.
    p = run_python("""
        import ctypes
        from mate import _mate, memory_debug as md
        hooks = ctypes.CDLL(_mate.hooks_library())
        hooks.mate_guard_alloc.restype = ctypes.c_void_p
        hooks.mate_guard_alloc.argtypes = [ctypes.c_ssize_t, ctypes.c_int, ctypes.c_void_p]
        block = hooks.mate_guard_alloc(1000, 1, None)
        print(md.check_all())
        ctypes.memset(block + 1000, 0x55, 4)  # the fake's device memory is host memory
        print(md.check_all())
    """, env={"MATE_FAKE_DRIVER_PATH": fake_driver, "FAKE_DRIVER_DEVICE_COUNT": "2"})
    assert p.stdout.splitlines() == ["0", "1"], p.stdout + p.stderr
