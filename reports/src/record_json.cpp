#include "record_json.h"

#include <cmath>

#include "ccscope/records/schema.h"

namespace ccscope::reports {

using nlohmann::json;
using records::Cell;
using records::FieldError;
using records::FieldType;

json json_of(const Cell& cell, FieldType type) {
  if (!cell.present && type != FieldType::kText && type != FieldType::kList &&
      type != FieldType::kMap)
    return nullptr;
  switch (type) {
    case FieldType::kText:
      return cell.text;
    case FieldType::kInteger:
      // Integers are written exactly (an int64 does not fit a double).
      try {
        return std::stoll(cell.text);
      } catch (const std::exception&) {
        return cell.text;
      }
    case FieldType::kNumber:
      return std::stod(cell.text);
    case FieldType::kFlag:
      return cell.text == "1";
    case FieldType::kList:
      return cell.items;
    case FieldType::kMap: {
      json out = json::object();
      for (const auto& [k, v] : cell.entries) out[k] = v;
      return out;
    }
  }
  return cell.text;
}

Cell cell_of_json(const json& value, FieldType type) {
  Cell cell;
  if (value.is_null()) return cell;
  cell.present = true;
  const auto refuse = [&](const char* expected) -> Cell {
    throw FieldError(std::string("expected ") + expected + ", found " + value.dump());
  };
  switch (type) {
    case FieldType::kText:
      if (!value.is_string()) return refuse("a string");
      cell.text = value.get<std::string>();
      cell.present = !cell.text.empty();
      return cell;
    case FieldType::kInteger:
      if (value.is_number_unsigned()) {
        cell.text = std::to_string(value.get<unsigned long long>());
      } else if (value.is_number_integer()) {
        cell.text = std::to_string(value.get<long long>());
      } else if (value.is_number_float() && std::floor(value.get<double>()) == value.get<double>() &&
                 std::fabs(value.get<double>()) < 9e18) {
        cell.text = std::to_string(static_cast<long long>(value.get<double>()));
      } else {
        return refuse("an integer");
      }
      return cell;
    case FieldType::kNumber:
      if (!value.is_number()) return refuse("a number");
      cell.text = records::number_text(value.get<double>());
      return cell;
    case FieldType::kFlag:
      if (!value.is_boolean()) return refuse("true or false");
      cell.text = value.get<bool>() ? "1" : "0";
      return cell;
    case FieldType::kList:
      if (!value.is_array()) return refuse("an array of strings");
      for (const auto& item : value) {
        if (!item.is_string()) return refuse("an array of strings");
        cell.items.push_back(item.get<std::string>());
      }
      cell.present = !cell.items.empty();
      return cell;
    case FieldType::kMap:
      if (!value.is_object()) return refuse("an object");
      for (const auto& [k, v] : value.items())
        cell.entries.emplace_back(k, v.is_string() ? v.get<std::string>() : v.dump());
      cell.present = !cell.entries.empty();
      return cell;
  }
  return cell;
}

}  // namespace ccscope::reports
