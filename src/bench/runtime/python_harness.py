# The Python runtime's harness, run as module _fib_harness (python_harness.h says what it does).
import importlib.util
import os
import sys
import traceback

torch = None
_codes = {}
_streams = {}
_results = None
_functions = []
_numbers = {}  # (file, function) -> its number: a module is imported once per worker


def _traceback():
    """The exception being handled, its traceback from the solution's first frame on."""
    kind, value, tb = sys.exc_info()
    while tb is not None and tb.tb_frame.f_code.co_filename == "<fib harness>":
        tb = tb.tb_next
    return "".join(traceback.format_exception(kind, value, tb))


def setup(path, executable, codes):
    sys.path[:] = [p for p in path.split("\n") if p]
    sys.executable = executable
    sys.argv = [executable]
    global _codes
    _codes = dict((name, int(code)) for name, code in
                  (item.split("=") for item in codes.split(",")))


# torch's own C-level accessors, taken before any solution's module runs: a returned tensor is
# read through them, never through attributes a subclass (or a patched torch.Tensor) can redefine.
_Tensor = None
_dtype_of = None
_shape_of = None
_copy = None


def _import_torch():
    global torch, _Tensor, _dtype_of, _shape_of, _copy
    if torch is None:
        import torch as t
        import torch.utils.dlpack
        base = getattr(t._C, "TensorBase", None) or t._C._TensorBase
        _Tensor = t.Tensor
        _dtype_of = base.dtype.__get__
        _shape_of = base.shape.__get__
        _copy = base.copy_
        torch = t


def load(file, function, binding):
    """'#<n>': the entry function is number n; anything else says why it is not."""
    if (file, function) in _numbers:
        return "#%d" % _numbers[(file, function)]
    try:
        _import_torch()
        stem = os.path.splitext(os.path.basename(file))[0]
        if binding == "torch":
            name = stem
        else:
            directory = os.path.dirname(file)
            if directory not in sys.path:
                sys.path.insert(0, directory)
            name = "fib_solution_%d_%s" % (len(_functions), stem)
        spec = importlib.util.spec_from_file_location(name, file)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        fn = getattr(module, function, None)
        if not callable(fn):
            return "%s defines no function '%s'" % (os.path.basename(file), function)
        _functions.append(fn)
        _numbers[(file, function)] = len(_functions) - 1
        return "#%d" % (len(_functions) - 1)
    except BaseException:
        return _traceback()


def _tensor(item, view):
    if view == "n":
        return None
    if view == "s":
        return item
    t = torch.utils.dlpack.from_dlpack(item)
    if len(view) > 2:
        dtype = getattr(torch, view[2:], None)
        if dtype is not None:
            t = t.view(dtype)
    return t


def _stream(pointer, device):
    s = _streams.get((pointer, device))
    if s is None:
        torch.cuda.set_device(device)
        s = torch.cuda.ExternalStream(pointer, device=torch.device("cuda", device))
        _streams[(pointer, device)] = s
    return s


def _on_stream(pointer, device, work):
    if not pointer:
        return work()
    with torch.cuda.stream(_stream(pointer, device)):
        return work()


def _describe(t):
    """'<fib dtype>:<shape>' of the data the tensor holds (its storage's dtype and extents)."""
    name = str(_dtype_of(t)).replace("torch.", "")
    code = _codes.get(name)
    if code is None:
        raise TypeError("the solution returned a tensor of dtype %s, which fib has no format for"
                        % name)
    shape = list(_shape_of(t))
    if name == "float4_e2m1fn_x2" and shape:
        shape[-1] *= 2
    return "%d:%s" % (code, ",".join(str(d) for d in shape))


def call(index, args, views, dps, pointer, device):
    """'K' and the results' formats ('<fib dtype>:<shape>;...'), or 'E' and the traceback."""
    global _results
    fn = _functions[index]
    try:
        tensors = [_tensor(a, v) for a, v in zip(args, views.split(","))]
        out = _on_stream(pointer, device, lambda: fn(*tensors))
        if dps:
            return "K"
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        for i, t in enumerate(outs):
            if not isinstance(t, _Tensor):
                raise TypeError("a value-returning solution returns a tensor or a tuple of "
                                "tensors; result #%d is a %s" % (i + 1, type(t).__name__))
            # Exactly torch.Tensor: a subclass can say what it likes about its dtype and shape.
            if type(t) is not _Tensor:
                raise TypeError("result #%d is a %s, a subclass of torch.Tensor; fib takes "
                                "exactly torch.Tensor (return the tensor itself, e.g. "
                                "t.as_subclass(torch.Tensor))" % (i + 1, type(t).__qualname__))
        _results = outs
        return "K" + ";".join(_describe(t) for t in outs)
    except BaseException:
        return "E" + _traceback()


def copy_out(capsules, views, pointer, device):
    global _results
    try:
        def work():
            for i, (src, cap, view) in enumerate(zip(_results, capsules, views.split(","))):
                dst = _tensor(cap, view)
                # fib's buffer was made with the result's own dtype and shape: a copy, never a
                # conversion or a broadcast.
                if _dtype_of(dst) != _dtype_of(src) or _shape_of(dst) != _shape_of(src):
                    raise TypeError("result #%d changed from %s %s to %s %s during the call"
                                    % (i + 1, _dtype_of(dst), list(_shape_of(dst)),
                                       _dtype_of(src), list(_shape_of(src))))
                _copy(dst, src)
        _on_stream(pointer, device, work)
        return ""
    except BaseException:
        return _traceback()
    finally:
        _results = None
