// Sandbox name rules: 1-63 characters of a-z, 0-9 and '-', not starting or ending with
// '-' (a DNS label, so that a name can appear in a preview host name).
#pragma once

#include <string_view>

#include "wire/errors.hpp"

namespace warren::wire {

inline constexpr std::size_t max_sandbox_name_bytes = 63;

/// Returns an `invalid_name` error that quotes the offending input (escaped and shortened)
/// and states the rule, or an empty error when `name` is valid.
error validate_sandbox_name(std::string_view name);

/// The domain of preview host names: a lower-case DNS name (e.g. localhost), at most 200
/// characters. An `invalid_argument` error otherwise.
error validate_preview_domain(std::string_view domain);

}  // namespace warren::wire
