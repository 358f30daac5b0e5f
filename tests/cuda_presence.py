"""Whether the zerotrain under test sees a CUDA device, for the Python GPU tests: they exit 77 (a
ctest skip) without one, unless ZT_REQUIRE_GPU is set (tools/gpu_session.sh sets it on the lent GPU
machine), where a missing device (a driver older than the toolkit, say) is a failure, as is a
`zerotrain version` that did not run: neither may read as a skip there."""
import os
import subprocess

SKIP = 77


def require_cuda_device(zerotrain, what):
    """None when a device is visible; else the exit code for the test to return (77 or 1)."""
    p = subprocess.run([zerotrain, "version"], capture_output=True, text=True)
    lines = p.stdout.strip().splitlines()
    if p.returncode != 0 or not lines:
        print(f"FAILED: `{zerotrain} version` exited {p.returncode}: {p.stderr.strip()[-500:]}")
        return 1
    cuda_line = next((line for line in lines if line.startswith("cuda:")), lines[-1])
    if "cuda: built;" in cuda_line and "; 0 device(s)" not in cuda_line:
        return None
    if os.environ.get("ZT_REQUIRE_GPU"):
        print(f"FAILED: ZT_REQUIRE_GPU is set but no CUDA device is visible ({cuda_line!r}): {what} did not run")
        return 1
    print(f"SKIPPED: no CUDA device visible ({cuda_line!r}): {what} has not run here")
    return SKIP
