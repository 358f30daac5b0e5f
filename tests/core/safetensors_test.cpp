// safetensors: what the writer produces is the standard layout (checked byte by byte), reads back
// exactly, and damaged files are refused with a message naming the file and the fault.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/app/io/safetensors.h"
#include "engine/base/core/check.h"

namespace zt {
namespace {

std::string temp_path(const char* name) { return ::testing::TempDir() + "/" + name; }

std::vector<char> read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<char>(std::istreambuf_iterator<char>(in), {});
}

void write_all(const std::string& path, const std::vector<char>& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

TEST(Safetensors, RoundTripsTensorsAndMetadata) {
  const std::string path = temp_path("round_trip.safetensors");
  const std::vector<float> a = {1.5f, -2.0f, 3.25f, 0.0f, 7.0f, 8.0f};
  const std::vector<std::int32_t> b = {4, -5, 6};
  SafetensorsWriter w;
  w.add_f32("a", {2, 3}, a.data());
  w.add("b", DType::kI32, {3}, b.data());
  w.set_metadata("config", "{\"x\": 1}");
  w.write(path);

  const std::vector<char> raw = read_all(path);
  std::uint64_t n = 0;
  std::memcpy(&n, raw.data(), 8);
  EXPECT_EQ((8 + n) % 8, 0u) << "data section is 8-byte aligned";
  const auto header = nlohmann::json::parse(std::string(raw.data() + 8, n));
  EXPECT_EQ(header["a"]["dtype"], "F32");
  EXPECT_EQ(header["a"]["data_offsets"], nlohmann::json({0, 24}));
  EXPECT_EQ(header["b"]["data_offsets"], nlohmann::json({24, 36}));
  EXPECT_EQ(raw.size(), 8 + n + 36);

  const SafetensorsFile f = read_safetensors(path);
  EXPECT_EQ(f.metadata.at("config"), "{\"x\": 1}");
  const SafetensorsEntry& ea = f.tensors.at("a");
  EXPECT_EQ(ea.shape, (std::vector<std::int64_t>{2, 3}));
  EXPECT_EQ(std::memcmp(ea.bytes.data(), a.data(), 24), 0);
  EXPECT_EQ(std::memcmp(f.tensors.at("b").bytes.data(), b.data(), 12), 0);
}

// A view is read at write() (not at add), an owned vector is taken over: both land as a copy would.
TEST(Safetensors, ViewsAndOwnedValuesWriteAsCopiesDo) {
  const std::string copied = temp_path("copied.safetensors"), mixed = temp_path("mixed.safetensors");
  std::vector<float> a = {1.0f, 2.0f, 3.0f, 4.0f};
  const std::vector<float> b = {-1.0f, 0.5f};
  SafetensorsWriter w1;
  w1.add_f32("a", {2, 2}, a.data());
  w1.add_f32("b", {2}, b.data());
  w1.write(copied);
  SafetensorsWriter w2;
  const std::vector<float> wrong(4, 9.0f);
  std::vector<float> later = wrong;
  w2.add_view("a", DType::kF32, {2, 2}, later.data());
  std::copy(a.begin(), a.end(), later.begin());  // changed before write(): the view writes what is there then
  w2.add_f32_owned("b", {2}, b);
  w2.write(mixed);
  EXPECT_EQ(read_all(mixed), read_all(copied));
  SafetensorsWriter w3;
  EXPECT_THROW(w3.add_f32_owned("c", {3}, b), std::exception);  // 2 values for 3 elements
}

TEST(Safetensors, DamagedFilesAreRefusedWithTheirName) {
  const std::string good = temp_path("good.safetensors");
  const std::vector<float> a(16, 1.0f);
  SafetensorsWriter w;
  w.add_f32("a", {16}, a.data());
  w.write(good);
  const std::vector<char> raw = read_all(good);

  const std::string bad = temp_path("bad.safetensors");
  std::vector<char> truncated(raw.begin(), raw.end() - 4);
  write_all(bad, truncated);
  EXPECT_THROW(read_safetensors(bad), InputError);

  std::vector<char> huge_header = raw;
  const std::uint64_t n = 1ull << 40;
  std::memcpy(huge_header.data(), &n, 8);
  write_all(bad, huge_header);
  try {
    read_safetensors(bad);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("bad.safetensors"), std::string::npos);
  }

  // A tensor named twice in the header: the parser kept the last entry, read silently.
  const std::string twice = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                            R"("a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})";
  std::vector<char> dup(8, 0);
  const std::uint64_t twice_length = twice.size();
  std::memcpy(dup.data(), &twice_length, 8);
  dup.insert(dup.end(), twice.begin(), twice.end());
  dup.resize(dup.size() + 16, 0);
  write_all(bad, dup);
  try {
    read_safetensors(bad);
    ADD_FAILURE() << "a tensor named twice taken";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("bad.safetensors: the header names 'a' twice"), std::string::npos) << e.what();
  }

  write_all(bad, std::vector<char>(raw.begin(), raw.begin() + 5));
  EXPECT_THROW(read_safetensors(bad), InputError);
  EXPECT_THROW(read_safetensors(temp_path("missing.safetensors")), InputError);
}

// The header reader that pretrained weights go through: a length of 2^63 or more (a file of 0xff
// bytes) was taken for a negative one that fits, and allocating it threw std::length_error; a
// shape whose bytes wrap int64 must not pass for its offsets' span.
TEST(Safetensors, TheHeaderReaderRefusesLengthsAndShapesThatDoNotFit) {
  const std::string bad = temp_path("header.safetensors");
  for (const std::uint64_t n : {~0ull, 1ull << 63, 0ull}) {
    std::vector<char> bytes(100, '\xff');
    std::memcpy(bytes.data(), &n, 8);
    write_all(bad, bytes);
    try {
      read_safetensors_header(bad);
      ADD_FAILURE() << "header length " << n << " taken";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("header.safetensors: header length"), std::string::npos) << e.what();
    }
  }
  const auto file_with = [&](const nlohmann::json& header) {
    const std::string text = header.dump();
    std::vector<char> bytes(8 + text.size() + 8, 0);
    const std::uint64_t n = text.size();
    std::memcpy(bytes.data(), &n, 8);
    std::memcpy(bytes.data() + 8, text.data(), text.size());
    write_all(bad, bytes);
    return read_safetensors_header(bad);
  };
  const SafetensorsHeader ok = file_with({{"t", {{"dtype", "F32"}, {"shape", {2}}, {"data_offsets", {0, 8}}}}});
  EXPECT_EQ(ok.data_size, 8);
  const SafetensorsSpan span = safetensors_span(ok.json["t"], 4, ok, bad, "t");
  EXPECT_EQ(span.bytes, 8);
  EXPECT_EQ(span.shape, std::vector<std::int64_t>{2});
  // 2^62 x 2^2 x 4 bytes wraps to 0 in int64; so does a negative size pair's product come out positive.
  for (const nlohmann::json& shape : {nlohmann::json{1ll << 62, 4}, nlohmann::json{-2, -4}}) {
    const SafetensorsHeader h = file_with({{"t", {{"dtype", "F32"}, {"shape", shape}, {"data_offsets", {0, 0}}}}});
    EXPECT_THROW(safetensors_span(h.json["t"], 4, h, bad, "t"), InputError) << shape.dump();
  }
  // An empty tensor whose size 0 follows a large one holds no bytes, in a file of any size.
  const SafetensorsHeader empty =
      file_with({{"t", {{"dtype", "F32"}, {"shape", {50257, 0}}, {"data_offsets", {0, 0}}}}});
  EXPECT_EQ(safetensors_span(empty.json["t"], 4, empty, bad, "t").bytes, 0);
  // Sizes and offsets are whole numbers (8.5 was read as 8).
  for (const nlohmann::json& shape : {nlohmann::json{2.5}, nlohmann::json{"2"}, nlohmann::json(2)}) {
    const SafetensorsHeader h = file_with({{"t", {{"dtype", "F32"}, {"shape", shape}, {"data_offsets", {0, 8}}}}});
    EXPECT_THROW(safetensors_span(h.json["t"], 4, h, bad, "t"), InputError) << shape.dump();
  }
  for (const nlohmann::json& offsets :
       {nlohmann::json{-8, 0}, nlohmann::json{0, 16}, nlohmann::json{0}, nlohmann::json{0, 8.5}}) {
    const SafetensorsHeader h = file_with({{"t", {{"dtype", "F32"}, {"shape", {2}}, {"data_offsets", offsets}}}});
    EXPECT_THROW(safetensors_span(h.json["t"], 4, h, bad, "t"), InputError) << offsets.dump();
  }
  // Two tensors over the same bytes (one read as the other's values, silently) and metadata that
  // is not an object are refused by the header as a whole; adjacent and empty tensors are fine.
  const auto tensor = [](std::int64_t begin, std::int64_t end) {
    return nlohmann::json{{"dtype", "F32"}, {"shape", {(end - begin) / 4}}, {"data_offsets", {begin, end}}};
  };
  EXPECT_NO_THROW(file_with({{"a", tensor(0, 4)}, {"b", tensor(4, 8)}, {"c", tensor(8, 8)}}));
  try {
    file_with({{"a", tensor(0, 8)}, {"b", tensor(4, 8)}});
    ADD_FAILURE() << "overlapping tensors taken";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("tensors 'a' and 'b' overlap in the data section"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(file_with({{"__metadata__", {1}}, {"a", tensor(0, 8)}}), InputError);
}

}  // namespace
}  // namespace zt
