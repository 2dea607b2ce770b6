#pragma once
// Text helpers the readers share: ASCII case folding and trimming, independent
// of the C locale (file formats and environment values are ASCII).
#include <string>
#include <string_view>
#include <vector>

namespace ccscope {

// `text` with A-Z folded to a-z; every other byte as it is.
std::string ascii_lower(std::string_view text);

// `text` without leading and trailing blanks (space, \t, \n, \r, \v, \f).
std::string_view trimmed(std::string_view text);

// The items of `text` between `separator`s, empty ones included ("a,,b" gives
// "a", "", "b"; "" gives one empty item), as written: the caller trims or skips.
std::vector<std::string> split(std::string_view text, char separator);

}  // namespace ccscope
