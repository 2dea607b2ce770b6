// The HTML and markdown reports: the page parses as XML, has the right charts,
// series and points, escapes untrusted strings, references nothing external;
// the markdown tables have one row per size. `reports_report_tests
// --write-sample FILE` writes the 3-collective, 4-run sample page instead of
// running the tests (used by the headless Chromium test).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "ccscope/reports/html_report.h"
#include "ccscope/reports/loaded_results.h"
#include "ccscope/reports/markdown_report.h"

namespace ccscope::reports {
namespace {

// ---- a small XML well-formedness checker that builds a tree ----

struct Element {
  std::string name;
  std::map<std::string, std::string> attrs;
  std::vector<std::unique_ptr<Element>> children;
  std::string text;  // decoded character data directly inside this element

  bool has_class(const std::string& cls) const {
    auto it = attrs.find("class");
    if (it == attrs.end()) return false;
    std::istringstream words(it->second);
    for (std::string w; words >> w;)
      if (w == cls) return true;
    return false;
  }
  // Every descendant (not this element) with the given tag name, in document order.
  void find_all(const std::string& tag, std::vector<const Element*>& out) const {
    for (const auto& c : children) {
      if (c->name == tag) out.push_back(c.get());
      c->find_all(tag, out);
    }
  }
  std::vector<const Element*> all(const std::string& tag, const std::string& cls = "") const {
    std::vector<const Element*> found, out;
    find_all(tag, found);
    for (const Element* e : found)
      if (cls.empty() || e->has_class(cls)) out.push_back(e);
    return out;
  }
  std::string all_text() const {
    std::string t = text;
    for (const auto& c : children) t += c->all_text();
    return t;
  }
};

class XmlParser {
 public:
  explicit XmlParser(const std::string& s) : s_(s) {}

  std::unique_ptr<Element> parse() {
    skip_misc();
    if (starts("<!DOCTYPE")) {
      skip_past(">");
      skip_misc();
    }
    auto root = element();
    skip_misc();
    if (i_ != s_.size()) fail("content after the root element");
    return root;
  }

 private:
  [[noreturn]] void fail(const std::string& what) {
    throw std::runtime_error("offset " + std::to_string(i_) + ": " + what + " near '" +
                             s_.substr(i_, 40) + "'");
  }
  bool starts(const char* p) const { return s_.compare(i_, std::strlen(p), p) == 0; }
  void skip_past(const char* p) {
    size_t j = s_.find(p, i_);
    if (j == std::string::npos) fail(std::string("missing ") + p);
    i_ = j + std::strlen(p);
  }
  void skip_ws() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  void skip_misc() {
    for (;;) {
      skip_ws();
      if (starts("<!--")) {
        skip_past("-->");
      } else if (starts("<?")) {
        skip_past("?>");
      } else {
        return;
      }
    }
  }
  std::string name() {
    size_t b = i_;
    while (i_ < s_.size() &&
           (std::isalnum(static_cast<unsigned char>(s_[i_])) || std::strchr("-_:.", s_[i_])))
      ++i_;
    if (b == i_) fail("expected a name");
    return s_.substr(b, i_ - b);
  }
  // Character data up to the next `stop`, with the XML entities decoded.
  std::string chars(char stop) {
    std::string out;
    while (i_ < s_.size() && s_[i_] != stop) {
      char c = s_[i_];
      if (c == '<') fail("'<' in character data");
      if (c == '&') {
        size_t semi = s_.find(';', i_);
        if (semi == std::string::npos || semi - i_ > 10) fail("bad entity");
        std::string ent = s_.substr(i_ + 1, semi - i_ - 1);
        static const std::map<std::string, std::string> kNamed = {
            {"amp", "&"}, {"lt", "<"}, {"gt", ">"}, {"quot", "\""}, {"apos", "'"}};
        if (kNamed.count(ent)) {
          out += kNamed.at(ent);
        } else if (ent.size() > 1 && ent[0] == '#') {
          long cp = ent[1] == 'x' ? std::strtol(ent.c_str() + 2, nullptr, 16)
                                  : std::strtol(ent.c_str() + 1, nullptr, 10);
          if (cp < 0x20 || cp > 0x7e) fail("only ASCII numeric entities are decoded here");
          out += static_cast<char>(cp);
        } else {
          fail("unknown entity &" + ent + ";");
        }
        i_ = semi + 1;
        continue;
      }
      if (static_cast<unsigned char>(c) < 0x20 && c != '\n' && c != '\r' && c != '\t')
        fail("control character");
      out += c;
      ++i_;
    }
    return out;
  }
  std::unique_ptr<Element> element() {
    if (!starts("<")) fail("expected '<'");
    ++i_;
    auto e = std::make_unique<Element>();
    e->name = name();
    for (;;) {
      skip_ws();
      if (starts("/>")) {
        i_ += 2;
        return e;
      }
      if (starts(">")) {
        ++i_;
        break;
      }
      std::string key = name();
      skip_ws();
      if (!starts("=")) fail("expected '=' after attribute " + key);
      ++i_;
      skip_ws();
      if (i_ >= s_.size() || (s_[i_] != '"' && s_[i_] != '\'')) fail("unquoted attribute");
      char q = s_[i_++];
      std::string value = chars(q);
      if (i_ >= s_.size()) fail("unterminated attribute");
      ++i_;
      if (!e->attrs.emplace(key, value).second) fail("duplicate attribute " + key);
    }
    for (;;) {
      e->text += chars('<');
      if (i_ >= s_.size()) fail("unclosed <" + e->name + ">");
      if (starts("</")) {
        i_ += 2;
        std::string end = name();
        if (end != e->name) fail("</" + end + "> closes <" + e->name + ">");
        skip_ws();
        if (!starts(">")) fail("expected '>'");
        ++i_;
        return e;
      }
      if (starts("<!--")) {
        skip_past("-->");
        continue;
      }
      e->children.push_back(element());
    }
  }

  const std::string& s_;
  size_t i_ = 0;
};

std::unique_ptr<Element> parse_xml(const std::string& text) { return XmlParser(text).parse(); }

// ---- synthetic runs ----

// An alpha-beta model: time = alpha + size / beta, busbw = size / time x factor.
LoadedRun synthetic_run(const std::string& path, int ranks, int nodes, double beta_GBps,
                        const std::vector<std::string>& collectives, int sizes,
                        const std::string& host_prefix = "node") {
  LoadedRun run;
  run.path = path;
  run.format = "ccscope-csv";
  RunMetadata& m = run.metadata;
  m.ccscope_version = "0.1.0";
  m.git_commit = "feb18ac";
  m.backend = "nccl";
  m.mpi_library = "Open MPI v4.1.6";
  m.nccl_version = "2.28.3";
  m.cuda_version = "13.0";
  m.ranks = ranks;
  m.nodes = nodes;
  m.ranks_per_node = ranks / nodes;
  for (int r = 0; r < ranks; ++r) {
    m.hosts.push_back(host_prefix + std::to_string(r / m.ranks_per_node + 1));
    m.gpu_names.push_back("NVIDIA H200");
  }
  m.environment = {{"NCCL_DEBUG", "WARN"}, {"NCCL_IB_HCA", "mlx5_0,mlx5_1"}};
  m.command_line = "mpirun -n " + std::to_string(ranks) + " ccscope bench allreduce -b 8 -e 1G";
  m.start_time_utc = "2026-11-30T03:04:05Z";
  m.end_time_utc = "2026-11-30T03:09:05Z";
  int line = 2;
  for (const std::string& collective : collectives)
    for (int e = 0; e < sizes; ++e)
      for (bool in_place : {false, true}) {
        LoadedRecord rec;
        rec.source = path + ":" + std::to_string(line++);
        rec.collective = collective;
        rec.backend = "nccl";
        rec.dtype = "float";
        rec.op = collective == "allgather" ? "none" : "sum";
        rec.in_place = in_place;
        rec.size_bytes = size_t{8} << e;
        rec.ranks = ranks;
        rec.nodes = nodes;
        const double time = 10e-6 + rec.size_bytes / (beta_GBps * 1e9);
        rec.time_s = time;
        rec.algbw_GBps = rec.size_bytes / time / 1e9;
        const double factor =
            collective == "allreduce" ? 2.0 * (ranks - 1) / ranks : double(ranks - 1) / ranks;
        rec.busbw_GBps = *rec.algbw_GBps * factor * (in_place ? 1.02 : 1.0);
        rec.wrong = 0;
        run.records.push_back(rec);
      }
  return run;
}

const std::vector<std::string> kCollectives = {"allreduce", "allgather", "reducescatter"};

// 3 collectives, 4 runs (8, 16, 32 ranks and a second 16-rank run), 8 B .. 1 GiB.
std::vector<LoadedRun> sample_runs() {
  return {synthetic_run("results/h200-1node.csv", 8, 1, 180, kCollectives, 28),
          synthetic_run("results/h200-2node.csv", 16, 2, 90, kCollectives, 28),
          synthetic_run("results/h200-4node.csv", 32, 4, 80, kCollectives, 28),
          synthetic_run("results/h200-2node-nccl2.27.csv", 16, 2, 85, kCollectives, 28, "gpu")};
}

size_t count(const std::string& haystack, const std::string& needle) {
  size_t n = 0;
  for (size_t p = haystack.find(needle); p != std::string::npos; p = haystack.find(needle, p + 1))
    ++n;
  return n;
}

// ---- HTML ----

TEST(HtmlReport, ParsesAsXmlWithOneChartPerCollective) {
  const std::string html = render_html_report(sample_runs(), {});
  std::unique_ptr<Element> root;
  ASSERT_NO_THROW(root = parse_xml(html)) << html.substr(0, 400);
  EXPECT_EQ(root->name, "html");
  const auto charts = root->all("svg", "busbw");
  ASSERT_EQ(charts.size(), 3u);
  for (const Element* chart : charts) {
    const auto series = chart->all("g", "series");
    ASSERT_EQ(series.size(), 8u);  // 4 runs x (out-of-place, in-place)
    for (const Element* s : series) {
      EXPECT_EQ(s->all("polyline").size(), 1u);
      EXPECT_EQ(s->all("circle", "point").size(), 28u);  // one per size
      std::istringstream points(s->all("polyline")[0]->attrs.at("points"));
      int n = 0;
      for (std::string p; points >> p;) ++n;
      EXPECT_EQ(n, 28);
    }
    EXPECT_EQ(chart->all("g", "in-place").size(), 4u);
    EXPECT_EQ(chart->all("g", "legend").size(), 1u);
    EXPECT_EQ(chart->all("g", "legend")[0]->all("text").size(), 8u);
    // Binary size ticks, 8 B .. 1 GiB.
    std::string ticks;
    for (const Element* t : chart->all("text", "x-tick")) ticks += t->all_text() + ";";
    EXPECT_EQ(ticks.rfind("8 B;", 0), 0u) << ticks;
    EXPECT_NE(ticks.find("1 KiB;"), std::string::npos) << ticks;
    EXPECT_NE(ticks.find("1 MiB;"), std::string::npos) << ticks;
    EXPECT_NE(ticks.find("1 GiB;"), std::string::npos) << ticks;
  }
  // Summary: one row per (run, collective, variant); metadata: one <details> per run.
  const auto summary = root->all("table", "summary");
  ASSERT_EQ(summary.size(), 1u);
  EXPECT_EQ(summary[0]->all("tbody")[0]->all("tr").size(), 4u * 3 * 2);
  EXPECT_EQ(root->all("details", "metadata").size(), 4u);
}

TEST(HtmlReport, SpeedupChartWhenRankCountsDiffer) {
  const auto runs = sample_runs();
  std::unique_ptr<Element> root = parse_xml(render_html_report(runs, {}));
  const auto charts = root->all("svg", "scaling");
  ASSERT_EQ(charts.size(), 3u);
  // 8, 16, 32 ranks (the second 16-rank run is not used): 3 points.
  EXPECT_EQ(charts[0]->all("g", "measured")[0]->all("circle", "point").size(), 3u);
  // allreduce at 1 GiB: busbw ratio 16 vs 8 ranks from the model, speed-up x2 on top.
  auto busbw = [](int ranks, double beta) {
    const double size = double(size_t{8} << 27);
    return size / (10e-6 + size / (beta * 1e9)) / 1e9 * 2.0 * (ranks - 1) / ranks;
  };
  const double eff16 = busbw(16, 90) / busbw(8, 180);
  const std::string table = charts[0]->all("title")[0]->all_text();
  EXPECT_NE(table.find("1 GiB"), std::string::npos) << table;
  // after 3 busbw and 3 latency charts
  const auto figure_rows = root->all("figure")[6]->all("tbody")[0]->all("tr");
  ASSERT_EQ(figure_rows.size(), 3u);
  const std::string row16 = figure_rows[1]->all_text();
  char expected[64];
  std::snprintf(expected, sizeof expected, "%.2f%.0f%%", eff16 * 2, eff16 * 100);
  EXPECT_NE(row16.find(expected), std::string::npos) << row16 << " vs " << expected;

  // Rank counts without a common size: said, not drawn.
  LoadedRun other = synthetic_run("other.csv", 4, 1, 10, {"allreduce"}, 3);
  for (auto& rec : other.records) rec.size_bytes *= 3;
  const std::string disjoint = render_html_report({runs[0], other}, {});
  EXPECT_EQ(parse_xml(disjoint)->all("svg", "scaling").size(), 0u);
  EXPECT_NE(disjoint.find("no message size in common"), std::string::npos);

  // One rank count only: no scaling section.
  const std::string one = render_html_report({runs[1], runs[3]}, {});
  EXPECT_EQ(parse_xml(one)->all("svg", "scaling").size(), 0u);
  EXPECT_EQ(one.find("Speed-up"), std::string::npos);
}

TEST(HtmlReport, LatencyChartsErrorBarsAndSpeedupAtTheProbesBuckets) {
  auto runs = sample_runs();
  for (auto& rec : runs[0].records) rec.ci_half_width_percent = 3;  // adaptive sampling's
  std::unique_ptr<Element> root = parse_xml(render_html_report(runs, {}));
  // A log-log time chart beside each busbw chart, decades as ticks.
  const auto latency = root->all("svg", "latency");
  ASSERT_EQ(latency.size(), 3u);
  std::string y_ticks;
  for (const Element* t : latency[0]->all("text", "y-tick")) y_ticks += t->all_text() + ";";
  EXPECT_NE(y_ticks.find("10;100;"), std::string::npos) << y_ticks;
  EXPECT_EQ(latency[0]->all("g", "series")[0]->all("circle", "point").size(), 28u);
  // Error bars where the records carry an interval: run 0's two variants, 28 sizes.
  EXPECT_EQ(latency[0]->all("line", "error-bar").size(), 56u);
  EXPECT_EQ(root->all("svg", "busbw")[0]->all("line", "error-bar").size(), 56u);
  // Speed-up and efficiency at the probe's 1 MiB and 25 MiB buckets.
  const auto buckets = root->all("table", "bucket-scaling");
  ASSERT_EQ(buckets.size(), 6u);  // 3 collectives x 2 bucket sizes
  EXPECT_NE(buckets[0]->all("caption")[0]->all_text().find("1 MiB"), std::string::npos);
  EXPECT_NE(buckets[1]->all("caption")[0]->all_text().find("25 MiB"), std::string::npos);
  auto busbw = [](int ranks, double beta, double size) {
    return size / (10e-6 + size / (beta * 1e9)) / 1e9 * 2.0 * (ranks - 1) / ranks;
  };
  const double mib = 1 << 20;
  const double eff16 = busbw(16, 90, mib) / busbw(8, 180, mib);
  const auto rows = buckets[0]->all("tbody")[0]->all("tr");
  ASSERT_EQ(rows.size(), 3u);
  char expected[64];
  std::snprintf(expected, sizeof expected, "%.2f%.0f%%", eff16 * 2, eff16 * 100);
  EXPECT_NE(rows[1]->all_text().find(expected), std::string::npos) << rows[1]->all_text();
  // 25 MiB lies between the measured 16 and 32 MiB: linear in log2(size).
  const auto at25 = [&](int ranks, double beta) {
    const double w = std::log2(25.0 / 16.0);
    return busbw(ranks, beta, 16 * mib) +
           w * (busbw(ranks, beta, 32 * mib) - busbw(ranks, beta, 16 * mib));
  };
  const double eff25 = at25(16, 90) / at25(8, 180);
  std::snprintf(expected, sizeof expected, "%.2f%.0f%%", eff25 * 2, eff25 * 100);
  const auto rows25 = buckets[1]->all("tbody")[0]->all("tr");
  ASSERT_EQ(rows25.size(), 3u);
  EXPECT_NE(rows25[1]->all_text().find(expected), std::string::npos) << rows25[1]->all_text();
}

TEST(HtmlReport, UntrustedStringsAreEscaped) {
  const std::string evil = "<script>alert(1)</script>";
  LoadedRun run = synthetic_run("dir/<b>\"x\" & 'y'.csv", 2, 1, 10, {"allreduce"}, 4);
  run.metadata.hosts = {evil, "node\x01\xff"};
  run.metadata.gpu_names = {"<img src=x onerror=alert(1)>", "gpu"};
  run.metadata.environment = {{"NCCL_SOCKET_IFNAME", "eth0\"><script>x</script>"},
                              {"UCX_TLS", "a&b"}};
  run.metadata.command_line = "ccscope bench </details></body>";
  run.metadata.mpi_library = "]]> <!-- -->";
  for (auto& rec : run.records) rec.collective = "all<reduce>";
  ReportOptions options;
  options.title = "report & <title>";
  const std::string html = render_html_report({run}, options);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("<img"), std::string::npos);
  EXPECT_EQ(html.find("<b>"), std::string::npos);
  EXPECT_NE(html.find("&lt;script&gt;alert(1)&lt;/script&gt;"), std::string::npos);
  std::unique_ptr<Element> root;
  ASSERT_NO_THROW(root = parse_xml(html));
  EXPECT_EQ(root->all("details").size(), 1u);
  EXPECT_NE(root->all_text().find(evil), std::string::npos);  // shown as text, verbatim
  EXPECT_NE(root->all_text().find("eth0\"><script>x</script>"), std::string::npos);
}

TEST(HtmlReport, NothingExternal) {
  const std::string html = render_html_report(sample_runs(), {});
  std::string rest = html;
  for (size_t p; (p = rest.find("xmlns=\"http://www.w3.org/2000/svg\"")) != std::string::npos;)
    rest.erase(p, 34);
  EXPECT_EQ(rest.find("http://"), std::string::npos);
  EXPECT_EQ(rest.find("https://"), std::string::npos);
  for (const char* s : {"<script", "src=", "href=", "url(", "@import", "<link"})
    EXPECT_EQ(rest.find(s), std::string::npos) << s;
}

TEST(HtmlReport, AbsentFiguresAndEmptyInput) {
  LoadedRun run;
  run.path = "osu.txt";
  LoadedRecord rec;
  rec.collective = "allreduce";
  rec.size_bytes = 1024;
  rec.time_s = 1e-5;  // no busbw: nothing to plot, nothing invented
  run.records.push_back(rec);
  std::unique_ptr<Element> root = parse_xml(render_html_report({run}, {}));
  EXPECT_EQ(root->all("circle").size(), 0u);
  EXPECT_NO_THROW(parse_xml(render_html_report({}, {})));
}

// ---- markdown ----

// Table rows of the section under "## title" (header and rule excluded).
std::vector<std::string> section_rows(const std::string& md, const std::string& title) {
  std::vector<std::string> rows;
  std::istringstream in(md.substr(md.find("\n## " + title + "\n") + 1));
  std::string line;
  std::getline(in, line);  // the heading
  int seen = 0;
  while (std::getline(in, line)) {
    if (line.rfind("## ", 0) == 0) break;
    if (line.rfind("|", 0) == 0 && ++seen > 2) rows.push_back(line);
  }
  return rows;
}

TEST(MarkdownReport, OneTablePerCollectiveAndVariantOneRowPerSize) {
  const std::string md = render_markdown_report(sample_runs(), {});
  EXPECT_EQ(count(md, "\n## "), 6u);
  for (const std::string& c : kCollectives)
    for (const char* variant : {"out-of-place", "in-place"}) {
      const auto rows = section_rows(md, c + ", " + variant);
      ASSERT_EQ(rows.size(), 28u) << c << " " << variant;
      EXPECT_EQ(rows.front().rfind("| 8 B |", 0), 0u) << rows.front();
      EXPECT_EQ(rows.back().rfind("| 1 GiB |", 0), 0u) << rows.back();
      for (const auto& row : rows)
        EXPECT_EQ(count(row, "|"), 9u) << row;  // size, 4 busbw, 3 ratios
    }
}

TEST(MarkdownReport, RatiosAndMissingSizes) {
  LoadedRun a = synthetic_run("a.csv", 2, 1, 10, {"allreduce"}, 3);
  LoadedRun b = a;
  b.path = "b.csv";
  for (auto& rec : b.records) *rec.busbw_GBps *= 0.5;
  b.records.erase(b.records.begin(), b.records.begin() + 2);  // 8 B absent in b
  const auto rows = section_rows(render_markdown_report({a, b}, {}), "allreduce, out-of-place");
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_NE(rows[0].find("| - | - |"), std::string::npos) << rows[0];
  EXPECT_NE(rows[1].find("| 0.500 |"), std::string::npos) << rows[1];
}

TEST(MarkdownReport, UntrustedStringsAreEscaped) {
  LoadedRun run = synthetic_run("x|y.csv", 2, 1, 10, {"allreduce"}, 2);
  run.metadata.hosts = {"<script>alert(1)</script>", "a|b\nc"};
  const std::string md = render_markdown_report({run}, {});
  EXPECT_EQ(count(md, "<"), count(md, "\\<"));  // every '<' escaped
  EXPECT_NE(md.find("\\<script\\>alert(1)\\</script\\>"), std::string::npos);
  // The runs table row keeps its 11 unescaped column separators.
  std::istringstream in(md);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("| 1 |", 0) == 0) {
      EXPECT_EQ(count(line, "|") - count(line, "\\|"), 11u) << line;
    }
}

// U+202E (RIGHT-TO-LEFT OVERRIDE) would show "node\u202egnp.exe" as
// "nodeexe.png": reports show the control as text instead.
TEST(HtmlReport, BidiControlsAreShownNotObeyed) {
  LoadedRun run = synthetic_run("run\xE2\x80\xAE.csv", 2, 1, 10, {"allreduce"}, 2);
  run.metadata.hosts = {"node\xE2\x80\xAEgnp.exe", "n\xE2\x81\xA6x\xD8\x9Cy"};
  const std::string html = render_html_report({run}, {});
  for (const char* raw : {"\xE2\x80\xAE", "\xE2\x81\xA6", "\xD8\x9C"})
    EXPECT_EQ(html.find(raw), std::string::npos) << "a raw bidi control in the HTML";
  EXPECT_NE(html.find("node\\u202egnp.exe"), std::string::npos);
  EXPECT_NE(html.find("n\\u2066x\\u061cy"), std::string::npos);
  const std::string md = render_markdown_report({run}, {});
  EXPECT_EQ(md.find("\xE2\x80\xAE"), std::string::npos);
  EXPECT_NE(md.find("node\\\\u202egnp.exe"), std::string::npos) << md;  // "\" escaped for markdown
}

TEST(HtmlReport, ElementIdsUseASafeAlphabet) {
  LoadedRun run = synthetic_run("x.csv", 2, 1, 10, {"allreduce"}, 2);
  for (auto& rec : run.records) rec.collective = "all reduce\"<b>_x";
  const std::string html = render_html_report({run}, {});
  EXPECT_NE(html.find("id=\"busbw-all_20reduce_22_3cb_3e_5fx\""), std::string::npos) << html;
  std::unique_ptr<Element> root;
  ASSERT_NO_THROW(root = parse_xml(html));
}

// Sizes near 2^63 (the largest a reader accepts): the x axis reaches 2^64,
// past size_t, and is labelled without a 64-bit shift (UBSan caught it).
TEST(HtmlReport, SizesNearTwoToThe63) {
  LoadedRun run = synthetic_run("x.csv", 2, 1, 10, {"allreduce"}, 1);
  for (auto& rec : run.records) rec.size_bytes = static_cast<size_t>(INT64_MAX);
  const std::string html = render_html_report({run}, {});
  EXPECT_NE(html.find("2^64 B"), std::string::npos);
  std::unique_ptr<Element> root;
  ASSERT_NO_THROW(root = parse_xml(html));
}

}  // namespace

// The sample page for the Chromium test and the size measurement.
int write_sample(const char* path) {
  const std::string html = render_html_report(sample_runs(), {"ccscope report: sample"});
  std::ofstream out(path, std::ios::binary);
  out << html;
  out.close();
  if (!out) return 2;
  std::printf("%s: %zu bytes (3 collectives, 4 runs, 28 sizes, both variants)\n", path,
              html.size());
  return 0;
}

}  // namespace ccscope::reports

int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], "--write-sample") == 0)
    return ccscope::reports::write_sample(argv[2]);
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}

namespace ccscope::reports {
namespace {

TEST(HtmlReport, FittedModelRecoversAlphaAndBeta) {
  // The synthetic runs take exactly 10 us + size / (180 GB/s) in run 1.
  const std::string html = render_html_report(sample_runs(), {});
  const auto root = parse_xml(html);
  const auto fit = root->all("table", "fit");
  ASSERT_EQ(fit.size(), 1u);
  const auto rows = fit[0]->all("tbody")[0]->all("tr");
  ASSERT_EQ(rows.size(), 4u * 3 * 2);  // run x collective x variant
  const auto cells = rows[0]->all("td");
  ASSERT_EQ(cells.size(), 6u);
  EXPECT_EQ(cells[3]->all_text(), "10.00");
  EXPECT_EQ(cells[4]->all_text().rfind("180", 0), 0u) << cells[4]->all_text();
}

}  // namespace
}  // namespace ccscope::reports

namespace ccscope::reports {
namespace {

TEST(HtmlReport, TopologyTableSetsEachRunAgainstItsSlowestPath) {
  std::vector<LoadedRun> runs = sample_runs();
  runs[1].metadata.expected_busbw_GBps = 50;
  runs[1].metadata.expected_path = "IB over mlx5_0:1: 400 Gbit/s <between> node0 and node1";
  double best = 0;
  for (const LoadedRecord& r : runs[1].records) best = std::max(best, r.busbw_GBps.value_or(0));
  const std::unique_ptr<Element> root = parse_xml(render_html_report(runs, {}));
  const auto tables = root->all("table", "topology");
  ASSERT_EQ(tables.size(), 1u);
  const auto rows = tables[0]->all("tbody")[0]->all("tr");
  ASSERT_EQ(rows.size(), runs.size());
  const std::string rated = rows[1]->all_text();
  EXPECT_NE(rated.find("IB over mlx5_0:1: 400 Gbit/s <between> node0"), std::string::npos) << rated;
  char percent[32];
  std::snprintf(percent, sizeof percent, "%.1f%%", 100 * best / 50);
  EXPECT_NE(rated.find(percent), std::string::npos) << rated << " wants " << percent;
  EXPECT_NE(rows[0]->all_text().find("not rated"), std::string::npos) << rows[0]->all_text();
}

}  // namespace
}  // namespace ccscope::reports
