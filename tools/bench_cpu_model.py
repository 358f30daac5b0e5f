"""Which model tools/bench_cpu.py times: a GPT-2 or a Llama's widths written out for both sides,
its model FLOPs by the benchmark's convention, and the parameter count PyTorch's side must have."""


def set_llama_widths(model):
    """Writes the Llama's derived widths into the config, so both sides build the same model: the
    key/value heads (n_head by default) and the SwiGLU width (0 or absent: Llama's rule, 8/3 x
    n_embd rounded up to a multiple of 256, as zerotrain derives it); no dropout key. Raises
    ValueError naming the key for a width that is not a positive whole number or heads that do not
    divide."""
    model.pop("dropout", None)
    model.setdefault("n_kv_head", model["n_head"])
    if not model.get("intermediate_size"):
        model["intermediate_size"] = -(-8 * model["n_embd"] // (3 * 256)) * 256
    for key in ("n_kv_head", "intermediate_size"):
        value = model[key]
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"--set model.{key}={value!r}: expected a positive whole number")
    if model["n_embd"] % model["n_head"] or model["n_head"] % model["n_kv_head"]:
        raise ValueError(f"model.n_head {model['n_head']} must divide n_embd {model['n_embd']} and be a multiple of "
                         f"n_kv_head {model['n_kv_head']}")


def model_flops_per_token(model, seq_len):
    """(flops per token, N, padded vocab): 6*N + 6*L*C*T with N counting every parameter, the
    embedding padded to a multiple of 64 (GPT-2: learned positions, biases, tied head; a Llama: the
    q/k/v/o products of its grouped-query heads, three SwiGLU products, RMSNorm weights, the head
    counted apart unless tied). As llm.c and this benchmark count GPT-2's position table, tables
    that are looked up rather than multiplied (a Llama's untied token table) are in N too: model
    FLOPs by a fixed convention, the same for both sides, not the arithmetic either side does."""
    L, C, V = model["n_layer"], model["n_embd"], model["vocab_size"]
    padded_vocab = (V + 63) // 64 * 64
    if model.get("arch", "gpt2") == "llama":
        hs = C // model["n_head"]
        attention = C * hs * (2 * model["n_head"] + 2 * model["n_kv_head"])  # q, o; k, v
        layer = attention + 3 * C * model["intermediate_size"] + 2 * C
        heads = 1 if model.get("tie_embeddings", False) else 2
        n_params = heads * padded_vocab * C + L * layer + C
    else:
        n_params = padded_vocab * C + model["block_size"] * C + L * (12 * C * C + 13 * C) + 2 * C
    return 6 * n_params + 6 * L * C * seq_len, n_params, padded_vocab


def params_without_padding(model, n_params, padded_vocab):
    """n_params less the vocabulary padding of each token table (PyTorch keeps the true vocabulary;
    GPT-2's head and a tied Llama's share one table)."""
    tables = 1 if model.get("arch", "gpt2") == "gpt2" or model.get("tie_embeddings", False) else 2
    return n_params - tables * (padded_vocab - model["vocab_size"]) * model["n_embd"]
