"""Plots a training run: RUN_DIR/metrics.jsonl -> RUN_DIR/loss.png (or --out).

Draws the train loss per step (thin) with a smoothed line, the validation loss as markers, the
least a model that ignores context can score on the validation windows (their targets' entropy,
from the run's summary; a run too old to log it gets its training data's unigram entropy, labelled
as such) as a dotted line, and
the learning rate on a second axis; the title names the model from RUN_DIR/config.json. A run that
trained no steps (train.max_steps=0) plots its evaluation alone. Renders with matplotlib's Agg
backend (no display needed). A missing, empty or malformed metrics file is a one-line error naming
the file (and line), exit 2.
Usage: plot_run.py RUN_DIR [--out PNG|PDF|SVG|JPG] [--smoothing 0.9]
"""
import json
import math
import sys
from collections import namedtuple
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from result_paths import OneLineParser  # noqa: E402

# train = [(step, loss, lr or None)] and evals = [(step, val_loss)], each by step; reference = the
# dotted line, (nats, legend label) or None; trained_no_steps: the summary says the run took no step.
Metrics = namedtuple("Metrics", "train evals reference trained_no_steps")
Reference = namedtuple("Reference", "nats label")
# The least any model that ignores context scores on the validation targets is their own entropy (a
# floor: a validation loss below it shows context use). The training split's entropy is no floor for
# them (another split's frequencies score below or above it), so it is named as itself.
CONTEXT_FREE_LABEL = "context-free floor (validation targets' entropy)"
ENTROPY_LABEL = "unigram entropy of the training data (no context-free loss logged)"


class InputError(Exception):
    """Bad input: printed as one line, exit 2."""


def as_float(value):
    """A logged number; null is how the engine's JSON writer spells a non-finite loss. Text or a
    boolean is not one (ValueError: a malformed record)."""
    if value is None:
        return float("nan")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{value!r} is not a number")
    return float(value)


def as_step(value):
    """A logged step: a whole number."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"step {value!r} is not a whole number")
    return value


def positive(value):
    """A summary's figure where it is a positive number, else None (absent, null, or 0 from a run
    with nothing to measure it on)."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0
    return float(value) if ok else None


def read_metrics(path):
    """The run's Metrics. The reference line is the last summary's context-free validation loss, or
    its training unigram entropy where it has none (an older run), or None without either."""
    if not path.is_file():
        raise InputError(f"{path}: no such file (is it a run directory made by `zerotrain train`?)")
    train, evals, context_free, entropy, summary_steps = [], [], None, None, None
    try:
        with open(path, encoding="utf-8") as f:
            # One read to the end (readlines beside a live run's writer can yield a line cut at the
            # end of what was there, then its rest as a line of its own), split at "\n" alone (a
            # sample's text may hold U+2028, where str.splitlines would cut a record).
            lines = f.read().split("\n")  # the last: "", or a line with no newline after it
    except UnicodeDecodeError as e:
        raise InputError(f"{path}: not UTF-8 text (byte 0x{e.object[e.start]:02x} at offset {e.start}): "
                         "not a metrics file") from None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        if number == len(lines):  # a record still being written is not one yet
            try:
                json.loads(line)
            except json.JSONDecodeError:
                continue
        kind = None
        try:
            record = json.loads(line)
            kind = record.get("type")
            if kind == "train":
                lr = record.get("lr")
                train.append((as_step(record["step"]), as_float(record["loss"]), None if lr is None else as_float(lr)))
            elif kind == "eval":
                evals.append((as_step(record["step"]), as_float(record["val_loss"])))
            elif kind == "summary":  # a resumed run appends one per part: the last one's figures hold
                context_free = positive(record.get("context_free_val_loss_nats")) or context_free
                entropy = positive(record.get("unigram_entropy_nats")) or entropy
                summary_steps = record.get("steps")
        except json.JSONDecodeError as e:
            raise InputError(f"{path}:{number}: not JSON ({e.msg}): {line.strip()[:80]}") from None
        except (AttributeError, KeyError, TypeError, ValueError) as e:
            raise InputError(f"{path}:{number}: malformed {kind or 'record'} record "
                             f"({type(e).__name__}: {e}): {line.strip()[:80]}") from None
    trained_no_steps = not train and summary_steps == 0
    if not train and not trained_no_steps:
        raise InputError(f"{path}: no train records (empty or not a metrics file)")
    if trained_no_steps and not evals:
        raise InputError(f"{path}: the run trained no steps (train.max_steps=0) and logged no evaluation: "
                         "nothing to plot")
    reference = (Reference(context_free, CONTEXT_FREE_LABEL) if context_free is not None
                 else Reference(entropy, ENTROPY_LABEL) if entropy is not None else None)
    return Metrics(sorted(train), sorted(evals), reference, trained_no_steps)


def smooth(values, weight):
    """Exponential moving average with bias correction (the first points are not pulled to 0)."""
    out, avg, norm = [], 0.0, 0.0
    for v in values:
        if math.isfinite(v):
            avg, norm = weight * avg + (1 - weight) * v, weight * norm + (1 - weight)
        out.append(avg / norm if norm > 0 else float("nan"))
    return out


def model_summary(m):
    """('GPT 4L/4H/256C' or 'Llama 4L/4H/2KV/128C', parameters as the engine counts them: the
    vocabulary padded to a multiple of 64)."""
    L, H, C, V = int(m["n_layer"]), int(m["n_head"]), int(m["n_embd"]), int(m["vocab_size"])
    padded_vocab = (V + 63) // 64 * 64
    if m.get("arch", "gpt2") == "llama":  # no position table; grouped keys and values, SwiGLU, RMSNorm
        kv, I = int(m.get("n_kv_head", H)), int(m["intermediate_size"])
        layer = 2 * C * C + 2 * C * kv * (C // H) + 3 * C * I + 2 * C
        head = 0 if m.get("tie_embeddings", False) else padded_vocab * C
        return f"Llama {L}L/{H}H/{kv}KV/{C}C", padded_vocab * C + head + L * layer + C
    return f"GPT {L}L/{H}H/{C}C", padded_vocab * C + int(m["block_size"]) * C + L * (12 * C * C + 13 * C) + 2 * C


def title_from_config(run_dir):
    """'GPT 4L/4H/256C, 3.23M params, T=128 — RUN_DIR', or just the directory without a config."""
    try:
        config = json.loads((run_dir / "config.json").read_text(encoding="utf-8"))
        m = config["model"]
        shape, n_params = model_summary(m)
        t = config.get("train", {})
        batch = f", B={t['micro_batch']}" if "micro_batch" in t else ""
        return (f"{shape}, {n_params / 1e6:.2f}M params, vocab {m['vocab_size']}, "
                f"T={t.get('seq_len') or m['block_size']}{batch} — {run_dir.name}")
    except (OSError, ValueError, KeyError, TypeError):
        return str(run_dir.name)


def plot(run_dir, metrics, out, smoothing):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    train, evals = metrics.train, metrics.evals
    steps = [s for s, _, _ in train]
    losses = [l for _, l, _ in train]
    fig, ax = plt.subplots(figsize=(9, 5), dpi=110)
    if train:
        ax.plot(steps, losses, color="tab:blue", alpha=0.3, linewidth=0.8, label="train loss")
    if smoothing > 0 and len(train) > 1:
        ax.plot(steps, smooth(losses, smoothing), color="tab:blue", linewidth=1.8,
                label=f"train loss (EMA {smoothing:g})")
    if evals:
        ax.plot([s for s, _ in evals], [v for _, v in evals], "o", color="tab:red", markersize=5,
                label="val loss")
    if metrics.reference is not None:
        ax.axhline(metrics.reference.nats, color="gray", linestyle=":", linewidth=1.2, label=metrics.reference.label)
    ax.set_xlabel("step")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # steps are whole (a lone step 0 got ticks of 0.02)
    ax.set_ylabel("loss (nats/token)")
    ax.grid(True, alpha=0.3)
    handles, labels = ax.get_legend_handles_labels()
    lr_points = [(s, lr) for s, _, lr in train if isinstance(lr, (int, float))]
    if lr_points:
        ax_lr = ax.twinx()
        ax_lr.plot([s for s, _ in lr_points], [lr for _, lr in lr_points], color="tab:green", linewidth=1.0,
                   linestyle="--", label="learning rate")
        ax_lr.set_ylabel("learning rate")
        ax_lr.ticklabel_format(axis="y", style="sci", scilimits=(-2, 3))
        more_handles, more_labels = ax_lr.get_legend_handles_labels()
        handles, labels = handles + more_handles, labels + more_labels
    ax.legend(handles, labels, loc="upper right")
    title = title_from_config(run_dir)
    ax.set_title(title + ("\nno steps trained (train.max_steps=0): the evaluation alone" if not train else ""),
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(out, format=out.suffix[1:].lower())
    plt.close(fig)


def main(argv=None):
    parser = OneLineParser("plot_run", description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", help="a run directory holding metrics.jsonl (and config.json)")
    parser.add_argument("--out", help="image to write, in its suffix's format (default RUN_DIR/loss.png)")
    parser.add_argument("--smoothing", type=float, default=0.9,
                        help="EMA weight of the smoothed line, 0 = none (default: %(default)s)")
    args = parser.parse_args(argv)
    if not 0.0 <= args.smoothing < 1.0:
        parser.error(f"--smoothing must be in [0, 1) (got {args.smoothing})")
    run_dir = Path(args.run_dir)
    out = Path(args.out) if args.out else run_dir / "loss.png"
    if out.suffix.lower() not in (".png", ".pdf", ".svg", ".jpg", ".jpeg"):
        parser.error(f"--out {out}: name a .png, .pdf, .svg or .jpg file (its suffix is its format)")
    try:
        metrics = read_metrics(run_dir / "metrics.jsonl")
        plot(run_dir, metrics, out, args.smoothing)
    except InputError as e:
        print(f"plot_run: error: {e}", file=sys.stderr)
        return 2
    except ImportError as e:
        print(f"plot_run: error: {e.name or 'matplotlib'} is missing: install python3-matplotlib "
              "(tools/setup.sh does)", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"plot_run: error: cannot write {out}: {e.strerror}", file=sys.stderr)
        return 2
    # A zero-step run is valid (it evaluates the initial or --init-from model): its evaluation is
    # plotted against the reference line, which is what such a run is for, and the line says why
    # there is no curve rather than failing a script that plots every run it makes.
    untrained = "the run trained no steps (train.max_steps=0); " if metrics.trained_no_steps else ""
    evals = f"{len(metrics.evals)} evaluation{'' if len(metrics.evals) == 1 else 's'}"
    print(f"plot_run: {untrained}{len(metrics.train)} train steps, {evals} -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
