"""onnx_eval.py: runs an ONNX graph with NumPy, one operator at a time as
the ONNX operator specification defines it, so that test_cdpool.py can
check what export_onnx() writes without ONNX Runtime (not in Debian) and
without torch (which wrote it).

    run(model, {"bands": x}) -> {output name: array}

Only the operators cdpool's exported models use (the engine's layers and
Deployed's standardization) are read; any other one raises
NotImplementedError naming it. Tensors are NCHW; Conv and ConvTranspose
with group 1, pooling with ceil_mode 0.
"""
import numpy as np
from numpy.lib.stride_tricks import sliding_window_view
from onnx import helper, mapping, numpy_helper


def _attrs(node):
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def _windows(x, k, stride, dil=(1, 1)):
    """(N, C, OH, OW, KH, KW) views of x (N, C, H, W)."""
    eh, ew = dil[0] * (k[0] - 1) + 1, dil[1] * (k[1] - 1) + 1
    w = sliding_window_view(x, (eh, ew), axis=(2, 3))
    return w[:, :, ::stride[0], ::stride[1], ::dil[0], ::dil[1]]


def _pad(x, pads, value=0.0):
    h0, w0, h1, w1 = pads
    return np.pad(x, ((0, 0), (0, 0), (h0, h1), (w0, w1)), constant_values=value)


def _conv(x, w, b=None, strides=(1, 1), pads=(0, 0, 0, 0), dilations=(1, 1), group=1, **_):
    assert group == 1, "Conv: group %d" % group
    win = _windows(_pad(x, pads), w.shape[2:], strides, dilations)
    y = np.einsum("nchwij,fcij->nfhw", win, w, optimize=True)
    return y if b is None else y + b[None, :, None, None]


def _conv_t(x, w, b=None, strides=(1, 1), pads=(0, 0, 0, 0), group=1, output_padding=(0, 0),
            dilations=(1, 1), **_):
    assert group == 1 and tuple(dilations) == (1, 1) and not any(output_padding), "ConvTranspose"
    n, c, h, wd = x.shape
    _, f, kh, kw = w.shape
    s0, s1 = strides
    full = np.zeros((n, f, (h - 1) * s0 + kh, (wd - 1) * s1 + kw), x.dtype)
    for i in range(kh):
        for j in range(kw):
            full[:, :, i:i + (h - 1) * s0 + 1:s0, j:j + (wd - 1) * s1 + 1:s1] += \
                np.einsum("nchw,cf->nfhw", x, w[:, :, i, j])
    y = full[:, :, pads[0]:full.shape[2] - pads[2], pads[1]:full.shape[3] - pads[3]]
    return y if b is None else y + b[None, :, None, None]


def _pool(x, kernel_shape, strides=None, pads=(0, 0, 0, 0), ceil_mode=0, kind="max",
          count_include_pad=0, **_):
    assert not ceil_mode, "pooling with ceil_mode"
    strides = strides or (1, 1)
    if kind == "max":
        return _windows(_pad(x, pads, -np.inf), kernel_shape, strides).max(axis=(4, 5))
    s = _windows(_pad(x, pads), kernel_shape, strides).sum(axis=(4, 5))
    if count_include_pad:
        return s / (kernel_shape[0] * kernel_shape[1])
    ones = _windows(_pad(np.ones_like(x[:1, :1]), pads), kernel_shape, strides).sum(axis=(4, 5))
    return s / ones


def _softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _bn(x, g, b, mean, var, epsilon=1e-5, **_):
    r = (1, -1, 1, 1)
    return (x - mean.reshape(r)) / np.sqrt(var.reshape(r) + epsilon) * g.reshape(r) + b.reshape(r)


def _resize(x, roi=None, scales=None, sizes=None, mode="nearest",
            coordinate_transformation_mode="half_pixel", nearest_mode="round_prefer_floor", **_):
    """Up-sampling as the engine's [upsample] exports (by a factor, or to
    sizes): nearest (asymmetric, floor) or linear (half_pixel,
    align_corners=False)."""
    if sizes is not None and len(sizes):
        out = [int(v) for v in sizes]
    else:
        out = [int(np.floor(d * s)) for d, s in zip(x.shape, scales)]
    mode = mode.decode() if isinstance(mode, bytes) else mode
    ys = []
    for axis in (2, 3):
        n_in, n_out = x.shape[axis], out[axis]
        scale = n_out / n_in
        if mode == "nearest":
            ys.append(np.minimum(np.floor(np.arange(n_out) / scale).astype(int), n_in - 1))
        else:
            ys.append(np.clip((np.arange(n_out) + 0.5) / scale - 0.5, 0, n_in - 1))
    if mode == "nearest":
        return x[:, :, ys[0]][:, :, :, ys[1]]
    for axis, pos in zip((2, 3), ys):
        lo = np.floor(pos).astype(int)
        hi = np.minimum(lo + 1, x.shape[axis] - 1)
        t = (pos - lo).astype(x.dtype)
        shape = [1, 1, 1, 1]
        shape[axis] = -1
        t = t.reshape(shape)
        x = np.take(x, lo, axis=axis) * (1 - t) + np.take(x, hi, axis=axis) * t
    return x


def _pad_op(x, pads, value=None, mode=b"constant"):
    assert mode in (b"constant", "constant"), "Pad mode %r" % mode
    r = x.ndim
    return np.pad(x, [(int(pads[i]), int(pads[i + r])) for i in range(r)],
                  constant_values=0 if value is None else value)


def _slice(x, starts, ends, axes=None, steps=None):
    """Slice (opset 10+): starts and ends clamped to each axis as numpy's
    slices clamp them."""
    axes = range(len(starts)) if axes is None else axes
    steps = [1] * len(starts) if steps is None else steps
    idx = [slice(None)] * x.ndim
    for a, b, e, st in zip(axes, starts, ends, steps):
        idx[int(a)] = slice(int(b), int(e), int(st))
    return x[tuple(idx)]


def _const(value=None, **_):
    return numpy_helper.to_array(value)


OPS = {
    "Conv": _conv, "ConvTranspose": _conv_t,
    "MaxPool": lambda x, **a: _pool(x, kind="max", **a),
    "AveragePool": lambda x, **a: _pool(x, kind="avg", **a),
    "GlobalAveragePool": lambda x: x.mean(axis=(2, 3), keepdims=True),
    "BatchNormalization": _bn,
    "Relu": lambda x: np.maximum(x, 0),
    "LeakyRelu": lambda x, alpha=0.01: np.where(x > 0, x, x * np.float32(alpha)),
    "Sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "Softmax": _softmax,
    "Concat": lambda *xs, axis: np.concatenate(xs, axis=axis),
    "Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": np.divide,
    "Abs": np.abs,
    "IsInf": lambda x, detect_negative=1, detect_positive=1: np.isinf(x),
    "IsNaN": np.isnan, "Or": np.logical_or, "Not": np.logical_not, "Where": np.where,
    "Shape": lambda x: np.array(x.shape, np.int64),
    "ConstantOfShape": lambda s, value=None: np.full(tuple(s), numpy_helper.to_array(value)
                                                     if value is not None else np.float32(0)),
    "Cast": lambda x, to: x.astype(mapping.TENSOR_TYPE_TO_NP_TYPE[to]),
    "Constant": _const,
    "Identity": lambda x: x,
    "Flatten": lambda x, axis=1: x.reshape(int(np.prod(x.shape[:axis])), -1),
    "Reshape": lambda x, s, allowzero=0: x.reshape([x.shape[i] if v == 0 and not allowzero else v
                                                    for i, v in enumerate(s)]),
    "Gemm": lambda a, b, c=None, alpha=1.0, beta=1.0, transA=0, transB=0:
        alpha * (a.T if transA else a) @ (b.T if transB else b) + (0 if c is None else beta * c),
    "Resize": _resize,
    "Equal": np.equal,
    "Expand": lambda x, s: x * np.ones(tuple(int(v) for v in s), x.dtype),
    "Gather": lambda x, i, axis=0: np.take(x, i, axis=axis),
    "Unsqueeze": lambda x, axes: np.expand_dims(x, tuple(int(a) for a in axes)),
    "Slice": _slice,
    "Pad": _pad_op,
}


def run(model, feeds):
    """Evaluates model's graph (an onnx.ModelProto) on feeds {name: array}."""
    env = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    env.update(feeds)
    for node in model.graph.node:
        fn = OPS.get(node.op_type)
        if fn is None:
            raise NotImplementedError("onnx_eval: operator %s" % node.op_type)
        args = [env[i] if i else None for i in node.input]
        if node.op_type == "Resize":
            args += [None] * (4 - len(args))
            out = fn(args[0], args[1], args[2], args[3], **_attrs(node))
        else:
            while args and args[-1] is None:
                args.pop()
            out = fn(*args, **_attrs(node))
        env[node.output[0]] = out
    return {o.name: env[o.name] for o in model.graph.output}
