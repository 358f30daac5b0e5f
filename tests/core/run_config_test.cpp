// Config parsing: defaults, overrides, and one clear error per class of bad input, naming the key.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>

#include "engine/app/config/run_config.h"
#include "engine/app/trainer/run_memory.h"
#include "engine/base/core/check.h"
#include "engine/base/core/config_reader.h"
#include "engine/base/core/config_text.h"
#include "tests/core/config_test_util.h"

namespace zt {
namespace {

TEST(RunConfig, DefaultsAreResolved) {
  const RunConfig c = parse_run_config(base(), "test.json");
  EXPECT_EQ(c.train.seq_len, 16);  // defaults to block_size
  EXPECT_EQ(c.param_dtype, DType::kF32);
  EXPECT_EQ(c.train.activation_checkpointing.kind, CheckpointPolicy::Kind::kNone);
  EXPECT_GE(c.train.num_threads, 1);
  EXPECT_EQ(c.model.padded_vocab_size(), 128);
}

// The optimizer's defaults are docs/config.md's (the configs in configs/ give them all, so a
// changed default shows nowhere else).
TEST(RunConfig, OptimizerDefaultsAreTheDocumentedOnes) {
  const RunConfig c = parse_run_config(base(), "test.json");
  EXPECT_EQ(c.train.max_steps, 100);
  EXPECT_EQ(c.optim.adamw.lr, 1e-3f);
  EXPECT_EQ(c.optim.min_lr, 1e-3f / 10.0f);  // lr / 10, from the single-precision lr
  EXPECT_EQ(c.optim.warmup_steps, 0);
  EXPECT_EQ(c.optim.decay, "cosine");
  EXPECT_EQ(c.optim.decay_steps, 100);  // train.max_steps
  EXPECT_EQ(c.optim.adamw.beta1, 0.9f);
  EXPECT_EQ(c.optim.adamw.beta2, 0.95f);
  EXPECT_EQ(c.optim.adamw.eps, 1e-8f);
  EXPECT_EQ(c.optim.adamw.weight_decay, 0.1f);
  EXPECT_EQ(c.optim.grad_clip, 1.0f);
  EXPECT_EQ(c.train.nonfinite, "stop");
  EXPECT_EQ(c.train.max_skipped_steps, 10);
}

TEST(RunConfig, OverridesReachNestedKeysAndParseTypes) {
  nlohmann::json doc = base();
  apply_override(doc, "precision.param_dtype=bf16");
  apply_override(doc, "train.activation_checkpointing=every:2");
  apply_override(doc, "optim.lr=0.5");
  apply_override(doc, "model.n_layer=3");
  const RunConfig c = parse_run_config(doc, "test.json");
  EXPECT_EQ(c.param_dtype, DType::kBF16);
  EXPECT_EQ(c.train.activation_checkpointing.every_k, 2);
  EXPECT_FLOAT_EQ(c.optim.adamw.lr, 0.5f);
  EXPECT_EQ(c.model.n_layer, 3);
  EXPECT_THROW(apply_override(doc, "novalue"), InputError);
  EXPECT_THROW(apply_override(doc, "model..x=1"), InputError);
}

TEST(RunConfig, UnknownKeyIsRejectedWithSuggestion) {
  nlohmann::json doc = base();
  doc["model"]["n_layers"] = 3;
  expect_error(doc, {"test.json", "unknown key 'model.n_layers'", "did you mean 'model.n_layer'"});
  doc = base();
  doc["trian"] = nlohmann::json::object();
  expect_error(doc, {"unknown key 'trian'", "did you mean 'train'"});
  // A key of another section (nanoGPT's flat names, put in the wrong place): where it belongs.
  doc = base();
  doc["train"] = {{"lr", 1e-3}};
  expect_error(doc, {"unknown key 'train.lr'", "did you mean 'optim.lr'?"});
  doc = base();
  doc["optim"] = {{"max_steps", 3}};
  expect_error(doc, {"unknown key 'optim.max_steps'", "did you mean 'train.max_steps'?"});
  doc = base();
  doc["train"] = {{"every_steps", 3}};
  expect_error(doc, {"unknown key 'train.every_steps'", "did you mean 'checkpoint.every_steps' or 'log.every_steps'?"});
  // Too far from the key by edits, but one word of it, or another trainer's name for it.
  for (const auto& [section, typed, meant] :
       {std::tuple{"optim", "warmup", "optim.warmup_steps"},
        std::tuple{"checkpoint", "every", "checkpoint.every_steps"}, std::tuple{"train", "steps", "train.max_steps"},
        std::tuple{"train", "batch_size", "train.micro_batch"}, std::tuple{"optim", "learning_rate", "optim.lr"},
        // ... also of a key of another section
        std::tuple{"train", "learning_rate", "optim.lr"}, std::tuple{"train", "warmup", "optim.warmup_steps"},
        // ... before a near spelling, which guessed another key (optim.eps, train.eval_every,
        // optim.decay_steps): nanoGPT's and DeepSpeed's names
        std::tuple{"optim", "steps", "train.max_steps"}, std::tuple{"train", "eval_iters", "train.eval_batches"},
        std::tuple{"optim", "decay_type", "optim.decay"}, std::tuple{"optim", "lr_decay_iters", "optim.decay_steps"},
        std::tuple{"train", "gradient_accumulation_steps", "train.grad_accum"},
        std::tuple{"optim", "gradient_clipping", "optim.grad_clip"}}) {
    doc = base();
    doc[section] = {{typed, 1}};
    const std::string hint = fmt::format("did you mean '{}'?", meant);
    expect_error(doc, {hint.c_str()});
  }
  // FSDP's and DeepSpeed's mixed-precision names, in any section, name the keys of ours.
  for (const auto& [section, typed, meant] :
       {std::tuple{"precision", "master_weights", "did you mean 'precision.param_dtype'?"},
        std::tuple{"", "bf16", "did you mean 'precision.param_dtype' and 'precision.activations'?"},
        std::tuple{"", "mixed_precision", "did you mean 'precision.param_dtype' and 'precision.activations'?"},
        std::tuple{"zero", "grad_accum_dtype", "did you mean 'zero.grad_shard_dtype'?"}}) {
    doc = base();
    if (*section == '\0') {
      doc[typed] = {{"enabled", true}};
    } else {
      doc[section] = {{typed, "fp32"}};
    }
    expect_error(doc, {meant});
  }
  // DeepSpeed's and FSDP's keys with no key of that meaning here, or one in other units: what
  // stands for them, instead of a spelling's guess (reduce_bucket_size's nearest takes MiB;
  // global_batch_size's counts tokens, not sequences; there is no offload to guess).
  for (const auto& [section, typed, said] :
       {std::tuple{"precision", "reduce_dtype", "(gradients are reduced in fp32 inside a group whatever"},
        std::tuple{"train", "global_batch_size", "(the global batch is 'train.global_batch_tokens', in tokens: "},
        std::tuple{"", "train_batch_size", "in tokens: sequences x train.seq_len)"},
        std::tuple{"train", "train_micro_batch_size_per_gpu", "did you mean 'train.micro_batch'?"},
        std::tuple{"", "wall_clock_breakdown", "did you mean 'log.profile_ops'?"},
        std::tuple{"", "zero_optimization", "(ZeRO's options are the 'zero' section's keys"},
        std::tuple{"", "fp16", "(no fp16 with loss scaling here"},
        std::tuple{"zero", "offload_optimizer", "(no CPU or NVMe offload here"},
        std::tuple{"zero", "offload_param", "(no CPU or NVMe offload here"},
        std::tuple{"", "offload_params", "(no CPU or NVMe offload here"},
        std::tuple{"zero", "reduce_bucket_size", "'zero.max_inflight_reduction_mb' bounds what the reductions"},
        std::tuple{"zero", "allgather_bucket_size", "(each gather is a unit's"},
        std::tuple{"zero", "stage3_prefetch_bucket_size", "'zero.prefetch_units' counts the units gathered ahead"},
        std::tuple{"zero", "stage3_max_live_parameters", "decide how many units stay gathered)"},
        std::tuple{"zero", "contiguous_gradients", "(always so here, with no key"},
        std::tuple{"", "sharding_strategy", "for HYBRID_SHARD, 'zero.shard_group_size')"}}) {
    doc = base();
    if (*section == '\0') {
      doc[typed] = 1;
    } else {
      doc[section] = {{typed, 1}};
    }
    expect_error(doc, {said});
  }
  doc = base();
  doc["optim"] = {{"betas", {0.9, 0.95}}};  // one key of theirs, two of ours
  expect_error(doc, {"did you mean 'optim.beta1' and 'optim.beta2'?"});
  doc = base();
  doc["train"] = {{"activation_checkpointing", true}};  // a choice, not a string to quote
  expect_error(doc, {"must be one of: none, selective, all or every:K (K from 1 to 2147483647) (got true)"});
  doc["train"] = {{"activation_checkpointing", "every:2147483648"}};  // past an int: the bound named
  expect_error(doc, {"\"every:2147483648\" is not none, selective, all or every:K (K from 1 to 2147483647)"});
  doc = base();
  doc["stage"] = 2;  // at the top level
  expect_error(doc, {"unknown key 'stage'", "did you mean 'zero.stage'?"});
  doc = base();
  doc["lr"] = 0.01;  // a key's home before a section's near name ('log')
  expect_error(doc, {"unknown key 'lr'", "did you mean 'optim.lr'?"});
  doc = base();
  doc["train"] = {{"device", "cpu"}};
  expect_error(doc, {"unknown key 'train.device'", "did you mean 'device'?"});
  // Keys a default config does not write: one written only where given, another family's.
  doc = base();
  doc["optim"] = {{"global_batch_tokens", 4096}};
  expect_error(doc, {"unknown key 'optim.global_batch_tokens'", "did you mean 'train.global_batch_tokens'?"});
  doc = base();
  doc["train"] = {{"n_kv_head", 2}};
  expect_error(doc, {"unknown key 'train.n_kv_head'", "did you mean 'model.n_kv_head'?"});
}

TEST(RunConfig, WrongTypesNameTheKey) {
  nlohmann::json doc = base();
  doc["model"]["n_embd"] = "32";
  expect_error(doc, {"'model.n_embd' must be an integer"});
  doc = base();
  doc["model"]["n_embd"] = 32.5;
  expect_error(doc, {"'model.n_embd' must be an integer"});
  doc = base();
  doc["optim"] = {{"lr", "fast"}};
  expect_error(doc, {"'optim.lr' must be a number"});
  doc = base();
  doc["train"] = 3;
  expect_error(doc, {"'train' must be a JSON object"});
}

// DeepSpeed's configs write whole numbers in exponent form (1e5): taken for an integer key; a
// fraction is still refused.
TEST(RunConfig, AWholeNumberInExponentFormIsAnInteger) {
  nlohmann::json doc = base();
  doc["zero"] = {{"param_persistence_threshold", 1e5}};
  EXPECT_EQ(parse_run_config(doc, "test.json").zero.persistence_threshold, 100000);
  doc["zero"] = {{"param_persistence_threshold", 1.5}};
  expect_error(doc, {"'zero.param_persistence_threshold' must be an integer"});
  doc["zero"] = {{"param_persistence_threshold", 3e9}};
  expect_error(doc, {"'zero.param_persistence_threshold' = 3000000000 is out of range"});
}

// A constant rate reads neither decay_steps nor min_lr: neither is printed as derived.
TEST(RunConfig, AConstantRateDerivesNoDecayTerms) {
  nlohmann::json doc = base();
  doc["optim"] = {{"decay", "constant"}};
  for (const std::string& note : parse_run_config(doc, "test.json").derived) {
    EXPECT_EQ(note.find("optim."), std::string::npos) << note;
  }
  doc["optim"] = {{"decay", "cosine"}};
  const std::vector<std::string> cosine = parse_run_config(doc, "test.json").derived;
  EXPECT_NE(std::find(cosine.begin(), cosine.end(), "optim.min_lr = 0.000100000005 (optim.lr / 10)"), cosine.end());
}

// A byte bound under half a byte rounded to 0, which reads as no bound at all: refused.
TEST(RunConfig, AnInflightBoundUnderOneByteIsRefused) {
  nlohmann::json doc = base();
  doc["zero"] = {{"max_inflight_reduction_mb", 4e-7}};
  expect_error(doc, {"zero.max_inflight_reduction_mb", "rounds to 0 bytes, which means no bound"});
  doc["zero"] = {{"max_inflight_reduction_mb", 1e-6}};
  EXPECT_EQ(parse_run_config(doc, "test.json").zero.max_inflight_reduction_bytes, 1);
}

// A zero key with nothing to act on is said among the derived notes, rather than shown in force.
TEST(RunConfig, ZeroKeysWithoutEffectAreSaid) {
  const auto notes = [](nlohmann::json zero, int world_size) {
    nlohmann::json doc = base();
    doc["zero"] = std::move(zero);
    std::string all;
    for (const std::string& note : parse_run_config(doc, "test.json", world_size).derived) all += note + "\n";
    return all;
  };
  EXPECT_NE(notes({{"stage", 0}, {"max_inflight_reduction_mb", 0.001}}, 2)
                .find("zero.max_inflight_reduction_mb bounds pending gradients, which stage 0 holds only"),
            std::string::npos);
  EXPECT_NE(notes({{"stage", 3}, {"overlap_comm", false}, {"prefetch_units", 2}}, 2)
                .find("zero.prefetch_units limits what is in flight, and zero.overlap_comm = false"),
            std::string::npos);
  EXPECT_NE(notes({{"stage", 3}, {"prefetch_units", 2}, {"reshard_after_forward", false}}, 1)
                .find("zero.prefetch_units, zero.reshard_after_forward act on collectives, which one rank on the "
                      "solo path"),
            std::string::npos);
  EXPECT_NE(notes({{"stage", 2}, {"grad_shard_dtype", "fp32"}}, 2)
                .find("zero.grad_shard_dtype = fp32 changes nothing with fp32 parameters"),
            std::string::npos);
  EXPECT_NE(notes({{"solo_path", false}}, 2).find("zero.solo_path = false is a one-rank option"), std::string::npos);
  // In force: no note. One rank at stage 2 with fp32 shards of bf16 parameters pends its gradients
  // (the limits and the shards' dtype act); so does a tied table reduced in rounds at stage 0.
  EXPECT_EQ(notes({{"stage", 3}, {"prefetch_units", 2}, {"max_inflight_reduction_mb", 1}}, 2).find("zero."),
            std::string::npos);
  nlohmann::json bf16 = base();
  bf16["precision"] = {{"param_dtype", "bf16"}};
  bf16["zero"] = {{"stage", 2}, {"grad_shard_dtype", "fp32"}, {"overlap_comm", false}};
  for (const std::string& note : parse_run_config(bf16, "test.json", 1).derived) {
    EXPECT_EQ(note.find("zero."), std::string::npos) << note;
  }
  nlohmann::json rounds = base();
  rounds["train"] = {{"head_chunks", 2}};
  rounds["zero"] = {{"stage", 0}, {"max_inflight_reduction_mb", 0.001}};
  for (const std::string& note : parse_run_config(rounds, "test.json", 2).derived) {
    EXPECT_EQ(note.find("zero."), std::string::npos) << note;
  }
  // Each key said once: at stage 0 without pending gradients and under overlap_comm = false.
  const std::string both = notes({{"stage", 0}, {"overlap_comm", false}, {"max_inflight_reduction_mb", 1}}, 2);
  EXPECT_EQ(both.find("max_inflight_reduction_mb", both.find("max_inflight_reduction_mb") + 1), std::string::npos)
      << both;
}

TEST(RunConfig, RangesAndConsistencyAreChecked) {
  for (const char* key : {"n_layer", "n_head", "n_embd", "block_size", "vocab_size"}) {
    nlohmann::json doc = base();
    doc["model"][key] = 0;
    expect_error(doc, {"out of range", key});
  }
  nlohmann::json doc = base();
  doc["model"]["n_head"] = 3;
  expect_error(doc, {"n_embd = 32 is not divisible by model.n_head = 3"});
  doc = base();
  doc["train"] = {{"seq_len", 17}};
  expect_error(doc, {"train.seq_len = 17 exceeds model.block_size = 16"});
  doc = base();
  doc["train"] = {{"activation_checkpointing", "every:0"}};
  expect_error(doc, {"train.activation_checkpointing"});
  doc = base();
  doc["precision"] = {{"param_dtype", "fp8"}};
  expect_error(doc, {"precision.param_dtype", "f32, fp32, bf16"});
  doc["precision"] = {{"param_dtype", "fp32"}};  // as every other dtype key spells it
  EXPECT_EQ(parse_run_config(doc, "test.json").param_dtype, DType::kF32);
  // ... and every other dtype key reads param_dtype's "f32" as fp32 (a trial's fp32 recipe was
  // refused key after key), saved as "fp32".
  doc["precision"] = {{"activations", "f32"}, {"matmul", "f32"}};
  doc["zero"] = {{"grad_shard_dtype", "f32"}, {"cross_group_grad_dtype", "f32"}};
  const RunConfig f32 = parse_run_config(doc, "test.json");
  EXPECT_EQ(f32.activation_dtype, DType::kF32);
  EXPECT_EQ(f32.matmul_precision, MatmulPrecision::kFp32);
  EXPECT_TRUE(f32.zero.fp32_grad_shards);
  EXPECT_EQ(f32.zero.cross_group_grad_wire, WireDType::kExact);
  EXPECT_EQ(f32.run_file_json()["precision"]["activations"], "fp32");
  EXPECT_EQ(f32.run_file_json()["zero"]["grad_shard_dtype"], "fp32");
  doc = base();
  doc["model"].erase("vocab_size");
  expect_error(doc, {"missing required key 'model.vocab_size'"});
  expect_error(nlohmann::json::object(), {"missing required section 'model'"});
}

// Dropout's mask counter takes 2^34 attention probabilities a sample: at 32 heads T 23170 fits,
// 23171 is refused by name, and without dropout the length is not bounded by it.
TEST(RunConfig, DropoutPastTheMaskCounterIsRefusedByName) {
  nlohmann::json doc = base();
  doc["model"]["n_head"] = 32;
  doc["model"]["n_embd"] = 64;
  doc["model"]["block_size"] = 32768;
  doc["model"]["dropout"] = 0.1;
  doc["train"] = {{"seq_len", 23170}};
  EXPECT_EQ(parse_run_config(doc, "test.json").train.seq_len, 23170);
  doc["train"] = {{"seq_len", 23171}};
  expect_error(doc, {"model.dropout = 0.1", "32 x 23171^2", "train.seq_len"});
  doc["model"]["dropout"] = 0.0;
  EXPECT_EQ(parse_run_config(doc, "test.json").train.seq_len, 23171);
}

TEST(RunConfig, FilesThatCannotBeReadOrParsedAreNamed) {
  EXPECT_THROW(load_run_config("/nonexistent/config.json", {}), InputError);
  const std::string path = ::testing::TempDir() + "/malformed.json";
  auto error_reading = [&](const std::string& text) {
    std::ofstream(path) << text;
    return error_of([&] { load_run_config(path, {}); });
  };
  std::string msg = error_reading("{\n  \"model\": {\n    \"n_layer\": 2,,\n  }\n}\n");
  EXPECT_NE(msg.find("malformed JSON at line 3"), std::string::npos) << msg;
  // A comment: JSON has none, and the error says so.
  msg = error_reading("{\n  // the model\n  \"model\": {}\n}\n");
  EXPECT_NE(msg.find("line 2, column 3 (JSON has no comments"), std::string::npos) << msg;
  // A '/' that opens no comment (a division) is not called one.
  msg = error_reading("{\"model\": {\"n_layer\": 4/2}}\n");
  EXPECT_NE(msg.find("malformed JSON at line 1"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("comments"), std::string::npos) << msg;
  // Empty, or blank, a byte-order mark alone too: said so (it read "malformed JSON at line 1, column 1").
  for (const char* text : {"", " \n\t\n", "\xEF\xBB\xBF", "\xEF\xBB\xBF\n"}) {
    msg = error_reading(text);
    EXPECT_NE(msg.find("malformed.json: the file is empty"), std::string::npos) << msg;
  }
}

TEST(RunConfig, BatchTermsAreDerivedOrMustAgree) {
  nlohmann::json doc = base();
  doc["train"] = {{"micro_batch", 4}, {"seq_len", 16}, {"global_batch_tokens", 256}};
  RunConfig c = parse_run_config(doc, "test.json");
  EXPECT_EQ(c.train.grad_accum, 4);  // 256 / (4 x 16 x 1 rank)
  EXPECT_TRUE(std::any_of(c.derived.begin(), c.derived.end(),
                          [](const std::string& d) { return d.find("train.grad_accum = 4") != std::string::npos; }));

  doc["train"] = {{"micro_batch", 4}, {"seq_len", 16}, {"grad_accum", 2}};
  c = parse_run_config(doc, "test.json");
  EXPECT_EQ(c.train.global_batch_tokens, 128);

  doc["train"] = {{"micro_batch", 4}, {"seq_len", 16}, {"grad_accum", 2}, {"global_batch_tokens", 256}};
  expect_error(doc, {"train.global_batch_tokens = 256 disagrees", "= 128"});
  doc["train"] = {{"micro_batch", 4}, {"seq_len", 16}, {"global_batch_tokens", 100}};
  expect_error(doc, {"train.global_batch_tokens = 100 is not a multiple"});
  // The global batch and the accumulation given, the micro-batch not: it splits the one by the
  // other (as DeepSpeed's train_micro_batch_size_per_gpu), where it can; else the default's refusal.
  doc["train"] = {{"seq_len", 16}, {"grad_accum", 2}, {"global_batch_tokens", 1024}};
  c = parse_run_config(doc, "test.json");
  EXPECT_EQ(c.train.micro_batch, 32);  // 1024 / (16 x 2 x 1 rank)
  EXPECT_TRUE(std::any_of(c.derived.begin(), c.derived.end(), [](const std::string& d) {
    return d.find("train.micro_batch = 32 (train.global_batch_tokens = 1024 over") != std::string::npos;
  }));
  EXPECT_EQ(parse_run_config(doc, "test.json", 4).train.micro_batch, 8);
  // Its config.json keeps the terms given, and the micro-batch named as derived, so on another rank
  // count it derives the micro-batch again (it kept micro_batch 32 in place of grad_accum 2: refused
  // on 4 ranks); the micro-batch stays written for what reads the file (eval --run, plan --profile).
  const nlohmann::json saved = c.run_file_json();
  EXPECT_EQ(saved["train"].value("micro_batch", 0), 32) << saved["train"].dump();
  EXPECT_NE(saved["derived"].dump().find("\"train.micro_batch\""), std::string::npos) << saved.dump();
  EXPECT_EQ(saved["train"].value("grad_accum", 0), 2);
  EXPECT_EQ(saved["train"].value("global_batch_tokens", 0), 1024);
  nlohmann::json again = saved;
  take_derived_out(again, "config.json");
  EXPECT_EQ(parse_run_config(again, "config.json", 4).train.micro_batch, 8);
  doc["train"] = {{"seq_len", 16}, {"grad_accum", 3}, {"global_batch_tokens", 1024}};
  expect_error(doc, {"train.global_batch_tokens = 1024 disagrees", "4 x 16 x 3 x 1"});
  // All three given and disagreeing: the split that keeps the accumulation given is named too.
  doc["train"] = {{"micro_batch", 16}, {"seq_len", 16}, {"grad_accum", 2}, {"global_batch_tokens", 256}};
  expect_error(doc, {"(train.grad_accum = 1 agrees with it; train.micro_batch = 8 keeps grad_accum 2)"});
  doc["train"] = {{"micro_batch", 16}, {"seq_len", 16}, {"grad_accum", 2}, {"global_batch_tokens", 192}};
  expect_error(doc, {"= 16 x 16 x 2 x 1 = 512 (train.micro_batch = 6 keeps grad_accum 2)"});
  // None keeps it: said, beside the accumulation that agrees or any split; a micro-batch not given
  // is named as the default it is.
  doc["train"] = {{"micro_batch", 16}, {"seq_len", 16}, {"grad_accum", 3}, {"global_batch_tokens", 256}};
  expect_error(doc, {"(train.grad_accum = 1 agrees with it; no micro-batch keeps grad_accum 3)"});
  doc["train"] = {{"micro_batch", 16}, {"seq_len", 16}, {"grad_accum", 3}, {"global_batch_tokens", 80}};
  expect_error(doc, {"(no micro-batch keeps grad_accum 3; train.micro_batch = 5 splits it: grad_accum 1)"});
  doc["train"] = {{"micro_batch", 16}, {"seq_len", 16}, {"grad_accum", 3}, {"global_batch_tokens", 1000}};
  expect_error(doc, {"(no micro-batch keeps grad_accum 3; no micro-batch splits it on 1 rank(s)"});
  doc["train"] = {{"seq_len", 16}, {"grad_accum", 3}, {"global_batch_tokens", 1024}};
  expect_error(doc, {"(train.micro_batch is not given: its default, 4; train.grad_accum = 16 agrees with it; no "
                     "micro-batch keeps grad_accum 3)"});
  // A derived grad_accum keeps its own range (a run of 2^31 micro-batches a step would never end a step).
  doc["train"] = {{"micro_batch", 1}, {"seq_len", 1}, {"global_batch_tokens", 65537}};
  expect_error(doc, {"makes train.grad_accum = 65537, above its largest, 65536"});
  // 2^31 tokens a step (as 16384 ranks of one 131072-token sequence make: `memory` refused to
  // predict them) is taken, derived or given.
  doc = base();
  doc["model"]["block_size"] = 65536;
  doc["train"] = {{"micro_batch", 32768}, {"seq_len", 65536}, {"max_steps", 10}};
  EXPECT_EQ(parse_run_config(doc, "test.json").train.global_batch_tokens, 2147483648LL);
  doc["train"] = {{"micro_batch", 32768}, {"seq_len", 65536}, {"max_steps", 10}, {"global_batch_tokens", 2147483648LL}};
  EXPECT_EQ(parse_run_config(doc, "test.json").train.grad_accum, 1);
  // A derived global batch keeps the range a given one is read in (it was taken, and `zerotrain
  // plan` then refused every choice that set it).
  doc["train"] = {{"micro_batch", 32768}, {"seq_len", 65536}, {"max_steps", 10}, {"grad_accum", 1024}};
  expect_error(doc, {"32768 x 65536 x 1024 x 1 = 2199023255552 tokens a step, past the 1099511627776"});
  // A run's tokens in all (steps times a step's: tokens seen, sample indices) stay in int64.
  doc["train"] = {{"micro_batch", 32768}, {"seq_len", 65536}, {"grad_accum", 512}, {"max_steps", 1000000000}};
  expect_error(doc, {"train.max_steps x train.global_batch_tokens = 1000000000 x 1099511627776 tokens, past the "
                     "4611686018427387904 a run counts"});
}

// A batch term given with --set wins over the file's other one, which is then derived (and the
// set-aside noted); given together in one place they must still agree.
TEST(RunConfig, ABatchTermOnTheCommandLineWinsOverTheFilesOther) {
  nlohmann::json doc = base();
  doc["train"] = {{"micro_batch", 4}, {"seq_len", 16}, {"grad_accum", 2}};
  const std::string path = ::testing::TempDir() + "/batch_terms.json";
  {
    std::ofstream out(path);
    out << doc.dump();
  }
  RunConfig c = load_run_config(path, {"train.global_batch_tokens=256"});
  EXPECT_EQ(c.train.grad_accum, 4);  // 256 / (4 x 16 x 1 rank), the file's 2 set aside
  EXPECT_EQ(c.train.global_batch_tokens, 256);
  c = load_run_config(path, {"train.global_batch_tokens=256"}, 2);
  EXPECT_EQ(c.train.grad_accum, 2);
  doc["train"] = {{"micro_batch", 4}, {"seq_len", 16}, {"global_batch_tokens", 256}};
  {
    std::ofstream out(path);
    out << doc.dump();
  }
  c = load_run_config(path, {"train.grad_accum=1"});
  EXPECT_EQ(c.train.global_batch_tokens, 64);  // the command line's grad_accum: the global batch follows
  EXPECT_THROW(load_run_config(path, {"train.grad_accum=1", "train.global_batch_tokens=128"}), InputError);
}

// null is a key not given: its default, in the file or from --set, which so clears a key the file
// gives (--set data.train_file=null was refused, advising a file named "null"); a misspelt key
// given null is still refused.
TEST(RunConfig, NullIsAKeyNotGiven) {
  nlohmann::json doc = base();
  doc["train"] = {{"micro_batch", 4}, {"seq_len", 16}, {"grad_accum", 2}, {"seed", nullptr}};
  doc["optim"] = {{"lr", 3e-3}};
  const std::string path = ::testing::TempDir() + "/null_keys.json";
  {
    std::ofstream out(path);
    out << doc.dump();
  }
  RunConfig c = load_run_config(path, {});
  EXPECT_EQ(c.train.seed, RunConfig().train.seed);
  c = load_run_config(path, {"optim.lr=null", "train.grad_accum=null"});
  EXPECT_EQ(c.optim.adamw.lr, RunConfig().optim.adamw.lr);
  EXPECT_EQ(c.train.grad_accum, 1);  // not given: derived again from the batch terms left
  c = load_run_config(path, {"train.global_batch_tokens=256", "train.grad_accum=null"});
  EXPECT_EQ(c.train.grad_accum, 4);
  // A section given as null is one not given; a key set inside it makes it.
  doc["zero"] = nullptr;
  doc["derived"] = nullptr;
  {
    std::ofstream out(path);
    out << doc.dump();
  }
  EXPECT_EQ(load_run_config(path, {}).zero.stage, 0);
  EXPECT_EQ(load_run_config(path, {"zero.stage=1"}).zero.stage, 1);
  EXPECT_EQ(load_run_config(path, {"optim=null"}).optim.adamw.lr, RunConfig().optim.adamw.lr);
  try {
    (void)load_run_config(path, {"optim.lrr=null"});
    ADD_FAILURE() << "a misspelt key given null was taken";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("unknown key 'optim.lrr'"), std::string::npos) << e.what();
  }
}

TEST(RunConfig, OptimizerScheduleAndOtherSectionsAreChecked) {
  nlohmann::json doc = base();
  doc["optim"] = {{"lr", 1e-3}, {"min_lr", 1e-2}};
  expect_error(doc, {"optim.min_lr", "exceeds optim.lr"});
  doc = base();
  doc["optim"] = {{"warmup_steps", 50}, {"decay_steps", 10}};
  expect_error(doc, {"optim.decay_steps = 10"});
  doc = base();
  doc["optim"] = {{"decay", "exponential"}};
  expect_error(doc, {"optim.decay", "cosine, linear, constant, wsd"});
  doc = base();
  doc["optim"] = {{"cooldown_fraction", 0.3}};
  expect_error(doc, {"optim.cooldown_fraction", "only with optim.decay = \"wsd\"", "cosine"});
  doc = base();
  doc["optim"] = {{"decay", "wsd"}, {"cooldown_fraction", 1.5}};
  expect_error(doc, {"optim.cooldown_fraction", "out of range"});
  doc = base();
  doc["optim"] = {{"decay", "wsd"}, {"cooldown_fraction", 0.3}};
  const RunConfig wsd = parse_run_config(doc, "wsd.json", 1);
  EXPECT_EQ(wsd.optim.cooldown_fraction, 0.3);
  EXPECT_EQ(wsd.to_json()["optim"]["cooldown_fraction"], 0.3);  // saved where read ...
  EXPECT_FALSE(parse_run_config(base(), "cosine.json", 1).to_json()["optim"].contains("cooldown_fraction"));  // only
  doc = base();
  doc["zero"] = {{"stage", 4}};
  expect_error(doc, {"zero.stage", "out of range"});
  doc = base();
  doc["zero"] = {{"max_inflight_reduction_mb", -1}};
  expect_error(doc, {"zero.max_inflight_reduction_mb", "out of range"});
  doc = base();
  doc["data"] = {{"train_file", "t.bin"}};
  expect_error(doc, {"data.train_file and data.val_file"});
  doc = base();
  doc["model"]["dropout"] = 1.5;
  expect_error(doc, {"model.dropout"});
  doc = base();
  doc["train"] = {{"nonfinite", "ignore"}};
  expect_error(doc, {"train.nonfinite", "stop, skip"});
  doc = base();
  doc["log"] = {{"sample_evry", 5}};
  expect_error(doc, {"unknown key 'log.sample_evry'", "did you mean 'log.sample_every'"});
}

TEST(RunConfig, ShardListsTakeAPatternOrAListAndAnOrder) {
  nlohmann::json doc = base();
  apply_override(doc, "data.train_files=shards/train_*.bin");  // a plain --set value: a list of one
  doc["data"]["val_files"] = {"shards/val_000.bin", "shards/val_001.bin"};
  apply_override(doc, "data.order=sequential");
  const RunConfig c = parse_run_config(doc, "test.json");
  EXPECT_EQ(c.data.train_files, std::vector<std::string>{"shards/train_*.bin"});
  EXPECT_EQ(c.data.val_files.size(), 2u);
  EXPECT_EQ(c.data.order, "sequential");
  EXPECT_EQ(parse_run_config(c.to_json(), "config.json").data.val_files, c.data.val_files);
  EXPECT_EQ(parse_run_config(base(), "test.json").to_json()["data"]["train_files"], nlohmann::json::array())
      << "no shards: written as [] and read back as none";

  doc = base();
  doc["data"] = {{"train_files", {"a_*.bin"}}};
  expect_error(doc, {"data.train_files and data.val_files must be given together"});
  doc["data"] = {{"train_files", "a.bin"}, {"val_files", "b.bin"}, {"train_file", "c.bin"}, {"val_file", "d.bin"}};
  expect_error(doc, {"data.train_files", "not both"});
  // One file of the single form beside the shard lists (a --set over a sharded config): the mix is
  // named, not the single form's missing half.
  doc["data"] = {{"train_files", "a.bin"}, {"val_files", "b.bin"}, {"train_file", "c.bin"}};
  expect_error(doc, {"data.train_files", "not both"});
  doc["data"] = {{"train_files", "a.bin"}, {"val_file", "d.bin"}};
  expect_error(doc, {"not both"});
  doc["data"] = {{"train_files", {"a.bin", 3}}, {"val_files", "b.bin"}};
  expect_error(doc, {"data.train_files", "a string or a list of strings"});
  doc["data"] = {{"train_files", {""}}, {"val_files", "b.bin"}};
  expect_error(doc, {"data.train_files", "empty string"});
  // An empty list names no data: the embedded text would be trained on unasked. Beside a key that
  // names the data (a saved config.json's data.dataset) it means no shards, as to_json writes it.
  doc["data"] = {{"train_files", nlohmann::json::array()}, {"val_files", nlohmann::json::array()}};
  expect_error(doc, {"data.train_files is an empty list"});
  doc["data"] = {{"train_files", "a_*.bin"}, {"val_files", nlohmann::json::array()}};
  expect_error(doc, {"data.val_files is an empty list"});
  doc["data"]["dataset"] = "embedded";
  doc["data"]["train_files"] = nlohmann::json::array();
  EXPECT_TRUE(parse_run_config(doc, "test.json").data.train_files.empty());
  doc["data"] = {{"order", "shuffled"}};
  expect_error(doc, {"data.order", "random, sequential"});
}

TEST(RunConfig, ResolvedConfigReloadsToItself) {
  nlohmann::json doc = base();
  doc["train"] = {{"micro_batch", 2}, {"global_batch_tokens", 64}, {"activation_checkpointing", "every:2"}};
  doc["precision"] = {{"param_dtype", "bf16"}};
  doc["zero"] = {{"max_inflight_reduction_mb", 0.5}};
  const RunConfig c = parse_run_config(doc, "configs/x.json");
  EXPECT_EQ(c.log.run_dir, "runs/x");
  // A pipe's name is no config's: `--config <(jq ...)` reads /dev/fd/63 (every such run was runs/63).
  EXPECT_EQ(parse_run_config(doc, "/dev/fd/63").log.run_dir, "runs/run");
  EXPECT_EQ(parse_run_config(doc, "/dev/stdin").log.run_dir, "runs/run");
  EXPECT_EQ(c.zero.max_inflight_reduction_bytes, 512 * 1024);
  const RunConfig again = parse_run_config(c.to_json(), "config.json");
  EXPECT_EQ(again.to_json(), c.to_json());
  // A MiB count is written as given, not as its rounded bytes over 2^20 (0.10000038146972656).
  doc["zero"] = {{"max_inflight_reduction_mb", 0.1}};
  const RunConfig tenth = parse_run_config(doc, "configs/x.json");
  EXPECT_EQ(tenth.to_json()["zero"]["max_inflight_reduction_mb"].get<double>(), 0.1);
  EXPECT_EQ(parse_run_config(tenth.to_json(), "config.json").zero.max_inflight_reduction_bytes,
            tenth.zero.max_inflight_reduction_bytes);
}

TEST(RunConfig, CheckpointSectionDefaultsRangesAndUnknownKeys) {
  const RunConfig d = parse_run_config(base(), "configs/x.json");
  EXPECT_EQ(d.checkpoint.dir, "");
  EXPECT_EQ(d.checkpoint.folder_for("runs/x"), "runs/x/checkpoints");
  EXPECT_EQ(d.checkpoint.every_steps, 0);
  EXPECT_EQ(d.checkpoint.keep_last, 3);
  EXPECT_FALSE(d.checkpoint.at_end);
  nlohmann::json doc = base();
  doc["checkpoint"] = {{"dir", "/ckpts"}, {"every_steps", 50}, {"keep_last", 0}, {"at_end", true}};
  const RunConfig c = parse_run_config(doc, "x.json");
  EXPECT_EQ(c.checkpoint.folder_for("runs/x"), "/ckpts");
  EXPECT_EQ(c.checkpoint.every_steps, 50);
  EXPECT_EQ(c.checkpoint.keep_last, 0);
  EXPECT_TRUE(c.checkpoint.at_end);
  EXPECT_EQ(parse_run_config(c.to_json(), "config.json").to_json(), c.to_json());
  doc["checkpoint"] = {{"every_step", 5}};
  expect_error(doc, {"unknown key 'checkpoint.every_step'", "did you mean 'checkpoint.every_steps'"});
  doc["checkpoint"] = {{"every_steps", -1}};
  expect_error(doc, {"checkpoint.every_steps", "out of range"});
  doc["checkpoint"] = {{"at_end", 1}};
  expect_error(doc, {"checkpoint.at_end"});
}

TEST(RunConfig, FinalWeightsAreOnByDefaultAndCanBeTurnedOff) {
  EXPECT_TRUE(parse_run_config(base(), "x.json").log.final_weights);
  nlohmann::json doc = base();
  apply_override(doc, "log.final_weights=false");
  const RunConfig c = parse_run_config(doc, "x.json");
  EXPECT_FALSE(c.log.final_weights);
  EXPECT_EQ(c.to_json()["log"]["final_weights"], false);
  EXPECT_EQ(parse_run_config(c.to_json(), "config.json").to_json(), c.to_json());
  doc = base();
  doc["log"] = {{"final_weights", "no"}};
  expect_error(doc, {"log.final_weights", "true or false"});
}

TEST(RunConfig, ProfileOpsIsABooleanOffByDefault) {
  EXPECT_FALSE(parse_run_config(base(), "x.json").log.profile_ops);
  nlohmann::json doc = base();
  apply_override(doc, "log.profile_ops=true");
  const RunConfig c = parse_run_config(doc, "x.json");
  EXPECT_TRUE(c.log.profile_ops);
  EXPECT_EQ(parse_run_config(c.to_json(), "config.json").to_json(), c.to_json());
  doc = base();
  apply_override(doc, "log.profile_ops=yes");  // not JSON: read as the string "yes"
  expect_error(doc, {"test.json", "log.profile_ops", "true or false"});
  doc = base();
  doc["log"] = {{"profile_ops", 1}};
  expect_error(doc, {"log.profile_ops", "true or false"});
  doc["log"] = {{"profile_op", true}};
  expect_error(doc, {"unknown key 'log.profile_op'", "did you mean 'log.profile_ops'"});
}

TEST(RunConfig, MatmulPrecisionIsForCudaOnlyAndRoundTrips) {
  EXPECT_EQ(parse_run_config(base(), "x.json").matmul_precision, MatmulPrecision::kFp32);
  for (const char* name : {"tf32", "bf16"}) {
    nlohmann::json doc = base();
    doc["device"] = "cuda";
    doc["precision"] = {{"matmul", name}};
    const RunConfig c = parse_run_config(doc, "x.json");
    EXPECT_EQ(matmul_precision_name(c.matmul_precision), name);
    EXPECT_EQ(parse_run_config(c.to_json(), "config.json").to_json(), c.to_json());
    doc.erase("device");  // the CPU multiplies in fp32 only
    expect_error(doc, {"test.json", "precision.matmul", name, "device = \"cuda\""});
  }
  nlohmann::json doc = base();
  doc["device"] = "cuda";
  doc["precision"] = {{"matmul", "fp16"}};
  expect_error(doc, {"precision.matmul", "fp32, f32, tf32, bf16"});
}

TEST(RunConfig, Bf16ActivationsOnEitherDeviceImplyBf16MatmulsOnCuda) {
  EXPECT_EQ(parse_run_config(base(), "x.json").activation_dtype, DType::kF32);
  nlohmann::json doc = base();
  doc["precision"] = {{"activations", "bf16"}};
  const RunConfig cpu = parse_run_config(doc, "x.json");
  EXPECT_EQ(cpu.activation_dtype, DType::kBF16);
  EXPECT_EQ(cpu.matmul_precision, MatmulPrecision::kFp32);  // the key is cuda's; the CPU rounds per the contract
  EXPECT_EQ(parse_run_config(cpu.to_json(), "config.json").to_json(), cpu.to_json());

  doc["device"] = "cuda";
  const RunConfig gpu = parse_run_config(doc, "x.json");
  EXPECT_EQ(gpu.matmul_precision, MatmulPrecision::kBf16);
  EXPECT_NE(
      std::find(gpu.derived.begin(), gpu.derived.end(), "precision.matmul = bf16 (from precision.activations = bf16)"),
      gpu.derived.end());
  EXPECT_EQ(parse_run_config(gpu.to_json(), "config.json").to_json(), gpu.to_json());
  for (const char* name : {"fp32", "tf32"}) {
    doc["precision"]["matmul"] = name;
    expect_error(doc, {"test.json", "precision.matmul", name, "conflicts with precision.activations"});
  }
  doc["precision"] = {{"activations", "fp16"}};
  expect_error(doc, {"precision.activations", "fp32, f32, bf16"});
}

TEST(RunConfig, AttentionKernelsAndGeluEpilogueAreCudaChoicesAndRoundTrip) {
  EXPECT_EQ(parse_run_config(base(), "x.json").attention_kernels, AttentionKernels::kAuto);
  EXPECT_FALSE(parse_run_config(base(), "x.json").gelu_epilogue);
  nlohmann::json doc = base();
  doc["device"] = "cuda";  // the epilogues are the default on CUDA with bf16 activations only
  EXPECT_FALSE(parse_run_config(doc, "x.json").gelu_epilogue);
  doc["precision"] = {{"activations", "bf16"}};
  const RunConfig by_default = parse_run_config(doc, "x.json");
  EXPECT_TRUE(by_default.gelu_epilogue);
  EXPECT_NE(std::find(by_default.derived.begin(), by_default.derived.end(),
                      "precision.gelu_epilogue = true (from precision.activations = bf16 on cuda)"),
            by_default.derived.end());
  doc["precision"]["gelu_epilogue"] = false;
  EXPECT_FALSE(parse_run_config(doc, "x.json").gelu_epilogue);
  doc.erase("device");
  EXPECT_FALSE(parse_run_config(doc, "x.json").gelu_epilogue) << "not on the CPU";
  doc["device"] = "cuda";
  doc["precision"] = {{"activations", "bf16"}, {"attention", "cudnn"}, {"gelu_epilogue", true}};
  const RunConfig c = parse_run_config(doc, "x.json");
  EXPECT_EQ(c.attention_kernels, AttentionKernels::kCudnn);
  EXPECT_TRUE(c.gelu_epilogue);
  EXPECT_EQ(parse_run_config(c.to_json(), "config.json").to_json(), c.to_json());
  doc["precision"]["attention"] = "flash";
  EXPECT_EQ(parse_run_config(doc, "x.json").attention_kernels, AttentionKernels::kFlash);
  doc["precision"]["attention"] = "cudnn";

  nlohmann::json on_cpu = doc;  // both choose among CUDA kernels: the CPU has one way each
  on_cpu.erase("device");
  on_cpu["precision"].erase("gelu_epilogue");
  expect_error(on_cpu, {"test.json", "precision.attention = \"cudnn\"", "device = \"cuda\""});
  on_cpu["precision"] = {{"gelu_epilogue", true}};
  expect_error(on_cpu, {"test.json", "precision.gelu_epilogue", "device = \"cuda\""});
  nlohmann::json fp32 = doc;  // cuDNN's attention takes bf16 and draws no CPU-equal dropout masks
  fp32["precision"].erase("activations");
  expect_error(fp32, {"precision.attention = \"cudnn\"", "precision.activations = \"bf16\""});
  nlohmann::json dropout = doc;
  dropout["model"]["dropout"] = 0.1;
  expect_error(dropout, {"precision.attention = \"cudnn\"", "model.dropout = 0.1"});
  doc["precision"]["attention"] = "fused";
  expect_error(doc, {"precision.attention", "auto, cudnn, flash"});
  doc["precision"]["attention"] = "auto";
  doc["precision"]["gelu_epilogue"] = "yes";
  expect_error(doc, {"precision.gelu_epilogue"});
}

// comm.backend and zero.solo_path: defaults, the round trip, and what each device refuses.
TEST(RunConfig, CommBackendAndSoloPathRoundTripAndNcclNeedsCuda) {
  const RunConfig d = parse_run_config(base(), "x.json");
  EXPECT_EQ(d.comm_backend, CommBackend::kAuto);
  EXPECT_TRUE(d.zero.solo_path);
  nlohmann::json doc = base();
  doc["device"] = "cuda";
  doc["comm"] = {{"backend", "mpi"}};
  doc["zero"] = {{"solo_path", false}};
  const RunConfig c = parse_run_config(doc, "x.json");
  EXPECT_EQ(c.comm_backend, CommBackend::kMpi);
  EXPECT_FALSE(c.zero.solo_path);
  const RunConfig again = parse_run_config(c.to_json(), "again.json");
  EXPECT_EQ(again.comm_backend, CommBackend::kMpi);
  EXPECT_FALSE(again.zero.solo_path);
  doc["comm"]["backend"] = "nccl";
  EXPECT_EQ(parse_run_config(doc, "x.json").comm_backend, CommBackend::kNccl);
  doc["device"] = "cpu";
  expect_error(doc, {"test.json", "comm.backend = \"nccl\"", "device = \"cuda\""});
  doc["comm"]["backend"] = "gloo";
  expect_error(doc, {"comm.backend", "auto, nccl, mpi"});
  doc["comm"] = {{"backend", "mpi"}, {"bakend", "mpi"}};
  expect_error(doc, {"comm.bakend"});
  doc["comm"] = {{"backend", "auto"}};
  doc["zero"]["solo_path"] = "no";
  expect_error(doc, {"zero.solo_path"});
}

// Deterministic hybrid sharding sums each hop in rank order, which MPI does on CPU ranks and NCCL
// does not: on NCCL it is refused in one line, naming what to drop.
TEST(RunConfig, DeterministicHybridShardingIsRefusedOnNccl) {
  nlohmann::json doc = base();
  doc["train"] = {{"deterministic", true}};
  doc["zero"] = {{"stage", 3}, {"shard_group_size", 2}};
  EXPECT_TRUE(parse_run_config(doc, "x.json", 4).zero.hybrid(4));  // the CPU's ranks: MPI
  doc["device"] = "cuda";
  for (const char* backend : {"auto", "nccl"}) {
    doc["comm"] = {{"backend", backend}};
    try {
      parse_run_config(doc, "x.json", 4);
      ADD_FAILURE() << "expected an InputError for comm.backend " << backend;
    } catch (const InputError& e) {
      const std::string msg = e.what();
      for (const char* f : {"x.json", "train.deterministic", "zero.shard_group_size = 2 of 4",
                            "train.deterministic = false or drop zero.shard_group_size"})
        EXPECT_NE(msg.find(f), std::string::npos) << "'" << f << "' not in: " << msg;
    }
  }
  doc["comm"] = {{"backend", "mpi"}};
  EXPECT_NO_THROW(parse_run_config(doc, "x.json", 4));
  doc["comm"] = {{"backend", "nccl"}};
  EXPECT_NO_THROW(parse_run_config(doc, "x.json", 2)) << "a group of all the ranks is not hybrid";
  doc["train"]["deterministic"] = false;
  EXPECT_NO_THROW(parse_run_config(doc, "x.json", 4));
}

// A group of every rank is the flat world ("0 (or N)"): read as 0 and said, so the store holds what
// the flat one does (at g = N stages 2-3 kept an fp32 reduced-shard buffer the flat store does not).
TEST(RunConfig, AShardGroupOfEveryRankIsReadAsNone) {
  nlohmann::json doc = base();
  doc["zero"] = {{"stage", 2}, {"shard_group_size", 4}};
  const RunConfig all = parse_run_config(doc, "x.json", 4);
  EXPECT_EQ(all.zero.shard_group_size, 0);
  EXPECT_EQ(all.to_json()["zero"]["shard_group_size"], 0);
  EXPECT_NE(std::find(all.derived.begin(), all.derived.end(),
                      "zero.shard_group_size = 0 (the 4 given is every rank: no hybrid sharding)"),
            all.derived.end());
  doc["zero"]["shard_group_size"] = 0;
  const RunConfig flat = parse_run_config(doc, "x.json", 4);
  for (int stage = 0; stage < 4; ++stage) {
    EXPECT_EQ(predict_run_memory(all, stage, 4).total_bytes(), predict_run_memory(flat, stage, 4).total_bytes())
        << "stage " << stage;
  }
  doc["zero"]["shard_group_size"] = 2;  // a real group of 2 on 4 ranks stays
  EXPECT_EQ(parse_run_config(doc, "x.json", 4).zero.shard_group_size, 2);
}

TEST(NearestKey, SuggestsOnlyCloseMatches) {
  EXPECT_EQ(nearest_key("n_embed", {"n_embd", "n_head"}), "n_embd");
  EXPECT_EQ(nearest_key("completely_different", {"n_embd", "n_head"}), "");
}

}  // namespace
}  // namespace zt
