"""Reading a sharecheck trace file as `sharecheck report` does: the file, then what its ring file
(FILE.ring) still holds when the process ended without exit handlers (layout:
core/src/ring.rs). Used by check_traces.py and gpu-rules.sh."""
import json
import os
import struct

RING_SUFFIX = ".ring"
MAGIC = b"SCRING01"
HEADER = 4096


def recovered_tail(path, trace_len):
    """The bytes past the trace file's end that its ring holds (b"" without a ring)."""
    try:
        with open(path + RING_SUFFIX, "rb") as f:
            data = f.read()
    except OSError:
        return b""
    if len(data) < HEADER or data[:8] != MAGIC:
        return b""
    ring, appended = struct.unpack_from("<QQ", data, 8)
    if ring == 0 or len(data) != HEADER + ring or trace_len < appended:
        return b""
    body = data[HEADER:]
    start = trace_len % ring
    return (body[start:] + body[:start]).rstrip(b"\0")


def read_lines(path):
    """The trace's lines (file and ring tail), without NUL gaps, cut records' pieces and records
    the ring repeats; each line is one JSON text (a cut record may still fail to parse)."""
    with open(path, "rb") as f:
        data = f.read()
    data += recovered_tail(path, len(data))
    lines, seqs = [], set()
    for piece in data.split(b"\0"):
        for raw in piece.split(b"\n"):
            line = raw.decode("utf-8", "replace")
            if not line.strip():
                continue
            try:
                seq = json.loads(line).get("seq")
            except ValueError:
                seq = None
            if seq is not None and seq in seqs:
                continue
            seqs.add(seq)
            lines.append(line)
    return lines


def is_trace(name):
    return ".jsonl" in name and not name.endswith(RING_SUFFIX)
