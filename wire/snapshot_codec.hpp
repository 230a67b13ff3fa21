// Codec of SnapshotTaken, shared by the event codec (events.cpp) and the registry's state
// snapshots (snapshots.cpp). Internal to wire/: it exposes Cap'n Proto types.
#pragma once

#include "wire/events.hpp"
#include "wire/journal.capnp.h"

namespace warren::wire {

void encode_snapshot_taken(journal::SnapshotTaken::Builder b, const snapshot_taken& x);
snapshot_taken decode_snapshot_taken(journal::SnapshotTaken::Reader r);
void encode_backup_created(journal::BackupCreated::Builder b, const backup_created& x);
backup_created decode_backup_created(journal::BackupCreated::Reader r);

}  // namespace warren::wire
