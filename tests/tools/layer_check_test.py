#!/usr/bin/env python3
"""tools/check_layers.cmake, the build's layering rule, on a copy of the tree: the tree as it is
passes; an upward include (a sharding header including the app's config), a model including the
trainer, and an engine file including a CPU kernel's header each fail, naming the file and why.

usage: layer_check_test.py SOURCE_DIR [CMAKE]
"""
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from check_report import Checks  # noqa: E402

report = Checks()
check = report.check


def main():
    source, cmake = sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "cmake"
    work = report.work_folder("zt_layer_check_")
    for folder in ("engine", "kernels", "models", "tools"):
        shutil.copytree(os.path.join(source, folder), os.path.join(work, folder))

    def run():
        return subprocess.run([cmake, f"-DROOT={work}", "-P", os.path.join(work, "tools", "check_layers.cmake")],
                              capture_output=True, text=True, timeout=120)

    p = run()
    check(p.returncode == 0, "the tree as it is keeps its layers" + ("" if p.returncode == 0 else f": {p.stderr}"))
    for path, include, expect in (
            ("engine/distributed/sharding/zero_options.h", "engine/app/config/run_config.h",
             "engine/distributed may not use engine/app"),
            ("models/unit_layout.h", "engine/app/trainer/trainer.h", "models may not use engine/app"),
            ("engine/app/trainer/trainer.cpp", "kernels/cpu/matmul.h", "only kernels/ includes a backend's headers")):
        target = os.path.join(work, path)
        with open(target) as f:
            original = f.read()
        with open(target, "a") as f:
            f.write(f'#include "{include}"\n')
        p = run()
        check(p.returncode != 0 and path in p.stderr and include in p.stderr and expect in p.stderr,
              f"{path} including {include} fails: {expect}")
        with open(target, "w") as f:
            f.write(original)
    return report.finish()


if __name__ == "__main__":
    sys.exit(main())
