// Summary table and JSON / Markdown / HTML reports.
#pragma once
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "runner.hpp"

namespace conf {

struct Report {
  std::string command;
  std::string plugin_path;
  std::vector<std::pair<std::string, std::string>> plugin;  // name, version, abi, features, devices...
  std::vector<std::string> suites;
  std::vector<Record> records;
  double seconds = 0;
};

struct Counts {
  long pass = 0, fail = 0, skip = 0, unsupported = 0;
  void add(const std::string& status);
};

// op -> counts, dtype -> counts (ops suite records).
std::map<std::string, Counts> op_matrix(const std::vector<Record>& records);
std::map<std::string, Counts> dtype_coverage(const std::vector<Record>& records);

std::string summary_text(const Report& r);  // table + failures + last line
bool write_json(const Report& r, const std::string& path);
bool write_markdown(const Report& r, const std::string& path);
bool write_html(const Report& r, const std::string& path);

}  // namespace conf
