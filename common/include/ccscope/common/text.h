#pragma once
// Text helpers the readers share: ASCII case folding and trimming, independent
// of the C locale (file formats and environment values are ASCII).
#include <string>
#include <string_view>

namespace ccscope {

// `text` with A-Z folded to a-z; every other byte as it is.
std::string ascii_lower(std::string_view text);

// `text` without leading and trailing blanks (space, \t, \n, \r, \v, \f).
std::string_view trimmed(std::string_view text);

}  // namespace ccscope
