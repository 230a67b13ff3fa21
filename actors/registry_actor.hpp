// The registry actor: maps validated names to sandbox incarnations. It owns the registry
// stream (stream 0) and spawns a sandbox actor on first use; sandboxes that are not loaded
// cost a small map entry and no actor.
//
// Protocol:
//   (wr_get, name, bool create, sandbox_settings) -> sandbox_info   get-or-create, running
//   (wr_list)                                 -> std::vector<sandbox_info>
//   (wr_destroy, name)                        -> bool           existed
//   (wr_info | wr_sleep, name, id)            -> sandbox_info   forwarded to the sandbox actor
//   (wr_config, name, id, sandbox_settings)   -> sandbox_info   forwarded
//   (wr_exec, name, id, exec_request)         -> exec_ticket    forwarded
//   (wr_ended, name, id, exec_id, outcome)    -> bool           forwarded
//   (wr_journal, name, id, bytes)             -> bool           from a sandbox actor: journal its
//                                                               event in both streams
//   (wr_wakeall)                              -> (none)         start sandboxes that were running
//   (wr_shut)                                 -> bool           stop every sandbox
// Forwarded calls are retried once on a fresh actor when the old one stopped meanwhile (it
// hibernated), so a caller never sees the hand-over.
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
