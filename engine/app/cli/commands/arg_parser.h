// A small command-line parser for zerotrain's sub-commands: declared flags (with a value or
// boolean, repeatable or not) produce the --help text and one-line usage errors (exit code 2).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace zt::cli {

class ArgParser {
 public:
  ArgParser(std::string command, std::string summary) : command_(std::move(command)), summary_(std::move(summary)) {}

  // A flag taking a value ("--config F"); `repeatable` flags collect every occurrence.
  ArgParser& value_flag(std::string name, std::string metavar, std::string help, bool required = false,
                        bool repeatable = false);
  ArgParser& bool_flag(std::string name, std::string help);

  // Parses args (after the sub-command). Returns false when --help was asked (help_text() then
  // holds what to print). Throws InputError for unknown flags, missing values or required flags.
  bool parse(const std::vector<std::string>& args);

  bool has(const std::string& name) const { return values_.count(name) != 0; }
  std::string get(const std::string& name, const std::string& fallback = "") const;
  const std::vector<std::string>& all(const std::string& name) const;
  int get_int(const std::string& name, int fallback, int min_value, int max_value) const;
  std::int64_t get_int64(const std::string& name, std::int64_t fallback, std::int64_t min_value,
                         std::int64_t max_value) const;
  std::string help_text() const;

 private:
  struct Flag {
    std::string name, metavar, help;
    bool takes_value = true, required = false, repeatable = false;
  };
  std::string command_, summary_;
  std::vector<Flag> flags_;
  std::map<std::string, std::vector<std::string>> values_;
};

// Whether `text` opens as a plain decimal number ("124e6", "0.5", ".5"): std::strtod, which the
// commands' number flags parse with, also takes hex ("0x10"), "inf", "nan" and leading blanks,
// none of which a size, rate or count on a command line means.
bool decimal_start(const std::string& text);

}  // namespace zt::cli
