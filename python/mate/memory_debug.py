"""The guarded allocator for device memory from PyTorch (seed 001):

    from mate.memory_debug import GuardAllocatorConfig, install_guard_allocator
    install_guard_allocator(GuardAllocatorConfig(mode="tail"))   # before the first device tensor

On CUDA PyTorch it goes through torch.cuda.memory.CUDAPluggableAllocator over MATE's hooks
library (libmate_guard_hooks.so, which shares this process's guard with the package); on
torch_musa through torch.musa.memory.MUSAPluggableAllocator. Host memory is guarded by running
the program under `mate guard-run -- python ...` (the preload must be there from the start).
"""

from dataclasses import dataclass

from . import _mate

GuardError = _mate.GuardError

_MODES = ("tail", "head")
_installed = None  # (kind, GuardAllocatorConfig)


@dataclass(frozen=True)
class GuardAllocatorConfig:
    """mode: "tail" (a guard page right after each allocation) or "head" (right before);
    sync_on_free: synchronize the device before checking canaries at free;
    log_allocations: one line per allocation and free on stderr."""

    mode: str = "tail"
    sync_on_free: bool = True
    log_allocations: bool = False

    def __post_init__(self):
        if self.mode not in _MODES:
            raise ValueError(f"GuardAllocatorConfig: mode {self.mode!r} is not accepted; accepted: 'tail', 'head'")
        for field in ("sync_on_free", "log_allocations"):
            if not isinstance(getattr(self, field), bool):
                raise TypeError(f"GuardAllocatorConfig: {field} must be a bool, got {getattr(self, field)!r}")


def _device_torch():
    """(kind, title, torch memory module, pluggable allocator class) of this process's torch."""
    try:
        import torch
    except ImportError as e:
        raise GuardError("install_guard_allocator needs PyTorch with CUDA or MUSA (import torch failed: "
                         f"{e}); for host memory run the program under `mate guard-run -- python ...`") from None
    musa = getattr(torch, "musa", None)
    if musa is not None and hasattr(musa, "memory") and hasattr(musa.memory, "MUSAPluggableAllocator"):
        return "musa", "MUSA", musa, musa.memory.MUSAPluggableAllocator
    if torch.version.cuda is not None and hasattr(torch.cuda.memory, "CUDAPluggableAllocator"):
        return "cuda", "CUDA", torch.cuda, torch.cuda.memory.CUDAPluggableAllocator
    if torch.version.cuda is not None:
        raise GuardError(f"torch {torch.__version__} has no CUDAPluggableAllocator (PyTorch 2.0 or later has it)")
    raise GuardError(f"torch {torch.__version__} is CPU-only: install_guard_allocator guards CUDA or MUSA device "
                     "memory; for host memory (CPU tensors) run the program under `mate guard-run -- python ...`")


def install_guard_allocator(config=None):
    """Makes every later device allocation of PyTorch a guarded one. Installing again with the
    same config does nothing; with another config raises GuardError; after the first device
    allocation raises GuardError ("Guard allocator must be installed before the first CUDA
    allocation in the process", MUSA on torch_musa)."""
    global _installed
    if config is None:
        config = GuardAllocatorConfig()
    if not isinstance(config, GuardAllocatorConfig):
        raise TypeError(f"install_guard_allocator takes a GuardAllocatorConfig, got {config!r}")
    if _installed is not None:
        if _installed[1] == config:
            return
        raise GuardError(f"the guard allocator is already installed with {_installed[1]}; "
                         f"it cannot be installed again with {config}")
    kind, title, device_module, pluggable = _device_torch()
    if device_module.is_initialized() and device_module.memory_reserved() > 0:
        raise GuardError(f"Guard allocator must be installed before the first {title} allocation in the process")
    _mate.install_guard_allocator(kind, config.mode, config.sync_on_free, config.log_allocations)
    allocator = pluggable(_mate.hooks_library(), "mate_guard_alloc", "mate_guard_free")
    device_module.memory.change_current_allocator(allocator)
    _installed = (kind, config)


def installed_config():
    """The config install_guard_allocator installed, or None."""
    return None if _installed is None else _installed[1]


def check_all():
    """Checks the canaries of every live guarded allocation this process's guard holds (reports
    each corruption on stderr); returns how many are not known intact."""
    return _mate.check_all()


def describe(x):
    """The guarded allocation a tensor, array or address belongs to: a dict (id, address, size,
    state, relation, offset, mode), or None when the guard holds no such allocation."""
    if hasattr(x, "data_ptr"):
        address = x.data_ptr()
    elif hasattr(x, "__array_interface__"):
        address = x.__array_interface__["data"][0]
    elif isinstance(x, int):
        address = x
    else:
        raise TypeError(f"describe takes a tensor, an array or an address (int), got {type(x).__name__}")
    return _mate.describe(address)


__all__ = ["GuardAllocatorConfig", "GuardError", "install_guard_allocator", "installed_config", "check_all", "describe"]
