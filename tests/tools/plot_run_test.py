"""Test of tools/plot_run.py: a synthetic run directory becomes a real PNG; bad input fails cleanly.

Proves that a metrics.jsonl with train, eval, sample and summary records (and a null loss, as the
engine writes a non-finite one) plots to a PNG with the PNG signature and a plausible size, at the
default place and at --out; that the dotted line is the summary's context-free validation loss
(the training unigram entropy, labelled as such, only for a run without one); that a run of zero
steps plots its evaluation; that a log read while its run writes a record is read up to that
record; and that a missing, empty or malformed metrics file exits 2 with one
line naming the file (and the line); and that --help gives every flag a meaning and its default.
Fails, never skips, when matplotlib is missing.
"""
import contextlib
import io
import json
import math
import os
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tool_run_util import flag_help  # noqa: E402

TOOL = Path(__file__).resolve().parents[2] / "tools" / "plot_run.py"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def run_tool(*args):
    return subprocess.run([sys.executable, str(TOOL), *map(str, args)], capture_output=True, text=True, timeout=120)


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def write_run(run_dir, lines, config=True):
    run_dir.mkdir(parents=True)
    (run_dir / "metrics.jsonl").write_text("".join(line + "\n" for line in lines))
    if config:
        (run_dir / "config.json").write_text(json.dumps({
            "model": {"n_layer": 2, "n_head": 2, "n_embd": 64, "block_size": 32, "vocab_size": 65},
            "train": {"micro_batch": 4, "seq_len": 32}}))


def synthetic_metrics(steps=300):
    lines = []
    for step in range(1, steps + 1):
        loss = 1.5 + 2.7 * math.exp(-step / 60) + 0.1 * math.sin(step)  # falling, noisy
        lr = 1e-3 * min(1.0, step / 20) * 0.5 * (1 + math.cos(math.pi * step / steps))
        lines.append(json.dumps({"type": "train", "step": step, "loss": None if step == 150 else loss, "lr": lr,
                                 "grad_norm": 1.0, "step_ms": 300.0, "tokens_per_s": 6800.0, "tokens": 2048}))
        if step % 50 == 0:
            lines.append(json.dumps({"type": "eval", "step": step, "val_loss": loss + 0.05}))
            lines.append(json.dumps({"type": "sample", "step": step, "text": "to be or not"}))
    lines.append(json.dumps({"type": "summary", "steps": steps, "unigram_entropy_nats": 2.5,
                             "context_free_val_loss_nats": 2.8}))
    return lines


def zero_step_metrics(evaluated=True):
    """What `zerotrain train --set train.max_steps=0` logs (tiny_debug.json, trimmed): no train record."""
    lines = [json.dumps({"type": "setup_memory", "init_from": "", "measured_peak_bytes": [], "predicted_bytes": {}})]
    if evaluated:
        lines.append(json.dumps({"type": "eval", "step": 0, "val_loss": 4.16198205947876, "val_windows": 32}))
    lines.append(json.dumps({"type": "summary", "steps": 0, "first_step": 0, "first_loss": None, "last_step": 0,
                             "last_loss": None, "val_loss": 4.16198205947876 if evaluated else None,
                             "unigram_entropy_nats": 2.9666011715561997,
                             "context_free_val_loss_nats": 2.9841853705581234}))
    return lines


def check_png(path):
    check(path.is_file(), f"{path} was not written")
    data = path.read_bytes()
    check(data[:8] == PNG_SIGNATURE, f"{path} does not start with the PNG signature: {data[:8]!r}")
    width, height = struct.unpack(">II", data[16:24])  # IHDR chunk
    check(400 <= width <= 4000 and 300 <= height <= 4000, f"implausible PNG size {width}x{height}")
    check(20_000 < len(data) < 5_000_000, f"implausible PNG file size {len(data)} bytes")


def test_matplotlib_present(tmp):
    proc = subprocess.run([sys.executable, "-c", "import matplotlib"], capture_output=True, text=True)
    check(proc.returncode == 0, "matplotlib is missing: install python3-matplotlib (tools/setup.sh)")


def test_plots_synthetic_run(tmp):
    run_dir = tmp / "run"
    write_run(run_dir, synthetic_metrics())
    proc = run_tool(run_dir)
    check(proc.returncode == 0, f"exit {proc.returncode}: {proc.stderr}")
    check("300 train steps, 6 evaluations" in proc.stdout, f"unexpected summary: {proc.stdout!r}")
    check_png(run_dir / "loss.png")


def test_out_flag_and_no_config(tmp):
    run_dir = tmp / "bare"
    write_run(run_dir, synthetic_metrics(steps=5)[:3], config=False)  # a few steps, no lr, no config
    out = tmp / "elsewhere" / "plot.png"
    out.parent.mkdir()
    proc = run_tool(run_dir, "--out", out)
    check(proc.returncode == 0, f"exit {proc.returncode}: {proc.stderr}")
    check_png(out)
    check(not (run_dir / "loss.png").exists(), "--out was ignored")


def expect_input_error(tmp, name, lines, *expected):
    run_dir = tmp / name
    if lines is None:
        run_dir.mkdir()
    else:
        write_run(run_dir, lines)
    proc = run_tool(run_dir)
    errors = proc.stderr.strip().splitlines()
    check(proc.returncode == 2, f"{name}: exit {proc.returncode}, expected 2: {proc.stderr!r}")
    check(len(errors) == 1 and all(e in errors[0] for e in expected),
          f"{name}: expected one line with {expected}, got {proc.stderr!r}")
    check(not (run_dir / "loss.png").exists(), f"{name}: a PNG was written for bad input")


def drawn_lines(run_dir):
    """{legend label: first y} of the figure plot_run.main draws for run_dir, drawn in this process."""
    sys.path.insert(0, str(TOOL.parent))
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import plot_run
    plt.close("all")
    close, plt.close = plt.close, lambda *a: None  # keep the figure to read it
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            rc = plot_run.main([str(run_dir), "--out", str(run_dir / "drawn.png")])
    finally:
        plt.close = close
    check(rc == 0 and plt.get_fignums(), f"{run_dir.name}: plot_run exits 0 ({rc})")
    lines = {l.get_label(): l.get_ydata()[0] for ax in plt.gcf().axes for l in ax.get_lines()
             if len(l.get_ydata())}
    plt.close("all")
    return lines


def test_context_free_line(tmp):
    """The dotted line is the summary's context-free floor under that name (the validation targets'
    entropy): the training unigram entropy is no floor for the validation loss of a model ignoring
    its context. A run too old to log it gets the entropy, named as that; a run with neither has no
    line."""
    run_dir = tmp / "run"
    write_run(run_dir, synthetic_metrics(20))
    lines = drawn_lines(run_dir)
    check(lines.get("context-free floor (validation targets' entropy)") == 2.8,
          f"the context-free validation loss (2.8, not the entropy 2.5) is drawn under its name: {lines}")
    check(not any(label.startswith("unigram entropy") for label in lines), f"no training entropy line beside it: {lines}")
    old = tmp / "old"
    write_run(old, [json.dumps({"type": "train", "step": 1, "loss": 4.0, "lr": 1e-3}),
                    json.dumps({"type": "summary", "steps": 1, "unigram_entropy_nats": 2.5})])
    lines = drawn_lines(old)
    check(lines.get("unigram entropy of the training data (no context-free loss logged)") == 2.5,
          f"an older run's entropy line says what it is: {lines}")
    bare = tmp / "bare"
    write_run(bare, [json.dumps({"type": "train", "step": 1, "loss": 4.0, "lr": 1e-3})])
    lines = drawn_lines(bare)
    check(set(lines) == {"train loss", "learning rate"}, f"no summary, no dotted line: {lines}")


def test_zero_step_run(tmp):
    """A run of train.max_steps=0 is valid (it evaluates the initial model): its evaluation is
    plotted and the tool says no steps were trained; with no evaluation either, one line, exit 2."""
    run_dir = tmp / "l0"
    write_run(run_dir, zero_step_metrics())
    proc = run_tool(run_dir)
    check(proc.returncode == 0, f"a zero-step run plots: exit {proc.returncode}: {proc.stderr!r}")
    check("trained no steps" in proc.stdout and "1 evaluation" in proc.stdout, f"it says so: {proc.stdout!r}")
    check_png(run_dir / "loss.png")
    check(drawn_lines(run_dir).get("val loss") == 4.16198205947876, "the step-0 evaluation is the marker")
    expect_input_error(tmp, "l0_no_eval", zero_step_metrics(evaluated=False), "metrics.jsonl", "trained no steps",
                       "no evaluation")


def test_torn_last_record_and_formats(tmp):
    """A last line still being written (no newline, not JSON yet) is not a record; a complete but
    malformed line is an error wherever it is. --out writes its suffix's format."""
    sys.path.insert(0, str(TOOL.parent))
    import plot_run
    run_dir = tmp / "torn"
    write_run(run_dir, synthetic_metrics(20))
    with open(run_dir / "metrics.jsonl", "a") as f:
        f.write('{"type": "train", "st')
    check(len(plot_run.read_metrics(run_dir / "metrics.jsonl")[0]) == 20, "the torn last line is skipped")
    proc = run_tool(run_dir, "--out", tmp / "loss.svg")
    check(proc.returncode == 0 and (tmp / "loss.svg").read_text().lstrip().startswith("<?xml"),
          f"--out loss.svg writes SVG: {proc.stderr!r}")
    proc = run_tool(run_dir, "--out", tmp / "loss.txt")
    check(proc.returncode == 2 and "--out" in proc.stderr and not (tmp / "loss.txt").exists(),
          f"an --out of no image format is refused: {proc.stderr!r}")


class GrowingFile(io.RawIOBase):
    """A file a live run appends to: the first reads end at `first`'s end (a record cut short), then
    one read answers end of file, and the later ones give `rest`, as the writer's next write would."""

    def __init__(self, first, rest):
        self.chunks = [first, b"", rest]

    def readable(self):
        return True

    def readinto(self, buffer):
        while self.chunks:
            chunk = self.chunks[0]
            n = min(len(buffer), len(chunk))
            buffer[:n] = chunk[:n]
            if n < len(chunk):
                self.chunks[0] = chunk[n:]
            else:
                self.chunks.pop(0)
            if n or chunk == b"":
                return n
        return 0


def test_live_log(tmp):
    """A log read while its run writes the record it cut short is read up to that record (a
    line-by-line read took the record's rest for a line of its own: 'not JSON'); a sample's text
    holding U+2028 or U+0085 (Python's other line ends) is one record."""
    sys.path.insert(0, str(TOOL.parent))
    import plot_run
    run_dir = tmp / "live"
    lines = synthetic_metrics(20)
    lines.insert(3, json.dumps({"type": "sample", "step": 2, "text": "a\u2028b\u0085c"}, ensure_ascii=False))
    write_run(run_dir, lines)
    whole = (run_dir / "metrics.jsonl").read_bytes()
    record = b'{"type": "train", "step": 21, "loss": 1.5, "lr": 0.001}\n'
    plot_run.open = lambda path, encoding: io.TextIOWrapper(io.BufferedReader(GrowingFile(whole + record[:30],
                                                                                          record[30:])), encoding)
    try:
        train = plot_run.read_metrics(run_dir / "metrics.jsonl")[0]
    except plot_run.InputError as e:
        raise AssertionError(f"a live log is read up to the record being written: {e}") from None
    finally:
        del plot_run.open
    check(len(train) == 20, f"the record being written is not one yet ({len(train)} train records)")


def test_errors(tmp):
    expect_input_error(tmp, "missing", None, "metrics.jsonl", "no such file")
    expect_input_error(tmp, "empty", [], "metrics.jsonl", "no train records")
    expect_input_error(tmp, "only_eval", ['{"type": "eval", "step": 1, "val_loss": 2.0}'], "no train records")
    good = json.dumps({"type": "train", "step": 1, "loss": 4.0, "lr": 1e-3})
    expect_input_error(tmp, "not_json", [good, '{"type": "train", "step": 2,'], "metrics.jsonl:2", "not JSON")
    expect_input_error(tmp, "no_loss", [good, '{"type": "train", "step": 2}'], "metrics.jsonl:2", "malformed train")
    expect_input_error(tmp, "bad_eval", [good, '{"type": "eval", "step": "x", "val_loss": 1}'], ":2", "malformed eval")
    expect_input_error(tmp, "not_object", [good, "[1, 2]"], "metrics.jsonl:2", "malformed")
    # Values of another type are not numbers (a text loss was plotted as its number, true as 1.0, a
    # step of 2.7 as 2).
    expect_input_error(tmp, "text_loss", [good, '{"type": "train", "step": 2, "loss": "4.2"}'], ":2", "malformed train")
    expect_input_error(tmp, "bool_loss", [good, '{"type": "train", "step": 2, "loss": true}'], ":2", "malformed train")
    expect_input_error(tmp, "real_step", [good, '{"type": "train", "step": 2.7, "loss": 4.0}'], ":2", "malformed train")
    # A file that is not UTF-8: one line, not a traceback.
    run_dir = tmp / "latin1"
    run_dir.mkdir()
    (run_dir / "metrics.jsonl").write_bytes(b'{"type": "train", "step": 1, "loss": 4.0, "note": "caf\xe9"}\n')
    proc = run_tool(run_dir)
    check(proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1 and "not UTF-8" in proc.stderr,
          f"a metrics file that is not UTF-8: exit 2, one line ({proc.returncode}: {proc.stderr!r})")



def test_help(tmp):
    proc = subprocess.run([sys.executable, str(TOOL), "--help"], capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, COLUMNS="100"))
    helps = {flag: flag_help(proc.stdout, flag) for flag in ("--out", "--smoothing")}
    check(proc.returncode == 0 and all(len(h.split()) > 3 for h in helps.values())
          and "(default: 0.9)" in helps["--smoothing"] and "default RUN_DIR/loss.png" in helps["--out"],
          f"--help gives each flag a meaning and its default ({helps})")


def test_llama_title(tmp):
    # The title counts a Llama's parameters as `zerotrain train` does (1.80M here), not as a GPT's.
    run_dir = tmp / "llama"
    write_run(run_dir, [json.dumps({"type": "train", "step": 1, "loss": 4.0, "lr": 1e-3})], config=False)
    (run_dir / "config.json").write_text(json.dumps({
        "model": {"arch": "llama", "n_layer": 4, "n_head": 4, "n_kv_head": 2, "n_embd": 128, "intermediate_size": 1024,
                  "block_size": 16, "vocab_size": 65, "tie_embeddings": False}, "train": {"micro_batch": 4}}))
    sys.path.insert(0, str(TOOL.parent))
    import plot_run  # noqa: E402
    title = plot_run.title_from_config(run_dir)
    check(title.startswith("Llama 4L/4H/2KV/128C, 1.80M params"), f"a Llama run's title: {title!r}")


def test_smoothing(tmp):
    """The moving average is bias-corrected: a constant curve stays at its value from the first point
    (uncorrected, it starts at a tenth of it and climbs); a non-finite loss is skipped, not averaged in."""
    sys.path.insert(0, str(TOOL.parent))
    import plot_run  # noqa: E402
    flat = plot_run.smooth([4.0] * 5, 0.9)
    check(all(abs(v - 4.0) < 1e-12 for v in flat), f"a constant curve smoothed stays constant: {flat}")
    steps = plot_run.smooth([2.0, float("nan"), 4.0], 0.5)
    check(steps[0] == 2.0 and steps[1] == 2.0 and abs(steps[2] - (0.25 * 2.0 + 0.5 * 4.0) / 0.75) < 1e-12,
          f"a NaN skipped, the next point weighed with the bias correction: {steps}")


def main():
    failed = 0
    for name, fn in [("matplotlib_present", test_matplotlib_present), ("plots_synthetic_run", test_plots_synthetic_run),
                     ("out_flag_and_no_config", test_out_flag_and_no_config),
                     ("context_free_line", test_context_free_line), ("zero_step_run", test_zero_step_run),
                     ("torn_last_record_and_formats", test_torn_last_record_and_formats),
                     ("live_log", test_live_log), ("errors", test_errors),
                     ("llama_title", test_llama_title), ("smoothing", test_smoothing), ("help", test_help)]:
        with tempfile.TemporaryDirectory(prefix="plot_run_test_") as tmp:
            try:
                fn(Path(tmp))
                print(f"PASS {name}")
            except AssertionError as e:
                failed += 1
                print(f"FAIL {name}: {e}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
