// The one JSON string quoting used for machine-readable output (journal tools, CLI --json).
#pragma once

#include <string>
#include <string_view>

namespace warren::wire {

/// `s` as a JSON string literal, quotes included; control characters escaped.
std::string json_quote(std::string_view s);

}  // namespace warren::wire
