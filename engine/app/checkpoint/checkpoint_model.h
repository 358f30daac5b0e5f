// Which model a checkpoint holds: the manifest's "model" object, written from a ModelSpec and read
// back (and checked against the manifest's parameter table) by resume, `sample --ckpt` and
// `ckpt export`.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "engine/app/checkpoint/checkpoint_reader.h"
#include "models/model_family.h"

namespace zt::ckpt {

// The manifest's "model" object: {"type": the family's name, n_layer, n_head, n_embd, block_size,
// vocab_size, padded_vocab_size} and the family's own keys as it resolved them (a Llama's
// n_kv_head, intermediate_size, rope_theta, norm_eps, tie_embeddings, and rope_scaling where it has
// one; GPT-2 has none). The unit layout is in the manifest's config.
nlohmann::json model_json(const ModelSpec& spec);
// The keys in which two model_json objects differ, each once, in key order: padded_vocab_size not
// where vocab_size differs (it follows it), and "type" alone where the families differ (every other
// key follows the family). What a resume's refusal and `--run`'s check of config.json name.
std::vector<std::string> differing_model_keys(const nlohmann::json& a, const nlohmann::json& b);
// The model a checkpoint was saved from, with its unit layout; InputError if the manifest's model
// object is not a model of a registered family or its parameter table is not that model's.
ModelSpec model_spec_of(const CheckpointReader& reader);
// The unit layout the checkpoint's run used (train.head_chunks and train.block_units; 1 where its
// config has none): the units its shards are of (models/unit_layout.h), as model_spec_of checks.
UnitLayout unit_layout_of(const CheckpointReader& reader);

}  // namespace zt::ckpt
