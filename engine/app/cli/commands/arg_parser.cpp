// ArgParser implementation.
#include "engine/app/cli/commands/arg_parser.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <optional>

#include "engine/base/core/check.h"
#include "engine/base/core/config_reader.h"
#include "engine/base/core/config_text.h"

namespace zt::cli {

ArgParser& ArgParser::value_flag(std::string name, std::string metavar, std::string help, bool required,
                                 bool repeatable) {
  flags_.push_back(Flag{std::move(name), std::move(metavar), std::move(help), true, required, repeatable});
  return *this;
}

ArgParser& ArgParser::bool_flag(std::string name, std::string help) {
  flags_.push_back(Flag{std::move(name), "", std::move(help), false, false, false});
  return *this;
}

bool ArgParser::parse(const std::vector<std::string>& args) {
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string arg = args[i];
    if (arg == "--help" || arg == "-h") return false;
    std::string inline_value;
    bool has_inline = false;
    if (const std::size_t eq = arg.find('='); arg.starts_with("--") && eq != std::string::npos) {
      inline_value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
      has_inline = true;
    }
    const Flag* flag = nullptr;
    for (const Flag& f : flags_) {
      if ("--" + f.name == arg) flag = &f;
    }
    if (flag == nullptr) throw_input_error("zerotrain {}: unknown argument '{}' (see --help)", command_, args[i]);
    if (!flag->repeatable && values_.count(flag->name) != 0) {
      throw_input_error("zerotrain {}: --{} given twice", command_, flag->name);
    }
    if (!flag->takes_value) {
      if (has_inline) throw_input_error("zerotrain {}: --{} takes no value", command_, flag->name);
      values_[flag->name].push_back("true");
      continue;
    }
    if (!has_inline) {
      if (i + 1 >= args.size())
        throw_input_error("zerotrain {}: --{} needs a value ({})", command_, flag->name, flag->metavar);
      inline_value = args[++i];
    }
    // A path the shell left unexpanded (--run-dir=~/x: no expansion after '='), as the shell would
    // have expanded it: taken as it was, it made a folder named "~" in the working directory.
    const bool path = flag->metavar == "DIR" || flag->metavar == "FILE" || flag->metavar.ends_with("PATH");
    if (path && inline_value.empty()) {
      // An empty name (--tokens "$UNSET") was read as a file named "", whose error named nothing.
      // "latest|PATH" said as "latest or a PATH".
      std::string needs;
      for (std::size_t start = 0; start <= flag->metavar.size();) {
        const std::size_t bar = std::min(flag->metavar.find('|', start), flag->metavar.size());
        const std::string part = flag->metavar.substr(start, bar - start);
        const bool placeholder = !part.empty() && std::isupper(static_cast<unsigned char>(part[0]));
        needs += (needs.empty() ? "" : " or ") + std::string(placeholder ? "a " : "") + part;
        start = bar + 1;
      }
      throw_input_error("zerotrain {}: --{} is empty (an unset variable?): it needs {}", command_, flag->name, needs);
    }
    if (path) {
      std::optional<std::string> expanded = expand_home(inline_value);
      if (!expanded) {
        throw_input_error("zerotrain {}: --{} '{}' starts with ~, but HOME is not set to expand it", command_,
                          flag->name, inline_value);
      }
      inline_value = *std::move(expanded);
      // A path ends up in JSON text (a run's config.json and records, a checkpoint's manifest): one
      // that is no UTF-8 failed there, mid-run, with the JSON writer's own exception.
      try {
        (void)nlohmann::json(inline_value).dump();
      } catch (const nlohmann::json::type_error&) {
        throw_input_error("zerotrain {}: --{} {} is not valid UTF-8 (paths are recorded as JSON text): rename it",
                          command_, flag->name, preview_json(nlohmann::json(inline_value)));
      }
    }
    values_[flag->name].push_back(inline_value);
  }
  for (const Flag& f : flags_) {
    if (f.required && values_.count(f.name) == 0) {
      throw_input_error("zerotrain {}: missing required --{} {}", command_, f.name, f.metavar);
    }
  }
  return true;
}

std::string ArgParser::get(const std::string& name, const std::string& fallback) const {
  auto it = values_.find(name);
  return it == values_.end() ? fallback : it->second.back();
}

const std::vector<std::string>& ArgParser::all(const std::string& name) const {
  static const std::vector<std::string> kNone;
  auto it = values_.find(name);
  return it == values_.end() ? kNone : it->second;
}

namespace {

// A whole number in exponent form (1e3, 2.5e3), as configs take it ("1e5 as DeepSpeed's configs
// write it") and --params did: exact below 2^53, nothing past the last digit.
std::optional<double> whole_in_exponent_form(const std::string& s) {
  if (!decimal_start(s) || s.find_first_of("eE") == std::string::npos) return std::nullopt;
  double v = 0;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size() || v != std::floor(v) || !(std::fabs(v) < 0x1p53)) {
    return std::nullopt;
  }
  return v;
}

template <typename T>
T parse_integer(const std::string& command, const std::string& name, const std::string& s, T min_value, T max_value) {
  T v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (const std::optional<double> whole = whole_in_exponent_form(s);
      whole && *whole >= static_cast<double>(min_value) && *whole <= static_cast<double>(max_value)) {
    return static_cast<T>(*whole);
  }
  if (ec != std::errc() || ptr != s.data() + s.size() || v < min_value || v > max_value) {
    // 9.2e18, whole and in range, is past what exponent form is read exactly at: said, not only refused.
    double d = 0;
    const auto [end, parsed] = std::from_chars(s.data(), s.data() + s.size(), d);
    const bool past_exact = decimal_start(s) && s.find_first_of("eE") != std::string::npos && parsed == std::errc() &&
                            end == s.data() + s.size() && std::fabs(d) >= 0x1p53 &&
                            d >= static_cast<double>(min_value) && d <= static_cast<double>(max_value);
    throw_input_error("zerotrain {}: --{} must be an integer in [{}, {}] (got '{}'{})", command, name, min_value,
                      max_value, s, past_exact ? ": exponent form is taken below 2^53 only; write it in digits" : "");
  }
  return v;
}

}  // namespace

int ArgParser::get_int(const std::string& name, int fallback, int min_value, int max_value) const {
  return has(name) ? parse_integer(command_, name, get(name), min_value, max_value) : fallback;
}

std::int64_t ArgParser::get_int64(const std::string& name, std::int64_t fallback, std::int64_t min_value,
                                  std::int64_t max_value) const {
  return has(name) ? parse_integer(command_, name, get(name), min_value, max_value) : fallback;
}

std::string ArgParser::help_text() const {
  std::string out = fmt::format("usage: zerotrain {} [flags]\n\n{}\n\nflags:\n", command_, summary_);
  for (const Flag& f : flags_) {
    const std::string lhs = f.takes_value ? fmt::format("--{} {}", f.name, f.metavar) : "--" + f.name;
    out += fmt::format("  {:<28} {}{}{}\n", lhs, f.help, f.required ? " (required)" : "",
                       f.repeatable ? " (repeatable)" : "");
  }
  out += fmt::format("  {:<28} {}\n", "--help", "show this help");
  return out;
}

bool decimal_start(const std::string& text) {
  return !text.empty() && (std::isdigit(static_cast<unsigned char>(text[0])) || text[0] == '.') &&
         text.find_first_of("xX") == std::string::npos;
}

}  // namespace zt::cli
