// What a resume reads of metrics.jsonl (MetricsLog::read_at_step, one pass) and the records it then
// drops (drop_records_after_step): a step's records, the save ids, records past the step, a
// summary's last_step, a last line a kill cut short, lines that are not records; and what
// write_while takes back once another run took the directory over.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "engine/app/trainer/run_log.h"

namespace zt {
namespace {

class MetricsLogAtStep : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("zt_metrics_log_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    path_ = (dir_ / "metrics.jsonl").string();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  void write_log(const std::string& text) const { std::ofstream(path_, std::ios::binary) << text; }
  std::string read_log() const {
    std::ifstream in(path_, std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }

  std::filesystem::path dir_;
  std::string path_;
};

constexpr const char* kLogUpToStep4 = R"({"type":"train","step":3,"loss":1.5})"
                                      "\n"
                                      R"({"type":"checkpoint_started","step":4,"save_id":"s4"})"
                                      "\n"
                                      R"({"type":"train","step":4,"loss":1.25})"
                                      "\n"
                                      R"({"type":"checkpoint","step":4,"save_id":"s4"})"
                                      "\n"
                                      "not a record\n"
                                      R"({"type":"eval","step":4,"val_loss":1.5})"
                                      "\n";

TEST_F(MetricsLogAtStep, ReadsTheStepsRecordsAndSaveIdsAndCountsWhatIsPastIt) {
  write_log(std::string(kLogUpToStep4) + R"({"type":"train","step":5,"loss":1.0})"
                                         "\n"
                                         R"({"type":"summary","last_step":5,"save_id":"s5"})"
                                         "\n");
  MetricsLog log(path_);
  const MetricsLog::AtStep at = log.read_at_step(4, {"s4", "s2"});
  EXPECT_TRUE(at.any_record);
  EXPECT_EQ(at.save_ids, (std::set<std::string>{"s4"}));  // s2 is not in the log; s5 was not asked
  EXPECT_EQ(at.kept_types, (std::set<std::string>{"checkpoint_started", "train", "checkpoint", "eval"}));
  EXPECT_EQ(at.past, 2);  // step 5's record and the summary whose last_step is 5
  EXPECT_EQ(log.drop_records_after_step(4, at.past), 2);
  EXPECT_EQ(read_log(), kLogUpToStep4);
  log.write({{"type", "resume"}, {"step", 4}});  // appended to the rewritten file
  EXPECT_EQ(read_log(), std::string(kLogUpToStep4) + R"({"step":4,"type":"resume"})"
                                                     "\n");
}

TEST_F(MetricsLogAtStep, ALastLineCutShortCountsForTheStepButIsDropped) {
  // A kill between a record's bytes and its newline: the record names the step (a resume takes the
  // log for this run's), but is not kept (the next record would be glued onto it).
  write_log(R"({"type":"train","step":3,"loss":1.5})"
            "\n"
            R"({"type":"eval","step":4,"val_loss":1.5})");
  MetricsLog log(path_);
  const MetricsLog::AtStep at = log.read_at_step(4, {});
  EXPECT_TRUE(at.any_record);
  EXPECT_TRUE(at.kept_types.empty());
  EXPECT_EQ(at.past, 1);
  EXPECT_EQ(log.drop_records_after_step(4, at.past), 1);
  EXPECT_EQ(read_log(), R"({"type":"train","step":3,"loss":1.5})"
                        "\n");
}

TEST_F(MetricsLogAtStep, AnotherTrajectorysLogHoldsNothingOfTheStep) {
  write_log(R"({"type":"train","step":1,"loss":2.0,"save_id":"other"})"
            "\n");
  MetricsLog log(path_);
  const MetricsLog::AtStep at = log.read_at_step(4, {"s4"});
  EXPECT_FALSE(at.any_record);
  EXPECT_TRUE(at.save_ids.empty());
  EXPECT_EQ(at.past, 0);
  EXPECT_EQ(log.drop_records_after_step(4, at.past), 0);  // left as it is
  EXPECT_EQ(read_log(), R"({"type":"train","step":1,"loss":2.0,"save_id":"other"})"
                        "\n");
}

TEST_F(MetricsLogAtStep, AMissingLogIsEmpty) {
  MetricsLog log(path_);  // creates it
  const MetricsLog::AtStep at = log.read_at_step(4, {"s4"});
  EXPECT_FALSE(at.any_record);
  EXPECT_EQ(at.past, 0);
}

// write_while: a record written while the run's directory is still its own stays; one written just
// as another run took the directory over (this process stopped meanwhile) is taken back out, but
// only where it still ends the file: the taker's records, before it or after it, stay.
class MetricsLogWriteWhile : public MetricsLogAtStep {
 protected:
  void append(const std::string& text) const { std::ofstream(path_, std::ios::binary | std::ios::app) << text; }
};

TEST_F(MetricsLogWriteWhile, KeepsTheRecordWhileTheDirectoryIsOurs) {
  MetricsLog log(path_);
  log.write_while({{"type", "train"}, {"step", 1}}, [] { return true; });
  EXPECT_EQ(read_log(), "{\"step\":1,\"type\":\"train\"}\n");
}

TEST_F(MetricsLogWriteWhile, TakesBackItsRecordOnlyWhereItEndsTheFile) {
  write_log("{\"step\":1}\n");
  MetricsLog log(path_);
  // Another run took the directory over before this write, and wrote a record (appended to the same file).
  append("{\"taker\":1}\n");
  log.write_while({{"step", 2}}, [] { return false; });
  EXPECT_EQ(read_log(), "{\"step\":1}\n{\"taker\":1}\n");
  // ... and after it, before this process checked: the record stays, the taker's too (cutting ours
  // would cut theirs).
  log.write_while({{"step", 3}}, [this] {
    append("{\"taker\":2}\n");
    return false;
  });
  EXPECT_EQ(read_log(), "{\"step\":1}\n{\"taker\":1}\n{\"step\":3}\n{\"taker\":2}\n");
}

TEST_F(MetricsLogWriteWhile, AFreshLogAppendsToo) {
  // A fresh run's log (start_afresh: the file truncated) also writes at the end: a record written
  // after another run's appended ones lands after them, and is taken back alone.
  MetricsLog log(path_);
  log.start_afresh();
  log.write({{"step", 1}});
  append("{\"taker\":1}\n");
  log.write_while({{"step", 2}}, [] { return false; });
  EXPECT_EQ(read_log(), "{\"step\":1}\n{\"taker\":1}\n");
}

}  // namespace
}  // namespace zt
