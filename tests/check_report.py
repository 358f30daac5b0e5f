"""The reporting convention the Python test drivers share: one line per check ("ok" or "FAIL"),
then "N passed, N failed" (the closing line CI reads), and exit code 1 when anything failed.

A driver's work folders come from `work_folder` (or are handed to `remove_on_pass`): `finish`
removes them when every check passed and keeps them, naming each, when one failed, so a failure
can be looked into while passing runs leave nothing behind (a suite run repeatedly would otherwise
fill the disk). A driver that crashes or is killed before `finish` keeps its folders too.
ZT_KEEP_TEST_FOLDERS=1 keeps them after a pass as well."""
import os
import shutil
import tempfile

KEEP_VARIABLE = "ZT_KEEP_TEST_FOLDERS"


def close_work_folders(folders, passed):
    """Removes `folders` when `passed` (and ZT_KEEP_TEST_FOLDERS is not 1), else names each as
    kept. A folder that cannot be removed is named, not failed: the checks have already spoken."""
    keep = not passed or os.environ.get(KEEP_VARIABLE) == "1"
    for folder in folders:
        if keep:
            print(f"work folder kept: {folder}")
            continue
        errors = []
        shutil.rmtree(folder, onerror=lambda _fn, path, info: errors.append(f"{path}: {info[1]}"))
        if errors:
            print(f"note: work folder {folder} not fully removed ({errors[0]})")


class Checks:
    def __init__(self, quiet_ok=False):
        self.total = 0
        self.failures = []
        self.quiet_ok = quiet_ok  # print only failures (drivers with hundreds of checks)
        self.folders = []

    def check(self, ok, what):
        self.total += 1
        if not ok:
            self.failures.append(what)
        if not ok or not self.quiet_ok:
            print(("ok    " if ok else "FAIL  ") + what)
        return ok

    def work_folder(self, prefix):
        """A fresh folder under the system's temporary directory, named `prefix`..., that `finish`
        removes when every check passed."""
        return self.remove_on_pass(tempfile.mkdtemp(prefix=prefix))

    def remove_on_pass(self, folder):
        """Hands `folder` (made elsewhere) to `finish` to remove when every check passed; returns it."""
        self.folders.append(folder)
        return folder

    def finish(self):
        print(f"{self.total - len(self.failures)} passed, {len(self.failures)} failed")
        if self.total == 0:
            print("FAIL  no check ran")  # a driver that checked nothing must not pass
        passed = self.total > 0 and not self.failures
        close_work_folders(self.folders, passed)
        return 0 if passed else 1
