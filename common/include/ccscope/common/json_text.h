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

// The nesting depth check, before the parser: one pass over the text counting
// the brackets outside strings (and outside comments when they are allowed).
// nlohmann's depth callback would do the same but switches the whole parse to
// its callback parser, some 10x slower on large documents (minutes under ASan).
// Malformed text is left to the parser's own message.
inline void check_json_depth(std::string_view text, bool ignore_comments) {
  int depth = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '"') {
      for (++i; i < text.size() && text[i] != '"'; ++i)
        if (text[i] == '\\') ++i;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth)
        throw JsonLimitError("nested deeper than " + std::to_string(kMaxJsonDepth) +
                             " levels: not a JSON document ccscope reads");
    } else if (c == ']' || c == '}') {
      --depth;
    } else if (ignore_comments && c == '/' && i + 1 < text.size()) {
      if (text[i + 1] == '/') {
        const size_t eol = text.find('\n', i);
        i = eol == std::string_view::npos ? text.size() : eol;
      } else if (text[i + 1] == '*') {
        const size_t close = text.find("*/", i + 2);
        i = close == std::string_view::npos ? text.size() : close + 1;
      }
    }
  }
}

// json::parse within the limits: throws JsonLimitError, or nlohmann's
// parse_error / out_of_range as json::parse does. `also` (optional) is a
// parser callback of the caller's.
template <typename Json = nlohmann::json, typename Callback = std::nullptr_t>
Json parse_json_text(std::string_view text, bool ignore_comments = false, Callback also = nullptr) {
  if (text.size() > kMaxJsonBytes)
    throw JsonLimitError("larger than " + std::to_string(kMaxJsonBytes >> 20) +
                         " MiB: not a JSON document ccscope reads");
  check_json_depth(text, ignore_comments);
  if constexpr (std::is_same_v<Callback, std::nullptr_t>) {
    return Json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/true,
                       ignore_comments);
  } else {
    return Json::parse(text.begin(), text.end(), also, /*allow_exceptions=*/true, ignore_comments);
  }
}

}  // namespace ccscope
