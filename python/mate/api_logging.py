"""API logging for Python functions: the C++ core's MATE_API, as a decorator.

    from mate.api_logging import mate_api

    @mate_api
    def scaled_add(x, y, alpha=1.0):
        return x + alpha * y

    @mate_api(name="mylib.rmsnorm", outputs=("out",))
    def rmsnorm(x, weight, out, eps=1e-6): ...

The logging and dumping configuration (MATE_LOGLEVEL, MATE_LOGDEST, MATE_LOGFORMAT, MATE_DUMP_*)
is read when this module is imported (seed 000). At level 0 the decorator returns the function
itself: nothing is added to a call. At levels 1, 3, 5 and 10 each call is logged exactly as a C++
MATE_API call is, to the same sink: inputs before the body runs (a crash keeps them), then the
outputs — the arguments named in `outputs` and the return value ("return") — or the exception,
which is re-raised unchanged. Level 10 dumps the call for `python -m mate replay`.

Arguments: torch tensors (any device), numpy arrays, bool, int, float, str, None, torch.dtype,
enums, and lists/tuples/dicts of these; anything else is logged as its repr().
"""

import functools
import inspect
import os
import sys

from . import _mate

# Read now, as seed 000 says; reconfigure() reads it again.
_level = _mate.log_level()


def reconfigure():
    """Reads MATE_LOGLEVEL, MATE_LOGDEST, MATE_LOGFORMAT and MATE_DUMP_* again (for tests and
    tools that change them in os.environ). Functions decorated while the level was 0 are the
    undecorated functions and stay so; decorated ones follow the new level."""
    global _level
    _mate.reconfigure()
    _level = _mate.log_level()


def level():
    """The logging level in effect."""
    return _level


def mate_api(func=None, *, name=None, outputs=()):
    """Logs each call of the decorated function. Bare (@mate_api) or with options:
    name: the function's name in the log and dumps (default: its __qualname__);
    outputs: names of parameters the function writes (e.g. "out"), logged after the body (and
    compared by replay), besides the return value."""
    if func is not None and not callable(func):
        raise TypeError(f"mate_api decorates a function; got {func!r} (write @mate_api(name=...) to name it)")
    if isinstance(outputs, str):
        outputs = (outputs,)
    if func is None:
        return lambda f: _decorate(f, name, tuple(outputs))
    return _decorate(func, name, tuple(outputs))


def _exception_type(e):
    t = type(e)
    return t.__qualname__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"


def _current_stream():
    """torch's current CUDA/MUSA stream handle (0: none), so that at levels 5 and 10 MATE reads no
    device memory while that stream is being captured into a graph (docs/logging.md)."""
    if _level < 5:
        return 0
    torch = sys.modules.get("torch")
    if torch is None:
        return 0
    for device in (getattr(torch, "musa", None), torch.cuda):
        if device is not None and device.is_available() and device.is_initialized():
            stream = device.current_stream()
            return getattr(stream, "cuda_stream", None) or getattr(stream, "musa_stream", 0)
    return 0


def _binder(signature):
    """(args, kwargs) -> {parameter: value} with defaults applied, or None for a call the
    function would refuse. Plain parameters take a fast path (inspect's bind costs several
    microseconds a call); *args, **kwargs and keyword-only parameters go through inspect."""
    params = list(signature.parameters.values())
    if any(p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params):
        def bind_with_inspect(args, kwargs):
            try:
                bound = signature.bind(*args, **kwargs)
            except TypeError:
                return None
            bound.apply_defaults()
            return bound.arguments
        return bind_with_inspect
    names = [p.name for p in params]
    keyword_names = {p.name for p in params if p.kind == p.POSITIONAL_OR_KEYWORD}
    defaults = {p.name: p.default for p in params if p.default is not p.empty}
    count = len(names)

    def bind_plain(args, kwargs):
        if len(args) > count:
            return None
        arguments = dict(zip(names, args))
        if kwargs:
            for key in kwargs:
                if key in arguments or key not in keyword_names:
                    return None
        for n in names[len(args):]:
            if n in kwargs:
                arguments[n] = kwargs[n]
            elif n in defaults:
                arguments[n] = defaults[n]
            else:
                return None
        return arguments

    return bind_plain


def _decorate(f, name, outputs):
    if not callable(f):
        raise TypeError(f"mate_api decorates a function; got {f!r}")
    if _level == 0:
        return f  # zero cost: the function itself
    signature = inspect.signature(f)
    unknown = [o for o in outputs if o not in signature.parameters]
    if unknown:
        raise ValueError(f"mate_api(outputs=...): {', '.join(map(repr, unknown))} not a parameter of "
                         f"{f.__qualname__}; its parameters are {', '.join(signature.parameters)}")
    logged_name = name or f.__qualname__
    origin = f"{f.__module__}:{f.__qualname__}"
    script = ""
    if f.__module__ == "__main__":
        main_file = getattr(sys.modules.get("__main__"), "__file__", None)
        script = os.path.abspath(main_file) if main_file else ""
    begin = _mate.begin_call
    bind = _binder(signature)

    @functools.wraps(f)
    def logged_call(*args, **kwargs):
        arguments = bind(args, kwargs)
        if arguments is None:
            return f(*args, **kwargs)  # a bad call: the function raises its own error
        call = begin(logged_name, list(arguments), list(arguments.values()), origin, script, _current_stream())
        if call is None:
            return f(*args, **kwargs)
        try:
            result = f(*args, **kwargs)
        except BaseException as e:
            call.finish(None, _exception_type(e), str(e))
            raise
        logged = [(o, arguments[o]) for o in outputs]
        if result is not None:
            logged.append(("return", result))
        call.finish(logged, None, None)
        return result

    return logged_call


__all__ = ["mate_api", "reconfigure", "level"]
