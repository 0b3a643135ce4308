"""safetensors read/write and the bf16 / f16 bit helpers, numpy only.

bf16 tensors are numpy uint16 arrays holding the bit patterns (numpy has no bfloat16).
"""
import json
import struct

import numpy as np

# posenc manifest dtype -> (safetensors dtype, numpy dtype of the stored array)
DTYPES = {
    "f64": ("F64", np.dtype("<f8")),
    "f32": ("F32", np.dtype("<f4")),
    "f16": ("F16", np.dtype("<f2")),
    "bf16": ("BF16", np.dtype("<u2")),
    "i64": ("I64", np.dtype("<i8")),
    "i32": ("I32", np.dtype("<i4")),
}
_ST_TO_NP = {st: npd for st, npd in DTYPES.values()}
_NP_TO_ST = {np.dtype("<f8"): "F64", np.dtype("<f4"): "F32", np.dtype("<f2"): "F16",
             np.dtype("<u2"): "BF16", np.dtype("<i8"): "I64", np.dtype("<i4"): "I32"}


def read_header(path):
    """Returns (header dict, offset of the data block) of a safetensors file."""
    with open(path, "rb") as f:
        raw = f.read(8)
        if len(raw) != 8:
            raise ValueError(f"read_header: path={path!r} is too short to be a safetensors file")
        n = struct.unpack("<Q", raw)[0]
        text = f.read(n)
    if len(text) != n:
        raise ValueError(f"read_header: path={path!r} is truncated (header of {n} bytes announced)")
    return json.loads(text), 8 + n


def read_safetensors(path):
    """Returns {name: numpy array} (read-only views of the file's bytes); bf16 as uint16 bits."""
    header, base = read_header(path)
    with open(path, "rb") as f:
        blob = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info["dtype"] not in _ST_TO_NP:
            raise ValueError(f"read_safetensors: path={path!r} tensor {name!r} has dtype "
                             f"{info['dtype']!r}, not one of {sorted(_ST_TO_NP)}")
        begin, end = info["data_offsets"]
        if base + end > len(blob):
            raise ValueError(f"read_safetensors: path={path!r} is truncated in tensor {name!r}")
        out[name] = np.frombuffer(blob[base + begin:base + end],
                                  dtype=_ST_TO_NP[info["dtype"]]).reshape(info["shape"])
    return out


def write_safetensors(path, tensors, dtypes=None, metadata=None):
    """Writes {name: array} deterministically (sorted names, 8-byte aligned header).

    dtypes: optional {name: "bf16" | "BF16" | ...}; a uint16 array is written as BF16 bits.
    """
    header, offset, blobs = {}, 0, []
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name])
        want = (dtypes or {}).get(name)
        if want is not None:
            st = DTYPES[want][0] if want in DTYPES else want
        else:
            key = a.dtype.newbyteorder("<") if a.dtype.byteorder not in ("=", "|", "<") else a.dtype
            st = _NP_TO_ST.get(np.dtype(key).newbyteorder("<"))
            if st is None:
                raise ValueError(f"write_safetensors: tensor {name!r} has numpy dtype {a.dtype}, "
                                 f"which safetensors cannot store here (use one of f8 f4 f2 u2 i8 i4)")
        data = a.astype(_ST_TO_NP[st]).tobytes()
        header[name] = {"dtype": st, "shape": list(a.shape),
                        "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    text = json.dumps(header, separators=(",", ":"))
    text += " " * ((8 - (8 + len(text)) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text.encode() + b"".join(blobs))


def bf16_to_float32(bits):
    """Widens bf16 bit patterns (uint16) to float32 exactly."""
    bits = np.asarray(bits)
    if bits.dtype != np.uint16:
        raise TypeError(f"bf16_to_float32: bits has dtype {bits.dtype}, expected uint16 bit patterns")
    return (bits.astype(np.uint32) << np.uint32(16)).view(np.float32)


def float32_to_bf16(x):
    """Rounds to bf16 (nearest, ties to even) and returns the uint16 bit patterns.

    The input is first converted to float32 (a float64 input is rounded twice: round to float32
    yourself first if that matters, or use float64_to_bf16). NaN stays a (quiet) NaN.
    """
    u = np.ascontiguousarray(np.asarray(x, dtype=np.float32)).view(np.uint32)
    rounded = ((u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)).astype(np.uint16)
    nan = np.isnan(u.view(np.float32))
    return np.where(nan, ((u >> np.uint32(16)) | np.uint32(0x40)).astype(np.uint16), rounded)


def float64_to_bf16(x):
    """Rounds float64 values to bf16 once (nearest, ties to even); returns uint16 bits.

    Goes through float32 rounded to odd (truncate, then set the last bit when inexact), which
    makes the second rounding to bf16 equal to a single correct rounding.
    """
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        f = x.astype(np.float32)
        toward_zero = np.where(np.abs(f.astype(np.float64)) > np.abs(x),
                               np.nextafter(f, np.float32(0)), f).astype(np.float32)
        inexact = np.isfinite(x) & (toward_zero.astype(np.float64) != x)
        bits = np.ascontiguousarray(toward_zero).view(np.uint32) | inexact.astype(np.uint32)
    return float32_to_bf16(bits.view(np.float32))


def to_float64(a, dtype):
    """Values of an array stored in posenc dtype `dtype` (bf16 as bits) as float64."""
    if dtype == "bf16":
        return bf16_to_float32(a).astype(np.float64)
    return np.asarray(a).astype(np.float64)
