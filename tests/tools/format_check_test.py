#!/usr/bin/env python3
"""The tree follows .clang-format: `clang-format --dry-run --Werror` over every C++ and CUDA source
git tracks. Skipped visibly (exit 77) where clang-format 14 (Debian's, which the style was checked
with; other versions lay some lines out differently) or git is missing.

usage: format_check_test.py REPO_ROOT
"""
import re
import shutil
import subprocess
import sys

SKIP = 77


def main():
    root = sys.argv[1]
    fmt = shutil.which("clang-format-14") or shutil.which("clang-format")
    if fmt is None or shutil.which("git") is None:
        print("SKIP: clang-format 14 or git not installed")
        return SKIP
    version = subprocess.run([fmt, "--version"], capture_output=True, text=True).stdout
    if not re.search(r"version 14\.", version):
        print(f"SKIP: {fmt} is not clang-format 14 ({version.strip()})")
        return SKIP
    listed = subprocess.run(["git", "-C", root, "ls-files", "*.cpp", "*.h", "*.cu", "*.cuh"], capture_output=True,
                            text=True)
    if listed.returncode != 0:
        print(f"SKIP: {root} is not a git checkout")
        return SKIP
    files = [f for f in listed.stdout.splitlines() if f]
    result = subprocess.run([fmt, "--dry-run", "--Werror", "--style=file", *files], cwd=root, capture_output=True,
                            text=True)
    if result.returncode != 0:
        offenders = sorted(set(re.findall(r"^(\S+?):\d+:\d+: error", result.stderr, re.M)))
        print(f"FAIL: {len(offenders)} file(s) differ from .clang-format (run clang-format -i on them):")
        for f in offenders:
            print(f"  {f}")
        return 1
    print(f"OK: {len(files)} files follow .clang-format")
    return 0


if __name__ == "__main__":
    sys.exit(main())
