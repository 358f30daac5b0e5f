#!/usr/bin/env python3
"""Rewrites a CUDA launcher file (kernels/cuda/*.cu) as C++ the SIMT emulator runs ([Note: launcher
emulation] in tests/emulation/launchers/launcher_emulation.h): each launch

    KERNEL<<<GRID, BLOCK, SMEM, STREAM>>>(ARGS)

becomes

    ::simt::launch_on(GRID, BLOCK, SMEM, STREAM, [&](auto... zt_a) { KERNEL(zt_a...); }, ARGS)

The lambda resolves KERNEL at the call, with the arguments' own types, as a CUDA launch converts
them (a template-id passed as a function pointer does not resolve where the kernel template has
more parameters than the id names). KERNEL is found by scanning back from `<<<` over one name with
its qualifiers and balanced <...> or (...) groups; a launch of another shape stops the rewrite
with the line it could not read, so no launch runs unconverted.

usage: rewrite_launches.py IN.cu OUT.cpp
"""
import re
import sys

NAME = re.compile(r"[A-Za-z0-9_:]")


def kernel_start(src, at):
    """Index where the kernel expression launched at `at` (the `<<<`) begins."""
    i = at - 1
    while src[i].isspace():
        i -= 1
    while True:
        if src[i] in ">)":  # a balanced group, backwards
            close, opening, depth = src[i], "<" if src[i] == ">" else "(", 0
            while True:
                depth += src[i] == close
                depth -= src[i] == opening
                if depth == 0:
                    break
                i -= 1
            i -= 1
            while src[i].isspace():
                i -= 1
            continue
        if not NAME.match(src[i]):
            raise SystemExit(f"rewrite_launches: no kernel name before the launch at line {src.count(chr(10), 0, at) + 1}")
        while NAME.match(src[i]):
            i -= 1
        j = i
        while src[j].isspace():
            j -= 1
        if src[j] == ":" and src[j - 1] == ":":  # a qualifier broken across lines
            i = j
            continue
        return i + 1


def matching_paren(src, opening):
    depth = 0
    for i in range(opening, len(src)):
        depth += src[i] == "("
        depth -= src[i] == ")"
        if depth == 0:
            return i
    raise SystemExit("rewrite_launches: unbalanced launch arguments")


def rewrite(src):
    while (at := src.find("<<<")) >= 0:
        start = kernel_start(src, at)
        close = src.index(">>>", at)
        opening = close + 3
        if src[opening] != "(":
            raise SystemExit(f"rewrite_launches: no arguments after the launch at line {src.count(chr(10), 0, at) + 1}")
        end = matching_paren(src, opening)
        kernel, config, args = src[start:at].strip(), src[at + 3:close], src[opening + 1:end]
        call = f"::simt::launch_on({config}, [&](auto... zt_a) {{ {kernel}(zt_a...); }}"
        src = src[:start] + call + (f", {args})" if args.strip() else ")") + src[end + 1:]
    return src


def main():
    with open(sys.argv[1]) as f:
        text = f.read()
    out = f"// Generated from {sys.argv[1]} by tests/emulation/launchers/rewrite_launches.py: do not edit.\n" + rewrite(text)
    with open(sys.argv[2], "w") as f:
        f.write(out)


if __name__ == "__main__":
    main()
