# Journal events, persisted forever. Rules (DESIGN.md "Event sourcing"): fields are only
# added; a removed field becomes obsoleteN; a changed meaning is a new event kind that the
# codec upcasts. Never put secrets, env values, file contents or process output here.
@0x86b62cf0d6d9cc93;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("warren::wire::journal");

struct Envelope {
  seq @0 :UInt64;         # Position in its stream, starting at 1, no gaps.
  atMs @1 :UInt64;        # When the event was decided, ms since the Unix epoch.
  skippable @2 :Bool;     # A reader that does not know this kind may skip it.
  event :union {
    sandboxCreated @3 :SandboxCreated;
    sandboxDestroyed @4 :SandboxDestroyed;
    execStarted @5 :ExecStarted;
    execFinished @6 :ExecFinished;
    sandboxHibernated @7 :SandboxHibernated;
    sandboxWoke @8 :SandboxWoke;
    sandboxConfigured @9 :SandboxConfigured;
    processStarted @10 :ProcessStarted;
    processEnded @11 :ProcessEnded;
    portExposed @12 :PortExposed;
    portUnexposed @13 :PortUnexposed;
    snapshotTaken @14 :SnapshotTaken;
    snapshotDeleted @15 :SnapshotDeleted;
    sandboxRestored @16 :SandboxRestored;
    backupCreated @17 :BackupCreated;
    backupDeleted @18 :BackupDeleted;
  }
}

struct SnapshotTaken {
  # In the registry stream (schema v8): the files of a sandbox (its writable layer: everything
  # it wrote, its sessions and the specs of its restart_on_wake processes) were captured as
  # an immutable snapshot, kept until deleted (also after the sandbox is destroyed).
  snapshotId @0 :UInt64;   # From the registry's id sequence (shared with incarnations).
  label @1 :Text;          # The client's name for it; may be empty.
  name @2 :Text;           # The sandbox it was taken of,
  sandboxId @3 :UInt64;    # and that sandbox's incarnation.
  pauseUs @4 :UInt64;      # How long the sandbox was frozen (0: it was not running).
  ports @5 :List(UInt32);  # Its exposed ports then (tokens are never copied).
  processes @6 :List(SnapshotProcess);  # Its running background processes then.
}

struct SnapshotProcess {
  processId @0 :Text;
  argv @1 :List(Text);
}

struct SandboxRestored {
  # In the sandbox's stream (schema v9): its files were replaced by a snapshot's (its
  # processes were stopped; the ones that ran are recorded as lost).
  snapshotId @0 :UInt64;
}

struct BackupCreated {
  # In the registry stream (schema v10): a directory of a sandbox was archived (tar + zstd)
  # into the blob store.
  backupId @0 :Text;       # 32 hex characters, random.
  name @1 :Text;           # The sandbox it was made of,
  sandboxId @2 :UInt64;    # and its incarnation.
  dir @3 :Text;            # The directory archived (absolute, inside the sandbox).
  sha256 @4 :Text;         # Of the archive, checked before every restore.
  bytes @5 :UInt64;        # Size of the archive.
  expiresAtMs @6 :UInt64;  # When it is deleted (ms since the Unix epoch).
}

struct BackupDeleted {
  # In the registry stream (schema v10): a backup and its archive are gone (deleted or expired).
  backupId @0 :Text;
}

struct SnapshotDeleted {
  # In the registry stream (schema v8): a snapshot and its files are gone.
  snapshotId @0 :UInt64;
}

struct PortExposed {
  # In the sandbox's stream (schema v6): a port is reachable through a preview URL.
  port @0 :UInt32;
  label @1 :Text;
  token @2 :Text;   # The URL's secret part (kept so that a link outlives restarts; never logged).
}

struct PortUnexposed {
  # In the sandbox's stream (schema v6): its preview URL was revoked.
  port @0 :UInt32;
}

struct ProcessStarted {
  # In the sandbox's stream (schema v5): a background process started.
  processId @0 :Text;
  argv @1 :List(Text);
  cwd @2 :Text;
  envNames @3 :List(Text);  # Names only, never values.
  restartOnWake @4 :Bool;   # v6: started again when the sandbox wakes.
  session @5 :Text;         # v7: the shell session it runs in (empty: none).
  autoCleanup @6 :Bool;     # v7: its record goes from the sandbox's state when it ends.
}

struct ProcessEnded {
  # In the sandbox's stream (schema v5): a background process ended.
  processId @0 :Text;
  status @1 :UInt8;         # 1 exited, 2 killed by a signal, 3 lost (the sandbox stopped while it ran).
  exitCode @2 :Int32;
  signal @3 :Int32;
}

struct SandboxCreated {
  # In the registry stream (0) and as the first event of the sandbox's own stream.
  name @0 :Text;          # Validated sandbox name.
  sandboxId @1 :UInt64;   # Id of this incarnation; also the id of its journal stream.
  fromSnapshot @2 :UInt64;  # v8: its files started as a copy of this snapshot (0: empty).
}

struct SandboxDestroyed {
  # In the registry stream (0); the sandbox's own stream is deleted in the same batch.
  name @0 :Text;          # Name that was destroyed.
  sandboxId @1 :UInt64;   # Incarnation that was destroyed.
}

struct ExecStarted {
  execId @0 :UInt64;            # Per-sandbox exec counter, starting at 1.
  argv @1 :List(Text);          # What was asked (a shell command is recorded as /bin/bash -c ...;
                                # before schema v4 as sh -c ...).
  cwd @2 :Text;                 # Working directory requested; since v4 empty when the session's
                                # own directory applied (before v4: /workspace by default).
  envNames @3 :List(Text);      # Names of the extra variables; values are never journaled.
  timeoutMs @4 :UInt64;         # Requested timeout, 0 = none.
  session @5 :Text;             # Shell session it ran in (v4; empty in older events).
}

struct ExecFinished {
  execId @0 :UInt64;        # Matches ExecStarted.execId.
  exitCode @1 :Int32;       # Exit status, -1 if killed by a signal or never ran.
  signal @2 :Int32;         # Terminating signal, 0 if none.
  timedOut @3 :Bool;        # Killed by its timeout.
  cancelled @4 :Bool;       # The caller went away; warren killed the command.
  durationMs @5 :UInt64;    # Wall time of the command.
  stdoutBytes @6 :UInt64;   # Bytes of output delivered.
  stderrBytes @7 :UInt64;   # Bytes of error output delivered.
  failed @8 :Text;          # Non-empty when the exec could not run at all (agent link lost ...).
  oomKilled @9 :Bool;       # The sandbox's memory limit killed a process while it ran.
}

struct SandboxHibernated {
  # In the sandbox's stream and the registry stream (one batch): its processes were stopped,
  # its writable layer stays on disk, its actor stops.
  sandboxId @0 :UInt64;   # Incarnation that went to sleep.
  reason @1 :Text;        # "idle" (sleep_after elapsed) or "requested".
  name @2 :Text;          # Its name (the registry's key).
}

struct SandboxWoke {
  # In the sandbox's stream and the registry stream (one batch): a hibernated sandbox was
  # started again. A sandbox is awake from its creation until it hibernates.
  sandboxId @0 :UInt64;   # Incarnation that woke.
  name @1 :Text;          # Its name (the registry's key).
}

struct SandboxConfigured {
  # In the sandbox's stream and the registry stream (one batch): its lifecycle settings, at
  # creation and whenever changed.
  sleepAfterMs @0 :UInt64;  # Idle time before hibernation.
  keepAlive @1 :Bool;       # Never hibernate when idle.
  name @2 :Text;            # Its name (the registry's key).
  sandboxId @3 :UInt64;     # Its incarnation.
  memoryBytes @4 :UInt64;   # Memory limit; 0 = the daemon's default.
  pidsMax @5 :UInt64;       # Process limit; 0 = the daemon's default.
  cpuMillis @6 :UInt64;     # CPU limit in 1/1000 CPU; 0 = the daemon's default.
  diskBytes @7 :UInt64;     # Disk limit of its writable layer; 0 = the daemon's default.
}

# State snapshots: a cache of replay, never the truth. A reader ignores a snapshot whose
# version it does not know (or that does not decode) and replays the whole stream instead.

struct SandboxSnapshot {
  version @0 :UInt32;          # Format version: 1.
  seq @1 :UInt64;              # The last event applied.
  name @2 :Text;
  sandboxId @3 :UInt64;
  createdAtMs @4 :UInt64;
  execCount @5 :UInt64;
  openExecs @6 :List(UInt64);  # Execs started and not finished.
  sleepAfterMs @7 :UInt64;
  keepAlive @8 :Bool;
  hibernated @9 :Bool;
  hibernations @10 :UInt64;
  memoryBytes @11 :UInt64;
  pidsMax @12 :UInt64;
  cpuMillis @13 :UInt64;
  diskBytes @14 :UInt64;
  processes @15 :List(ProcessEntry);  # Its background processes (v5), oldest first.
  ports @16 :List(ExposedPort);        # Its preview URLs (v6), by port.
  restores @17 :UInt64;                # How many times it was restored from a snapshot (v9).

  struct ExposedPort {
    port @0 :UInt32;
    label @1 :Text;
    token @2 :Text;
  }

  struct ProcessEntry {
    processId @0 :Text;
    argv @1 :List(Text);
    status @2 :UInt8;       # 0 running, else as in ProcessEnded.
    exitCode @3 :Int32;
    signal @4 :Int32;
    restartOnWake @5 :Bool;  # v6.
    autoCleanup @6 :Bool;    # v7.
  }
}

struct RegistrySnapshot {
  version @0 :UInt32;          # Format version: 1.
  seq @1 :UInt64;              # The last registry event applied.
  nextId @2 :UInt64;           # Next incarnation id (ids are never reused).
  entries @3 :List(Entry);
  struct Entry {
    name @0 :Text;
    sandboxId @1 :UInt64;
    createdAtMs @2 :UInt64;
    sleepAfterMs @3 :UInt64;
    keepAlive @4 :Bool;
    hibernated @5 :Bool;
  }
  snapshots @4 :List(Snapshot);  # The snapshots that exist (v8), by id.
  backups @5 :List(Backup);       # The backups that exist (v10), by id.
  struct Backup {
    created @0 :BackupCreated;
    atMs @1 :UInt64;
  }
  struct Snapshot {
    taken @0 :SnapshotTaken;
    atMs @1 :UInt64;
  }
}
