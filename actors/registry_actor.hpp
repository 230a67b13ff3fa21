// The registry actor: maps validated names to sandbox incarnations. It owns the registry
// stream (stream 0) and spawns a sandbox actor on first use; sandboxes that are not loaded
// cost a small map entry and no actor.
//
// Protocol:
//   (wr_get, name, bool create)               -> sandbox_info   get-or-create, running
//   (wr_list)                                 -> std::vector<sandbox_info>
//   (wr_destroy, name)                        -> bool           existed
//   (wr_info, name, id)                       -> sandbox_info
//   (wr_exec, name, id, exec_request)         -> exec_ticket
//   (wr_ended, name, id, exec_id, outcome)    -> bool
//   (wr_shut)                                 -> bool           stop every sandbox
#pragma once

#include <caf/fwd.hpp>

#include "actors/registry_logic.hpp"
#include "actors/runtime.hpp"

namespace warren::storage {
class journal;
struct layout;
}  // namespace warren::storage

namespace warren::actors {

struct core_options;

/// Spawns the registry with the state replayed from stream 0. All references are borrowed
/// and outlive the actor system.
caf::actor spawn_registry(caf::actor_system& system, registry_record replayed,
                          storage::journal& journal, const storage::layout& layout,
                          sandbox_runtime& runtime, const core_options& options);

}  // namespace warren::actors
