// The sandbox actor: one per running (or recently used) sandbox incarnation. It owns the
// sandbox's journal stream and state, and drives its runtime (init + agent link).
//
// Protocol (all replies after the journal sync of their events):
//   (wr_start)                           -> sandbox_info   start the init if it is not running
//   (wr_info)                            -> sandbox_info
//   (wr_exec, exec_request)              -> exec_ticket    validate, start if needed, journal
//   (wr_ended, exec_id, exec_outcome)    -> bool           journal exec_finished
//   (wr_stop)                            -> bool           stop the runtime, then quit
// It sends (wr_status, sandbox_info) to its registry whenever the info changes.
#pragma once

#include <caf/fwd.hpp>

#include <cstdint>

#include "actors/runtime.hpp"

namespace warren::storage {
class journal;
}

namespace warren::actors {

struct core_options;

/// Spawns the actor for incarnation `spec.sandbox_id`, replaying its journal stream.
/// `journal` and `runtime` are borrowed and outlive the actor system.
caf::actor spawn_sandbox(caf::actor_system& system, const sandbox_spec& spec,
                         storage::journal& journal, sandbox_runtime& runtime,
                         const core_options& options, const caf::actor& registry);

}  // namespace warren::actors
