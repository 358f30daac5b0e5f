// Every damaged checkpoint is refused with an error naming the file and the fault: missing or
// truncated rank file, flipped byte, missing, malformed, unsealed or edited manifest (its crc32),
// a manifest of another step than its folder, another format version, an edited layout, and
// another model's parameter table.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <sstream>
#include <tuple>
#include <vector>

#include "engine/app/checkpoint/checkpoint_model.h"
#include "engine/app/checkpoint/durable_file.h"
#include "tests/checkpoint/checkpoint_test_util.h"

namespace zt::ckpt {
namespace {

namespace fs = std::filesystem;
using testing::RankState;

class CheckpointCorruption : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "zt_ckpt_bad_XXXXXX").string();
    folder_ = mkdtemp(tmpl.data());
    dir_ = testing::save_simulated(folder_, table_, 3, 1, 7);
  }
  void TearDown() override { fs::remove_all(folder_); }

  // The InputError message of fn, or "" when it does not throw one.
  static std::string error_of(const std::function<void()>& fn) {
    try {
      fn();
    } catch (const InputError& e) {
      return e.what();
    }
    return "";
  }
  std::string load_error() {
    return error_of([&] {
      const CheckpointReader reader(dir_);
      RankState loaded(table_, 2, 1);
      load_optimizer_state(reader, table_, loaded.target());
    });
  }
  std::string manifest_text() {
    std::ifstream in(dir_ + "/manifest.json");
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  void write_manifest(const std::string& text) { std::ofstream(dir_ + "/manifest.json") << text; }
  // An edited manifest sealed again (its manifest_crc32 recomputed, as Manifest::to_text does), to
  // reach the checks behind the checksum.
  void write_resealed_manifest(const std::string& text) {
    nlohmann::ordered_json doc = nlohmann::ordered_json::parse(text);
    doc.erase("manifest_crc32");
    const std::string compact = doc.dump();
    doc["manifest_crc32"] = crc32_update(0, compact.data(), static_cast<std::int64_t>(compact.size()));
    write_manifest(doc.dump(1));
  }

  ParamTable table_ = testing::odd_table();
  std::string folder_, dir_;
};

// A reader reads the checkpoint it began with, through the directory it holds, even when the folder
// is moved meanwhile and another checkpoint saved under its name (a fresh run on a live folder sets
// its checkpoints aside to superseded/): by path it took the new rank files under the old manifest,
// "checksum mismatch: the file is corrupt" of a healthy checkpoint. [Note: a reader's files
// through its held directory]
TEST_F(CheckpointCorruption, AReaderKeepsItsCheckpointWhenTheFolderIsReplacedUnderIt) {
  const CheckpointReader reader(dir_);
  fs::create_directories(folder_ + "/superseded");
  fs::rename(dir_, folder_ + "/superseded/step_00000007");
  ASSERT_EQ(testing::save_simulated(folder_, table_, 2, 1, 7), dir_);  // another save of step 7
  EXPECT_EQ(error_of([&] { reader.verify_checksums(); }), "");
  EXPECT_EQ(reader.manifest().world_size, 3);
  // A checkpoint removed between its choice and its hold is said as such, not as incomplete.
  fs::remove_all(dir_);
  const std::string gone = error_of([&] { const CheckpointReader late(dir_); });
  EXPECT_NE(gone.find("the checkpoint was removed as it was read"), std::string::npos) << gone;
}

TEST_F(CheckpointCorruption, MissingRankFileIsNamed) {
  fs::remove(dir_ + "/rank_00002.bin");
  const std::string e = load_error();
  EXPECT_NE(e.find("rank_00002.bin: rank file missing"), std::string::npos) << e;
}

// A folder where a rank file was: named as such, not as a file of the folder's size ("truncated").
TEST_F(CheckpointCorruption, RankFileThatIsAFolderIsNamed) {
  fs::remove(dir_ + "/rank_00001.bin");
  fs::create_directory(dir_ + "/rank_00001.bin");
  const std::string e = load_error();
  EXPECT_NE(e.find("checkpoint rank file " + dir_ + "/rank_00001.bin: is a directory"), std::string::npos) << e;
}

TEST_F(CheckpointCorruption, TruncatedRankFileIsNamed) {
  fs::resize_file(dir_ + "/rank_00001.bin", fs::file_size(dir_ + "/rank_00001.bin") - 3);
  const std::string e = load_error();
  EXPECT_NE(e.find("rank_00001.bin"), std::string::npos) << e;
  EXPECT_NE(e.find("truncated"), std::string::npos) << e;
}

TEST_F(CheckpointCorruption, FlippedByteFailsTheChecksumOfThatFile) {
  {
    std::fstream f(dir_ + "/rank_00001.bin", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(17);
    char c = 0;
    f.read(&c, 1);
    f.seekp(17);
    c = static_cast<char>(c ^ 0x10);
    f.write(&c, 1);
  }
  const std::string e = load_error();  // rank 1 of 2 needs bytes of rank 1's file
  EXPECT_NE(e.find("rank_00001.bin: checksum mismatch in bytes [0, "), std::string::npos) << e;
  const std::string v = error_of([&] { CheckpointReader(dir_).verify_checksums(); });
  EXPECT_NE(v.find("rank_00001.bin: checksum mismatch"), std::string::npos) << v;
  EXPECT_EQ(error_of([&] { CheckpointReader(dir_).verify_file(0); }), "");  // the others are fine
}

TEST_F(CheckpointCorruption, MissingManifestMeansNoCheckpoint) {
  fs::remove(dir_ + "/manifest.json");
  const std::string e = load_error();
  EXPECT_NE(e.find("manifest.json: missing manifest"), std::string::npos) << e;
}

TEST_F(CheckpointCorruption, MalformedManifestIsNamed) {
  write_manifest(manifest_text().substr(0, 200));
  const std::string e = load_error();
  EXPECT_NE(e.find("manifest.json: malformed JSON"), std::string::npos) << e;
}

TEST_F(CheckpointCorruption, OtherFormatVersionIsRefused) {
  const std::string text = manifest_text();
  const std::string key = "\"format_version\": 1";
  ASSERT_NE(text.find(key), std::string::npos);
  for (const char* version : {"3", "0"}) {
    std::string edited = text;
    edited.replace(edited.find(key), key.size(), std::string("\"format_version\": ") + version);
    write_manifest(edited);
    const std::string e = load_error();
    EXPECT_NE(e.find(std::string("format version ") + version + " is not supported"), std::string::npos) << e;
    EXPECT_NE(e.find("reads versions 1-2"), std::string::npos) << e;
  }
}

// Version 2 (a model that builds reading only version 1 would misread: a Llama with RoPE scaling)
// is written only for such a model, and read.
TEST(CheckpointFormatVersion, TwoOnlyForAModelVersionOneReadersWouldMisread) {
  EXPECT_EQ(format_version_for({{"type", "gpt2"}, {"n_layer", 2}}), 1);
  EXPECT_EQ(format_version_for({{"type", "llama"}, {"rope_theta", 500000.0}}), 1);
  EXPECT_EQ(format_version_for({{"type", "llama"}, {"rope_scaling", {{"rope_type", "llama3"}, {"factor", 32.0}}}}), 2);
}

TEST_F(CheckpointCorruption, EditedLayoutIsRefused) {
  std::string text = manifest_text();
  const std::string key = "\"world_size\": 3";
  ASSERT_NE(text.find(key), std::string::npos);
  text.replace(text.find(key), key.size(), "\"world_size\": 2");
  write_resealed_manifest(text);
  const std::string e = load_error();
  EXPECT_NE(e.find("3 rank files listed for world_size 2"), std::string::npos) << e;
}

// A parameter's row_offset (a tensor split by rows across units) must continue its tensor's
// earlier rows: a resealed manifest that says otherwise is refused by name.
TEST_F(CheckpointCorruption, RowOffsetThatDoesNotContinueItsTensorIsRefused) {
  nlohmann::ordered_json doc = nlohmann::ordered_json::parse(manifest_text());
  ASSERT_TRUE(doc.contains("params") && doc["params"].is_array() && !doc["params"].empty());
  doc["params"][0]["row_offset"] = 5;
  write_resealed_manifest(doc.dump(1));
  const std::string e = load_error();
  EXPECT_NE(e.find("starts at row 5 but its earlier parts hold 0 rows"), std::string::npos) << e;
}

// Shapes whose element counts overflow (each dimension in range, their product 2^80, which was
// signed overflow in the table's numel), a Hugging Face shape likewise, and a table past 2^40
// elements in all: refused by name before any offset is computed from them.
TEST_F(CheckpointCorruption, ShapesPastTwoToTheFortyElementsAreRefused) {
  const std::int64_t big = std::int64_t{1} << 40;
  const std::string original = manifest_text();
  for (const auto& [key, shape, said] :
       {std::tuple<const char*, std::vector<std::int64_t>, const char*>{"shape", {big, big}, "over 2^40 elements"},
        {"hf_shape", {big, big}, "over 2^40 elements"},
        {"shape", {-1, 4}, "negative"},
        {"shape", {big}, "takes the table past 2^40 elements"}}) {
    nlohmann::ordered_json doc = nlohmann::ordered_json::parse(manifest_text());
    ASSERT_TRUE(doc.contains("params") && doc["params"].size() > 1);
    nlohmann::ordered_json& p = doc["params"][1];
    p[key] = shape;
    // The Hugging Face shape of as many dimensions, valid: the shape's own check is what acts.
    if (std::string(key) == "shape") p["hf_shape"] = std::vector<std::int64_t>(shape.size(), 1);
    write_resealed_manifest(doc.dump(1));
    const std::string e = load_error();
    EXPECT_NE(e.find(said), std::string::npos) << key << ": " << e;
    write_manifest(original);
  }
}

// The manifest is sealed by a crc32 of its contents: a position edited by hand (the sample index
// a resume would continue from) is refused, and a step_XXXXXXXX directory must hold that step
// (a resealed manifest of another step, or one moved to another folder).
TEST_F(CheckpointCorruption, EditedManifestFailsItsChecksum) {
  for (const char* key : {"\"next_sample_index\": ", "\"step\": ", "\"tokens_seen\": "}) {
    SCOPED_TRACE(key);
    const std::string original = manifest_text();
    std::string text = original;
    const std::size_t at = text.find(key);
    ASSERT_NE(at, std::string::npos);
    text.insert(at + std::strlen(key), "1");  // 24 -> 124
    write_manifest(text);
    const std::string e = load_error();
    EXPECT_NE(e.find("manifest.json: manifest checksum mismatch"), std::string::npos) << e;
    write_manifest(original);
    EXPECT_EQ(load_error(), "");
  }
}

TEST_F(CheckpointCorruption, ManifestOfAnotherStepThanItsFolderIsRefused) {
  std::string text = manifest_text();
  const std::string key = "\"step\": 7";
  ASSERT_NE(text.find(key), std::string::npos) << text.substr(0, 300);
  text.replace(text.find(key), key.size(), "\"step\": 8");
  write_resealed_manifest(text);
  const std::string e = load_error();
  EXPECT_NE(e.find("the manifest records step 8, but its directory is step_00000007"), std::string::npos) << e;
}

// Resealed values that pass the seal but are no checkpoint's: a negative or huge position, more updates
// than steps (or a count past an int, which wrapped to 0 and restarted AdamW's bias correction),
// a stage past 3, a checksum chunk that would size a buffer of gigabytes. Refused on reading.
TEST_F(CheckpointCorruption, ResealedPositionsAndSizesOutOfRangeAreRefused) {
  const std::string original = manifest_text();
  const std::vector<std::pair<std::function<void(nlohmann::ordered_json&)>, const char*>> cases = {
      {[](auto& d) { d["next_sample_index"] = -1; }, "next_sample_index -1 is not a count"},
      {[](auto& d) { d["tokens_seen"] = -5; }, "tokens_seen -5 is not a count"},
      // Past 2^53 (a resume's sums of them would overflow: an internal check failed on the first step).
      {[](auto& d) { d["next_sample_index"] = INT64_MAX; },
       "next_sample_index 9223372036854775807 is not a count (0 to 9007199254740992)"},
      {[](auto& d) { d["tokens_seen"] = (std::int64_t{1} << 53) + 1; }, "tokens_seen 9007199254740993 is not a count"},
      {[](auto& d) { d["optimizer_step"] = 8; }, "optimizer_step 8 is not a count of at most its step 7"},
      {[](auto& d) { d["optimizer_step"] = 4294967296; }, "optimizer_step 4294967296 is not a whole number"},
      {[](auto& d) { d["step"] = d["optimizer_step"] = 4294967296; }, "optimizer_step 4294967296 is not a whole"},
      {[](auto& d) { d["zero_stage"] = 9; }, "zero_stage 9 is not 0-3"},
      {[](auto& d) { d["checksum"]["chunk_bytes"] = std::int64_t{1} << 31; }, "unsupported checksum"},
      // No chunks at all: refused by name (a division by the chunk size followed).
      {[](auto& d) { d["checksum"]["chunk_bytes"] = 0; }, "unsupported checksum"},
      // A rank file of other bytes than its split's, or one chunk checksum more than its bytes have.
      {[](auto& d) { d["files"][0]["bytes"] = d["files"][0]["bytes"].template get<std::int64_t>() + 4; },
       "does not describe the"},
      {[](auto& d) { d["files"][0]["chunk_crc32"].push_back(7); }, "chunk checksums for"},
      {[](auto& d) { d["config"] = 5; }, "\"config\" is 5, not an object"},
      {[](auto& d) { d["extra"] = nlohmann::json::array(); }, "\"extra\" is [], not an object"},
      // Numbers that nlohmann's get<int> would take for others: true for 1, 2^32 for 0.
      {[](auto& d) { d["world_size"] = true; }, "world_size true is not a whole number"},
      {[](auto& d) { d["files"][0]["rank"] = 4294967296; }, "files[0].rank 4294967296 is not a whole number"},
      // Fields of another type, named by their path (the library's type_error named none), and a
      // crc32 of -1 that get<std::uint32_t> read as ffffffff.
      {[](auto& d) { d["params"][1]["shape"] = "x"; }, "manifest.json: params[1].shape is \"x\", not a list"},
      {[](auto& d) {
         d["params"][0]["hf_shape"] = {2, true};
       },
       "params[0].hf_shape[1] true is not a whole number"},
      {[](auto& d) { d["params"][0]["name"] = 3; }, "params[0].name is 3, not a string"},
      {[](auto& d) { d["params"][0]["decays"] = 1; }, "params[0].decays is 1, not true or false"},
      {[](auto& d) { d["params"][0].erase("dtype"); }, "params[0] has no \"dtype\""},
      {[](auto& d) { d["params"][0] = 7; }, "params[0] is 7, not an object"},
      {[](auto& d) {
         d["units"] = {{"name", "x"}};
       },
       "units is {\"name\": \"x\"}, not a list"},
      {[](auto& d) { d["files"][0]["crc32"] = -1; }, "files[0].crc32 -1 is not a whole number"},
      {[](auto& d) { d["files"][0]["chunk_crc32"] = {"a"}; }, "files[0].chunk_crc32[0] \"a\" is not a whole"},
      {[](auto& d) { d["files"][0]["segments"][2]["state"] = 7; }, "files[0].segments[2].state is 7, not a string"},
      {[](auto& d) { d["checksum"]["algorithm"] = nullptr; }, "checksum.algorithm is null, not a string"},
      {[](auto& d) { d.erase("world_size"); }, "the manifest has no \"world_size\""},
      {[](auto& d) { d["state_dtype"] = "BF16"; }, "not this format's master, exp_avg and exp_avg_sq in F32"},
      // What the readers take from config and extra, of another type: the library's type_error
      // later, naming nothing (from a fuzz of resealed manifests).
      {[](auto& d) { d["config"]["train"] = "x"; }, "config.train is \"x\", not an object"},
      {[](auto& d) {
         d["config"]["model"] = {{"dropout", ""}};
       },
       "config.model.dropout is \"\", not a number"},
      {[](auto& d) { d["extra"]["skipped_steps"] = nlohmann::json::array(); },
       "extra.skipped_steps is [], not a count"},
      {[](auto& d) { d["extra"]["consecutive_skips"] = -1; }, "extra.consecutive_skips is -1, not a count"},
      {[](auto& d) { d["extra"]["data_parallel_ranks"] = 0; }, "extra.data_parallel_ranks is 0, not a count"},
      {[](auto& d) { d["extra"]["data_identity"] = -1; }, "extra.data_identity is -1, not a list of files"},
      {[](auto& d) {
         d["extra"]["data_identity"] = {{{"path", 3}}};
       },
       "extra.data_identity is [{\"path\":3}], not a list"},
      // A crc32 past 32 bits, or a sampled one that is none: printed cut to 32 bits, a changed
      // file's refusal named two equal fingerprints.
      {[](auto& d) {
         d["extra"]["data_identity"] = {{{"path", "t.bin"}, {"bytes", 9}, {"fingerprint", 4294967301ULL}}};
       },
       "\"fingerprint\":4294967301,\"path\":\"t.bin\"}], not a list of files"},
      {[](auto& d) {
         d["extra"]["data_identity"] = {
             {{"path", "t.bin"}, {"bytes", 9}, {"fingerprint", 5}, {"sampled_fingerprint", -5}}};
       },
       "\"sampled_fingerprint\":-5}], not a list of files"},
      {[](auto& d) { d["extra"]["save_id"] = 7; }, "extra.save_id is 7, not a string"},
  };
  for (const auto& [edit, message] : cases) {
    SCOPED_TRACE(message);
    nlohmann::ordered_json doc = nlohmann::ordered_json::parse(original);
    edit(doc);
    write_resealed_manifest(doc.dump(1));
    const std::string e = load_error();
    EXPECT_NE(e.find(message), std::string::npos) << e;
  }
  write_manifest(original);
  EXPECT_EQ(load_error(), "");
}

// A model section past the model keys' ranges is refused before a parameter table is built from it
// (a million layers built one of gigabytes first).
TEST_F(CheckpointCorruption, AModelPastTheConfigRangesIsRefusedBeforeItsTable) {
  nlohmann::ordered_json doc = nlohmann::ordered_json::parse(manifest_text());
  doc["model"] = {{"type", "gpt2"}, {"n_layer", 100000000}, {"n_head", 2},
                  {"n_embd", 8},    {"block_size", 8},      {"vocab_size", 10}};
  write_resealed_manifest(doc.dump(1));
  const std::string e = error_of([&] { (void)model_spec_of(CheckpointReader(dir_)); });
  EXPECT_NE(e.find("n_layer = 100000000 is not an integer in [1, 1024]"), std::string::npos) << e;
  doc["model"]["n_layer"] = 4294967297;  // wrapped to 1 in an int
  write_resealed_manifest(doc.dump(1));
  const std::string wrapped = error_of([&] { (void)model_spec_of(CheckpointReader(dir_)); });
  EXPECT_NE(wrapped.find("n_layer = 4294967297 is not an integer"), std::string::npos) << wrapped;
}

// The Llama family's own keys too, each read checked: nlohmann's get<int> of 1e300 (undefined
// behaviour, caught by UBSan; x86 made it -2^31, "is negative") and of 2^40 (cut to 0, "must be
// positive"), get<float> of 1e300 (inf) each gave a wrong message.
TEST_F(CheckpointCorruption, LlamaKeysPastTheirRangesAreNamedAsGiven) {
  nlohmann::ordered_json doc = nlohmann::ordered_json::parse(manifest_text());
  const nlohmann::ordered_json llama = {{"type", "llama"},
                                        {"n_layer", 1},
                                        {"n_head", 2},
                                        {"n_embd", 8},
                                        {"block_size", 8},
                                        {"vocab_size", 10},
                                        {"n_kv_head", 1},
                                        {"intermediate_size", 16},
                                        {"rope_theta", 10000},
                                        {"norm_eps", 1e-5},
                                        {"tie_embeddings", false},
                                        {"rope_scaling",
                                         {{"rope_type", "llama3"},
                                          {"factor", 8},
                                          {"low_freq_factor", 1},
                                          {"high_freq_factor", 4},
                                          {"original_max_position_embeddings", 8192}}}};
  const std::pair<nlohmann::ordered_json::json_pointer, std::string> cases[] = {
      {nlohmann::ordered_json::json_pointer("/n_kv_head"), "n_kv_head = 1e+300 is not an integer in [1, 1024]"},
      {nlohmann::ordered_json::json_pointer("/intermediate_size"),
       "intermediate_size = 1e+300 is not an integer in [0, 16777216]"},
      {nlohmann::ordered_json::json_pointer("/rope_theta"), "rope_theta = 1e+300 is not a finite fp32 number"},
      {nlohmann::ordered_json::json_pointer("/rope_scaling/factor"),
       "rope_scaling.factor = 1e+300 is not a finite fp32 number"},
      {nlohmann::ordered_json::json_pointer("/rope_scaling/original_max_position_embeddings"),
       "rope_scaling.original_max_position_embeddings = 1e+300 is not an integer in [1, 16777216]"}};
  for (const auto& [key, expected] : cases) {
    doc["model"] = llama;
    doc["model"][key] = 1e300;
    write_resealed_manifest(doc.dump(1));
    const std::string e = error_of([&] { (void)model_spec_of(CheckpointReader(dir_)); });
    EXPECT_NE(e.find(expected), std::string::npos) << e;
  }
  doc["model"] = llama;
  doc["model"]["n_kv_head"] = std::int64_t{1} << 40;
  write_resealed_manifest(doc.dump(1));
  const std::string wide = error_of([&] { (void)model_spec_of(CheckpointReader(dir_)); });
  EXPECT_NE(wide.find("n_kv_head = 1099511627776 is not an integer in [1, 1024]"), std::string::npos) << wide;
  // Unedited, the keys are read: only the fixture's table (not a Llama's) is refused.
  doc["model"] = llama;
  write_resealed_manifest(doc.dump(1));
  const std::string valid = error_of([&] { (void)model_spec_of(CheckpointReader(dir_)); });
  EXPECT_NE(valid.find("the parameter table is not llama's"), std::string::npos) << valid;
}

TEST_F(CheckpointCorruption, UnsealedManifestIsRefused) {
  nlohmann::ordered_json doc = nlohmann::ordered_json::parse(manifest_text());
  const auto sealed = doc["manifest_crc32"].get<std::uint64_t>();
  doc.erase("manifest_crc32");
  write_manifest(doc.dump(1));
  const std::string e = load_error();
  EXPECT_NE(e.find("no manifest_crc32"), std::string::npos) << e;
  // A seal that is no crc32 is an edit, not an older manifest (it was said as "no manifest_crc32"); one
  // past 32 bits was cut to its low bits, and the seal plus 2^32 passed.
  for (const nlohmann::ordered_json& bad : {nlohmann::ordered_json("abc"), nlohmann::ordered_json(-1),
                                            nlohmann::ordered_json(sealed + (std::uint64_t{1} << 32))}) {
    doc["manifest_crc32"] = bad;
    write_manifest(doc.dump(1));
    const std::string edited = load_error();
    EXPECT_NE(edited.find("manifest_crc32 = " + bad.dump() + " is no crc32"), std::string::npos) << edited;
  }
}

TEST_F(CheckpointCorruption, AnotherModelIsRefusedOnLoad) {
  const ParamTable other = testing::big_table();
  const std::string e = error_of([&] {
    const CheckpointReader reader(dir_);
    RankState loaded(other, 1, 0);
    load_optimizer_state(reader, other, loaded.target());
  });
  EXPECT_NE(e.find("the checkpoint's model differs from this run's"), std::string::npos) << e;
}

// State no run saves, behind valid checksums (a file rewritten and resealed): a NaN or infinite
// value, a negative second moment. Refused on load, naming the unit and the state: resumed, the
// first update made every parameter NaN and that checkpoint became the latest.
TEST_F(CheckpointCorruption, StateNoRunSavesIsRefusedOnLoad) {
  for (const auto& [kind, bad] : {std::pair{StateKind::kMaster, std::nanf("")},
                                  {StateKind::kExpAvg, std::numeric_limits<float>::infinity()},
                                  {StateKind::kExpAvgSq, -1.0f}}) {
    const std::string folder = folder_ + "/" + std::string(state_kind_name(kind));
    const std::string temp = temp_dir_for(folder, 5);
    prepare_temp_dir(temp);
    RankState state(table_, 1, 0);
    state.fill();
    state.values[static_cast<int>(kind)][1][2] = bad;
    std::vector<RankFileWritten> files{write_rank_file(temp, table_, 1, 0, state.source())};
    const std::string dir = commit_checkpoint(folder, temp, table_, testing::simulated_meta(5), 1, files, 0).path;
    const std::string e = error_of([&] {
      const CheckpointReader reader(dir);
      RankState loaded(table_, 1, 0);
      load_optimizer_state(reader, table_, loaded.target());
    });
    EXPECT_NE(e.find(fmt::format("unit '{}' {} element 2", table_.units()[1].name, state_kind_name(kind))),
              std::string::npos)
        << e;
    EXPECT_NE(e.find("not a state AdamW continues from"), std::string::npos) << e;
  }
}

TEST_F(CheckpointCorruption, NotAManifestAtAll) {
  write_manifest("{\"hello\": 1}");
  const std::string e = load_error();
  EXPECT_NE(e.find("not a zerotrain checkpoint manifest"), std::string::npos) << e;
  // A "format" of another type: the library's type_error, with no file named, before.
  nlohmann::ordered_json doc = nlohmann::ordered_json::parse(manifest_text());
  for (const nlohmann::json& format : {nlohmann::json(), nlohmann::json(5), nlohmann::json::array()}) {
    doc["format"] = format;
    write_manifest(doc.dump(1));
    const std::string e2 = load_error();
    EXPECT_NE(e2.find("not a zerotrain checkpoint manifest"), std::string::npos) << format.dump() << ": " << e2;
  }
}

}  // namespace
}  // namespace zt::ckpt
