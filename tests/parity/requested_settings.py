"""Whether the engine ran every setting a parity test asked for. The reference model is built from
what the engine's file says it ran (its hf_config, its run_config's activation dtype), so an
override the engine ignored (train.head_chunks, precision.activations, a rope_scaling key) would
leave both sides agreeing, and the test passing, on a run it did not ask for."""
import json

# Values that ask the engine to derive the setting: the resolved config holds what it chose.
DERIVED = {("model.intermediate_size", 0)}


def same(got, want):
    if isinstance(want, bool) or isinstance(got, bool):
        return got is want
    if isinstance(want, (int, float)) and isinstance(got, (int, float)):
        return got == want or abs(got - want) <= 1e-6 * max(abs(got), abs(want))  # float32 round trips
    return got == want


def settings_not_run(run_config_text, requested):
    """A message for each "section.key=value" of `requested` (the value as the engine reads --set:
    JSON, else a string) that the resolved config (the metadata's run_config) does not hold."""
    try:
        config = json.loads(run_config_text)
    except (TypeError, ValueError) as e:
        return [f"__metadata__ run_config is unreadable ({e}): the requested settings cannot be checked"]
    missed = []
    for item in requested:
        key, _, text = item.partition("=")
        try:
            want = json.loads(text)
        except ValueError:
            want = text
        if (key, want) in DERIVED:
            continue
        node = config
        for part in key.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        if not same(node, want):
            missed.append(f"--set {item} was not run: the engine's run_config has {key} = {json.dumps(node)}")
    return missed
