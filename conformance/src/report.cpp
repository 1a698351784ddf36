#include "report.hpp"

#include "utf8.hpp"

#include <cstdio>
#include <fstream>
#include <sstream>

namespace conf {

void Counts::add(const std::string& s) {
  if (s == "pass") ++pass;
  else if (s == "fail") ++fail;
  else if (s == "unsupported") ++unsupported;
  else ++skip;
}

std::map<std::string, Counts> op_matrix(const std::vector<Record>& records) {
  std::map<std::string, Counts> m;
  for (auto& r : records)
    if (r.suite == "ops" && !r.op.empty()) m[r.op].add(r.status);
  return m;
}

std::map<std::string, Counts> dtype_coverage(const std::vector<Record>& records) {
  std::map<std::string, Counts> m;
  for (auto& r : records)
    if (r.suite == "ops" && !r.dtype.empty()) m[r.dtype].add(r.status);
  return m;
}

namespace {

Counts total(const std::vector<Record>& rs, const std::string& suite = "") {
  Counts c;
  for (auto& r : rs)
    if (suite.empty() || r.suite == suite) c.add(r.status);
  return c;
}

std::string pad(const std::string& s, size_t w, bool right = false) {
  if (s.size() >= w) return s;
  return right ? std::string(w - s.size(), ' ') + s : s + std::string(w - s.size(), ' ');
}

// Plugin text can be anything: malformed UTF-8 becomes U+FFFD, so the report always parses.
std::string json_str(const std::string& raw) {
  const std::string s = to_valid_utf8(raw);
  std::string o = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': o += "\\\""; break;
      case '\\': o += "\\\\"; break;
      case '\n': o += "\\n"; break;
      case '\r': o += "\\r"; break;
      case '\t': o += "\\t"; break;
      default:
        if (c < 0x20) {
          char b[8];
          std::snprintf(b, sizeof b, "\\u%04x", c);
          o += b;
        } else {
          o += char(c);
        }
    }
  }
  return o + "\"";
}

std::string html(const std::string& raw) {
  const std::string s = to_valid_utf8(raw);
  std::string o;
  for (char c : s) {
    switch (c) {
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '&': o += "&amp;"; break;
      case '"': o += "&quot;"; break;
      default: o += c;
    }
  }
  return o;
}

std::string md(const std::string& raw) {
  const std::string s = to_valid_utf8(raw);
  std::string o;
  for (char c : s) {
    if (c == '|') o += "\\|";
    else if (c == '\n') o += ' ';
    else o += c;
  }
  return o;
}

std::string counts_json(const Counts& c) {
  return "{\"pass\": " + std::to_string(c.pass) + ", \"fail\": " + std::to_string(c.fail) + ", \"unsupported\": " +
         std::to_string(c.unsupported) + ", \"skip\": " + std::to_string(c.skip) + "}";
}

std::string last_line(const Counts& c) {
  return std::to_string(c.pass) + " passed, " + std::to_string(c.fail) + " failed, " + std::to_string(c.skip + c.unsupported) +
         " skipped";
}

bool save(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  if (!f) return false;
  f << text;
  return bool(f);
}

}  // namespace

std::string summary_text(const Report& r) {
  std::ostringstream o;
  o << "\n" << pad("suite", 10) << pad("passed", 9, true) << pad("failed", 9, true) << pad("skipped", 9, true)
    << pad("unsupported", 13, true) << "\n";
  for (auto& s : r.suites) {
    Counts c = total(r.records, s);
    o << pad(s, 10) << pad(std::to_string(c.pass), 9, true) << pad(std::to_string(c.fail), 9, true)
      << pad(std::to_string(c.skip), 9, true) << pad(std::to_string(c.unsupported), 13, true) << "\n";
  }
  Counts t = total(r.records);
  o << pad("total", 10) << pad(std::to_string(t.pass), 9, true) << pad(std::to_string(t.fail), 9, true)
    << pad(std::to_string(t.skip), 9, true) << pad(std::to_string(t.unsupported), 13, true) << "\n";
  bool any = false;
  for (auto& rec : r.records)
    if (rec.status == "fail") {
      if (!any) o << "\nFailures:\n";
      any = true;
      o << "  FAIL " << rec.suite << "/" << rec.check << ": " << rec.message << "\n";
    }
  // Skips that explain a whole suite (no device, no host) are worth showing once.
  std::map<std::string, long> reasons;
  for (auto& rec : r.records)
    if (rec.status == "skip" && (rec.message.rfind("no device", 0) == 0 || rec.message.rfind("not run", 0) == 0))
      reasons[rec.suite + ": " + rec.message]++;
  if (!reasons.empty()) {
    o << "\nSkipped:\n";
    for (auto& [m, n] : reasons) o << "  " << n << " x " << m << "\n";
  }
  o << "\n" << last_line(t) << "\n";
  return o.str();
}

bool write_json(const Report& r, const std::string& path) {
  std::ostringstream o;
  o << "{\n  \"tool\": \"nxrt-conformance\",\n  \"command\": " << json_str(r.command) << ",\n";
  o << "  \"plugin\": {\"path\": " << json_str(r.plugin_path);
  for (auto& [k, v] : r.plugin) o << ", " << json_str(k) << ": " << json_str(v);
  o << "},\n  \"suites\": [";
  for (size_t i = 0; i < r.suites.size(); ++i) o << (i ? ", " : "") << json_str(r.suites[i]);
  Counts t = total(r.records);
  o << "],\n  \"summary\": {\"passed\": " << t.pass << ", \"failed\": " << t.fail << ", \"skipped\": " << t.skip + t.unsupported
    << ", \"unsupported\": " << t.unsupported << ", \"seconds\": " << r.seconds << ", \"verdict\": \"" << (t.fail ? "fail" : "pass")
    << "\"},\n";
  o << "  \"per_suite\": {";
  for (size_t i = 0; i < r.suites.size(); ++i)
    o << (i ? ", " : "") << json_str(r.suites[i]) << ": " << counts_json(total(r.records, r.suites[i]));
  o << "},\n  \"op_matrix\": {";
  bool first = true;
  for (auto& [op, c] : op_matrix(r.records)) {
    o << (first ? "\n    " : ",\n    ") << json_str(op) << ": " << counts_json(c);
    first = false;
  }
  o << "},\n  \"dtype_coverage\": {";
  first = true;
  for (auto& [d, c] : dtype_coverage(r.records)) {
    o << (first ? "\n    " : ",\n    ") << json_str(d) << ": " << counts_json(c);
    first = false;
  }
  o << "},\n  \"checks\": [";
  for (size_t i = 0; i < r.records.size(); ++i) {
    auto& c = r.records[i];
    char secs[32];
    std::snprintf(secs, sizeof secs, "%.3f", c.seconds);
    o << (i ? ",\n    " : "\n    ") << "{\"suite\": " << json_str(c.suite) << ", \"check\": " << json_str(c.check)
      << ", \"status\": " << json_str(c.status) << ", \"message\": " << json_str(c.message);
    if (!c.op.empty()) o << ", \"op\": " << json_str(c.op);
    if (!c.dtype.empty()) o << ", \"dtype\": " << json_str(c.dtype);
    o << ", \"seconds\": " << secs << "}";
  }
  o << "\n  ]\n}\n";
  return save(path, o.str());
}

bool write_markdown(const Report& r, const std::string& path) {
  std::ostringstream o;
  Counts t = total(r.records);
  o << "# nxrt conformance report\n\n";
  o << "- plugin: `" << r.plugin_path << "`\n";
  for (auto& [k, v] : r.plugin) o << "- " << k << ": " << md(v) << "\n";
  o << "- verdict: **" << (t.fail ? "FAIL" : "PASS") << "** (" << last_line(t) << ")\n\n";
  o << "## Summary\n\n| suite | passed | failed | skipped | unsupported |\n|---|---:|---:|---:|---:|\n";
  for (auto& s : r.suites) {
    Counts c = total(r.records, s);
    o << "| " << s << " | " << c.pass << " | " << c.fail << " | " << c.skip << " | " << c.unsupported << " |\n";
  }
  auto matrix = op_matrix(r.records);
  if (!matrix.empty()) {
    o << "\n## Operators\n\n| op | pass | fail | unsupported | skipped |\n|---|---:|---:|---:|---:|\n";
    for (auto& [op, c] : matrix)
      o << "| " << md(op) << " | " << c.pass << " | " << c.fail << " | " << c.unsupported << " | " << c.skip << " |\n";
    o << "\n## Element types\n\n| dtype | pass | fail | unsupported | skipped |\n|---|---:|---:|---:|---:|\n";
    for (auto& [d, c] : dtype_coverage(r.records))
      o << "| " << d << " | " << c.pass << " | " << c.fail << " | " << c.unsupported << " | " << c.skip << " |\n";
  }
  o << "\n## Checks\n\n| suite | check | status | message |\n|---|---|---|---|\n";
  for (auto& c : r.records)
    o << "| " << c.suite << " | " << md(c.check) << " | " << c.status << " | " << md(c.message) << " |\n";
  return save(path, o.str());
}

bool write_html(const Report& r, const std::string& path) {
  std::ostringstream o;
  Counts t = total(r.records);
  o << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>nxrt conformance: "
    << html(r.plugin_path) << "</title>\n<style>\n"
    << "body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2em;color:#1d1d1f;max-width:1300px}\n"
    << "h1{font-size:1.5em}h2{font-size:1.2em;margin-top:2em;border-bottom:1px solid #ddd;padding-bottom:.2em}\n"
    << "table{border-collapse:collapse;margin:.5em 0;font-size:.9em}\n"
    << "th,td{border:1px solid #d0d0d0;padding:.25em .6em;text-align:left;vertical-align:top}\n"
    << "th{background:#f0f0f3;position:sticky;top:0}td.n{text-align:right;font-variant-numeric:tabular-nums}\n"
    << "tr:nth-child(even) td{background:#fafafa}\n"
    << ".pass{color:#0a7a2f;font-weight:600}.fail{color:#b00020;font-weight:600}.skip,.unsupported{color:#8a6d00}\n"
    << "td.pass{background:#e8f6ec!important}td.fail{background:#fde7ea!important}td.unsupported,td.skip{background:#fff8e1!important}\n"
    << ".verdict{font-size:1.3em;padding:.3em .8em;border-radius:6px;display:inline-block}\n"
    << ".verdict.pass{background:#e8f6ec}.verdict.fail{background:#fde7ea}\n"
    << "code{background:#f3f3f3;padding:0 .3em;border-radius:3px}\n"
    << "</style></head><body>\n";
  o << "<h1>nxrt conformance report</h1>\n<p class=\"verdict " << (t.fail ? "fail\">FAIL" : "pass\">PASS") << "</p> "
    << html(last_line(t)) << "\n";
  o << "<table><tr><th>plugin</th><td><code>" << html(r.plugin_path) << "</code></td></tr>\n";
  for (auto& [k, v] : r.plugin) o << "<tr><th>" << html(k) << "</th><td>" << html(v) << "</td></tr>\n";
  o << "<tr><th>command</th><td><code>" << html(r.command) << "</code></td></tr></table>\n";
  o << "<h2>Summary</h2>\n<table><tr><th>suite</th><th>passed</th><th>failed</th><th>skipped</th><th>unsupported</th></tr>\n";
  for (auto& s : r.suites) {
    Counts c = total(r.records, s);
    o << "<tr><td>" << html(s) << "</td><td class=\"n\">" << c.pass << "</td><td class=\"n" << (c.fail ? " fail" : "") << "\">"
      << c.fail << "</td><td class=\"n\">" << c.skip << "</td><td class=\"n\">" << c.unsupported << "</td></tr>\n";
  }
  o << "</table>\n";
  auto cell = [](long n, const char* cls) {
    return std::string("<td class=\"n") + (n ? std::string(" ") + cls : "") + "\">" + std::to_string(n) + "</td>";
  };
  auto matrix = op_matrix(r.records);
  if (!matrix.empty()) {
    o << "<h2>Operators</h2>\n<table><tr><th>op</th><th>pass</th><th>fail</th><th>unsupported</th><th>skipped</th></tr>\n";
    for (auto& [op, c] : matrix)
      o << "<tr><td>" << html(op) << "</td>" << cell(c.pass, "pass") << cell(c.fail, "fail") << cell(c.unsupported, "unsupported")
        << cell(c.skip, "skip") << "</tr>\n";
    o << "</table>\n<h2>Element types</h2>\n<table><tr><th>dtype</th><th>pass</th><th>fail</th><th>unsupported</th><th>skipped</th></tr>\n";
    for (auto& [d, c] : dtype_coverage(r.records))
      o << "<tr><td>" << html(d) << "</td>" << cell(c.pass, "pass") << cell(c.fail, "fail") << cell(c.unsupported, "unsupported")
        << cell(c.skip, "skip") << "</tr>\n";
    o << "</table>\n";
  }
  o << "<h2>Checks</h2>\n<table><tr><th>suite</th><th>check</th><th>status</th><th>seconds</th><th>message</th></tr>\n";
  for (auto& c : r.records) {
    char secs[32];
    std::snprintf(secs, sizeof secs, "%.2f", c.seconds);
    o << "<tr><td>" << html(c.suite) << "</td><td>" << html(c.check) << "</td><td class=\"" << html(c.status) << "\">"
      << html(c.status) << "</td><td class=\"n\">" << secs << "</td><td>" << html(c.message) << "</td></tr>\n";
  }
  o << "</table>\n</body></html>\n";
  return save(path, o.str());
}

}  // namespace conf
