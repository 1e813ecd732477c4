#!/usr/bin/python3
"""Writes testdata/safetensors/corrupt/*.safetensors: one file per way a safetensors file can lie.
optkit must refuse every one with exit 2 and a message naming the file (tests/cli/test_cli_eval.sh)."""
import json
import os
import struct

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corrupt")


def build(header, data=b"", length=None, raw_header=None):
    text = raw_header if raw_header is not None else json.dumps(header).encode()
    n = len(text) if length is None else length
    return struct.pack("<Q", n) + text + data


def ok_header(**over):
    h = {"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}
    h["a"].update(over)
    return h


CASES = {
    "empty": b"",
    "short_length": b"\x10\x00\x00",
    "header_past_eof": build(ok_header(), b"\0" * 8, length=4096),
    "header_length_huge": struct.pack("<Q", 1 << 40) + b"{}",
    "not_json": build(None, b"", raw_header=b"{not json at all}"),
    "json_array": build(None, b"", raw_header=b"[1, 2, 3]"),
    "unknown_dtype": build(ok_header(dtype="Q4_K"), b"\0" * 8),
    "shape_size_mismatch": build(ok_header(shape=[3]), b"\0" * 8),
    "offsets_past_end": build(ok_header(data_offsets=[0, 8]), b"\0" * 4),
    "end_before_begin": build(ok_header(data_offsets=[8, 0]), b"\0" * 8),
    "negative_dim": build(ok_header(shape=[-2]), b"\0" * 8),
    "overlapping": build({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                          "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}, b"\0" * 12),
    "hole": build({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                   "b": {"dtype": "F32", "shape": [1], "data_offsets": [8, 12]}}, b"\0" * 12),
    "trailing_garbage": build(ok_header(), b"\0" * 16),
    "duplicate_name": build(None, b"\0" * 8, raw_header=b'{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},'
                                                        b'"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}'),
    "metadata_not_strings": build({"__metadata__": {"format": 1}, **ok_header()}, b"\0" * 8),
    "missing_offsets": build({"a": {"dtype": "F32", "shape": [2]}}, b"\0" * 8),
    "unknown_field": build(ok_header(extra=1), b"\0" * 8),
    "shape_overflow": build(ok_header(shape=[1 << 62, 1 << 62]), b"\0" * 8),
}


def main():
    os.makedirs(OUT, exist_ok=True)
    for name, blob in CASES.items():
        with open(os.path.join(OUT, name + ".safetensors"), "wb") as f:
            f.write(blob)


if __name__ == "__main__":
    main()
