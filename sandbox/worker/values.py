"""Plain builtin values as tagged JSON: the only form in which data leaves a program process.
encode() refuses anything that is not a builtin value; decode() rebuilds exact builtin types with
json's parser, so no object of a program's class ever reaches the trusted test.
"""

import json


def encode(v, depth=0):
    """JSON text of a plain builtin value; ValueError/TypeError for anything else."""
    return json.dumps(_enc(v, depth), allow_nan=True)


def _enc(v, depth):
    t = type(v)
    if v is None or t is str or t is int or t is bool or t is float:
        return v
    if depth > 400:
        raise ValueError("value nested too deeply")
    if t is list:
        return [_enc(x, depth + 1) for x in v]
    if t is dict:
        return {"t": "dict", "v": [[_enc(k, depth + 1), _enc(x, depth + 1)] for k, x in v.items()]}
    if t in (tuple, set, frozenset):
        return {"t": t.__name__, "v": [_enc(x, depth + 1) for x in v]}
    if t is bytes:
        return {"t": "bytes", "v": v.hex()}
    if t is complex:
        return {"t": "complex", "v": [v.real, v.imag]}
    raise TypeError(f"a {t.__name__} is not a plain builtin value")


def _dec_hook(obj):
    if len(obj) != 2 or type(obj.get("v")) not in (list, str):
        raise ValueError("malformed value")
    t, v = obj.get("t"), obj["v"]
    if t == "tuple":
        return tuple(v)
    if t in ("set", "frozenset"):
        return (set if t == "set" else frozenset)(v)
    if t == "dict" and all(type(p) is list and len(p) == 2 for p in v):
        return {k: x for k, x in v}
    if t == "bytes" and type(v) is str:
        return bytes.fromhex(v)
    if t == "complex" and len(v) == 2 and all(type(x) in (int, float) for x in v):
        return complex(*v)
    raise ValueError("malformed value")


def decode(text):
    """The only way data from a program reaches the test: json's parser plus exact builtin types."""
    return json.loads(text, object_hook=_dec_hook)
