#!/usr/bin/env python3
"""Runs a test under .venv-hf's python: hf_python.py PYTHON SCRIPT [ARGS...] becomes PYTHON SCRIPT
[ARGS...] (the same process). Where PYTHON is missing (tools/setup.sh makes .venv-hf), it exits 77
with one line, which CTest shows as skipped, as hf_env.require_hf does where .venv-hf lacks a
library; CTest itself had reported the missing interpreter as a failure."""
import os
import sys


def main():
    python = sys.argv[1]
    if not os.access(python, os.X_OK):
        print(f"{python} not found: tools/setup.sh makes .venv-hf (skipped)")
        return 77
    os.execv(python, [python] + sys.argv[2:])


if __name__ == "__main__":
    sys.exit(main())
