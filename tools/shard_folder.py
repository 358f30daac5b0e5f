"""What tools/prepare_tokens.py checks of its --out folder before it writes there: the sets of
shards it holds (llm.c's names, NAME_(train|val)_NNNNNN.bin), which of them a set's globs would
reach, whose tokenizer.json it holds (a training run's, a model folder's, another set's), and the
staging files an interrupted run of a set left. A refusal is one line, exit 2, as the tool's own."""
import functools
import glob
import json
import os
import re

import tokenizer_outputs

fail = functools.partial(tokenizer_outputs.fail, "prepare_tokens")


SHARD_NAME = re.compile(r"(.+)_(train|val)_\d{6}\.bin")


def shard_sets(out):
    """The sets of shards in OUT: {NAME: [paths]}, by llm.c's names NAME_(train|val)_NNNNNN.bin."""
    sets = {}
    for p in glob.glob(os.path.join(glob.escape(out), "*.bin")):
        m = SHARD_NAME.fullmatch(os.path.basename(p))
        if m:
            sets.setdefault(m.group(1), []).append(p)
    return sets


def earlier_shards(out, name):
    """NAME's shards already in OUT (an earlier preparation's), which the new set replaces: its own
    names alone (NAME_train_*.bin would also match set NAME_train's NAME_train_train_000001.bin)."""
    return sorted(shard_sets(out).get(name, []))


def check_name_globs(args):
    """The globs a run reads a set by (OUT/NAME_train_*.bin, OUT/NAME_val_*.bin) must find NAME's
    shards alone: set "d" beside set "d_val" would train or validate on the other's too."""
    for other in sorted(set(shard_sets(args.out)) - {args.name}):
        for a, b in ((args.name, other), (other, args.name)):
            if any(f"{b}_".startswith(f"{a}_{split}_") for split in ("train", "val")):
                fail(f"--name {args.name}: --out {args.out} holds set {other}, and the glob {a}_train_*.bin or "
                     f"{a}_val_*.bin would also match {b}'s shards; give another --name or --out")


def same_file(source, target):
    """Whether target is source itself (--tokenizer given from OUT): nothing to copy."""
    return os.path.exists(source) and os.path.exists(target) and os.path.samefile(source, target)


# The longest staging name a set has, NAME_tokenizer_config.json.tmp, within a file name's 255 bytes.
LONGEST_STAGING_SUFFIX = "_tokenizer_config.json.tmp"


def tokenizer_staging_path(out, name, target):
    """Where a tokenizer file is staged: named by the set (NAME_tokenizer.json.tmp), so that a later
    run of NAME knows it for its own leftover."""
    return os.path.join(out, f"{name}_{os.path.basename(target)}.tmp")


def remove_stale_staging(out, name):
    """Removes the staging files of set NAME that an earlier run left in OUT (a SIGKILL, a power
    loss: nothing removed them), so they do not pile up run after run; they are this tool's own
    names, and no other run is writing into OUT (lock_folder). Returns how many there were."""
    own = re.compile(re.escape(name) + r"_((train|val)_\d{6}\.bin|tokenizer\.json|tokenizer_config\.json)\.tmp")
    stale = [e.path for e in os.scandir(out) if own.fullmatch(e.name) and e.is_file(follow_symlinks=False)]
    for p in stale:
        os.remove(p)
    return len(stale)


def same_tokenizer(a, b):
    """Whether tokenizer.json files a and b are one tokenizer (the same file, or the same JSON saved
    again in another key order or spacing); False where a is missing or unreadable."""
    try:
        if os.path.samefile(a, b):
            return True
        with open(a, encoding="utf-8") as fa, open(b, encoding="utf-8") as fb:
            return json.load(fa) == json.load(fb)
    except (OSError, ValueError):
        return False


RUN_FILES = ("metrics.jsonl", "RUN_LOCK", "checkpoints", "final.safetensors")
MODEL_WEIGHTS = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                 "pytorch_model.bin.index.json")


def refuse_run_or_model_folder(out):
    """OUT's tokenizer.json is replaced and its tokenizer_config.json may go: not where they are a
    training run's (its samples and exports decode through them) or a model folder's (config.json
    beside its weights)."""
    if not os.path.isdir(out):
        return
    held = next((f for f in RUN_FILES if os.path.lexists(os.path.join(out, f))), None)
    if held:
        fail(f"--out {out} is a training run's directory (it holds {held}): its tokenizer is the run's, "
             "which samples and exports decode through; give another --out")
    weights = next((f for f in MODEL_WEIGHTS if os.path.lexists(os.path.join(out, f))), None)
    if weights and os.path.exists(os.path.join(out, "config.json")):
        fail(f"--out {out} is a model folder (config.json beside {weights}): its tokenizer is the model's; "
             "give another --out")


def check_tokenizer_of_out(args, replacing):
    """OUT's tokenizer.json is its shards' (training finds it beside them): another set's there, of
    other names than NAME, must not be replaced (`replacing`: --tokenizer is not that one) by
    another tokenizer, whose ids would then decode (or be refused against) that set's tokens."""
    if not os.path.isfile(os.path.join(args.out, "tokenizer.json")) or not replacing:
        return
    others = sorted(set(shard_sets(args.out)) - {args.name})
    if others:
        fail(f"--out {args.out}: its tokenizer.json is another tokenizer, that of its shards {', '.join(others)}; "
             "give another --out (each folder holds one tokenizer)")
