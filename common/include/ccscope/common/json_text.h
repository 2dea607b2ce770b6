#pragma once
// The one parser entry of every JSON reader (results, baselines, topologies,
// diag documents, DeepSpeed configs): the same size and depth limits for all,
// so that a hostile file is refused at once instead of exhausting the stack
// or the memory. Header-only: the readers already link nlohmann/json.
#include <cstddef>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace ccscope {

// Deeper than any file ccscope reads or writes (a DeepSpeed config: 4 levels).
inline constexpr int kMaxJsonDepth = 256;
// Larger than any results file worth a JSON document (a sweep of every
// collective and size is a few MiB); nlohmann's tree takes some 10x the text.
inline constexpr size_t kMaxJsonBytes = size_t{256} << 20;

// A document over kMaxJsonBytes or nested deeper than kMaxJsonDepth; what()
// says which, without a file name (the reader adds its own).
class JsonLimitError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// json::parse within the limits: throws JsonLimitError, or nlohmann's
// parse_error / out_of_range as json::parse does. `also` (optional) is a
// parser callback of the caller's, called after the depth check.
template <typename Json = nlohmann::json, typename Callback = std::nullptr_t>
Json parse_json_text(std::string_view text, bool ignore_comments = false, Callback also = nullptr) {
  if (text.size() > kMaxJsonBytes)
    throw JsonLimitError("larger than " + std::to_string(kMaxJsonBytes >> 20) +
                         " MiB: not a JSON document ccscope reads");
  const auto limit = [&also](int depth, typename Json::parse_event_t event, Json& parsed) {
    const bool opens =
        event == Json::parse_event_t::object_start || event == Json::parse_event_t::array_start;
    // `depth` counts the containers open around this one.
    if (opens && depth >= kMaxJsonDepth)
      throw JsonLimitError("nested deeper than " + std::to_string(kMaxJsonDepth) +
                           " levels: not a JSON document ccscope reads");
    if constexpr (std::is_same_v<Callback, std::nullptr_t>) {
      (void)parsed;
      return true;
    } else {
      return also(depth, event, parsed);
    }
  };
  return Json::parse(text.begin(), text.end(), limit, /*allow_exceptions=*/true, ignore_comments);
}

}  // namespace ccscope
