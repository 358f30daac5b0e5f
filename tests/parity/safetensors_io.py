"""Strict safetensors reader (and a small writer for the parity self-test), in plain json + numpy.

Exists because the parity test may use only Debian's torch and numpy (no `safetensors` package), and
because it should reject a malformed file from the engine rather than quietly read garbage.
Layout: u64 little-endian header length N, N bytes of JSON header, then the raw little-endian data;
each tensor's data_offsets are [begin, end) relative to the start of the data section.
"""
import json
import os
import struct

import numpy as np

# Element size in bytes and the numpy type each safetensors dtype is stored as.
DTYPES = {
    "F32": (4, np.dtype("<f4")),
    "I32": (4, np.dtype("<i4")),
    "BF16": (2, np.dtype("<u2")),  # raw bits; widened to float32 on load
    "U16": (2, np.dtype("<u2")),
}
MAX_HEADER_BYTES = 100 * 1024 * 1024  # the reference implementation's own limit


class SafetensorsError(Exception):
    """The file does not follow the safetensors format."""


def _no_duplicate_keys(pairs):
    keys = [k for k, _ in pairs]
    if len(keys) != len(set(keys)):
        raise SafetensorsError(f"duplicate keys in JSON header: {sorted(k for k in keys if keys.count(k) > 1)}")
    return dict(pairs)


def bf16_bits_to_f32(bits):
    """bf16 -> f32 is exact: the bf16 bits are the top half of the f32 bits."""
    return (bits.astype(np.uint32) << 16).view(np.float32)


def read_safetensors(path):
    """Returns ({name: numpy array}, {name: dtype name}, {metadata key: str}).

    F32 and BF16 load as float32, I32 as int32, U16 as uint16.

    Raises SafetensorsError naming the tensor at fault if the header is malformed, a dtype is
    unknown, a byte range does not match its shape, or the ranges leave holes/overlaps in the data.
    """
    file_bytes = os.path.getsize(path)
    with open(path, "rb") as f:
        blob = f.read()
    if file_bytes < 8:
        raise SafetensorsError(f"{path}: {file_bytes} bytes, too short for the 8-byte header length")
    (header_bytes,) = struct.unpack("<Q", blob[:8])
    if header_bytes == 0 or header_bytes > MAX_HEADER_BYTES or 8 + header_bytes > file_bytes:
        raise SafetensorsError(f"{path}: header length {header_bytes} is not sane for a {file_bytes}-byte file")
    try:
        # The format allows the header to be padded with trailing spaces (for alignment).
        header = json.loads(blob[8:8 + header_bytes].decode("utf-8").rstrip(" "),
                            object_pairs_hook=_no_duplicate_keys)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise SafetensorsError(f"{path}: header is not UTF-8 JSON: {e}") from e
    if not isinstance(header, dict):
        raise SafetensorsError(f"{path}: header is a {type(header).__name__}, not a JSON object")

    metadata = header.pop("__metadata__", {})
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise SafetensorsError(f"{path}: __metadata__ must map strings to strings, got {metadata!r}")

    data = memoryview(blob)[8 + header_bytes:]
    ranges = []
    tensors, dtypes = {}, {}
    for name, entry in header.items():
        if not isinstance(entry, dict) or set(entry) != {"dtype", "shape", "data_offsets"}:
            raise SafetensorsError(f"{name}: entry must have exactly dtype, shape, data_offsets: {entry!r}")
        dtype, shape, offsets = entry["dtype"], entry["shape"], entry["data_offsets"]
        if dtype not in DTYPES:
            raise SafetensorsError(f"{name}: unsupported dtype {dtype!r} (expected one of {sorted(DTYPES)})")
        if not (isinstance(shape, list) and all(isinstance(d, int) and d >= 0 for d in shape)):
            raise SafetensorsError(f"{name}: shape must be a list of non-negative ints, got {shape!r}")
        if not (isinstance(offsets, list) and len(offsets) == 2 and all(isinstance(o, int) for o in offsets)):
            raise SafetensorsError(f"{name}: data_offsets must be [begin, end], got {offsets!r}")
        begin, end = offsets
        elem_bytes, np_dtype = DTYPES[dtype]
        count = int(np.prod(shape, dtype=np.int64))
        if not 0 <= begin <= end <= len(data):
            raise SafetensorsError(f"{name}: data_offsets {offsets} outside the {len(data)}-byte data section")
        if end - begin != count * elem_bytes:
            raise SafetensorsError(f"{name}: {end - begin} bytes for {dtype} {shape} (needs {count * elem_bytes})")
        ranges.append((begin, end, name))
        array = np.frombuffer(data, dtype=np_dtype, count=count, offset=begin).reshape(shape)
        tensors[name] = bf16_bits_to_f32(array) if dtype == "BF16" else array.copy()
        dtypes[name] = dtype

    # The data section must be covered exactly: contiguous ranges, no holes, no overlaps.
    position = 0
    for begin, end, name in sorted(ranges):
        if begin != position:
            raise SafetensorsError(f"{name}: starts at byte {begin}, expected {position} (hole or overlap)")
        position = end
    if position != len(data):
        raise SafetensorsError(f"{path}: tensors cover {position} bytes of a {len(data)}-byte data section")
    return tensors, dtypes, metadata


def write_safetensors(path, tensors, metadata):
    """tensors: {name: (dtype name, numpy array)}; written in name order, header padded to 8 bytes.

    Only what the engine writes (F32, I32, U16) is supported: this exists for the parity self-test."""
    header = {"__metadata__": dict(metadata)}
    chunks, position = [], 0
    for name in sorted(tensors):
        dtype, array = tensors[name]
        if dtype == "BF16":
            raise ValueError(f"{name}: the self-test writer does not write BF16")
        raw = np.ascontiguousarray(array, dtype=DTYPES[dtype][1]).tobytes()
        header[name] = {"dtype": dtype, "shape": list(array.shape), "data_offsets": [position, position + len(raw)]}
        chunks.append(raw)
        position += len(raw)
    header_json = json.dumps(header).encode("utf-8")
    header_json += b" " * (-len(header_json) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(header_json)))
        f.write(header_json)
        for raw in chunks:
            f.write(raw)
