#!/usr/bin/env python3
"""Regenerates core/src/meanings.rs: what each CUDA and HIP result code means, in the headers' own
words (the comment cuda.h gives each CUresult value, the `///<` comment hip_runtime_api.h gives
each hipError_t value), and which codes each covered function's documentation names (in its
return list or its sentences; cuda.h's `\\notefnerr` adds the codes of earlier asynchronous launches).
Usage: scripts/gen-meanings.py CUDA_INCLUDE_DIR [HIP_INCLUDE_DIR]"""
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


def covered(api):
    """The base names of the covered (not observed) functions of one API, from core/src/functions.rs."""
    src = open(os.path.join(os.path.dirname(__file__), "..", "core", "src", "functions.rs")).read()
    out = []
    for m in re.finditer(r"^\s*(cuda|hip) \w+ \[(\w+) \d+ \w+( observed)?\]", src, re.M):
        if m.group(1) == api and not m.group(3) and m.group(2) not in out:
            out.append(m.group(2))
    return out


def doc_before(src, decl):
    """The doc comment that ends right before the first declaration matching `decl`."""
    m = re.search(decl, src, re.M)
    if not m:
        return None
    head = src[: m.start()].rstrip()
    if not head.endswith("*/"):
        return None
    return head[head.rindex("/**") :]


def named_codes(doc, name_re, codes):
    """The codes a function's comment names anywhere (its return list and its sentences), in order."""
    out = []
    for name in re.findall(name_re, doc):
        if name in codes and codes[name] not in out:
            out.append(codes[name])
    return out


def enum_codes(src, start, end, prefix):
    block = src[src.index(start) :]
    block = block[: block.index(end)]
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"\b(%s[A-Za-z0-9_]+)\s*=\s*(\d+)" % prefix, block)}


def cuda_returns(header, meanings):
    src = open(header).read()
    codes = enum_codes(src, "typedef enum cudaError_enum", "} CUresult;", "CUDA_")
    # `\\notefnerr`: "this function may also return error codes from previous, asynchronous
    # launches", the codes cuda.h says leave the process unusable ("any further CUDA work will
    # return the same error").
    sticky = [c for c, m in sorted(meanings.items()) if "any further CUDA work will return the same error" in m]
    out = {}
    for base in covered("cuda"):
        doc = doc_before(src, r"^CUresult CUDAAPI %s\(" % base)
        if not doc or not re.search(r"\\returns?\b", doc):
            sys.exit(f"cuda.h: no return list for {base}")
        listed = named_codes(doc, r"CUDA_[A-Z_0-9]+", codes)
        if "\\notefnerr" in doc:
            listed += [c for c in sticky if c not in listed]
        out[base] = listed
    return out


def hip_returns(header):
    src = open(header).read()
    codes = enum_codes(src, "hipError_t {", "} hipError_t;", "hip")
    out = {}
    for base in covered("hip"):
        doc = doc_before(src, r"^hipError_t %s\(" % base)
        if not doc or not re.search(r"@returns?\b|\bReturns\b", doc):
            sys.exit(f"hip_runtime_api.h: no return list for {base}")
        out[base] = named_codes(doc, r"hip[A-Za-z0-9_]+", codes)
    return out


def emit_returns(name, doc, returns):
    yield f"/// {doc}"
    yield f"pub fn {name}(base: &str) -> Option<&'static [i32]> {{"
    yield "    Some(match base {"
    for base, codes in returns.items():
        yield f"        {rust_str(base)} => &[{', '.join(str(c) for c in sorted(codes))}],"
    yield "        _ => return None,"
    yield "    })"
    yield "}"


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
        "//! What each result code means, in the headers' own words, and which codes each covered",
        "//! function's documentation lists (generated from CUDA 13.5 `cuda.h` and HIP",
        "//! `hip_runtime_api.h` by scripts/gen-meanings.py; do not edit).",
        "",
    ]
    lines += emit("cuda_result_meaning", "What cuda.h says a `CUresult` value means.", cuda_meanings(cuda_h))
    lines.append("")
    lines += emit("hip_result_meaning", "What hip_runtime_api.h says a `hipError_t` value means.", hip_meanings(hip_h))
    lines.append("")
    lines += emit_returns(
        "cuda_documented_returns",
        "The codes cuda.h's comment for a covered function (by base name) names, and, where it says the function may also return errors of earlier asynchronous launches, the codes cuda.h says leave the process unusable.",
        cuda_returns(cuda_h, cuda_meanings(cuda_h)),
    )
    lines.append("")
    lines += emit_returns(
        "hip_documented_returns",
        "The codes hip_runtime_api.h's comment for a covered function (by base name) names.",
        hip_returns(hip_h),
    )
    open(out, "w").write("\n".join(lines) + "\n")


main()
