#!/usr/bin/env python3
"""Regenerates core/src/meanings.rs: what each CUDA and HIP result code means, in the headers' own
words (the comment cuda.h gives each CUresult value, the `///<` comment hip_runtime_api.h gives
each hipError_t value). Usage: scripts/gen-meanings.py CUDA_INCLUDE_DIR [HIP_INCLUDE_DIR]"""
import os
import re
import sys


def clean(text):
    text = re.sub(r"\\(deprecated|ref|p|c)\b", "", text)
    text = text.replace("::", "")
    text = re.sub(r"\s+", " ", text).strip()
    return text


def cuda_meanings(header):
    src = open(header).read()
    block = src[src.index("typedef enum cudaError_enum"):]
    block = block[: block.index("} CUresult;")]
    out = {}
    for m in re.finditer(r"/\*\*(.*?)\*/\s*(CUDA_[A-Z_0-9]+)\s*=\s*(\d+)", block, re.S):
        body = "\n".join(l.strip().lstrip("*") for l in m.group(1).splitlines())
        code = int(m.group(3))
        out.setdefault(code, clean(body))
    return out


def hip_meanings(header):
    lines = open(header).read().splitlines()
    start = next(i for i, l in enumerate(lines) if re.search(r"typedef enum (__HIP_NODISCARD )?hipError_t", l))
    out = {}
    current = None
    for l in lines[start + 1:]:
        if l.strip().startswith("} hipError_t"):
            break
        m = re.match(r"\s*(hip[A-Za-z0-9_]+)\s*=\s*(\d+)\s*,?\s*(///<(.*))?$", l)
        if m:
            current = int(m.group(2))
            if m.group(4) and current not in out:
                out[current] = m.group(4).strip()
            elif not m.group(4):
                current = None
            continue
        c = re.match(r"\s*///<(.*)$", l)
        if c and current is not None and current in out:
            out[current] += " " + c.group(1).strip()
        else:
            current = None
    return {k: clean(v) for k, v in out.items()}


def rust_str(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def emit(name, doc, meanings):
    yield f"/// {doc}"
    yield f"pub fn {name}(code: i32) -> Option<&'static str> {{"
    yield "    Some(match code {"
    for code in sorted(meanings):
        if meanings[code]:
            yield f"        {code} => {rust_str(meanings[code])},"
    yield "        _ => return None,"
    yield "    })"
    yield "}"


def main():
    cuda_h = os.path.join(sys.argv[1], "cuda.h")
    hip_h = os.path.join(sys.argv[2] if len(sys.argv) > 2 else "/usr/include", "hip", "hip_runtime_api.h")
    out = os.path.join(os.path.dirname(__file__), "..", "core", "src", "meanings.rs")
    lines = [
        "//! What each result code means, in the headers' own words (generated from CUDA 13.5",
        "//! `cuda.h` and HIP `hip_runtime_api.h` by scripts/gen-meanings.py; do not edit).",
        "",
    ]
    lines += emit("cuda_result_meaning", "What cuda.h says a `CUresult` value means.", cuda_meanings(cuda_h))
    lines.append("")
    lines += emit("hip_result_meaning", "What hip_runtime_api.h says a `hipError_t` value means.", hip_meanings(hip_h))
    open(out, "w").write("\n".join(lines) + "\n")


main()
