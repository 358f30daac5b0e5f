"""The tiny Shakespeare corpus that tests train on: ../shared/data/tinyshakespeare.txt beside the
repository (the project's shared material, never copied into it; nanoGPT's `input.txt`). A test
that needs it, run where it is absent, says so and exits 77, which ctest shows as skipped
(SKIP_RETURN_CODE 77) rather than as a failure."""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY_SHAKESPEARE = os.path.join(ROOT, "..", "shared", "data", "tinyshakespeare.txt")


def require_tiny_shakespeare():
    """The corpus's path; exits 77 with one line where it is absent."""
    if not os.path.isfile(TINY_SHAKESPEARE):
        print(f"{os.path.normpath(TINY_SHAKESPEARE)} is absent (the shared tiny Shakespeare corpus beside the "
              "repository, nanoGPT's input.txt): skipped")
        sys.exit(77)
    return TINY_SHAKESPEARE
