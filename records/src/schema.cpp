// The codec of cells (number text, integers, flags) and CSV text.
#include "ccscope/records/schema.h"

#include <array>
#include <charconv>
#include <cmath>
#include <system_error>

#include "cells.h"

namespace ccscope::records {

std::string_view name(FieldType type) {
  switch (type) {
    case FieldType::kText:
      return "text";
    case FieldType::kInteger:
      return "integer";
    case FieldType::kNumber:
      return "number";
    case FieldType::kFlag:
      return "flag";
    case FieldType::kList:
      return "list";
    case FieldType::kMap:
      return "map";
  }
  return "text";
}

int schema_version(std::string_view id, std::string_view schema) {
  if (!id.starts_with(schema) || id.size() <= schema.size() + 1 || id[schema.size()] != '/')
    return 0;
  const std::string digits(id.substr(schema.size() + 1));
  try {
    return static_cast<int>(cells::parse_integer(digits, 1, 1000000));
  } catch (const FieldError&) {
    throw FieldError("schema '" + std::string(id) + "' has no version number after '/'");
  }
}

std::string number_text(double value) {
  // The shortest text that reads back to the same double.
  std::array<char, 64> buffer{};
  auto [end, ec] = std::to_chars(buffer.data(), buffer.data() + buffer.size(), value);
  if (ec != std::errc()) return std::to_string(value);
  return std::string(buffer.data(), end);
}

namespace cells {

double parse_number(const std::string& text) {
  double v = 0;
  const char* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, v);
  if (ec != std::errc() || p != end || !std::isfinite(v))
    throw FieldError("'" + text + "' is not a finite number");
  return v;
}

long long parse_integer(const std::string& text, long long min_value, long long max_value) {
  long long v = 0;
  const char* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, v);
  if (ec == std::errc::result_out_of_range ||
      (ec == std::errc() && p == end && (v < min_value || v > max_value)))
    throw FieldError(text + " is out of range (" + std::to_string(min_value) + " to " +
                     std::to_string(max_value) + ")");
  if (ec != std::errc() || p != end) throw FieldError("'" + text + "' is not an integer");
  return v;
}

bool parse_flag(const std::string& text) {
  if (text == "1" || text == "true") return true;
  if (text == "0" || text == "false") return false;
  throw FieldError("'" + text + "' is not 1 or 0");
}

}  // namespace cells

// ------------------------------------------------------------------ CSV

std::string csv_line(const std::vector<std::string>& fields) {
  std::string line;
  for (size_t i = 0; i < fields.size(); ++i) {
    if (i) line += ',';
    const std::string& field = fields[i];
    if (field.find_first_of(",\"\r\n") == std::string::npos) {
      line += field;
      continue;
    }
    line += '"';
    for (char c : field) {
      if (c == '"') line += '"';
      line += c;
    }
    line += '"';
  }
  // LF, not RFC 4180's CRLF: the files are read on Unix, and every CSV reader
  // accepts it. CR and LF inside a field are quoted.
  line += '\n';
  return line;
}

namespace {

std::string join(const std::vector<std::string>& parts) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? ";" : "") + parts[i];
  return out;
}

std::vector<std::string> split(std::string_view text) {
  std::vector<std::string> parts;
  if (text.empty()) return parts;
  size_t start = 0;
  for (size_t p; (p = text.find(';', start)) != std::string_view::npos; start = p + 1)
    parts.emplace_back(text.substr(start, p - start));
  parts.emplace_back(text.substr(start));
  return parts;
}

}  // namespace

std::string csv_text(const Cell& cell, FieldType type) {
  if (!cell.present) return "";
  if (type == FieldType::kList) return join(cell.items);
  if (type == FieldType::kMap) {
    std::vector<std::string> pairs;
    for (const auto& [k, v] : cell.entries) pairs.push_back(k + "=" + v);
    return join(pairs);
  }
  return cell.text;
}

Cell cell_from_csv(std::string_view text, FieldType type) {
  Cell cell;
  cell.present = !text.empty();
  if (!cell.present) return cell;
  if (type == FieldType::kList) {
    cell.items = split(text);
  } else if (type == FieldType::kMap) {
    for (const auto& pair : split(text)) {
      const size_t eq = pair.find('=');
      cell.entries.emplace_back(pair.substr(0, eq),
                                eq == std::string::npos ? "" : pair.substr(eq + 1));
    }
  } else {
    cell.text = std::string(text);
  }
  return cell;
}

std::vector<CsvRecordLine> parse_csv(std::string_view text) {
  std::vector<CsvRecordLine> rows;
  CsvRecordLine row;
  std::string field;
  size_t line = 1;
  size_t i = 0;
  bool row_started = false;
  auto end_field = [&] {
    row.fields.push_back(std::move(field));
    field.clear();
  };
  auto end_row = [&] {
    end_field();
    // A blank line (one empty field) is not a row.
    if (!(row.fields.size() == 1 && row.fields[0].empty())) rows.push_back(std::move(row));
    row = CsvRecordLine{};
    row_started = false;
  };
  while (i < text.size()) {
    if (!row_started) {
      row.line = line;
      row_started = true;
    }
    const char c = text[i];
    if (c == '"' && field.empty()) {
      const size_t opened_on = line;
      ++i;
      for (;;) {
        if (i >= text.size()) throw CsvError(opened_on, "a quoted field is not closed");
        if (text[i] == '"') {
          if (i + 1 < text.size() && text[i + 1] == '"') {
            field += '"';
            i += 2;
            continue;
          }
          ++i;
          break;
        }
        if (text[i] == '\n') ++line;
        field += text[i++];
      }
      // Text after a closing quote joins the field (as most readers do).
      continue;
    }
    if (c == ',') {
      end_field();
      ++i;
    } else if (c == '\n' || (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n')) {
      end_row();
      i += c == '\r' ? 2 : 1;
      ++line;
    } else {
      field += c;
      ++i;
    }
  }
  if (row_started) end_row();
  return rows;
}

}  // namespace ccscope::records
