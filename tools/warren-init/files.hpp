// The Files server of a sandbox (files.cpp); the agent hands it out through Agent.files().
#pragma once

#include "wire/files.capnp.h"

namespace warren::init {

wire::Files::Client make_files();

}  // namespace warren::init
