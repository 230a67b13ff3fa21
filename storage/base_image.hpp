// The base image every sandbox's root overlay sits on: a generated skeleton (an /etc that
// names no host secret, symlinks bin -> usr/bin ..., empty /root /home /workspace), never the
// host's `/` itself. The host's /usr is mounted over the skeleton's usr/ by warren-init as a
// second overlay, so the skeleton and /usr never nest (overlay refuses nested lowers).
#pragma once

#include <string>

#include "wire/errors.hpp"

namespace warren::storage {

/// Builds the skeleton at `dir` if it is not there yet (idempotent; built in a temporary
/// directory and renamed into place, so a crash never leaves a half-built skeleton).
/// `host_etc` is where the few copied, non-secret files come from. Default: "/etc".
error ensure_base_image(const std::string& dir, const std::string& host_etc = "/etc");

}  // namespace warren::storage
