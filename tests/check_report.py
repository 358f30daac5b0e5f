"""The reporting convention the Python test drivers share: one line per check ("ok" or "FAIL"),
then "N passed, N failed" (the closing line CI reads), and exit code 1 when anything failed."""


class Checks:
    def __init__(self, quiet_ok=False):
        self.total = 0
        self.failures = []
        self.quiet_ok = quiet_ok  # print only failures (drivers with hundreds of checks)

    def check(self, ok, what):
        self.total += 1
        if not ok:
            self.failures.append(what)
        if not ok or not self.quiet_ok:
            print(("ok    " if ok else "FAIL  ") + what)
        return ok

    def finish(self):
        print(f"{self.total - len(self.failures)} passed, {len(self.failures)} failed")
        if self.total == 0:
            print("FAIL  no check ran")  # a driver that checked nothing must not pass
            return 1
        return 1 if self.failures else 0
