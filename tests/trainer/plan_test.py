#!/usr/bin/env python3
"""`zerotrain plan` (engine/app/plan) through the real binary, with real ranks for its pick:

  * every choice it keeps needs at most the budget (the memory check's measure), some choices do
    not fit it (the budget binds), and the best comes with a ready --set line;
  * that pick trains on 2 ranks under a memory offer of exactly the budget
    (ZT_TEST_AVAILABLE_BYTES, train.check_memory on), and every rank's measured peak, summed over
    the categories, stays within it;
  * the pick's next larger micro-batch (half the accumulation, all else the same) is refused by
    the memory check before it trains;
  * a config whose own micro-batch does not divide its global batch at N is planned all the same
    (the search sets it) and says so; a CUDA config ranked by a CPU profile is warned of;
  * step times of minutes are printed in minutes; --top 1 prints one row; the best line reads
    back through the shell's quoting; --cross-link-gbps and --ranks-per-node default as said;
  * a budget nothing fits, a bad size and a missing profile are refused in one line.
The estimate against measured step times at N = 1, 2, 4 is tools/bench_planner.py's (a benchmark).

usage: plan_test.py MPIRUN [FLAGS...] -- PATH/TO/zerotrain
"""
import json
import os
import shlex
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from check_report import Checks  # noqa: E402
from run_dir_util import mpi_driver, train_records  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROFILE = os.path.join(ROOT, "docs", "results", "cpu_op_profile.json")
CONFIG = {
    "model": {"n_layer": 2, "n_head": 2, "n_embd": 64, "block_size": 64, "vocab_size": 256},
    "data": {"embedded_chars": 100000},
    "train": {"micro_batch": 2, "grad_accum": 8, "max_steps": 3, "eval_batches": 1, "eval_every": 0,
              "num_threads": 1},
    "log": {"sample_tokens": 0, "progress": "plain"},
}


def main():
    checks = Checks()
    launcher, binary, work, config, env = mpi_driver(checks, "zt_plan_", CONFIG)
    check = checks.check

    def plan(budget, *extra):
        return subprocess.run([binary, "plan", "--config", config, "--ranks", "2", "--device-memory", str(budget),
                               "--profile", PROFILE, *extra], capture_output=True, text=True, timeout=300)

    everything = plan("1TB", "--json")
    doc = json.loads(everything.stdout) if everything.returncode == 0 else {"fitting": []}
    needs = sorted(c["required_bytes"] for c in doc["fitting"])
    check(len(needs) > 100, f"a generous budget keeps most choices ({len(needs)} of {doc.get('considered')})")
    # Only stage 3 gathers ahead, so only its choices name a prefetch depth (stage 1's all said 1).
    prefetch_named = {c["sets"][0]: any(x.startswith("zero.prefetch_units=") for x in c["sets"]) for c in doc["fitting"]}
    check(prefetch_named == {"zero.stage=0": False, "zero.stage=1": False, "zero.stage=2": False, "zero.stage=3": True},
          f"a prefetch depth named by stage 3's choices only ({prefetch_named})")
    budget = needs[len(needs) // 3] if needs else 0  # a third of the choices fit
    p = plan(budget, "--json")
    kept = json.loads(p.stdout)["fitting"] if p.returncode == 0 else []
    check(kept and all(c["required_bytes"] <= budget for c in kept) and len(kept) < len(needs) and
          len(kept) == sum(1 for n in needs if n <= budget),
          f"at {budget} bytes: {len(kept)} of {len(needs)} choices kept, each within the budget, every one within it "
          f"(the budget is one choice's need exactly, as train takes it)")
    text = plan(budget)
    best_line = [line for line in text.stdout.splitlines() if line.startswith("best: mpirun -np 2 ")]
    words = shlex.split(best_line[0])[4:6] if best_line else []
    # The binary that planned (as build/zerotrain from the root), not a `zerotrain` on PATH.
    check(text.returncode == 0 and len(words) == 2 and os.path.samefile(words[0], binary) and words[1] == "train",
          f"the table ends with a ready command for 2 ranks, of this binary ({best_line})")
    best = kept[0]["sets"] if kept else []
    check(best_line and all(f"--set {s}" in best_line[0] for s in best), "the command carries the best choice's sets")

    def train(name, sets):
        cmd = launcher + ["-np", "2", "-x", "ZT_TEST_AVAILABLE_BYTES", binary, "train", "--config", config, "--run-dir",
                          os.path.join(work, name)]
        for s in sets:
            cmd += ["--set", s]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=300,
                              env={**env, "ZT_TEST_AVAILABLE_BYTES": str(budget)})

    p = train("best", best)
    check(p.returncode == 0, f"the pick trains on 2 ranks under an offer of the budget ({(p.stdout + p.stderr)[-300:]})")
    if p.returncode == 0:
        m = next(r for r in train_records(os.path.join(work, "best")) if r["type"] == "memory")
        totals = [sum(rank.values()) for rank in m["measured_peak_bytes"]]
        check(all(t <= budget for t in totals), f"every rank's measured peak is within the budget ({totals} <= {budget})")

    def value(sets, key):
        return next(int(s.split("=")[1]) for s in sets if s.startswith(key + "="))
    mb, accum = value(best, "train.micro_batch"), value(best, "train.grad_accum")
    if accum > 1:
        larger = [s for s in best if not s.startswith(("train.micro_batch=", "train.grad_accum="))]
        larger += [f"train.micro_batch={2 * mb}", f"train.grad_accum={accum // 2}"]
        p = train("larger", larger)
        errors = [line for line in p.stderr.splitlines() if "zerotrain: error:" in line]
        check(p.returncode != 0 and errors and "more than" in errors[0] and "ZT_TEST_AVAILABLE_BYTES" in errors[0],
              f"the next larger micro-batch ({2 * mb} x {accum // 2}) is refused by the memory check ({errors[:1]})")
    else:
        check(False, "the pick has accumulation left to trade for a larger micro-batch (test setup)")

    # The memory check's advice weighs the other stages: at stage 2, which here needs more than
    # stage 1 (its reduced shards in flight), an offer stage 1 fits names stage 1, and one nothing
    # fits advises no higher stage, which needs more still (it said "raise zero.stage" in both).
    predicted = subprocess.run([binary, "memory", "--config", config, "--ranks", "2", "--json"], capture_output=True,
                               text=True, timeout=120)
    need = [s["required"] for s in json.loads(predicted.stdout)["stages"]] if predicted.returncode == 0 else [0] * 4
    if check(need[1] < need[0] and need[1] < need[2] < need[3],
             f"test setup: stage 0 needs more than stage 1, stage 2 more than stage 1, stage 3 more still ({need})"):
        # ... and at stage 0, where every higher stage needs less but none fits: "raise zero.stage".
        # Stage 3 at an offer stage 2 fits: the least stage that fits, not the highest.
        least = min(s for s in range(3) if need[s] <= need[2])
        for stage, offer, said, unsaid in ((2, (need[1] + need[2]) // 2, "set zero.stage = 1 (it needs",
                                            "raise zero.stage"),
                                           (3, need[2], f"set zero.stage = {least} (it needs", "set zero.stage = 2"),
                                           (2, need[1] - 1, "add ranks", "zero.stage"),
                                           (0, need[1] - 1, "raise zero.stage", "set zero.stage")):
            budget = offer
            p = train(f"stage_advice_{stage}_{offer}", [f"zero.stage={stage}"])
            errors = [line for line in p.stderr.splitlines() if "zerotrain: error:" in line]
            advice = errors[0].split("offers:")[-1] if errors else ""
            check(p.returncode == 2 and said in advice and unsaid not in advice,
                  f"stage {stage} refused at an offer of {offer}: '{said}', not '{unsaid}' ({errors[:1]})")

    # A config written for another rank count: its own micro-batch does not divide its global batch
    # on 3 ranks (576 tokens = 3 x 64 x 3 at micro-batch 1); the search sets it, and says so. (The
    # same micro-batch given with --set is held, and refused by name: below.)
    other_n = os.path.join(work, "other_n.json")
    with open(other_n, "w") as f:
        json.dump({**CONFIG, "train": {**{k: v for k, v in CONFIG["train"].items() if k != "grad_accum"},
                                       "global_batch_tokens": 576, "micro_batch": 2}}, f)
    p = subprocess.run([binary, "plan", "--config", other_n, "--ranks", "3", "--device-memory", "1TB", "--profile",
                        PROFILE], capture_output=True, text=True, timeout=300)
    best_line = [line for line in p.stdout.splitlines() if line.startswith("best: mpirun -np 3 ")]
    check(p.returncode == 0 and "note: the config's own micro-batch does not load on 3 rank(s)" in p.stdout and
          best_line and best_line[0].count("train.micro_batch=") == 1,
          f"a config whose micro-batch does not divide at N is planned, its pinned micro-batch not repeated in the "
          f"command (exit {p.returncode}, {(best_line or [p.stderr.strip()])[0][:300]})")
    # ... and only that: an error micro_batch = 1 happens to hide stands.
    p = subprocess.run([binary, "plan", "--config", other_n, "--ranks", "3", "--device-memory", "1TB", "--profile",
                        PROFILE, "--set", "train.micro_batch=\"two\""], capture_output=True, text=True, timeout=300)
    check(p.returncode == 2 and "train.micro_batch" in p.stderr and "note:" not in p.stdout,
          f"a micro-batch of another type is refused, not planned past (exit {p.returncode}, {p.stderr.strip()[-200:]})")
    # A global batch no micro-batch splits on the ranks (576 tokens over 64 x 5): said so, not only
    # that the config's micro-batch does not.
    p = subprocess.run([binary, "plan", "--config", other_n, "--ranks", "5", "--device-memory", "1TB", "--profile",
                        PROFILE], capture_output=True, text=True, timeout=300)
    check(p.returncode == 2 and "no micro-batch splits it on 5 rank(s)" in p.stderr and
          len(p.stderr.strip().splitlines()) == 1,
          f"a global batch that no micro-batch splits is refused saying so (exit {p.returncode}, "
          f"{p.stderr.strip()[-300:]})")
    # A --set global batch the config's micro-batch does not split here, but micro-batch 1 does: memory
    # predicts at the config's micro-batch with a note (it said 'no micro-batch splits it', false),
    # and train names the micro-batch that splits it.
    p = subprocess.run([binary, "memory", "--config", config, "--ranks", "5", "--brief", "--set",
                        "train.global_batch_tokens=960"], capture_output=True, text=True, timeout=300)
    check(p.returncode == 0 and "note: the config's batch does not load on 5 ranks" in p.stdout and
          "(train.micro_batch = 1 splits it: grad_accum 3)" in p.stdout,
          f"memory predicts a --set global batch another micro-batch splits, saying which ({p.stderr.strip()[-300:]})")
    p = subprocess.run([binary, "train", "--config", config, "--run-dir", os.path.join(work, "split"), "--set",
                        "train.global_batch_tokens=960"], capture_output=True, text=True, timeout=300)
    check(p.returncode == 2 and "(train.micro_batch = 1 splits it: grad_accum 15)" in p.stderr,
          f"train names the micro-batch that splits its global batch ({p.stderr.strip()[-300:]})")
    # plan and memory take the same rank counts (plan stopped at 2^20, memory at 2^24).
    said = [subprocess.run([binary, command, "--config", other_n, "--ranks", "16777217", *extra],
                           capture_output=True, text=True, timeout=300).stderr.strip()
            for command, extra in (("plan", ["--device-memory", "1TB", "--profile", PROFILE]), ("memory", []))]
    check(all(line.endswith("--ranks must be an integer in [1, 16777216] (got '16777217')") for line in said),
          f"plan and memory refuse the same rank counts ({said})")
    # A CUDA config ranked by a CPU profile: said before the table, and in the JSON.
    cuda = [plan("1TB", "--set", "device=cuda", *json_flag) for json_flag in ([], ["--json"])]
    warning = "warning: the profile was measured on cpu"
    check(cuda[0].returncode == 0 and warning in cuda[0].stdout and cuda[1].returncode == 0 and
          any(n.startswith(warning) for n in json.loads(cuda[1].stdout)["notes"]),
          f"a CUDA config with a CPU profile is warned of ({cuda[0].stdout[:400]})")

    # The reference profile's times are its machine's, named; a run directory's own profile (this
    # machine's) is not noted (a trial's VM ran the README's pick 24-33% slower than estimated).
    machine_note = "the step times are those of the profile's machine (Intel"
    profiled = os.path.join(work, "profiled_run")
    trained = subprocess.run([binary, "train", "--config", config, "--run-dir", profiled, "--set",
                              "log.profile_ops=true", "--set", "train.max_steps=3"],
                             capture_output=True, text=True, timeout=300)
    own = subprocess.run([binary, "plan", "--config", config, "--ranks", "2", "--device-memory", "1TB", "--profile",
                          profiled, "--json"], capture_output=True, text=True, timeout=300)
    check("note: " + machine_note in cuda[0].stdout and any(n.startswith(machine_note) for n in json.loads(cuda[1].stdout)["notes"])
          and trained.returncode == 0 and own.returncode == 0 and
          not any("profile's machine" in n for n in json.loads(own.stdout)["notes"]),
          f"the reference profile's machine is named, a run's own profile is not ({cuda[0].stdout[:600]}; "
          f"{trained.stderr.strip()[-200:]}; {own.stderr.strip()[-200:]})")

    # A profile's machine is a string, printed as one line of printable text; another type is refused.
    with open(PROFILE) as f:
        reference = json.load(f)
    for machine, said in (("fast\nbox\x1b[31m", "(fast?box?[31m)"), (5, "machine is 5, not a string")):
        odd = os.path.join(work, "odd_profile.json")
        with open(odd, "w") as f:
            json.dump(dict(reference, machine=machine), f)
        p = subprocess.run([binary, "plan", "--config", config, "--ranks", "2", "--device-memory", "1TB", "--profile",
                            odd, "--top", "1"], capture_output=True, text=True, timeout=300)
        check(said in p.stdout + p.stderr and (p.returncode == 0) == isinstance(machine, str),
              f"a profile's machine {machine!r}: {said} ({p.returncode}: {(p.stdout + p.stderr)[:300]})")

    # At most 300 characters, cut between two: a UTF-8 sequence cut in two was no JSON for --json.
    with open(odd, "w") as f:
        json.dump(dict(reference, machine="a" * 299 + "\u00e9b"), f)
    p = subprocess.run([binary, "plan", "--config", config, "--ranks", "2", "--device-memory", "1TB", "--profile", odd,
                        "--json"], capture_output=True, text=True, timeout=300)
    notes = json.loads(p.stdout)["notes"] if p.returncode == 0 else []
    check(any("(" + "a" * 299 + "\u00e9)" in n for n in notes),
          f"a long machine: cut at 300 characters, not inside one ({p.returncode}: {p.stderr.strip()[-200:]})")

    # GPT-2 124M ranked by the CPU profile: steps of about 40 minutes, printed as such, not in ms.
    p = subprocess.run([binary, "plan", "--config", os.path.join(ROOT, "configs", "gpt2_124m.json"), "--ranks", "1",
                        "--device-memory", "1TB", "--profile", PROFILE, "--top", "1"],
                       capture_output=True, text=True, timeout=120)
    row = [line.split() for line in p.stdout.splitlines() if line.strip().startswith("1 ")]
    check(p.returncode == 0 and row and row[0][-1].endswith("min") and 10 < float(row[0][-1][:-3]) < 600,
          f"a step of minutes is printed in minutes ({row[:1]})")
    second = [line for line in p.stdout.splitlines() if line.strip().startswith("2 ")]
    check(p.returncode == 0 and row and ", 1920 fit" in p.stdout and not second,
          f"--top 1 prints one row ({second[:1]}; {p.stdout[-300:]})")

    # Without --profile, from another working directory: the committed profile of the repository
    # whose build/ holds the binary (it was looked for in the working directory only).
    p = subprocess.run([binary, "plan", "--config", os.path.join(ROOT, "configs", "tiny.json"), "--ranks", "2",
                        "--device-memory", "1GiB", "--top", "1"], capture_output=True, text=True, timeout=120, cwd=work)
    in_repo = os.path.abspath(binary).startswith(ROOT + os.sep)
    check(not in_repo or (p.returncode == 0 and "best: " in p.stdout),
          f"plan finds the repository's profile from another directory (exit {p.returncode}: {p.stderr.strip()[-200:]})")

    # The best line pastes back as the arguments it was: a config path with a space and a --set
    # value with quotes (double and single) and a `;` come quoted for the shell (they came raw: the path split in two,
    # and the `;` would have run what followed it).
    spaced = os.path.join(work, "my config.json")
    shutil.copy(config, spaced)
    prompt = 'log.sample_prompt=say "hi"; it\'s; rm -rf x'
    p = subprocess.run([binary, "plan", "--config", spaced, "--ranks", "1", "--device-memory", "1TB", "--profile",
                        PROFILE, "--set", prompt], capture_output=True, text=True, timeout=300)
    best_line = [line[len("best: "):] for line in p.stdout.splitlines() if line.startswith("best: ")]
    try:
        argv = shlex.split(best_line[0]) if best_line else []
    except ValueError:  # quoting the shell cannot read back
        argv = []
    # From the binary's own folder the line names ./zerotrain (a bare name would be looked up on PATH).
    here = subprocess.run([binary, "plan", "--config", spaced, "--ranks", "1", "--device-memory", "1TB", "--profile",
                           PROFILE], capture_output=True, text=True, timeout=300, cwd=os.path.dirname(binary))
    own = [line[len("best: "):] for line in here.stdout.splitlines() if line.startswith("best: ")]
    check(here.returncode == 0 and own and shlex.split(own[0])[0] == "./" + os.path.basename(binary),
          f"plan run from the binary's folder names ./{os.path.basename(binary)} ({own})")
    check(p.returncode == 0 and len(argv) > 4 and os.path.samefile(argv[0], binary) and
          argv[1:4] == ["train", "--config", spaced] and prompt in argv,
          f"the best line quotes what the shell would split ({best_line})")
    # A choice the trainer refuses (int8 gathers at stage 0, which has none) is counted refused,
    # not ranked (48 of them came first at 2 ranks).
    p = plan("1TB", "--json", "--set", "zero.gather_dtype=int8")
    doc = json.loads(p.stdout) if p.returncode == 0 else {"fitting": []}
    stages = {c["sets"][0] for c in doc["fitting"]} if doc["fitting"] and "sets" in doc["fitting"][0] else set()
    check(p.returncode == 0 and doc["fitting"] and "zero.stage=0" not in stages and doc["invalid"] > 0,
          f"int8 gathers: no stage-0 choice kept ({sorted(stages)}, {doc.get('invalid')} refused)")
    # Each row's run_sets carry the user's own --set entries before the choice's, as the best line
    # does: its sets alone (all --json gave) need another amount, here bf16 activations left out.
    p = plan("1TB", "--json", "--set", "precision.activations=bf16")
    doc = json.loads(p.stdout) if p.returncode == 0 else {"fitting": []}
    row = doc["fitting"][0] if doc["fitting"] else {"sets": [], "run_sets": []}
    check(row["run_sets"] == ["precision.activations=bf16"] + row["sets"],
          f"--json's run_sets: the user's --set, then the choice's ({row['run_sets']})")
    predicted = subprocess.run([binary, "memory", "--config", config, "--ranks", "2", "--json",
                                *[a for s in row["run_sets"] for a in ("--set", s)]], capture_output=True, text=True,
                               timeout=120)
    stage = value(row["sets"], "zero.stage") if row["sets"] else -1
    need = [s.get("required") for s in json.loads(predicted.stdout).get("stages", [])
            if s.get("stage") == stage] if predicted.returncode == 0 else []
    check(need == [row.get("required_bytes")], f"memory with a row's run_sets predicts its required_bytes "
          f"({need} vs {row.get('required_bytes')}; {predicted.stderr.strip()[-200:]})")
    # A searched key the user sets is held at its value (the search had replaced --set zero.stage=1
    # with its own pick), and said; the others are still searched.
    p = plan("1TB", "--json", "--set", "zero.stage=1", "--set", "train.activation_checkpointing=all")
    doc = json.loads(p.stdout) if p.returncode == 0 else {"fitting": []}
    rows = [c["sets"] for c in doc["fitting"]]
    check(p.returncode == 0 and rows and all("zero.stage=1" in r and "train.activation_checkpointing=all" in r
                                             for r in rows) and len({value(r, "train.micro_batch") for r in rows}) > 1
          and doc.get("held") == ["zero.stage=1", "train.activation_checkpointing=all"],
          f"--set holds a searched key, the rest searched ({len(rows)} rows, held {doc.get('held')})")
    # A key set to null is not given: searched, not held (it was held at its default).
    p = plan("1TB", "--json", "--set", "zero.stage=1", "--set", "zero.stage=null")
    doc = json.loads(p.stdout) if p.returncode == 0 else {"fitting": []}
    stages = {value(c["sets"], "zero.stage") for c in doc["fitting"]}
    check(p.returncode == 0 and len(stages) > 1 and not doc.get("held"),
          f"--set KEY=null: the key searched, not held ({stages}, held {doc.get('held')})")
    p = plan("1TB", "--set", "zero.stage=3", "--top", "1")
    check(p.returncode == 0 and "held as --set gives them, not searched: zero.stage=3" in p.stdout and
          "--set zero.stage=3" in p.stdout and "mb x acc: train.micro_batch x train.grad_accum" in p.stdout,
          f"the table says what it held and what its columns are ({p.stdout[-600:]})")
    for args, what in [(["--device-memory", "1KB"], "a budget nothing fits"),
                       (["--device-memory", "lots"], "a size that is not one"),
                       (["--device-memory", "0x10GiB"], "a size in hex (strtod took it as 16 GiB)"),
                       (["--device-memory", "0.5"], "half a byte (read as a budget of 0 B, nothing fit)"),
                       (["--device-memory", "4611686018427387905"], "2^62 + 1 bytes (read as 2^62)"),
                       (["--device-memory", "1GiB", "--link-gbps", "1e-300"], "a link rate of 1e-300 GB/s"),
                       (["--device-memory", "1GB", "--profile", os.path.join(work, "none.json")], "a missing profile"),
                       # The CPU profile's note on a CUDA plan came on stderr before the error.
                       (["--device-memory", "1KB", "--json", "--set", "device=cuda"], "nothing fits, --json")]:
        p = subprocess.run([binary, "plan", "--config", config, *args] +
                           ([] if "--profile" in args else ["--profile", PROFILE]),
                           capture_output=True, text=True, timeout=120)
        errors = [line for line in p.stderr.splitlines() if line.strip()]
        named = "must be a size" in p.stderr or "0.5" not in args and "4611686018427387905" not in args
        check(p.returncode == 2 and len(errors) == 1 and named, f"{what}: refused in one line ({errors})")
    # --json of a budget nothing fits carries the least any choice needs, as the error line says it;
    # a small model's count is its own (it read "0.0 M parameters"), one rank is "1 rank".
    p = plan("1KB", "--json")
    least = json.loads(p.stdout).get("least_required_bytes") if p.stdout.strip() else None
    check(p.returncode == 2 and isinstance(least, int) and least > 1000, f"nothing fits, --json: the least need ({least})")
    # ... and that choice's need with fewer communication buffers, keys the search does not vary
    # (it said "add ranks or memory" alone): a budget between the two is named as fitting them.
    lean = json.loads(p.stdout).get("least_required_bytes_fewer_buffers") if p.stdout.strip() else None
    if check(isinstance(lean, int) and isinstance(least, int) and lean < least,
             f"nothing fits, --json: the least need with fewer buffers is less ({lean} < {least})"):
        p = plan((lean + least) // 2)
        check(p.returncode == 2 and "--set zero.overlap_comm=false (not searched)"
              in p.stderr and "which fits" in p.stderr, f"a budget fewer buffers fit: named ({p.stderr.strip()})")
        # ... and the promise holds: planned again with it, something fits that budget.
        p = plan((lean + least) // 2, "--json", "--set", "zero.overlap_comm=false")
        rows = json.loads(p.stdout).get("fitting", []) if p.returncode == 0 else []
        check(rows and all(r["required_bytes"] <= (lean + least) // 2 for r in rows),
              f"planned again with zero.overlap_comm=false, choices fit ({len(rows)}; {p.stderr.strip()[-200:]})")
    brief = subprocess.run([binary, "memory", "--config", os.path.join(ROOT, "configs", "tiny_debug.json"), "--ranks",
                            "2", "--brief"], capture_output=True, text=True, timeout=120)
    paper = subprocess.run([binary, "memory", "--params", "124e6", "--ranks", "1"], capture_output=True, text=True,
                           timeout=120)
    check(brief.stdout.startswith(os.path.join(ROOT, "configs", "tiny_debug.json") + ": gpt2, 30080 parameters") and
          "N = 1 rank," in paper.stdout, f"counts as they are ({brief.stdout[:90]!r}; {paper.stdout[:140]!r})")
    # --brief marks a stage the config refuses, as the note before it says (it marked nothing).
    brief = subprocess.run([binary, "memory", "--config", os.path.join(ROOT, "configs", "tiny_debug.json"), "--ranks",
                            "2", "--brief", "--set", "zero.gather_dtype=int8"], capture_output=True, text=True,
                           timeout=120)
    head = [line for line in brief.stdout.splitlines() if line.startswith("predicted bytes per rank")]
    check(brief.returncode == 0 and "stage 0 (marked *)" in brief.stdout and head and "stage 0*" in head[0] and
          "stage 1*" not in head[0], f"memory --brief marks a refused stage ({head})")
    # memory --json's notes wait for its JSON: a config refused after one gave two lines.
    p = subprocess.run([binary, "memory", "--config", os.path.join(ROOT, "configs", "gpt2_124m.json"), "--ranks", "5",
                        "--json", "--set", 'zero.cross_group_grad_dtype="bf16"'], capture_output=True, text=True,
                       timeout=120)
    errors = [line for line in p.stderr.splitlines() if line.strip()]
    check(p.returncode == 2 and len(errors) == 1 and "cross_group_grad_dtype" in errors[0],
          f"memory --json, a note and then a refused config: one line ({errors})")
    # On 2 ranks no shard_group_size makes two groups: the refusal says so (it asked for a group size
    # below 2, which none can be).
    p = subprocess.run([binary, "memory", "--config", config, "--ranks", "2", "--set", "zero.stage=2", "--set",
                        "zero.shard_group_size=2", "--set", 'zero.cross_group_grad_dtype="int8"'],
                       capture_output=True, text=True, timeout=120)
    check(p.returncode == 2 and "two groups of 2 ranks or more (4 ranks or more)" in p.stderr,
          f"cross_group_grad_dtype on 2 ranks: the refusal says what it needs ({p.stderr.strip()})")
    # A held micro-batch that cannot split the global batch is refused by name (plan said it held 3
    # and planned 1); a held accumulation takes the micro-batch that splits the global batch with it
    # (refused as 'no micro-batch splits it'); a key held in a section's JSON is held as the dotted one.
    three = plan("1TB", "--set", "train.global_batch_tokens=2048", "--set", "train.micro_batch=3")
    lines = [line for line in three.stderr.splitlines() if line.strip()]
    check(three.returncode == 2 and len(lines) == 1 and "train.micro_batch = 3 (held as --set gives it)" in lines[0]
          and "train.micro_batch = 2 splits it: grad_accum 8" in lines[0],
          f"a held micro-batch that does not split is refused by name ({lines})")
    # A held micro-batch whose batch is past any global batch (no global batch to split): the
    # config's own refusal, not "does not split train.global_batch_tokens = 0".
    huge = subprocess.run([binary, "plan", "--config", config, "--ranks", "16777216", "--device-memory", "1TB",
                           "--profile", PROFILE, "--set", "model.block_size=65536", "--set", "train.seq_len=65536",
                           "--set", "train.micro_batch=3"], capture_output=True, text=True, timeout=300)
    lines = [line for line in huge.stderr.splitlines() if line.strip()]
    check(huge.returncode == 2 and len(lines) == 1 and "past the 1099511627776" in lines[0] and
          "global_batch_tokens = 0" not in lines[0], f"a held micro-batch past any global batch: said so ({lines})")
    # The config's own global batch (2 x 64 x 8 x 2 ranks = 2048), pinned for a held micro-batch, is
    # not named as a --set the user gave.
    three = plan("1TB", "--set", "train.micro_batch=3")
    lines = [line for line in three.stderr.splitlines() if line.strip()]
    check(three.returncode == 2 and len(lines) == 1 and "train.global_batch_tokens = 2048 over" in lines[0]
          and "--set train.global_batch_tokens" not in lines[0],
          f"a held micro-batch at the config's derived global batch: refused without a --set never given ({lines})")
    accum = plan("1TB", "--json", "--set", "train.global_batch_tokens=8192", "--set", "train.grad_accum=2")
    rows = [c["sets"] for c in json.loads(accum.stdout)["fitting"]] if accum.returncode == 0 else []
    check(rows and all("train.grad_accum=2" in r and "train.micro_batch=32" in r for r in rows),
          f"a held accumulation plans the micro-batch that splits with it ({accum.stderr.strip()[-300:]})")
    # Every micro-batch that splits the global batch is searched, not only powers of two: 12
    # sequences a rank (1536 tokens = 12 x 64 x 2 ranks) run as 1, 2, 3, 4, 6 or 12 at a time.
    p = plan("1TB", "--json", "--set", "train.global_batch_tokens=1536", "--set", "zero.stage=1")
    rows = [c["sets"] for c in json.loads(p.stdout)["fitting"]] if p.returncode == 0 else []
    splits = sorted({(value(r, "train.micro_batch"), value(r, "train.grad_accum")) for r in rows})
    check(splits == [(1, 12), (2, 6), (3, 4), (4, 3), (6, 2), (12, 1)],
          f"every micro-batch that splits 12 sequences is searched ({splits}; {p.stderr.strip()[-300:]})")
    # Past 65536 sequences a rank, micro-batch 1's accumulation is out of range: a config whose own
    # micro-batch does not split the batch is planned from the smallest that does (it was refused,
    # its hint naming a micro-batch the search would have found). 70005 = 3 x 23335 sequences.
    p = plan("1TB", "--json", "--set", f"train.global_batch_tokens={70005 * 64 * 2}", "--set", "zero.stage=0",
             "--set", "train.activation_checkpointing=none", "--set", "train.head_chunks=1",
             "--set", "train.block_units=1")
    doc = json.loads(p.stdout) if p.returncode == 0 else {"fitting": []}
    splits = sorted({value(c["sets"], "train.micro_batch") for c in doc["fitting"]})
    check(p.returncode == 0 and splits and splits[0] == 3 and all(70005 % mb == 0 for mb in splits) and
          any("does not load on 2 rank(s)" in n for n in doc.get("notes", [])),
          f"a batch past 65536 sequences a rank is planned ({splits}; {p.stderr.strip()[-300:]})")
    # Past 2^31 sequences a rank only the micro-batches the config's ranges take are tried, each
    # once (one narrowed to int was tried twice, and 66 of 83 choices were refused).
    p = plan("1000000TB", "--json", "--set", "train.global_batch_tokens=549890031616", "--set", "zero.stage=0",
             "--set", "train.activation_checkpointing=none", "--set", "train.head_chunks=1",
             "--set", "train.block_units=1")
    doc = json.loads(p.stdout) if p.returncode == 0 else {"fitting": []}
    rows = [tuple(c["sets"]) for c in doc["fitting"]]
    check(rows and len(set(rows)) == len(rows) and doc.get("invalid") == 0,
          f"4296015872 sequences a rank: each choice once, none refused ({len(rows)} rows, {len(set(rows))} "
          f"distinct, {doc.get('invalid')} refused; {p.stderr.strip()[-200:]})")
    # The config derives its global batch (2 x 64 x 8 x 2 ranks = 2048): a held micro-batch or
    # accumulation splits that one, as the search's do (it derived another: a held micro_batch of 4
    # planned 4096 tokens a step, a hyper-parameter changed unsaid).
    for held, split in (("train.micro_batch=4", "train.grad_accum=4"), ("train.grad_accum=2", "train.micro_batch=8")):
        p = plan("1TB", "--json", "--set", held)
        doc = json.loads(p.stdout) if p.returncode == 0 else {"fitting": []}
        check(doc.get("global_batch_tokens") == 2048 and doc["fitting"] and
              all(held in c["sets"] and split in c["sets"] for c in doc["fitting"]),
              f"a held {held} splits the config's own global batch ({doc.get('global_batch_tokens')}, "
              f"{p.stderr.strip()[-300:]})")
    # The config's own in-flight bound is among those searched where gradients pend (a config that
    # fitted only with it was said to fit nothing), and named by no choice where none pends.
    bounded = os.path.join(work, "bounded.json")
    with open(bounded, "w") as f:
        json.dump({**CONFIG, "zero": {"max_inflight_reduction_mb": 0.1}}, f)
    p = subprocess.run([binary, "plan", "--config", bounded, "--ranks", "2", "--device-memory", "1TB", "--profile",
                        PROFILE, "--json"], capture_output=True, text=True, timeout=300)
    rows = json.loads(p.stdout)["fitting"] if p.returncode == 0 else []
    bound_of = {}
    for c in rows:
        stage = next(int(x.split("=")[1]) for x in c["sets"] if x.startswith("zero.stage="))
        chunked = "train.head_chunks=1" not in c["sets"]  # reduced in rounds: pends at every stage on 2 ranks
        bound_of.setdefault((stage, chunked), set()).update(x.split("=")[1] for x in c["sets"]
                                                            if x.startswith("zero.max_inflight_reduction_mb="))
    searched = {"0", "64", "0.1"}
    check(bound_of.get((0, False)) == set() and bound_of.get((1, False)) == set() and
          all(bound_of.get(k) == searched for k in ((0, True), (1, True), (2, False), (2, True), (3, False), (3, True))),
          f"the config's own bound is searched where gradients pend (stages 2-3, a chunked head), none named "
          f"elsewhere ({bound_of}, {p.stderr.strip()[-200:]})")
    # Both batch terms held: the global batch follows from them, as train derives it.
    both = plan("1TB", "--json", "--set", "train.micro_batch=4", "--set", "train.grad_accum=2")
    doc = json.loads(both.stdout) if both.returncode == 0 else {}
    check(doc.get("global_batch_tokens") == 4 * 64 * 2 * 2, f"micro_batch and grad_accum held: their global batch "
                                                             f"({doc.get('global_batch_tokens')}, {both.stderr.strip()[-200:]})")
    section = plan("1TB", "--json", "--set", 'zero={"stage":1}')
    doc = json.loads(section.stdout) if section.returncode == 0 else {"fitting": []}
    check(doc["fitting"] and all("zero.stage=1" in c["sets"] for c in doc["fitting"]) and
          doc.get("held") == ["zero.stage=1"], f"a key held in its section's JSON is held ({doc.get('held')})")
    # A train section holding the accumulation keeps its other keys (the global batch was dropped
    # with the section); a file giving both batch terms plans at its global batch (refused as
    # 'disagrees' where micro-batch 1 kept the file's grad_accum).
    p = plan("1TB", "--json", "--set", 'train={"global_batch_tokens":2048,"grad_accum":2}')
    rows = [c["sets"] for c in json.loads(p.stdout)["fitting"]] if p.returncode == 0 else []
    check(rows and all("train.global_batch_tokens=2048" in r and "train.micro_batch=8" in r for r in rows),
          f"a held accumulation in a train section keeps its global batch ({p.stderr.strip()[-300:]})")
    both = os.path.join(work, "both.json")
    with open(both, "w") as f:
        json.dump({**CONFIG, "train": {**CONFIG["train"], "micro_batch": 4, "grad_accum": 2,
                                       "global_batch_tokens": 1024}}, f)
    p = subprocess.run([binary, "plan", "--config", both, "--ranks", "4", "--device-memory", "1TB", "--profile",
                        PROFILE, "--top", "1"], capture_output=True, text=True, timeout=300)
    check(p.returncode == 0 and "global batch 1024 tokens" in p.stdout,
          f"a file with both batch terms is planned at its global batch ({p.stderr.strip()[-300:]})")
    t = subprocess.run([binary, "train", "--config", both, "--run-dir", os.path.join(work, "both_run")],
                       capture_output=True, text=True, timeout=300)
    check(t.returncode == 2 and "(train.grad_accum = 4 agrees with it; " in t.stderr,
          f"terms that disagree name the accumulation that agrees ({t.stderr.strip()[-300:]})")
    # The split named keeps grad_accum in its range (it named micro-batch 3 at grad_accum 65537).
    t = subprocess.run([binary, "train", "--config", config, "--run-dir", os.path.join(work, "cap_run"), "--set",
                        "train.seq_len=1", "--set", "train.global_batch_tokens=196611"],
                       capture_output=True, text=True, timeout=300)
    check(t.returncode == 2 and "(train.micro_batch = 65537 splits it: grad_accum 3)" in t.stderr,
          f"the split named is one the config takes ({t.stderr.strip()[-300:]})")
    # The defaults the help states: --cross-link-gbps is --link-gbps's, --ranks-per-node is --ranks
    # (one node), so each choice's times equal those with the flag at that value and differ at
    # another (configs/tiny.json at 4 ranks in hybrid groups of 2).
    def times(*extra):
        p = subprocess.run([binary, "plan", "--config", os.path.join(ROOT, "configs", "tiny.json"), "--ranks", "4",
                            "--device-memory", "1TB", "--profile", PROFILE, "--json", "--set", "zero.shard_group_size=2",
                            *extra], capture_output=True, text=True, timeout=300)
        return [(c["sets"], c["comm_s"], c["compute_s"]) for c in json.loads(p.stdout)["fitting"]] if p.returncode == 0 else []
    slow = times("--link-gbps", "1")
    check(slow and slow == times("--link-gbps", "1", "--cross-link-gbps", "1") and
          slow != times("--link-gbps", "1", "--cross-link-gbps", "10"), "--cross-link-gbps defaults to --link-gbps")
    one_node = times()
    check(one_node and one_node == times("--ranks-per-node", "4") and one_node != times("--ranks-per-node", "1"),
          "--ranks-per-node defaults to --ranks")

    # --cores-per-node takes a container's fractional CPU quota, as its help says (0.5 was refused).
    half = plan("1TB", "--cores-per-node", "0.5", "--top", "1")
    check(half.returncode == 0, f"half a core per node plans ({half.stderr.strip()})")
    # A stage the config's rules refuse (int8 gathers at stage 0) is predicted but marked, with why;
    # hybrid sharding is named in the zero line.
    int8 = ["memory", "--config", config, "--ranks", "4", "--set", "zero.gather_dtype=int8", "--set",
            "zero.shard_group_size=2"]
    text = subprocess.run([binary] + int8, capture_output=True, text=True, timeout=120)
    js = subprocess.run([binary] + int8 + ["--json"], capture_output=True, text=True, timeout=120)
    rows = json.loads(js.stdout) if js.returncode == 0 else []
    rows = rows.get("stages", rows) if isinstance(rows, dict) else rows
    marked = [r.get("refused") is not None for r in rows] if rows else []
    check(text.returncode == 0 and "stage 0*" in text.stdout and "note: stage 0 (marked *) is refused" in text.stdout
          and "hybrid: shard groups of 2 ranks, 2 groups" in text.stdout and marked == [True, False, False, False],
          f"memory marks a stage the config refuses and names hybrid groups ({marked}, {text.stdout[:600]})")
    # The refusal names the user's --set, not the stage memory set itself ("... and --set zero.stage=0").
    check("--set zero.stage=0" not in text.stdout and "--set zero.gather_dtype=int8" in text.stdout,
          f"memory's refused stage names only the user's --set ({text.stdout[:600]})")
    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
