#!/usr/bin/env python3
"""CLI bad-input test: every class of bad input (missing file, malformed JSON, unknown key, wrong
type, indivisible n_embd, zero sizes, bad flags) ends with exit code 2 and exactly one line on
stderr that names the culprit, never a crash, and leaves an existing output file untouched.

usage: bad_input_test.py PATH/TO/zerotrain
"""
import json
import os
import resource
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests"))
from check_report import close_work_folders  # noqa: E402
from choice_file_util import write_choice_file  # noqa: E402

GOOD = {"model": {"n_layer": 1, "n_head": 2, "n_embd": 8, "block_size": 8, "vocab_size": 10},
        "train": {"micro_batch": 2}}


def main():
    binary = sys.argv[1]
    work = tempfile.mkdtemp(prefix="zt_cli_")
    out = os.path.join(work, "state.safetensors")
    sentinel = b"previous contents must survive a failed run"

    def config_file(name, content):
        path = os.path.join(work, name)
        with open(path, "w") as f:
            f.write(content if isinstance(content, str) else json.dumps(content))
        return path

    def with_model(**changes):
        doc = json.loads(json.dumps(GOOD))
        doc["model"].update(changes)
        return doc

    cases = [  # (name, argv after the binary, fragment the error must contain)
        # Named as the flag, not as train.init_from, which the user never set.
        ("sample --from a missing file", ["sample", "--from", os.path.join(work, "nope.bin")],
         f"sample: --from {os.path.join(work, 'nope.bin')}: no such Hugging Face folder"),
        ("missing config file", ["debug-state", "--config", os.path.join(work, "nope.json"), "--out", out], "nope.json"),
        ("malformed JSON", ["debug-state", "--config", config_file("bad.json", '{"model": {"n_layer": 1,,}}'),
                            "--out", out], "malformed JSON at line 1"),
        # A trailing comma (JavaScript and Python take one): said, as a comment is.
        ("a trailing comma", ["debug-state", "--config", config_file("comma.json", '{"model": {"n_layer": 1,\n}}'),
                              "--out", out], "line 2, column 1 (JSON allows no comma after a last item"),
        ("unknown key", ["debug-state", "--config", config_file("k.json", with_model(n_layers=2)), "--out", out],
         "model.n_layers"),
        ("wrong type", ["debug-state", "--config", config_file("t.json", with_model(n_embd="8")), "--out", out],
         "model.n_embd"),
        ("n_embd not divisible by n_head", ["debug-state", "--config", config_file("d.json", with_model(n_head=3)),
                                            "--out", out], "model.n_head"),
        ("zero n_layer", ["debug-state", "--config", config_file("z1.json", with_model(n_layer=0)), "--out", out],
         "model.n_layer"),
        ("zero vocab", ["debug-state", "--config", config_file("z2.json", with_model(vocab_size=0)), "--out", out],
         "model.vocab_size"),
        ("zero batch", ["debug-state", "--config", config_file("z3.json", dict(GOOD, train={"micro_batch": 0})),
                        "--out", out], "train.micro_batch"),
        ("config not an object", ["debug-state", "--config", config_file("a.json", "[1, 2]"), "--out", out], "object"),
        ("bad --set", ["debug-state", "--config", config_file("g.json", GOOD), "--out", out, "--set", "model.n_head"],
         "--set"),
        # A --set value that is broken JSON (an object, a number past a double) is read as a word
        # (a path or glob may open with "["), and the key's type error says where its JSON broke (it
        # said "must be a JSON object (got ...)", "must be a number", nothing more).
        ("a broken --set object", ["debug-state", "--config", config_file("g7.json", GOOD), "--out", out, "--set",
                                   'optim={"lr": 0.1,}'],
         "as JSON it is malformed at line 1, column 12 (JSON allows no comma"),
        ("--set 1e999", ["debug-state", "--config", config_file("g8.json", GOOD), "--out", out, "--set",
                         "optim.lr=1e999"], "must be a number (got \"1e999\") (read as a word: as JSON, number overflow"),
        ("a broken --set list", ["train", "--config", config_file("g9.json", GOOD), "--run-dir",
                                 os.path.join(work, "broken_list"), "--set", 'data.train_files=["a.bin",]', "--set",
                                 'data.val_files=["a.bin"]'],
         "pattern '[\"a.bin\",]' matches no file (read as a word: as JSON it is malformed at line 1, column 10"),
        # The number found outside strings (a search of its text found it inside "x1e999" first).
        ("1e999 in the file", ["debug-state", "--config",
                               config_file("of.json", '{"log": {"run_dir": "x1e999"},\n "model": {"n_layer": 1e999}}'),
                               "--out", out], "number overflow parsing '1e999' at line 2, column 23"),
        ("bad --steps", ["debug-state", "--config", config_file("g2.json", GOOD), "--out", out, "--steps", "-1"],
         "--steps"),
        # memory predicts every stage, but the config as given must still be one (it printed a table).
        ("memory: zero.stage 7 in the file", ["memory", "--config", config_file("s7.json", dict(GOOD, zero={"stage": 7})),
                                              "--ranks", "2"], "'zero.stage' = 7 is out of range"),
        # Each key in range, their product past what the memory model counts (negative totals).
        ("memory: sizes past 64 PiB", ["memory", "--config", config_file("big.json", GOOD), "--ranks", "1", "--set",
                                       "model.n_embd=1048576", "--set", "model.n_head=1", "--set",
                                       "model.block_size=1048576", "--set", "train.micro_batch=1024"],
         "past the 64 PiB"),
        ("missing --out", ["debug-state", "--config", config_file("g3.json", GOOD)], "--out"),
        ("--run of no directory", ["sample", "--run", os.path.join(work, "no_such_run")], "no such run directory"),
        # An --out the write would fail on (exit 1 after the work) or replace (a FIFO): refused first.
        ("--out a directory", ["debug-state", "--config", config_file("g4.json", GOOD), "--out", work],
         "is a directory, not a regular file"),
        ("--out in no folder", ["debug-state", "--config", config_file("g5.json", GOOD), "--out",
                                os.path.join(work, "no_such_folder", "x.safetensors")], "no folder"),
        # An empty path ("$UNSET"): named as the flag (it was "error: : cannot open token file").
        ("an empty --tokens", ["eval", "--from", os.path.join(work, "nope.bin"), "--tokens", ""],
         "eval: --tokens is empty (an unset variable?): it needs a FILE"),
        ("an empty --run-dir=", ["train", "--config", config_file("g6.json", GOOD), "--run-dir="],
         "train: --run-dir is empty (an unset variable?): it needs a DIR"),
        ("an empty --resume", ["train", "--config", config_file("g10.json", GOOD), "--resume", ""],
         "train: --resume is empty (an unset variable?): it needs latest or a PATH"),
        ("unknown flag", ["debug-state", "--frobnicate"], "--frobnicate"),
        ("unknown command", ["frobnicate"], "frobnicate"),
        ("a misspelt command", ["trian"], "did you mean 'train'?"),
    ]

    # Data files: a token file with a bad magic, one shorter than its header says, and an
    # out-of-range token, each refused when training opens it.
    def token_file(name, magic=20240520, count=100, actual=100, token=1):
        path = os.path.join(work, name)
        with open(path, "wb") as f:
            f.write(struct.pack("<256i", magic, 1, count, *([0] * 253)))
            f.write(struct.pack(f"<{actual}H", *([token] * actual)))
        return path
    good_tokens = token_file("good.bin")
    run_dir = os.path.join(work, "run")
    def train_on(train_path, *extra):
        return ["train", "--config", config_file("tr.json", GOOD), "--run-dir", run_dir,
                "--set", f"data.train_file={train_path}", "--set", f"data.val_file={good_tokens}"] + list(extra)
    cases += [
        ("llm.c-style header, unknown magic", train_on(token_file("magic2.bin", magic=20250000, count=100)),
         "unknown magic 20250000"),
        ("token file with bad magic", train_on(token_file("magic.bin", magic=1234), "--set", "data.format=llmc"),
         "magic"),
        ("truncated token file", train_on(token_file("short.bin", count=100, actual=60)), "short.bin"),
        ("out-of-range token", train_on(token_file("range.bin", token=500)), "500"),
        ("missing dataset directory", ["train", "--config", config_file("nd.json", dict(GOOD, data={"dataset": "/nonexistent/data"})),
                                       "--run-dir", run_dir], "data.dataset"),
        ("inconsistent batch terms", ["train", "--config", config_file("bt.json", dict(GOOD, train={"micro_batch": 2, "grad_accum": 2, "global_batch_tokens": 7})),
                                      "--run-dir", run_dir], "train.global_batch_tokens"),
        # A data file that cannot be read is named by the key that gave it, and where that came from.
        ("a missing vocabulary file", ["train", "--config", config_file("vf.json", GOOD), "--run-dir", run_dir,
                                       "--set", f"data.vocab_file={os.path.join(work, 'none.json')}"],
         "--set data.vocab_file="),
        ("a missing shard", ["train", "--config", config_file("sf.json", GOOD), "--run-dir", run_dir, "--set",
                             f"data.train_files={os.path.join(work, 'none_0.bin')}", "--set",
                             f"data.val_files={os.path.join(work, 'none_1.bin')}"], "--set data.train_files="),
        # A cross-key refusal of the model's support names the --set entries it read, not the file alone.
        ("selective beside the GELU epilogue", ["train", "--config", config_file("ge.json", GOOD), "--run-dir", run_dir,
                                                "--set", "device=cuda", "--set", "precision.activations=bf16", "--set",
                                                "train.activation_checkpointing=selective", "--set",
                                                "precision.gelu_epilogue=true"], "--set precision.gelu_epilogue=true"),
        ("--allow-config-change alone", ["train", "--config", config_file("acc.json", GOOD), "--run-dir", run_dir,
                                         "--allow-config-change"], "--allow-config-change is read only with --resume"),
        ("--set of an unknown section", ["train", "--config", config_file("us.json", GOOD), "--run-dir", run_dir,
                                         "--set", "trian.max_steps=3"], "config error in --set trian.max_steps=3"),
        ("prepare: missing text", ["prepare", "--text", os.path.join(work, "none.txt"), "--out", os.path.join(work, "p")],
         "none.txt"),
        ("prepare: a folder as text", ["prepare", "--text", work, "--out", os.path.join(work, "p")],
         "a folder, not a text file"),
        ("eval: --windows without --tokens", ["eval", "--run", os.path.join(work, "norun"), "--choices", "c.bin",
                                              "--windows", "2"], "--windows is read only with --tokens"),
        ("eval: --format without --tokens", ["eval", "--run", os.path.join(work, "norun"), "--choices", "c.bin",
                                             "--format", "nanogpt"], "--format is read only with --tokens"),
        ("sample: not a run directory", ["sample", "--run", os.path.join(work, "norun")], "norun"),
        ("sample: unknown --device", ["sample", "--run", os.path.join(work, "norun"), "--device", "tpu"],
         "--device must be cpu or cuda (got 'tpu')"),
        ("sample: unknown --dtype", ["sample", "--run", os.path.join(work, "norun"), "--dtype", "f16"],
         "--dtype must be f32 (fp32) or bf16 (got 'f16')"),
        ("train: unknown flag", ["train", "--confg", "x.json"], "--confg"),
        # A flag given twice is refused, not the last one taken; a switch given a value is refused, not
        # taken as on (--json=false printed JSON).
        ("train: --config twice", ["train", "--config", config_file("t1.json", GOOD), "--config",
                                   config_file("t2.json", GOOD), "--run-dir", run_dir], "--config given twice"),
        ("memory: a switch with a value", ["memory", "--config", config_file("m1.json", GOOD), "--json=false"],
         "--json takes no value"),
        ("log.profile_ops not a bool", ["train", "--config", config_file("po.json", GOOD), "--run-dir", run_dir,
                                        "--set", "log.profile_ops=yes"], "log.profile_ops"),
        # Issue 19's small ones: each names the real culprit.
        ("duplicate key", ["train", "--config", config_file(
            "dup.json", '{"model": {"n_layer": 1, "n_head": 2, "n_embd": 8, "block_size": 8, "vocab_size": 10, '
                        '"n_layer": 2}, "train": {"micro_batch": 2}}'), "--run-dir", run_dir], "'model.n_layer' appears twice"),
        ("duplicate section", ["train", "--config", config_file(
            "dup2.json", '{"model": {"n_layer": 1, "n_head": 2, "n_embd": 8, "block_size": 8, "vocab_size": 10}, '
                         '"train": {"micro_batch": 2}, "train": {"micro_batch": 4}}'), "--run-dir", run_dir],
         "'train' appears twice"),
        ("a --set out of range names the --set", ["train", "--config", config_file("s1.json", GOOD), "--run-dir", run_dir,
                                                  "--set", "train.micro_batch=0"],
         "config error in --set train.micro_batch=0: key 'train.micro_batch'"),
        ("a --set number for a text key says how to quote it", ["train", "--config", config_file("s3.json", GOOD),
                                                                 "--run-dir", run_dir, "--set", "log.sample_prompt=123"],
         """must be a string (got 123) (a --set value is read as JSON; for the text, quote it: --set 'log.sample_prompt="123"')"""),
        ("a --set unknown key names the --set", ["train", "--config", config_file("s2.json", GOOD), "--run-dir", run_dir,
                                                 "--set", "train.micro_bach=2"], "config error in --set train.micro_bach=2"),
        ("top-level array with a --set", ["train", "--config", config_file("arr.json", "[1, 2]"), "--run-dir", run_dir,
                                          "--set", "train.micro_batch=2"], "arr.json: the top level must be a JSON object"),
        ("directory as --config", ["train", "--config", work, "--run-dir", run_dir], "is a directory"),
        # The Llama family's keys (issue 22).
        ("a Llama key on GPT-2", ["train", "--config", config_file("lk.json", with_model(n_kv_head=1)),
                                  "--run-dir", run_dir], "model.n_kv_head is a Llama key"),
        ("n_head not a multiple of n_kv_head", ["train", "--config", config_file(
            "lq.json", with_model(arch="llama", n_kv_head=3)), "--run-dir", run_dir], "not a multiple of model.n_kv_head = 3"),
        ("unknown model.arch", ["train", "--config", config_file("la.json", with_model(arch="mamba")),
                                "--run-dir", run_dir], "model.arch"),
        ("Llama with dropout", ["train", "--config", config_file("ld.json", with_model(arch="llama", dropout=0.1)),
                                "--run-dir", run_dir], "has no dropout"),
        # Control characters in a path the error names: escaped, so the error stays one line (a
        # newline split it; a NUL ended the message there, naming nothing).
        ("empty --out", ["debug-state", "--config", config_file("eo.json", GOOD), "--out", ""], "--out is empty (an unset variable?): it needs a FILE"),
        ("--out a folder's name", ["debug-state", "--config", config_file("ef.json", GOOD), "--out", work + "/new/"],
         "not a file name"),
        ("empty log.run_dir", ["train", "--config", config_file("erd.json", dict(GOOD, log={"run_dir": ""}))],
         "log.run_dir is empty"),
        # A missing dataset folder for a model of a tokenizer's vocabulary: not `zerotrain prepare`'s
        # hint (a character vocabulary, on which such a model trains the wrong tokens).
        ("missing dataset, BPE vocabulary", ["train", "--config", config_file("bpe.json", dict(
            with_model(vocab_size=50257), data={"dataset": os.path.join(work, "no_gpt2_tokens")})),
            "--run-dir", run_dir], "tools/prepare_tokens.py's shards"),
        # precision.attention = "cudnn" where the models never open the fused path (cuDNN's fallback,
        # the flash kernels, has no head size 4): refused, as "cudnn" insists (it was quietly not taken).
        ("cudnn without the fused path", ["memory", "--config", config_file("cudnn.json", dict(
            GOOD, device="cuda", precision={"activations": "bf16", "attention": "cudnn"})), "--ranks", "1"],
         "they have no head size 4"),
        ("--out another kind of file", ["debug-state", "--config", config_file("eo.json", GOOD), "--out", out],
         "exists and is not a debug-state file"),
        ("newline in a path", ["debug-state", "--config", os.path.join(work, "a\nb.json"), "--out", out],
         "a\\nb.json: cannot open"),
        ("NUL in a config's path", ["train", "--config", config_file("nul.json", dict(GOOD, data={
            "vocab_file": "ab\x00cd"})), "--run-dir", run_dir], "key 'data.vocab_file' = 'ab\\x00cd' holds a NUL"),
        ("vocab_file without the text's characters", ["train", "--config", config_file("vf.json", dict(GOOD, data={
            "vocab_file": config_file("a_only.json", {"format": "zerotrain-vocab", "kind": "char", "tokens": ["a"],
                                                      "version": 1})})), "--run-dir", run_dir],
         "data.vocab_file = "),
    ]

    failures = []
    for name, argv, fragment in cases:
        with open(out, "wb") as f:
            f.write(sentinel)
        proc = subprocess.run([binary] + argv, capture_output=True, text=True, timeout=60)
        err_lines = [l for l in proc.stderr.splitlines() if l.strip()]
        problems = []
        if proc.returncode != 2:
            problems.append(f"exit code {proc.returncode}, expected 2")
        if not err_lines or fragment not in err_lines[0]:
            problems.append(f"first stderr line lacks '{fragment}'")
        if len(err_lines) != 1:
            problems.append(f"{len(err_lines)} stderr lines, expected 1")
        with open(out, "rb") as f:
            if f.read() != sentinel:
                problems.append("the existing output file was modified")
        status = "OK" if not problems else "FAIL: " + "; ".join(problems)
        print(f"{name:<32} exit={proc.returncode}  {status}\n    stderr: {proc.stderr.strip()[:200]}")
        if problems:
            failures.append(name)

    # A --set word that opens as JSON would but is none, where a string is meant (a glob, a path
    # with brackets): taken as it is.
    proc = subprocess.run([binary, "memory", "--config", config_file("globs.json", GOOD), "--ranks", "1", "--set",
                           "data.train_files=[ab]*.bin", "--set", "data.val_files=[ab]*.bin", "--set",
                           "log.run_dir=[exp1]/run"], capture_output=True, text=True, timeout=60)
    ok = proc.returncode == 0
    print(f"{'--set words opening with [':<32} exit={proc.returncode}  {'OK' if ok else 'FAIL'}"
          f"\n    stderr: {proc.stderr.strip()[:200]}")
    if not ok:
        failures.append("--set words opening with [")

    # debug-state under a launcher of several ranks: every rank would write the same unsharded state
    # to the same --out; refused in one line, the file as it was.
    with open(out, "wb") as f:
        f.write(sentinel)
    proc = subprocess.run([binary, "debug-state", "--config", config_file("ds.json", GOOD), "--out", out],
                          capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, ZT_RANK="1", ZT_WORLD_SIZE="2"))
    lines = [l for l in proc.stderr.splitlines() if l.strip()]
    with open(out, "rb") as f:
        kept = f.read() == sentinel
    ok = proc.returncode == 2 and len(lines) == 1 and "rank 1 of 2" in lines[0] and kept
    print(f"{'debug-state under a launcher':<32} exit={proc.returncode}  {'OK' if ok else 'FAIL'}\n"
          f"    stderr: {proc.stderr.strip()[:200]}")
    if not ok:
        failures.append("debug-state under a launcher")

    # A run that cannot fit is refused before it allocates (issue 19): the prediction by category
    # beside what the machine offers, exit 2, nothing written; train.check_memory = false overrides.
    huge = json.loads(json.dumps(GOOD))
    huge["model"].update({"n_layer": 48, "n_embd": 4096, "n_head": 32, "vocab_size": 64})
    huge_dir = os.path.join(work, "huge_run")
    proc = subprocess.run([binary, "train", "--config", config_file("huge.json", huge), "--run-dir", huge_dir],
                          capture_output=True, text=True, timeout=120)
    lines = [l for l in proc.stderr.splitlines() if l.strip()]
    ok = (proc.returncode == 2 and len(lines) == 1 and "the run needs" in lines[0] and "optimizer_states" in lines[0]
          and "train.check_memory" in lines[0] and not os.path.exists(huge_dir))
    print(f"{'model too large for the machine':<32} exit={proc.returncode}  {'OK' if ok else 'FAIL'}\n    stderr: {proc.stderr.strip()[:200]}")
    if not ok:
        failures.append("model too large")
    # Its output and the error in one stream (2>&1, a batch system's log): the error comes last,
    # after the header stdout printed before it (stdout was flushed only at exit, after the error).
    proc = subprocess.run([binary, "train", "--config", config_file("huge.json", huge), "--run-dir", huge_dir],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
    merged = [l for l in proc.stdout.splitlines() if l.strip()]
    ok = proc.returncode == 2 and len(merged) > 1 and merged[-1].startswith("zerotrain: error:")
    print(f"{'error last in a merged log':<32} exit={proc.returncode}  {'OK' if ok else 'FAIL'}\n    last: {merged[-1:]}")
    if not ok:
        failures.append("error last in a merged log")
    small = dict(os.environ, ZT_TEST_AVAILABLE_BYTES="1000")
    tiny_args = [binary, "train", "--config", config_file("small.json", GOOD), "--run-dir", run_dir, "--set",
                 f"data.train_file={good_tokens}", "--set", f"data.val_file={good_tokens}", "--set", "train.max_steps=1",
                 "--set", "log.sample_tokens=0", "--set", "train.eval_batches=1"]
    refused = subprocess.run(tiny_args, capture_output=True, text=True, timeout=120, env=small)
    forced = subprocess.run(tiny_args + ["--set", "train.check_memory=false"], capture_output=True, text=True,
                            timeout=120, env=small)
    # One rank: every stage holds the whole model, so a higher stage is advised only with more ranks.
    ok = (refused.returncode == 2 and "ZT_TEST_AVAILABLE_BYTES offers: 1000 B" in refused.stderr and
          forced.returncode == 0 and "raise zero.stage" not in refused.stderr and
          "add ranks at a higher zero.stage" in refused.stderr)
    print(f"{'machine too small; override':<32} exit={refused.returncode}/{forced.returncode}  {'OK' if ok else 'FAIL'}"
          f"\n    stderr: {refused.stderr.strip()[-200:]} {forced.stderr.strip()[-200:]}")
    if not ok:
        failures.append("memory check override")
    # debug-state checks the same memory before it allocates (it grew towards the OOM killer).
    dbg_out = os.path.join(work, "dbg_small.safetensors")
    dbg = subprocess.run([binary, "debug-state", "--config", config_file("small.json", GOOD), "--out", dbg_out],
                         capture_output=True, text=True, timeout=120, env=small)
    ok = (dbg.returncode == 2 and len(dbg.stderr.strip().splitlines()) == 1 and
          "ZT_TEST_AVAILABLE_BYTES offers: 1000 B" in dbg.stderr and not os.path.exists(dbg_out))
    print(f"{'debug-state: machine too small':<32} exit={dbg.returncode}  {'OK' if ok else 'FAIL'}"
          f"\n    stderr: {dbg.stderr.strip()[-200:]}")
    if not ok:
        failures.append("debug-state memory check")
    # At stage 3 with every activation recomputed, neither is offered as a way out (it advised
    # "raise zero.stage" at stage 3, and blamed a --set zero.stage=3 for the memory).
    at_most = subprocess.run(tiny_args + ["--set", "zero.stage=3", "--set", "train.activation_checkpointing=all"],
                             capture_output=True, text=True, timeout=120, env=small)
    ok = (at_most.returncode == 2 and "zero.stage" not in at_most.stderr and
          "activation_checkpointing" not in at_most.stderr and "add ranks" in at_most.stderr)
    print(f"{'no advice already taken':<32} exit={at_most.returncode}  {'OK' if ok else 'FAIL'}"
          f"\n    stderr: {at_most.stderr.strip()[-300:]}")
    if not ok:
        failures.append("memory advice at stage 3")

    # A large token table and few activations: setting the weights up (one unit in fp32 beside the
    # model states) needs more than a step. An offer between the two is refused for the set-up.
    # (Without final.safetensors: its gather, the same states and the unit again, would tie with it.)
    big_vocab = ["--set", "model.vocab_size=50257", "--set", "model.n_embd=64", "--set", "model.n_layer=1",
                 "--set", "model.n_head=2", "--set", "model.block_size=8", "--set", "train.micro_batch=1",
                 "--set", "log.final_weights=false"]
    mem = subprocess.run([binary, "memory", "--config", config_file("small.json", GOOD), "--ranks", "1", "--json",
                          *big_vocab], capture_output=True, text=True, timeout=120)
    step_total = json.loads(mem.stdout)["stages"][0]["total"] if mem.returncode == 0 else 0
    between = dict(os.environ, ZT_TEST_AVAILABLE_BYTES=str(step_total + 1000))
    refused = subprocess.run(tiny_args + big_vocab, capture_output=True, text=True, timeout=120, env=between)
    # The set-up holds no activations: the line names the --set model keys that sized it and offers
    # a smaller model, not a smaller batch, seq_len or recomputation (which change nothing there).
    ok = (refused.returncode == 2 and "to set its weights up" in refused.stderr and step_total > 0 and
          "--set model.vocab_size=50257" in refused.stderr and "shrink the model" in refused.stderr and
          "micro_batch" not in refused.stderr and "seq_len" not in refused.stderr and
          "activation_checkpointing" not in refused.stderr)
    print(f"{'set-up larger than a step':<32} exit={refused.returncode}  {'OK' if ok else 'FAIL'}"
          f"\n    stderr: {refused.stderr.strip()[-300:]}")
    if not ok:
        failures.append("set-up memory check")
    # `memory` says what the check weighs: its "required" (here the set-up's peak) trains under an
    # offer of exactly that and is refused a byte below (memory printed only the step's total).
    required = json.loads(mem.stdout)["stages"][0].get("required", 0) if mem.returncode == 0 else 0
    runs = [subprocess.run(tiny_args + big_vocab, capture_output=True, text=True, timeout=120,
                           env=dict(os.environ, ZT_TEST_AVAILABLE_BYTES=str(offer)))
            for offer in (required, required - 1)]
    ok = required > step_total and runs[0].returncode == 0 and runs[1].returncode == 2
    print(f"{'memory says what check weighs':<32} exit={runs[0].returncode}/{runs[1].returncode}  "
          f"{'OK' if ok else 'FAIL'} (required {required}, step total {step_total})")
    if not ok:
        failures.append("memory's required bytes")
    # With final.safetensors (the default), the final gather holds what stays between steps (with
    # bf16 parameters, the kernels' fp32 unit copies too) and the largest unit whole in fp32: here
    # more than a step or the set-up, so it is what the CPU's check weighs; an offer a byte below is
    # refused for it, with log.final_weights = false among the ways out, and at exactly that the run
    # trains and writes the file.
    with_final = big_vocab[:-2] + ["--set", "precision.param_dtype=bf16"]
    mem = subprocess.run([binary, "memory", "--config", config_file("small.json", GOOD), "--ranks", "1", "--json",
                          *with_final], capture_output=True, text=True, timeout=120)
    stage0 = json.loads(mem.stdout)["stages"][0] if mem.returncode == 0 else {}
    gather_total, required = stage0.get("final_gather_total", 0), stage0.get("required", 0)
    final_file = os.path.join(run_dir, "final.safetensors")
    if os.path.exists(final_file):
        os.remove(final_file)  # an earlier case's: the file must be this run's
    runs = [subprocess.run(tiny_args + with_final, capture_output=True, text=True, timeout=120,
                           env=dict(os.environ, ZT_TEST_AVAILABLE_BYTES=str(offer)))
            for offer in (required, required - 1)]
    ok = (required == gather_total > max(stage0.get("total", 0), stage0.get("setup_total", 0)) > 0
          and runs[0].returncode == 0 and os.path.exists(final_file)
          and runs[1].returncode == 2 and "to gather its final weights after the last step" in runs[1].stderr
          and "set log.final_weights = false" in runs[1].stderr and "shrink the model" in runs[1].stderr
          and "micro_batch" not in runs[1].stderr and "activation_checkpointing" not in runs[1].stderr)
    print(f"{'final gather weighed':<32} exit={runs[0].returncode}/{runs[1].returncode}  {'OK' if ok else 'FAIL'} "
          f"(required {required}, final gather {gather_total})\n    stderr: {runs[1].stderr.strip()[-300:]}")
    if not ok:
        failures.append("final gather's memory check")

    # A token file of exactly seq_len + 1 tokens holds one window: it trains (block_size 8).
    nine = token_file("nine.bin", count=9, actual=9)
    proc = subprocess.run([binary, "train", "--config", config_file("nine.json", GOOD), "--run-dir", run_dir,
                           "--set", f"data.train_file={nine}", "--set", f"data.val_file={nine}", "--set",
                           "train.max_steps=2", "--set", "log.sample_tokens=0", "--set", "train.eval_batches=1"],
                          capture_output=True, text=True, timeout=120)
    print(f"{'seq_len + 1 tokens train':<32} exit={proc.returncode}  {'OK' if proc.returncode == 0 else 'FAIL'}"
          f"\n    stderr: {proc.stderr.strip()[-200:]}")
    if proc.returncode != 0:
        failures.append("seq_len + 1 tokens")

    # llm.c's Llama 3 token files (magic 20240801, version 7, uint32) train on a vocabulary above
    # 65,535 under data.format auto, reading the tokens themselves (not the header as uint16).
    wide = os.path.join(work, "wide.bin")
    with open(wide, "wb") as f:
        f.write(struct.pack("<256i", 20240801, 7, 64, *([0] * 253)))
        f.write(struct.pack("<64I", *[(i * 9973) % 70000 for i in range(64)]))
    wide_cfg = json.loads(json.dumps(GOOD))
    wide_cfg["model"]["vocab_size"] = 70000
    proc = subprocess.run([binary, "train", "--config", config_file("wide.json", wide_cfg), "--run-dir", run_dir,
                           "--set", f"data.train_file={wide}", "--set", f"data.val_file={wide}", "--set",
                           "train.max_steps=2", "--set", "log.sample_tokens=0", "--set", "train.eval_batches=1"],
                          capture_output=True, text=True, timeout=120)
    unigram = "unigram entropy of the training data: 4.1589" in proc.stdout  # 64 distinct tokens: ln 64
    print(f"{'uint32 tokens, vocab 70000':<32} exit={proc.returncode}  {'OK' if proc.returncode == 0 and unigram else 'FAIL'}"
          f"\n    stderr: {proc.stderr.strip()[-200:]}")
    if proc.returncode != 0 or not unigram:
        failures.append("uint32 tokens")
    # The same file trains a Llama (Llama 3's token files are what its 128,256 vocabulary comes in).
    wide_cfg["model"].update({"arch": "llama", "n_kv_head": 1})
    proc = subprocess.run([binary, "train", "--config", config_file("wide_llama.json", wide_cfg), "--run-dir", run_dir,
                           "--set", f"data.train_file={wide}", "--set", f"data.val_file={wide}", "--set",
                           "train.max_steps=2", "--set", "log.sample_tokens=0", "--set", "train.eval_batches=1"],
                          capture_output=True, text=True, timeout=120)
    ok = proc.returncode == 0 and "unigram entropy of the training data: 4.1589" in proc.stdout
    print(f"{'Llama on uint32 tokens':<32} exit={proc.returncode}  {'OK' if ok else 'FAIL'}"
          f"\n    stderr: {proc.stderr.strip()[-200:]}")
    if not ok:
        failures.append("Llama on uint32 tokens")
    # That run has token files and no tokenizer or vocabulary: a prompt cannot be encoded and is
    # refused (it was dropped, the sample continuing nothing); without one the sample prints ids.
    refused = subprocess.run([binary, "sample", "--run", run_dir, "--prompt", "the queen", "--tokens", "2"],
                             capture_output=True, text=True, timeout=120)
    plain = subprocess.run([binary, "sample", "--run", run_dir, "--tokens", "2"], capture_output=True, text=True,
                           timeout=120)
    lines = refused.stderr.strip().splitlines()
    ok = (refused.returncode == 2 and len(lines) == 1 and "--prompt needs a tokenizer" in lines[0] and
          "--vocab" in lines[0] and plain.returncode == 0 and len(plain.stdout.split()) == 2)
    print(f"{'sample: prompt without tokenizer':<32} exit={refused.returncode}/{plain.returncode}  {'OK' if ok else 'FAIL'}"
          f"\n    stderr: {refused.stderr.strip()[-200:]} {plain.stderr.strip()[-200:]}")
    if not ok:
        failures.append("sample prompt without tokenizer")

    # A prepared dataset with another dataset's vocabulary as data.vocab_file: refused before
    # training (its samples would decode through the wrong table).
    texts = {"A": "abcdefghij klmnopqrst\n" * 400, "B": "xyz xyz\n" * 800}
    for name, text in texts.items():
        with open(os.path.join(work, f"{name}.txt"), "w") as f:
            f.write(text)
        subprocess.run([binary, "prepare", "--text", os.path.join(work, f"{name}.txt"), "--out",
                        os.path.join(work, f"ds_{name}")], capture_output=True, timeout=120)
    proc = subprocess.run([binary, "train", "--config", config_file("vf.json", GOOD), "--run-dir", run_dir,
                           "--set", f"data.dataset={os.path.join(work, 'ds_A')}",
                           "--set", f"data.vocab_file={os.path.join(work, 'ds_B', 'vocab.json')}"],
                          capture_output=True, text=True, timeout=120)
    lines = proc.stderr.strip().splitlines()
    ok = proc.returncode == 2 and len(lines) == 1 and "the dataset was made with" in lines[0]
    print(f"{'data.vocab_file not the dataset':<32} exit={proc.returncode}  {'OK' if ok else 'FAIL'}"
          f"\n    stderr: {proc.stderr.strip()[-200:]}")
    if not ok:
        failures.append("vocab_file of another dataset")

    # Plain token files (no vocabulary of their own) with a data.vocab_file too small for their ids:
    # refused before training (samples would decode them through another table). Their own: trains.
    plain = ["--set", f"data.train_file={os.path.join(work, 'ds_A', 'train.bin')}",
             "--set", f"data.val_file={os.path.join(work, 'ds_A', 'val.bin')}", "--set", "train.max_steps=1"]
    proc = subprocess.run([binary, "train", "--config", config_file("vf65.json", with_model(vocab_size=65)),
                           "--run-dir", run_dir, *plain,
                           "--set", f"data.vocab_file={os.path.join(work, 'ds_B', 'vocab.json')}"],
                          capture_output=True, text=True, timeout=120)
    own = subprocess.run([binary, "train", "--config", config_file("vf65.json", with_model(vocab_size=65)),
                          "--run-dir", run_dir + "_own",
                          *plain, "--set", f"data.vocab_file={os.path.join(work, 'ds_A', 'vocab.json')}"],
                         capture_output=True, text=True, timeout=120)
    lines = proc.stderr.strip().splitlines()
    ok = (proc.returncode == 2 and len(lines) == 1 and "the training data holds token id" in lines[0] and
          "ds_B" in lines[0] and own.returncode == 0)
    print(f"{'data.vocab_file too small':<32} exit={proc.returncode}/{own.returncode}  {'OK' if ok else 'FAIL'}"
          f"\n    stderr: {proc.stderr.strip()[-200:]} {own.stderr.strip()[-200:]}")
    if not ok:
        failures.append("vocab_file smaller than the token files' ids")
    # The same where the vocabulary is not named beside plain files: a prepared dataset whose
    # vocab.json is not the one its tokens were made with (ds_B's 5 tokens over ds_A's 22), and a
    # data.tokenizer_file too small for a dataset's ids (the export of a run on ds_B). Refused
    # before training, naming the file; neither trained on nor copied into the run.
    damaged = os.path.join(work, "ds_damaged")
    shutil.copytree(os.path.join(work, "ds_A"), damaged)
    shutil.copy(os.path.join(work, "ds_B", "vocab.json"), os.path.join(damaged, "vocab.json"))
    on_b = subprocess.run([binary, "train", "--config", config_file("vf65.json", with_model(vocab_size=65)),
                           "--run-dir", run_dir + "_b", "--set", f"data.dataset={os.path.join(work, 'ds_B')}",
                           "--set", "train.max_steps=1", "--set", "checkpoint.at_end=true"],
                          capture_output=True, text=True, timeout=120)
    export_b = subprocess.run([binary, "ckpt", "export", os.path.join(run_dir + "_b", "checkpoints"), "--format", "hf",
                               "--out", os.path.join(work, "hf_b")], capture_output=True, text=True, timeout=120)
    for what, sets, named in (
            ("dataset vocab.json too small", [f"data.dataset={damaged}"], os.path.join(damaged, "vocab.json")),
            ("tokenizer_file too small", [f"data.dataset={os.path.join(work, 'ds_A')}",
                                          f"data.tokenizer_file={os.path.join(work, 'hf_b', 'tokenizer.json')}"],
             os.path.join(work, "hf_b", "tokenizer.json"))):
        target = run_dir + "_" + what.split()[0]
        proc = subprocess.run([binary, "train", "--config", config_file("vf65.json", with_model(vocab_size=65)),
                               "--run-dir", target, "--set", "train.max_steps=1",
                               *[a for kv in sets for a in ("--set", kv)]], capture_output=True, text=True, timeout=120)
        lines = proc.stderr.strip().splitlines()
        ok = (on_b.returncode == 0 and export_b.returncode == 0 and proc.returncode == 2 and len(lines) == 1 and
              "the training data holds token id" in lines[0] and f"past the 5 tokens of {named}" in lines[0] and
              not os.path.exists(os.path.join(target, "metrics.jsonl")))
        print(f"{what:<32} exit={proc.returncode}  {'OK' if ok else 'FAIL'}"
              f"\n    stderr: {proc.stderr.strip()[-200:]} {on_b.stderr.strip()[-200:]} {export_b.stderr.strip()[-200:]}")
        if not ok:
            failures.append(what)
    # sample --vocab larger than the model's (a byte-level vocabulary's 256 for a model of 65): not
    # the vocabulary it was trained with, refused before the weights load.
    subprocess.run([binary, "prepare", "--text", os.path.join(work, "A.txt"), "--out", os.path.join(work, "ds_byte"),
                    "--level", "byte"], capture_output=True, timeout=120)
    proc = subprocess.run([binary, "sample", "--run", run_dir + "_own", "--vocab",
                           os.path.join(work, "ds_byte", "vocab.json"), "--tokens", "2"],
                          capture_output=True, text=True, timeout=120)
    lines = proc.stderr.strip().splitlines()
    ok = (proc.returncode == 2 and len(lines) == 1 and "has 256 tokens, more than the model's vocabulary of 65"
          in lines[0] and proc.stdout == "")
    print(f"{'sample: --vocab past the model':<32} exit={proc.returncode}  {'OK' if ok else 'FAIL'}"
          f"\n    stderr: {proc.stderr.strip()[-200:]}")
    if not ok:
        failures.append("sample --vocab larger than the model's")
    # More that a trained run refuses before its weights load, each at its boundary: a --temperature
    # under 0.001 (the logits' scale 1/T overflows a float: 1e-50 drew one token over and over), a
    # --vocab of one token more than the model's 65, and eval --tokens of a file one token short of
    # a window (8 positions and the next token).
    vocab66 = config_file("vocab66.json", {"format": "zerotrain-vocab", "kind": "char", "version": 1,
                                           "tokens": [chr(0x100 + i) for i in range(66)]})
    short = os.path.join(work, "short.bin")  # 8 raw uint16 tokens
    with open(short, "wb") as f:
        f.write(bytes(16))
    own = run_dir + "_own"
    for what, argv, said in (
            ("sample: --temperature 1e-50", ["sample", "--run", own, "--temperature", "1e-50"],
             "--temperature must be 0 (greedy) or a number in [0.001, 100] (got '1e-50')"),
            ("sample: --temperature 0.0009", ["sample", "--run", own, "--temperature", "0.0009"],
             "(got '0.0009')"),
            ("sample: --vocab one past", ["sample", "--run", own, "--vocab", vocab66],
             "has 66 tokens, more than the model's vocabulary of 65"),
            ("eval: --tokens without a window", ["eval", "--run", own, "--tokens", short, "--seq-len", "8"],
             "no window of 9 tokens (--seq-len 8 and its next token)")):
        proc = subprocess.run([binary, *argv, "--tokens", "2"] if argv[0] == "sample" else [binary, *argv],
                              capture_output=True, text=True, timeout=120)
        lines = proc.stderr.strip().splitlines()
        ok = proc.returncode == 2 and len(lines) == 1 and said in lines[0] and proc.stdout == ""
        print(f"{what:<32} exit={proc.returncode}  {'OK' if ok else 'FAIL'}\n    stderr: {proc.stderr.strip()[-200:]}")
        if not ok:
            failures.append(what)
    # A --tokenizer of 66 characters (a run's export: ids 0-65 for '!' to 'b') on the model of 65: a
    # prompt of its token 64 samples, one of token 65 is refused (its row is past the table).
    with open(os.path.join(work, "t66.txt"), "w") as f:
        f.write("".join(chr(0x21 + i) for i in range(66)) * 300)
    subprocess.run([binary, "prepare", "--text", os.path.join(work, "t66.txt"), "--out", os.path.join(work, "ds66")],
                   capture_output=True, timeout=120)
    subprocess.run([binary, "train", "--config", config_file("c66.json", with_model(vocab_size=66)), "--run-dir",
                    run_dir + "_66", "--set", f"data.dataset={os.path.join(work, 'ds66')}", "--set", "train.max_steps=1",
                    "--set", "checkpoint.at_end=true", "--set", "log.sample_tokens=0"], capture_output=True, timeout=120)
    subprocess.run([binary, "ckpt", "export", os.path.join(run_dir + "_66", "checkpoints"), "--format", "hf", "--out",
                    os.path.join(work, "hf66")], capture_output=True, timeout=120)
    t66 = os.path.join(work, "hf66", "tokenizer.json")
    last, past = (subprocess.run([binary, "sample", "--run", own, "--tokenizer", t66, "--prompt", prompt, "--tokens", "2"],
                                 capture_output=True, text=True, timeout=120) for prompt in ("a", "ab"))
    lines = past.stderr.strip().splitlines()
    ok = (last.returncode == 0 and past.returncode == 2 and len(lines) == 1 and
          "the prompt encodes to token 65, outside the model's vocabulary of 65" in lines[0])
    print(f"{'sample: a prompt token past':<32} exit={last.returncode}/{past.returncode}  {'OK' if ok else 'FAIL'}"
          f"\n    stderr: {last.stderr.strip()[-200:]} {past.stderr.strip()[-200:]}")
    if not ok:
        failures.append("sample prompt token past the model's vocabulary")
    # eval --choices (llm.c's eval file) whose longest example fills the model's 8 positions: scored;
    # one position more: refused before the weights load, naming the file.
    fills, over = os.path.join(work, "fills.bin"), os.path.join(work, "over.bin")
    for path, context in ((fills, 5), (over, 6)):  # inputs of 5 + 4 - 1 and 6 + 4 - 1 positions
        write_choice_file(path, [(0, list(range(1, context + 1)), [[5, 6, 7, 8], [8, 7, 6, 5]])])
    scored = subprocess.run([binary, "eval", "--run", own, "--choices", fills], capture_output=True, text=True,
                            timeout=120)
    refused = subprocess.run([binary, "eval", "--run", own, "--choices", over], capture_output=True, text=True,
                             timeout=120)
    lines = refused.stderr.strip().splitlines()
    ok = (scored.returncode == 0 and refused.returncode == 2 and len(lines) == 1 and
          f"--choices {over}: its longest example needs 9 positions, over the model's 8" in lines[0])
    print(f"{'eval: --choices at block_size':<32} exit={scored.returncode}/{refused.returncode}  "
          f"{'OK' if ok else 'FAIL'}\n    stderr: {scored.stderr.strip()[-200:]} {refused.stderr.strip()[-200:]}")
    if not ok:
        failures.append("eval --choices at the model's positions")
    # A log.sample_prompt that data.vocab_file's vocabulary cannot encode: named as that file (it
    # said "the dataset's vocabulary" of an embedded run, and left the key out of its sources).
    proc = subprocess.run([binary, "train", "--config", config_file("vf65.json", with_model(vocab_size=65)),
                           "--run-dir", run_dir + "_prompt", *plain,
                           "--set", f"data.vocab_file={os.path.join(work, 'ds_A', 'vocab.json')}",
                           "--set", 'log.sample_prompt="aZ"', "--set", "log.sample_tokens=4"],
                          capture_output=True, text=True, timeout=120)
    lines = proc.stderr.strip().splitlines()
    ok = (proc.returncode == 2 and len(lines) == 1 and "log.sample_prompt cannot be sampled from" in lines[0] and
          "--set data.vocab_file=" in lines[0] and "(data.vocab_file " in lines[0] and
          "the dataset's vocabulary" not in lines[0])
    print(f"{'sample_prompt outside vocab_file':<32} exit={proc.returncode}  {'OK' if ok else 'FAIL'}"
          f"\n    stderr: {proc.stderr.strip()[-200:]}")
    if not ok:
        failures.append("sample_prompt outside data.vocab_file")
    # A prompt with a character the run's vocabulary lacks: the error names --prompt.
    proc = subprocess.run([binary, "sample", "--run", run_dir + "_own", "--prompt", "aZ", "--tokens", "1"],
                          capture_output=True, text=True, timeout=120)
    lines = proc.stderr.strip().splitlines()
    ok = (proc.returncode == 2 and len(lines) == 1 and "--prompt: character U+005A 'Z'" in lines[0]
          and "not in the vocabulary" in lines[0])
    print(f"{'sample: prompt outside the vocab':<32} exit={proc.returncode}  {'OK' if ok else 'FAIL'}"
          f"\n    stderr: {proc.stderr.strip()[-200:]}")
    if not ok:
        failures.append("prompt outside the vocabulary")

    # The deterministic banner names the stages whose bits agree where a setting limits them.
    for name, sets, said in (
            ("det", ["zero.stage=2", "precision.param_dtype=bf16", "zero.grad_shard_dtype=fp32"],
             "the same bits at stages 2-3 (fp32 gradient shards"),
            # (zero.solo_path = false: int8 gathers act at one rank; on the solo path none runs)
            ("det_int8", ["zero.stage=3", "zero.gather_dtype=int8", "zero.solo_path=false"],
             "the same bits at stages 1-3 on this rank count (int8 gathers")):
        args = [binary, "train", "--config", config_file("det.json", with_model(vocab_size=65)), "--run-dir",
                os.path.join(work, name)]
        for kv in ["train.deterministic=true", "train.max_steps=1", "log.sample_tokens=0"] + sets:
            args += ["--set", kv]
        proc = subprocess.run(args, capture_output=True, text=True, timeout=120)
        ok = proc.returncode == 0 and said in proc.stdout
        print(f"{'deterministic banner: ' + name:<32} exit={proc.returncode}  {'OK' if ok else 'FAIL'}")
        if not ok:
            failures.append(f"deterministic banner ({name})")

    # Every config the repository ships loads, and its memory is predicted (nothing trains). One
    # that starts from pretrained weights the user downloads (train.init_from) says in one line
    # that they are not there.
    configs = sorted(f for f in os.listdir(os.path.join(ROOT, "configs")) if f.endswith(".json"))
    bad = []
    for name in configs:
        proc = subprocess.run([binary, "memory", "--config", os.path.join(ROOT, "configs", name), "--ranks", "8"],
                              capture_output=True, text=True, timeout=60)
        with open(os.path.join(ROOT, "configs", name)) as f:
            init_from = json.load(f).get("train", {}).get("init_from")
        if init_from and not os.path.exists(init_from):
            lines = proc.stderr.strip().splitlines()
            if proc.returncode != 2 or len(lines) != 1 or "no such Hugging Face folder or llm.c model file" not in lines[0]:
                bad.append(f"{name} without its weights: {proc.stderr.strip()[-200:]}")
        elif proc.returncode != 0:
            bad.append(f"{name}: {proc.stderr.strip()[-200:]}")
    print(f"{'every shipped config loads':<32} {len(configs)} configs  {'OK' if not bad else 'FAIL: ' + '; '.join(bad)}")
    if bad or not configs:
        failures.append("shipped configs")

    # A config written for 8 ranks asked about 3, whose global batch does not split over them: the
    # bytes per rank follow the micro-batch, so predicted at grad_accum 1, with a note (it was refused).
    gpt2 = os.path.join(ROOT, "configs", "gpt2_124m.json")
    odd = subprocess.run([binary, "memory", "--config", gpt2, "--ranks", "3"], capture_output=True, text=True,
                         timeout=60)
    asked = subprocess.run([binary, "memory", "--config", gpt2, "--ranks", "3", "--set", "train.grad_accum=1"],
                           capture_output=True, text=True, timeout=60)
    note = [line for line in odd.stdout.splitlines() if line.startswith("note: ")]
    ok = (odd.returncode == 0 and len(note) == 1 and "does not load on 3 ranks" in note[0]
          and "train.grad_accum = 1" in note[0] and asked.returncode == 0
          and [line for line in odd.stdout.splitlines() if not line.startswith("note: ")] == asked.stdout.splitlines())
    as_json = subprocess.run([binary, "memory", "--config", gpt2, "--ranks", "3", "--json"], capture_output=True,
                             text=True, timeout=60)
    doc = json.loads(as_json.stdout) if as_json.returncode == 0 else {}
    ok = ok and len(doc.get("notes", [])) == 1 and "does not load on 3 ranks" in doc["notes"][0] and doc["grad_accum"] == 1
    print(f"{'memory on a rank count the batch does not split over':<32} {'OK' if ok else 'FAIL: ' + (odd.stdout + odd.stderr)[-300:]}")
    if not ok:
        failures.append("memory at another rank count")
    # ... and only that: an error grad_accum = 1 happens to hide stands (a grad_accum of "two" was
    # predicted at 1 with a note, exit 0, where train refuses it).
    # (A batch past 2^40 tokens at one rank already: no rank count cures it either.)
    for bad_accum in ['"two"', "0", "65536 --set train.micro_batch=32768"]:
        proc = subprocess.run([binary, "memory", "--config", gpt2, "--ranks", "2", "--set",
                               *f"train.grad_accum={bad_accum}".split()], capture_output=True, text=True, timeout=60)
        lines = proc.stderr.strip().splitlines()
        ok = proc.returncode == 2 and len(lines) == 1 and "train.grad_accum" in lines[0] and "note:" not in proc.stdout
        print(f"{'memory, grad_accum ' + bad_accum:<32} exit={proc.returncode}  {'OK' if ok else 'FAIL'}\n    {lines[-1:]}")
        if not ok:
            failures.append(f"memory with grad_accum {bad_accum}")

    # A config piped in (/dev/stdin fed by a writer): memory and plan, which load it again for each
    # stage or choice, read the pipe once (the second read found it drained: refused, and plan
    # counted every choice refused).
    tiny = os.path.join(ROOT, "configs", "tiny_debug.json")
    with open(tiny) as f:
        text = f.read()
    piped_ok = True
    for args in (["memory", "--ranks", "2"], ["plan", "--ranks", "1", "--device-memory", "1GiB", "--json"]):
        by_path = subprocess.run([binary, *args, "--config", tiny], capture_output=True, text=True, timeout=120)
        piped = subprocess.run([binary, *args, "--config", "/dev/stdin"], input=text, capture_output=True, text=True,
                               timeout=120)
        same = piped.returncode == 0 and piped.stdout.replace("/dev/stdin", tiny) == by_path.stdout
        piped_ok = piped_ok and same
        if not same:
            print(f"    {args[0]} from a pipe: exit {piped.returncode}: {(piped.stdout + piped.stderr)[-300:]}")
    print(f"{'memory and plan from a pipe':<32} {'OK' if piped_ok else 'FAIL'}")
    # A budget a byte short of the least choice: both figures round to the same MiB, so the bytes
    # are given too (it read "nothing fits 11.02 MiB ...: the least any choice needs is 11.02 MiB").
    plan_args = ["plan", "--config", os.path.join(ROOT, "configs", "tiny.json"), "--ranks", "2", "--device-memory"]
    fits = subprocess.run([binary, *plan_args, "1GiB", "--json"], capture_output=True, text=True, timeout=120)
    least = min(c["required_bytes"] for c in json.loads(fits.stdout)["fitting"]) if fits.returncode == 0 else 0
    short = subprocess.run([binary, *plan_args, str(least - 1)], capture_output=True, text=True, timeout=120)
    ok = short.returncode == 2 and f"({least - 1} bytes)" in short.stderr and f"({least} bytes)" in short.stderr
    print(f"{'plan a byte short':<32} {'OK' if ok else 'FAIL: ' + short.stderr.strip()[-300:]}")
    if not ok:
        failures.append("plan a byte short")
    if not piped_ok:
        failures.append("config from a pipe")

    # eval --from a folder whose context is long: its default window (the whole context) does not fit,
    # and the error says which flag makes it fit.
    long_dir, long_hf, long_ds = (os.path.join(work, n) for n in ("long", "long_hf", "ds_long"))
    with open(os.path.join(work, "long.txt"), "w") as f:
        f.write("abcdefghij klmnopqrst\n" * 16000)  # a validation split of over 32768 tokens
    subprocess.run([binary, "prepare", "--text", os.path.join(work, "long.txt"), "--out", long_ds],
                   capture_output=True, timeout=120)
    subprocess.run([binary, "train", "--config", config_file("long.json", with_model(vocab_size=65, block_size=32768)),
                    "--run-dir", long_dir, "--set", "train.seq_len=8", "--set", "train.max_steps=0", "--set",
                    "checkpoint.at_end=true", "--set", f"data.dataset={long_ds}"], capture_output=True, timeout=120)
    subprocess.run([binary, "ckpt", "export", os.path.join(long_dir, "checkpoints"), "--format", "hf", "--out",
                    long_hf], capture_output=True, timeout=120)
    limit = lambda: resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))  # noqa: E731
    proc = subprocess.run([binary, "eval", "--from", long_hf, "--tokens", os.path.join(long_ds, "val.bin"),
                           "--windows", "1"], capture_output=True, text=True, timeout=120, preexec_fn=limit)
    ok = proc.returncode == 1 and "out of memory" in proc.stderr and "pass a smaller --seq-len" in proc.stderr
    print(f"{'eval: default window too long':<32} exit={proc.returncode}  {'OK' if ok else 'FAIL'}"
          f"\n    stderr: {proc.stderr.strip()[-200:]}")
    if not ok:
        failures.append("eval's default window too long")

    # A run directory where a checkpoint folder is wanted, and a run without final weights: the
    # errors say where the checkpoints are.
    export = subprocess.run([binary, "ckpt", "export", long_dir, "--format", "hf", "--out", long_hf + "2"],
                            capture_output=True, text=True, timeout=120)
    no_final = os.path.join(work, "no_final")
    subprocess.run([binary, "train", "--config", config_file("nf.json", with_model(vocab_size=65)), "--run-dir",
                    no_final, "--set", "train.max_steps=0", "--set", "checkpoint.at_end=true", "--set",
                    "log.final_weights=false", "--set", f"data.dataset={long_ds}"], capture_output=True, timeout=120)
    sample = subprocess.run([binary, "sample", "--run", no_final, "--tokens", "2"], capture_output=True, text=True,
                            timeout=120)
    ok = (export.returncode == 2 and f"its checkpoints are in {os.path.join(long_dir, 'checkpoints')}" in export.stderr
          and sample.returncode == 2 and f"--ckpt {os.path.join(no_final, 'checkpoints')}" in sample.stderr)
    print(f"{'run dir for its checkpoints':<32} exit={export.returncode}/{sample.returncode}  {'OK' if ok else 'FAIL'}"
          f"\n    stderr: {export.stderr.strip()[-200:]} {sample.stderr.strip()[-200:]}")
    if not ok:
        failures.append("run directory for its checkpoints")

    def report(name, ok, exits, detail):
        print(f"{name:<32} exit={exits}  {'OK' if ok else 'FAIL'}\n    {detail}")
        if not ok:
            failures.append(name)

    # A raw token file not named .bin: the refusal names eval's own --format (it named data.format,
    # which eval does not take), and with --format nanogpt it scores as the same tokens in llm.c's file.
    with open(os.path.join(long_ds, "val.bin"), "rb") as f:
        f.read(1024)
        raw_tokens = f.read()
    raw = os.path.join(work, "val_raw.dat")
    with open(raw, "wb") as f:
        f.write(raw_tokens)
    runs = [subprocess.run([binary, "eval", "--run", long_dir, "--tokens", path, *flags], capture_output=True, text=True,
                           timeout=120)
            for path, flags in ((raw, []), (raw, ["--format", "nanogpt"]), (os.path.join(long_ds, "val.bin"), []))]
    losses = [p.stdout.split(": loss ")[1].split()[0] if ": loss " in p.stdout else None for p in runs]
    ok = (runs[0].returncode == 2 and "eval's --format nanogpt" in runs[0].stderr and runs[1].returncode == 0 and
          runs[2].returncode == 0 and losses[1] is not None and losses[1] == losses[2])
    report("eval --format nanogpt", ok, [p.returncode for p in runs], f"{runs[0].stderr.strip()[-200:]} {losses}")

    # Weights holding a NaN (a diverged run's export): sample and eval refuse them naming the tensor,
    # rather than print a chance score, a NaN loss or a run of one token with exit 0.
    nan_hf = os.path.join(work, "nan_hf")
    shutil.copytree(long_hf, nan_hf)
    with open(os.path.join(nan_hf, "model.safetensors"), "r+b") as f:
        header_len = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(header_len))
        name = next(k for k, v in sorted(header.items()) if k != "__metadata__" and v["dtype"] == "F32")
        f.seek(8 + header_len + header[name]["data_offsets"][0] + 4 * 3)
        f.write(struct.pack("<f", float("nan")))
    runs = [subprocess.run([binary, *argv], capture_output=True, text=True, timeout=120)
            for argv in (["sample", "--from", nan_hf, "--tokens", "2"],
                         ["eval", "--from", nan_hf, "--tokens", os.path.join(long_ds, "val.bin")])]
    ok = all(p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1 and
             f"tensor {name} (element 3) is nan" in p.stderr for p in runs)
    report("NaN weights refused", ok, [p.returncode for p in runs], [p.stderr.strip()[-200:] for p in runs])

    # A run directory that a live run is training in (its RUN_LOCK held): sample and eval --run refuse
    # it, naming the run, rather than read an earlier run's final weights under the new config.json
    # (a sample and a loss of another model, exit 0); once that run is gone, they read it again.
    live_dir = os.path.join(work, "live")
    shutil.copytree(long_dir, live_dir)
    live = subprocess.Popen([binary, "train", "--config", config_file("live.json", with_model(vocab_size=65)),
                             "--run-dir", live_dir, "--set", "train.max_steps=1000000", "--set", "train.seed=7",
                             "--set", f"data.dataset={long_ds}", "--set", "train.num_threads=1"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 60
    lock = os.path.join(live_dir, "RUN_LOCK")

    def locked_by_live():
        try:
            with open(lock) as f:
                return json.load(f).get("pid") == live.pid
        except (OSError, ValueError):
            return False
    while time.time() < deadline and not locked_by_live():
        time.sleep(0.05)
    runs = [subprocess.run([binary, *argv], capture_output=True, text=True, timeout=120)
            for argv in (["sample", "--run", live_dir, "--tokens", "2"],
                         ["eval", "--run", live_dir, "--tokens", os.path.join(long_ds, "val.bin")])]
    live.kill()
    live.wait()
    after = subprocess.run([binary, "sample", "--run", live_dir, "--tokens", "2"], capture_output=True, text=True,
                           timeout=120)
    # (Its directory held an earlier run's final weights, which the run keeps aside once set up; until
    # then the refusal names them as the earlier run's.)
    ok = (all(p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1 and "is being trained now, by pid "
              f"{live.pid}" in p.stderr and "its final weights come at the run's end" in p.stderr for p in runs)
          and "being trained" not in after.stderr)
    report("--run of a live run refused", ok, [p.returncode for p in runs] + [after.returncode],
           f"{[p.stderr.strip()[-200:] for p in runs]} {after.stderr.strip()[-200:]}")

    proc = subprocess.run([binary, "debug-state", "--help"], capture_output=True, text=True, timeout=60)
    if proc.returncode != 0 or "--config" not in proc.stdout:
        failures.append("debug-state --help")
    proc = subprocess.run([binary, "help", "train"], capture_output=True, text=True, timeout=60)
    if proc.returncode != 0 or "--resume" not in proc.stdout:
        failures.append("help train")  # as train --help
    # A disk that fills (the file size limit stands in: writes past it fail with EFBIG, SIGXFSZ
    # ignored): a run that cannot write its lock is a runtime failure (exit 1, not 2, which says
    # the input was wrong), named by the lock; an HF export into folders it made leaves no empty
    # folder behind.
    def small_files():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (100, 100))

    full_run = os.path.join(work, "full_run")
    proc = subprocess.run(tiny_args[:5] + [full_run] + tiny_args[6:], capture_output=True, text=True, timeout=120,
                          preexec_fn=small_files)
    lines = proc.stderr.strip().splitlines()
    report("a lock the disk cannot hold", proc.returncode == 1 and len(lines) == 1 and
           f"cannot create the lock {full_run}/RUN_LOCK" in lines[0], proc.returncode, lines[-1:])
    exported = os.path.join(work, "export_new", "deeper")  # both folders new: both go again
    ckpt_run = os.path.join(work, "ckpt_run")
    subprocess.run(tiny_args[:5] + [ckpt_run] + tiny_args[6:] + ["--set", "checkpoint.at_end=true"], capture_output=True, text=True, timeout=120)
    proc = subprocess.run([binary, "ckpt", "export", os.path.join(ckpt_run, "checkpoints"), "--format", "hf", "--out",
                           exported], capture_output=True, text=True, timeout=120, preexec_fn=small_files)
    report("an export the disk cannot hold", proc.returncode == 1 and os.path.isdir(os.path.join(ckpt_run, "checkpoints"))
           and not os.path.exists(os.path.dirname(exported)), proc.returncode, proc.stderr.strip()[-200:])
    # A folder that takes no new file whatever its permissions (/proc, which access(2) passes for
    # root): the input's fault, exit 2 naming the key or flag (it was exit 1, naming a lock's
    # staging file).
    if os.path.isfile("/proc/self/status"):
        for name, argv, fragment in (
                ("checkpoint.dir taking no files", tiny_args + ["--set", "checkpoint.dir=/proc"], "checkpoint.dir '/proc'"),
                ("run directory taking no files", tiny_args[:5] + ["/proc"] + tiny_args[6:], "'/proc'"),
                ("llm.c --out taking no files", [binary, "ckpt", "export", os.path.join(ckpt_run, "checkpoints"),
                                                 "--format", "llmc", "--out", "/proc/model.bin"], "--out /proc/model.bin"),
                ("HF --out taking no files", [binary, "ckpt", "export", os.path.join(ckpt_run, "checkpoints"),
                                              "--format", "hf", "--out", "/proc"], "--out /proc")):
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=120)
            lines = proc.stderr.strip().splitlines()
            # As root access(2) passes /proc: the probe file is what refuses it (not root: access does).
            why = "no file can be created there" if os.geteuid() == 0 else "Permission denied"
            report(name, proc.returncode == 2 and len(lines) == 1 and fragment in lines[0] and why in lines[0],
                   proc.returncode, lines[-1:])
    # device = "cuda" where there is no GPU: refused before any folder is made (it left an empty
    # checkpoints/ in a new run directory).
    version = subprocess.run([binary, "version"], capture_output=True, text=True, timeout=60).stdout
    if " 0 device(s)" in version or "cuda: not built" in version:
        no_gpu_run = os.path.join(work, "no_gpu_run")
        proc = subprocess.run(tiny_args[:5] + [no_gpu_run] + tiny_args[6:] + ["--set", "device=cuda"],
                              capture_output=True, text=True, timeout=120)
        report("cuda without a GPU", proc.returncode == 2 and "device" in proc.stderr and not os.path.exists(no_gpu_run),
               proc.returncode, f"{proc.stderr.strip()[-200:]} (run directory made: {os.path.exists(no_gpu_run)})")
    else:
        report("cuda without a GPU", True, "-", "skipped: this machine has a GPU")
    # sample as rank 1 outside mpirun (a rank variable left in the environment, a torchrun worker):
    # rank 0 alone samples, and this rank says why it prints nothing (it exited 0 in silence).
    stray = dict(os.environ, ZT_RANK="1", ZT_WORLD_SIZE="2")
    proc = subprocess.run([binary, "sample", "--run", run_dir + "_own", "--tokens", "3"], capture_output=True,
                          text=True, timeout=120, env=stray)
    lines = proc.stderr.strip().splitlines()
    report("sample as a stray rank 1", proc.returncode == 0 and len(lines) == 1 and "rank 1 of 2 (ZT_RANK)" in
           lines[0] and "rank 0 alone prints" in lines[0] and proc.stdout == "", proc.returncode, lines[-1:])
    # ZT_OPENBLAS_LIB naming no library: said, not the default library taken in silence.
    proc = subprocess.run([binary, "train", "--config", os.path.join(ROOT, "configs", "tiny_debug.json"), "--run-dir",
                           run_dir + "_blas", "--set", "train.max_steps=1"], capture_output=True, text=True,
                          timeout=120, env=dict(os.environ, ZT_OPENBLAS_LIB="/nonexistent/libopenblas.so"))
    lines = proc.stderr.strip().splitlines()
    report("ZT_OPENBLAS_LIB naming nothing", proc.returncode == 1 and len(lines) == 1 and
           "ZT_OPENBLAS_LIB=/nonexistent/libopenblas.so" in lines[0], proc.returncode, lines[-1:])
    # memory and plan likewise: under a launcher each rank printed the same (two JSON documents).
    for name, command in (("memory", ["memory", "--config", os.path.join(ROOT, "configs", "tiny_debug.json"),
                                      "--ranks", "2", "--json"]),
                          ("plan", ["plan", "--config", os.path.join(ROOT, "configs", "tiny_debug.json"), "--ranks",
                                    "2", "--device-memory", "1GiB", "--json"])):
        proc = subprocess.run([binary, *command], capture_output=True, text=True, timeout=120, env=stray)
        lines = proc.stderr.strip().splitlines()
        report(f"{name} as a stray rank 1", proc.returncode == 0 and proc.stdout == "" and len(lines) == 1 and
               f"zerotrain {name}: rank 1 of 2 (ZT_RANK)" in lines[0], proc.returncode, lines[-1:])
    # A path that is no UTF-8 (a run directory's name in Latin-1): refused in one line naming the flag;
    # it failed mid-run with the JSON writer's own exception (paths are recorded as JSON text).
    latin1 = os.fsencode(run_dir) + b"_caf\xe9"
    proc = subprocess.run([os.fsencode(binary), b"train", b"--config",
                           os.fsencode(os.path.join(ROOT, "configs", "tiny_debug.json")), b"--run-dir", latin1],
                          capture_output=True, timeout=120)
    lines = proc.stderr.decode("utf-8", "replace").strip().splitlines()
    report("--run-dir not UTF-8", proc.returncode == 2 and len(lines) == 1 and "--run-dir" in lines[0] and
           "is not valid UTF-8" in lines[0] and not os.path.exists(latin1), proc.returncode, lines[-1:])
    # A whole count in exponent form (--ranks 1e3, as --params 7.5e9 and the configs take numbers) is
    # that count; a fraction, or one out of range, is refused by the flag's rule.
    paper = [subprocess.run([binary, "memory", "--params", "7.5e9", "--ranks", ranks], capture_output=True, text=True,
                            timeout=60) for ranks in ("1000", "1e3", "1.5e0", "2e7")]
    report("--ranks 1e3", paper[0].returncode == 0 and paper[1].returncode == 0 and paper[1].stdout == paper[0].stdout
           and paper[2].returncode == 2 and "--ranks must be an integer in [1, 16777216] (got '1.5e0')" in
           paper[2].stderr and paper[3].returncode == 2 and "(got '2e7')" in paper[3].stderr,
           [p.returncode for p in paper], [p.stderr.strip()[-120:] for p in paper[1:]])
    # Output that cannot be written (a full disk; /dev/full) is an error, not a silent exit 0.
    if os.path.exists("/dev/full"):
        with open("/dev/full", "w") as full:
            proc = subprocess.run([binary, "memory", "--params", "7.5e9", "--ranks", "4"], stdout=full,
                                  stderr=subprocess.PIPE, text=True, timeout=60)
        lines = proc.stderr.strip().splitlines()
        ok = proc.returncode == 1 and len(lines) == 1 and "standard output: No space left on device" in lines[0]
        report("stdout that cannot be written", ok, proc.returncode, proc.stderr.strip()[-200:])
    # PMI's variables set by hand (or by another MPI's mpiexec) beside an MPI that starts a world of
    # one: each process trained alone as rank 0 of 1; now refused before anything is made.
    pmi_run = os.path.join(work, "pmi_run")
    pmi_env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMIX_", "PMI_", "ZT_RANK"))}
    proc = subprocess.run(tiny_args[:5] + [pmi_run] + tiny_args[6:], capture_output=True, text=True, timeout=120,
                          env=dict(pmi_env, PMI_RANK="0", PMI_SIZE="2"))
    lines = proc.stderr.strip().splitlines()
    report("PMI_SIZE=2 beside a world of 1", proc.returncode == 2 and len(lines) == 1 and
           ("PMI_RANK=0 and PMI_SIZE=2 say rank 0 of 2, but MPI started this process as rank 0 of 1" in lines[0] or
            "without MPI" in lines[0]) and not os.path.exists(pmi_run), proc.returncode, lines[-1:])
    # Slurm's variables of a job of 2 beside PMIx's rank (srun --mpi=pmix beside an MPI that does
    # not join the PMIx job): each task trained alone, the job's work done twice; refused too.
    proc = subprocess.run(tiny_args[:5] + [pmi_run] + tiny_args[6:], capture_output=True, text=True, timeout=120,
                          env=dict(pmi_env, SLURM_PROCID="1", SLURM_NTASKS="2", SLURM_LOCALID="1", PMIX_RANK="1"))
    lines = proc.stderr.strip().splitlines()
    report("Slurm's world of 2 beside an MPI world of 1", proc.returncode == 2 and len(lines) == 1 and
           ("SLURM_PROCID=1 and SLURM_NTASKS=2 say rank 1 of 2, but MPI started this process as rank 0 of 1" in
            lines[0] or "without MPI" in lines[0]) and not os.path.exists(pmi_run), proc.returncode, lines[-1:])
    # A config read from a pipe that never ends (`--config <(yes)`): refused past 256 MiB in one
    # line (it grew until the allocation failed: std::bad_alloc, exit 1).
    endless = subprocess.Popen(["yes", " "], stdout=subprocess.PIPE)
    proc = subprocess.run([binary, "memory", "--ranks", "1", "--config", "/dev/stdin"], stdin=endless.stdout,
                          capture_output=True, text=True, timeout=120)
    endless.kill()
    endless.wait()
    lines = proc.stderr.strip().splitlines()
    report("a config from an endless pipe", proc.returncode == 2 and len(lines) == 1 and
           "larger than 256 MiB" in lines[0], proc.returncode, lines[-1:])
    # device = "cuda" where no GPU is: named with the file that set it (it named only the key). On a
    # machine with a device the run would start: checked only without one.
    version = subprocess.run([binary, "version"], capture_output=True, text=True, timeout=60).stdout
    if "cuda:" not in version or "; 0 device(s)" in version:
        with open(os.path.join(ROOT, "configs", "tiny_debug.json")) as f:
            cuda_cfg = config_file("cuda.json", {**json.load(f), "device": "cuda"})
        proc = subprocess.run([binary, "train", "--config", cuda_cfg, "--run-dir", os.path.join(work, "cuda_run")],
                              capture_output=True, text=True, timeout=120)
        lines = proc.stderr.strip().splitlines()
        report("device cuda without a GPU", proc.returncode == 2 and len(lines) == 1 and
               f"config error in {cuda_cfg}: device = \"cuda\"" in lines[0], proc.returncode, lines[-1:])
    else:
        report("device cuda without a GPU", True, 0, "a CUDA device is visible: not applicable")
    print(f"{len(cases) + 27 - len(failures)} passed, {len(failures)} failed")
    close_work_folders([work], passed=not failures)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
