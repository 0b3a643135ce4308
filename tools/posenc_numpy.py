#!/usr/bin/env python3
"""Read posenc golden files (safetensors) without torch or the safetensors package.

    import posenc_numpy as pn
    tensors = pn.read_safetensors("golden/data/rope/<case>.safetensors")  # name -> numpy array
    pn.write_safetensors("out/<case>.safetensors", {"q_rot": q_rot, "k_rot": k_rot})

bf16 tensors come back as uint16 bit patterns (numpy has no bfloat16); pn.bf16_to_float32(a)
widens them exactly, pn.float32_to_bf16(a) rounds to nearest even. Run as a script to list the
tensors of a file: python3 tools/posenc_numpy.py FILE.safetensors
"""
import json
import struct
import sys

_DTYPES = {"F64": ("<f8", 8), "F32": ("<f4", 4), "F16": ("<f2", 2), "BF16": ("<u2", 2),
           "I64": ("<i8", 8), "I32": ("<i4", 4)}


def read_header(path):
    """Returns (header dict, data offset) of a safetensors file."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
    return header, 8 + n


def read_safetensors(path):
    import numpy as np
    header, base = read_header(path)
    with open(path, "rb") as f:
        blob = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        descr, _ = _DTYPES[info["dtype"]]
        begin, end = info["data_offsets"]
        out[name] = np.frombuffer(blob[base + begin:base + end], dtype=descr).reshape(info["shape"])
    return out


def write_safetensors(path, tensors, dtypes=None):
    """tensors: name -> numpy array; dtypes: optional name -> "BF16" for uint16 bit patterns."""
    import numpy as np
    names = sorted(tensors)
    header, offset, blobs = {}, 0, []
    for name in names:
        a = np.ascontiguousarray(tensors[name])
        st = (dtypes or {}).get(name) or {"<f8": "F64", "<f4": "F32", "<f2": "F16", "<i8": "I64",
                                           "<i4": "I32", "<u2": "BF16"}[a.dtype.newbyteorder("<").str]
        data = a.astype(_DTYPES[st][0]).tobytes()
        header[name] = {"dtype": st, "shape": list(a.shape), "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    text = json.dumps(header, separators=(",", ":"))
    text += " " * ((8 - (8 + len(text)) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text.encode() + b"".join(blobs))


def bf16_to_float32(bits):
    import numpy as np
    return (bits.astype(np.uint32) << 16).view(np.float32)


def float32_to_bf16(x):
    import numpy as np
    u = np.asarray(x, dtype=np.float32).view(np.uint32)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    hdr, _ = read_header(sys.argv[1])
    for key, val in sorted(hdr.items()):
        if key != "__metadata__":
            print(f"{key:24s} {val['dtype']:5s} {val['shape']}")
