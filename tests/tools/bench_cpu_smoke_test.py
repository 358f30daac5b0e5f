"""Smoke test of tools/bench_cpu.py: its arithmetic, its result file, and its failure modes.

Proves, with stand-in zerotrain and zt_bench_sgemm programs whose step times are known, that the
median skips the warm-up steps, that speedup, tokens/s, GFLOP/s and fraction of peak follow from
them (no share of a peak a side outran: measured under load; no verdict beside a busy process) and from flops/token = 6*N + 6*L*C*T (N with the vocabulary padded to 64; a Llama's by its
own layers), that the real
PyTorch side runs, and that a failing side gives exit 1 with one line and bad flags exit 2. The real-binary run also
proves the PyTorch/zt side loads the OpenBLAS build in the directory zerotrain's library is in, and that a --set
zerotrain refuses exits 2 in one line before the sgemm peak is measured (it exited 1 after it). --help gives every
flag a meaning and its default. The result's commit is the one the zerotrain binary reports (`zerotrain version`,
"+dirty" included), the checkout's under checkout_commit; a missing binary exits 2 in one line before any work.
With --zerotrain and --sgemm (the real binaries) it also runs a tiny config end to end.
Usage: bench_cpu_smoke_test.py [--zerotrain build/zerotrain --sgemm build/tools/zt_bench_sgemm]
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tool_run_util import flag_help  # noqa: E402

BENCH = Path(__file__).resolve().parents[2] / "tools" / "bench_cpu.py"
TINY = ["--set", "model.n_layer=1", "--set", "model.n_head=2", "--set", "model.n_embd=32",
        "--set", "model.block_size=16", "--set", "train.seq_len=16", "--set", "train.micro_batch=2"]

FAKE_ZEROTRAIN = """#!{python}
import json, sys
args = sys.argv[1:]
if args[0] == "version":
    print("zerotrain 0.0 (commit 0123456789ab+dirty)\\ncpu blas: /fake/libopenblas.so.0 core=Haswell (detected), OpenBLAS fake")
    sys.exit(0)
import os
calls = os.path.join(os.path.dirname(os.path.abspath(sys.argv[0])), "train_calls")  # this fake's earlier trains
count = int(open(calls).read()) if args[0] == "train" and os.path.exists(calls) else 0
if args[0] == "train":
    open(calls, "w").write(str(count + 1))
if 0 <= {fail_from} <= count and args[0] == "train":  # fails from its (fail_from + 1)-th train on
    print("train: error: model.n_embd: planted failure", file=sys.stderr)
    sys.exit(2)
config = json.load(open(args[args.index("--config") + 1]))
if args[0] == "memory":  # its params: the counts the test's two shapes have (GPT-2 and Llama TINY)
    print(json.dumps({{"params": 35936 if config["model"].get("arch") == "llama" else 17376}}))
    sys.exit(0)
run_dir = args[args.index("--run-dir") + 1]
os.makedirs(run_dir)
t = config["train"]
with open(os.path.join(run_dir, "metrics.jsonl"), "w") as f:
    for step in range(1, t["max_steps"] + 1):
        # a slow first step the median must skip; each later train 50 ms slower, so rounds differ
        ms = 1000.0 if step == 1 else 100.0 + step + 50.0 * count
        f.write(json.dumps({{"type": "train", "step": step, "loss": 4.0, "step_ms": ms,
                            "tokens": t["micro_batch"] * t["seq_len"]}}) + "\\n")
    f.write(json.dumps({{"type": "summary"}}) + "\\n")
"""

FAKE_SGEMM = """#!{python}
import sys
print('{{"size": 2048, "threads": %s, "gflops": {gflops}, "core": "Haswell"}}' % sys.argv[sys.argv.index("--threads") + 1])
"""


RECORDING_SGEMM = """#!{python}
import os, sys
open(os.path.join(os.path.dirname(os.path.abspath(sys.argv[0])), "sgemm_ran"), "w").close()
print('{{"size": 2048, "threads": 1, "gflops": 100.0, "core": "Haswell"}}')
"""


# An idle machine's reading, for the verdicts' arithmetic beside other tests (which load it).
IDLE = json.dumps({"other_processes_cores": 0.0, "steal_cores": 0.0})


def write_script(path, text, **fmt):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text.format(python=sys.executable, **fmt))
    path.chmod(0o755)
    return str(path)


def run_bench(*flags, env=None):
    return subprocess.run([sys.executable, str(BENCH), *flags], capture_output=True, text=True, timeout=600, env=env)


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def test_arithmetic_with_fakes(tmp):
    zt = write_script(tmp / "fake_zerotrain", FAKE_ZEROTRAIN, fail_from=-1)
    sgemm = write_script(tmp / "fake_sgemm", FAKE_SGEMM, gflops=100.0)
    out = tmp / "result.json"
    # The environment's spinning policy: the PyTorch sides run passive all the same, zerotrain's as given.
    proc = run_bench("--zerotrain", zt, "--sgemm", sgemm, "--steps", "4", "--warmup", "1", "--threads", "1",
                     "--rounds", "2", "--torch-blas", "system", "--out", str(out), *TINY,
                     env=dict(os.environ, OMP_WAIT_POLICY="active", ZT_TEST_CPU_COMPETITION=IDLE))
    check(proc.returncode == 0, f"bench exited {proc.returncode}: {proc.stderr}")
    r = json.loads(out.read_text())
    zt_side, pt = r["zerotrain"], r["pytorch"]
    # The fake's rounds: medians of 102..104 and, 50 ms slower, 152..154; their median 128.
    check(zt_side["ms_per_step_by_round"] == [103.0, 153.0], f"zerotrain rounds {zt_side['ms_per_step_by_round']}")
    check(zt_side["ms_per_step_median"] == 128.0, f"median of the rounds' 103 and 153 expected, got {zt_side}")
    # N = 128*32 (wte, vocab 65 padded) + 16*32 (wpe) + 1*(12*32^2 + 13*32) + 2*32 = 17376
    check(r["flops"]["n_params"] == 17376 and r["flops"]["padded_vocab_size"] == 128, f"N: {r['flops']}")
    flops_per_token = 6 * 17376 + 6 * 1 * 32 * 16
    check(r["flops"]["per_token"] == flops_per_token, f"flops/token {r['flops']['per_token']} != {flops_per_token}")
    check(math.isclose(zt_side["tokens_per_s"], 32 / 0.128), f"tokens/s {zt_side['tokens_per_s']}")
    check(math.isclose(zt_side["gflops"], flops_per_token * 32 / 0.128 / 1e9), f"GFLOP/s {zt_side['gflops']}")
    check(math.isclose(zt_side["fraction_of_sgemm_peak"], zt_side["gflops"] / 100.0), "fraction of peak")
    # Two interleaved rounds, the second starting with the other side; each side's figure the median
    # of its rounds' medians after the warm-up, the speedup the median of the rounds' ratios.
    check(r["order_by_round"] == [["zerotrain", "pytorch"], ["pytorch", "zerotrain"]], f"order {r['order_by_round']}")
    rounds = pt["step_ms_by_round"]
    check(len(rounds) == 2 and all(len(x) == 4 and all(ms > 0 for ms in x) for x in rounds), f"PyTorch steps {rounds}")
    round_ms = [statistics.median(x[1:]) for x in rounds]
    check(pt["ms_per_step_by_round"] == round_ms and math.isclose(pt["ms_per_step_median"], statistics.median(round_ms)),
          "PyTorch median of its rounds' medians")
    check(r["speedup"].keys() == {"pytorch"} and "pytorch_zt_blas" not in r, f"--torch-blas system: {r['speedup']}")
    # Each round's ratio pairs that round's two medians (not the ratio of the medians).
    by_round = [round_ms[0] / 103.0, round_ms[1] / 153.0]
    check(all(math.isclose(a, b) for a, b in zip(r["speedup_by_round"]["pytorch"], by_round))
          and math.isclose(r["speedup"]["pytorch"], statistics.median(by_round)), f"speedup {r['speedup_by_round']}")
    check(pt["blas"]["core"] in ("Haswell", "unknown"), f"PyTorch ran with core {pt['blas']['core']}, not Haswell")
    # torch's OpenMP threads told not to spin (they slowed its pthread BLAS several-fold), as the
    # PyTorch process read it; zerotrain's side records the environment's.
    check(pt["env"].get("OMP_WAIT_POLICY") == "passive" and zt_side["env"] == {"OMP_WAIT_POLICY": "active"},
          f"wait policies: {pt['env']}, {zt_side.get('env')}")
    check(math.isfinite(pt["final_loss"]), "PyTorch loss not finite")
    check(r["targets"]["speedup_pass"]["pytorch"] == (r["speedup"]["pytorch"] >= 2.0), "speedup verdict")
    for key in ("checkout_commit", "checkout_dirty", "date", "machine", "config", "sgemm"):
        check(key in r, f"result lacks {key}")
    check(r.get("commit") == "0123456789ab+dirty", f"the commit is the binary's own: {r.get('commit')}")
    check("speedup over PyTorch (median of the rounds' PyTorch ms / zerotrain ms)" in proc.stdout
          and "target >= 60%" in proc.stdout,
          f"table lacks the verdict lines:\n{proc.stdout}")


def test_peak_under_load(tmp):
    """A side past 100% of the sgemm peak: the peak was measured under load, so the table gives no
    share of it and the 60% target is not judged (a loaded machine's run read 192.7% and PASS)."""
    zt = write_script(tmp / "fake_zerotrain", FAKE_ZEROTRAIN, fail_from=-1)
    sgemm = write_script(tmp / "fake_sgemm", FAKE_SGEMM, gflops=0.01)  # zerotrain's fake: 0.027 GFLOP/s
    out = tmp / "result.json"
    proc = run_bench("--zerotrain", zt, "--sgemm", sgemm, "--steps", "3", "--warmup", "1", "--threads", "1",
                     "--rounds", "1", "--torch-blas", "system", "--out", str(out), *TINY)
    check(proc.returncode == 0, f"bench exited {proc.returncode}: {proc.stderr}")
    r = json.loads(out.read_text())
    check(r["zerotrain"]["fraction_of_sgemm_peak"] > 1 and r["sgemm"]["peak_unreliable"]
          and r["targets"]["fraction_pass"] is None, f"a peak below zerotrain's own: {r['sgemm']} {r['targets']}")
    check(any("measured under load" in w and "zerotrain reached" in w for w in r["warnings"]), f"{r['warnings']}")
    check("not judged" in proc.stdout and "PASS" not in proc.stdout.split("fraction of sgemm peak")[1]
          and "%" not in proc.stdout.split("of peak")[1].split("warning")[0], f"table:\n{proc.stdout}")


def test_verdicts_under_load(tmp):
    """Beside a process that keeps a core busy, no target is judged: the speedup and the share of
    peak say "not judged (measured under load)", never PASS (a run beside 0.93 cores of other work
    measured sgemm at a third of its idle peak and printed PASS)."""
    zt = write_script(tmp / "fake_zerotrain", FAKE_ZEROTRAIN, fail_from=-1)
    sgemm = write_script(tmp / "fake_sgemm", FAKE_SGEMM, gflops=1000.0)
    out = tmp / "result.json"
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        proc = run_bench("--zerotrain", zt, "--sgemm", sgemm, "--steps", "3", "--warmup", "1", "--threads", "1",
                         "--rounds", "1", "--torch-blas", "system", "--out", str(out), *TINY)
    finally:
        spinner.kill()
        spinner.wait()
    check(proc.returncode == 0, f"bench exited {proc.returncode}: {proc.stderr}")
    r = json.loads(out.read_text())
    other = r["machine"]["cpu_competition"]["other_processes_cores"]
    check(other > 0.5, f"the spinner's core is counted as other processes' ({other:.2f} cores)")
    check(r["targets"]["speedup_pass"] == {"pytorch": None} and r["targets"]["fraction_pass"] is None,
          f"no verdict under load: {r['targets']}")
    verdicts = proc.stdout.split("speedup over")[1]
    check(verdicts.count("not judged (measured under load)") == 2 and "PASS" not in verdicts
          and "FAIL" not in verdicts, f"table:\n{proc.stdout}")


def test_load_and_peak_rules(tmp):
    """The rules the verdicts follow, at their edges: the hypervisor's steal alone (0.5 of a core) is
    load as other processes are; an idle machine's few hundredths are not; a side at 150% of the
    sgemm peak is past it (the peak was measured under load) and one at 100% is not."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
    import bench_cpu_report as report
    check(report.under_load({"other_processes_cores": 0.0, "steal_cores": 0.5}), "steal alone is load")
    check(report.under_load({"other_processes_cores": 0.5, "steal_cores": 0.0}), "other processes are load")
    check(not report.under_load({"other_processes_cores": 0.05, "steal_cores": 0.02}), "an idle machine is not")
    sides = {"zerotrain": {"fraction_of_sgemm_peak": 1.5}, "pytorch": {"fraction_of_sgemm_peak": 1.0},
             "pytorch_zt_blas": {"fraction_of_sgemm_peak": 0.4}}
    check(report.over_peak(sides) == {"zerotrain": 1.5}, f"past the peak: {report.over_peak(sides)}")


def test_llama_with_fakes(tmp):
    """A Llama: its widths written out for both sides, its N by its own formula, PyTorch's model the
    same (bench_cpu.py refuses a PyTorch side whose parameter count is not zerotrain's)."""
    zt = write_script(tmp / "fake_zerotrain", FAKE_ZEROTRAIN, fail_from=-1)
    sgemm = write_script(tmp / "fake_sgemm", FAKE_SGEMM, gflops=100.0)
    out = tmp / "llama.json"
    proc = run_bench("--zerotrain", zt, "--sgemm", sgemm, "--steps", "3", "--warmup", "1", "--threads", "1",
                     "--rounds", "1", "--torch-blas", "system", "--out", str(out), *TINY, "--set", "model.arch=llama",
                     "--set", "model.n_kv_head=1")
    check(proc.returncode == 0, f"llama bench exited {proc.returncode}: {proc.stderr}")
    r = json.loads(out.read_text())
    m = r["config"]["model"]
    check(m["intermediate_size"] == 256 and m["n_kv_head"] == 1 and "dropout" not in m,
          f"the Llama's widths (8/3 x 32 rounded up to 256; 1 kv head): {m}")
    # untied head and table 2*128*32; a layer: q, o 2*32*32, k, v 2*32*16, SwiGLU 3*32*256, two norms;
    # the final norm 32
    n = 2 * 128 * 32 + (2 * 32 * 32 + 2 * 32 * 16 + 3 * 32 * 256 + 2 * 32) + 32
    check(r["flops"]["n_params"] == n == 35936, f"Llama N {r['flops']['n_params']} != {n}")
    check(r["flops"]["per_token"] == 6 * n + 6 * 1 * 32 * 16, f"flops/token {r['flops']['per_token']}")
    check(r["pytorch"]["ms_per_step_median"] > 0 and math.isfinite(r["pytorch"]["final_loss"]), f"{r['pytorch']}")
    check("Llama 1L/2H (1 kv)/32C/256I" in proc.stdout, f"table header:\n{proc.stdout}")
    proc = run_bench("--zerotrain", zt, "--sgemm", sgemm, *TINY, "--set", "model.arch=llama",
                     "--set", "model.n_kv_head=3")
    check(proc.returncode == 2 and "n_kv_head 3" in proc.stderr, f"3 kv heads of 2: rc {proc.returncode} {proc.stderr!r}")
    # zerotrain's own count (the fake's: the 1-layer shape's) against the formula's for 2 layers
    proc = run_bench("--zerotrain", zt, "--sgemm", sgemm, "--torch-blas", "system", "--out", str(tmp / "x.json"),
                     *TINY, "--set", "model.arch=llama", "--set", "model.n_kv_head=1", "--set", "model.n_layer=2")
    check(proc.returncode == 1 and "zerotrain's model has 35936 parameters, the FLOPs formula counts" in proc.stderr,
          f"a formula that misses zerotrain's count: rc {proc.returncode} {proc.stderr!r}")


def test_failures(tmp):
    zt = write_script(tmp / "failing_zerotrain", FAKE_ZEROTRAIN, fail_from=0)
    sgemm = write_script(tmp / "fake_sgemm", FAKE_SGEMM, gflops=100.0)
    proc = run_bench("--zerotrain", zt, "--sgemm", sgemm, "--torch-blas", "system", "--out", str(tmp / "x.json"), *TINY)
    lines = proc.stderr.strip().splitlines()
    check(proc.returncode == 1 and len(lines) == 1 and "zerotrain train exited 2" in lines[0]
          and "planted failure" in lines[0], f"failing side: rc {proc.returncode}, stderr {proc.stderr!r}")
    check(not (tmp / "x.json").exists(), "a failed run wrote a result file")
    # A side failing in a later round: one line naming the round, no result file.
    late = write_script(tmp / "late" / "fake_zerotrain", FAKE_ZEROTRAIN, fail_from=1)
    proc = run_bench("--zerotrain", late, "--sgemm", sgemm, "--rounds", "2", "--steps", "2", "--warmup", "1",
                     "--torch-blas", "system", "--out", str(tmp / "x.json"), *TINY)
    lines = proc.stderr.strip().splitlines()
    check(proc.returncode == 1 and len(lines) == 1 and "round 2 of 2: zerotrain train exited 2" in lines[0],
          f"a failure in round 2: rc {proc.returncode}, stderr {proc.stderr!r}")
    check(not (tmp / "x.json").exists(), "a run failed in round 2 wrote a result file")
    for flag in ("--zerotrain", "--sgemm"):
        proc = run_bench(flag, str(tmp / "missing"), "--out", str(tmp / "x.json"))
        lines = proc.stderr.strip().splitlines()
        check(proc.returncode == 2 and len(lines) == 1 and f"{flag} {tmp / 'missing'}" in lines[0]
              and "sgemm" not in proc.stdout, f"missing {flag}: exit 2 in one line (rc {proc.returncode}, {proc.stderr!r})")
    proc = run_bench("--zerotrain", write_script(tmp / "fake_zerotrain", FAKE_ZEROTRAIN, fail_from=-1),
                     "--sgemm", sgemm, "--torch-blas", "zerotrain", "--out", str(tmp / "x.json"))
    check(proc.returncode == 1 and "no libblas.so.3 beside zerotrain's /fake/libopenblas.so.0" in proc.stderr,
          f"--torch-blas zerotrain without a libblas.so.3 beside zerotrain's library: {proc.stderr!r}")
    proc = run_bench("--steps", "3", "--warmup", "3")
    check(proc.returncode == 2 and "warmup" in proc.stderr, f"bad flags: rc {proc.returncode} {proc.stderr!r}")
    proc = run_bench("--rounds", "0")
    check(proc.returncode == 2 and "--rounds" in proc.stderr, f"--rounds 0: rc {proc.returncode} {proc.stderr!r}")



def test_help(tmp):
    proc = subprocess.run([sys.executable, str(BENCH), "--help"], capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, COLUMNS="100"))
    flags = ("--steps", "--warmup", "--threads", "--rounds", "--zerotrain", "--sgemm", "--out", "--torch-blas",
             "--torch-wait-policy")
    helps = {flag: flag_help(proc.stdout, flag) for flag in flags}
    check(proc.returncode == 0 and all(len(h.split()) > 3 and "default" in h for h in helps.values())
          and "(default: both)" in helps["--torch-blas"] and "build/zerotrain)" in helps["--zerotrain"]
          and "build/tools/zt_bench_sgemm)" in helps["--sgemm"] and len(flag_help(proc.stdout, "--set").split()) > 3,
          f"--help gives each flag a meaning and its default ({helps})")


def test_real_binaries(tmp, zerotrain, sgemm):
    # A --set zerotrain refuses: exit 2 in one line naming it, before the sgemm peak is measured.
    recording = write_script(tmp / "recording" / "sgemm", RECORDING_SGEMM)
    proc = run_bench("--zerotrain", zerotrain, "--sgemm", recording, "--set", "bogus.key=1",
                     "--out", str(tmp / "x.json"))
    lines = proc.stderr.strip().splitlines()
    check(proc.returncode == 2 and len(lines) == 1 and "--set bogus.key=1: unknown key 'bogus'" in lines[0]
          and not (tmp / "recording" / "sgemm_ran").exists() and not (tmp / "x.json").exists(),
          f"a --set zerotrain refuses: exit 2 in one line before measuring (rc {proc.returncode}, {proc.stderr!r}, "
          f"sgemm ran: {(tmp / 'recording' / 'sgemm_ran').exists()})")
    out = tmp / "real.json"
    proc = run_bench("--zerotrain", zerotrain, "--sgemm", sgemm, "--steps", "3", "--warmup", "1", "--rounds", "1",
                     "--threads", "1", "--out", str(out), *TINY)
    check(proc.returncode == 0, f"real run exited {proc.returncode}: {proc.stderr}")
    r = json.loads(out.read_text())
    for side in ("zerotrain", "pytorch", "pytorch_zt_blas"):
        check(r[side]["ms_per_step_median"] > 0 and math.isfinite(r[side]["final_loss"]), f"{side}: {r[side]}")
    for side in ("pytorch", "pytorch_zt_blas"):
        check(r[side]["blas"]["core"] in (r["zerotrain"]["blas_core"], "unknown"),
              f"{side} BLAS core {r[side]['blas']} differs from zerotrain's {r['zerotrain']['blas_core']}")
    zt_dir = str(Path(r["zerotrain"]["blas_library"]).parent)
    check(r["pytorch_zt_blas"]["blas"].get("library", "").startswith(zt_dir + "/"),
          f"PyTorch/zt loaded {r['pytorch_zt_blas']['blas']}, not the library in {zt_dir}")
    check(r["sgemm"]["gflops"] > 0 and set(r["speedup"]) == {"pytorch", "pytorch_zt_blas"}, f"{r['speedup']}")
    # A Llama (grouped-query, untied): zerotrain's own parameter count equals the formula's and
    # PyTorch's model, or bench_cpu.py exits 1.
    proc = run_bench("--zerotrain", zerotrain, "--sgemm", sgemm, "--steps", "2", "--warmup", "1", "--threads", "1",
                     "--rounds", "1", "--torch-blas", "system", "--out", str(tmp / "llama.json"), *TINY, "--set", "model.arch=llama",
                     "--set", "model.n_kv_head=1")
    check(proc.returncode == 0, f"real Llama run exited {proc.returncode}: {proc.stderr}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--zerotrain")
    parser.add_argument("--sgemm")
    args = parser.parse_args()
    tests = [("arithmetic_with_fakes", test_arithmetic_with_fakes, ()), ("llama_with_fakes", test_llama_with_fakes, ()),
             ("peak_under_load", test_peak_under_load, ()), ("verdicts_under_load", test_verdicts_under_load, ()),
             ("load_and_peak_rules", test_load_and_peak_rules, ()),
             ("failures", test_failures, ()), ("help", test_help, ())]
    if args.zerotrain and args.sgemm:
        tests.append(("real_binaries", test_real_binaries, (args.zerotrain, args.sgemm)))
    failed = 0
    for name, fn, extra in tests:
        with tempfile.TemporaryDirectory(prefix="bench_cpu_test_") as tmp:
            try:
                fn(Path(tmp), *extra)
                print(f"PASS {name}")
            except AssertionError as e:
                failed += 1
                print(f"FAIL {name}: {e}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
