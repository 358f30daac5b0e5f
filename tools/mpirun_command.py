"""The mpirun command the CPU tools start their ranks with, in one place, the same flags as the
tests' ZT_MPIRUN_FLAGS (tests/CMakeLists.txt): ranks may outnumber cores (--oversubscribe) and float
(--bind-to none), shared memory between ranks on one machine (btl self,vader), and the ob1 layer
named so that MPI_Init does not first wait on the others it would probe (about 0.2 s a launch here;
docs/results/test_suite_time_cpu.md)."""
import sys

MPIRUN = ["mpirun", "--oversubscribe", "--allow-run-as-root", "--bind-to", "none",
          "--mca", "btl", "self,vader", "--mca", "pml", "ob1"]

if __name__ == "__main__":
    sys.stderr.write("mpirun_command.py: a module the tools import (its MPIRUN list), not a command\n")
    sys.exit(2)
