# Warren public API, version 1. Served by warrend over Cap'n Proto RPC on a unix socket
# (bootstrap: Warren) and optionally over TCP (bootstrap: Login, which checks a bearer token).
#
# Evolution rules: fields and methods are only added with the next ordinal; a removed one is
# renamed obsoleteN. Errors are Cap'n Proto exceptions whose description starts with a stable
# error code followed by ": " and a sentence for people, e.g.
# "invalid_name: sandbox name 'Foo' ...". Codes are listed in wire/errors.hpp.
@0x837bd3b28d37dee7;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("warren::wire");
using Files = import "files.capnp".Files;
using ByteSink = import "files.capnp".ByteSink;
using Process = import "process.capnp".Process;
using ProcessInfo = import "process.capnp".ProcessInfo;
using ProcessStatus = import "process.capnp".ProcessStatus;

interface Login {
  # Bootstrap of the TCP listener: nothing is reachable before the bearer token is checked.
  login @0 (token :Text) -> (warren :Warren);
  # Returns the Warren root for a correct token; fails with "unauthenticated" otherwise.
}

interface Warren {
  # Root of the API: one daemon, many named sandboxes.

  sandbox @0 (name :Text, options :SandboxOptions) -> (sandbox :Sandbox, info :SandboxInfo);
  # Gets the sandbox called `name`, creating and starting it if needed (get-or-create).
  # `name`: 1-63 characters of a-z, 0-9 and '-', not starting or ending with '-'.
  # Returns once the sandbox is running and its creation is durable.

  list @1 () -> (sandboxes :List(SandboxInfo));
  # Every sandbox this daemon knows, sorted by name.

  destroy @2 (name :Text) -> (existed :Bool);
  # Stops the sandbox, kills its processes and removes its files and journal. Idempotent:
  # destroying an unknown name succeeds with existed = false.

  version @3 () -> (daemon :Text, api :UInt32);
  # `daemon`: warrend's version string. `api`: this schema's version (1).

  journal @4 (name :Text, fromSeq :UInt64, limit :UInt32) -> (entries :List(JournalEntry), lastSeq :UInt64);
  # The sandbox's event history from `fromSeq` (1 = the beginning), at most `limit` entries
  # (0: up to 10000). `lastSeq`: its newest event, for following (ask again from lastSeq + 1).

  journalState @5 (name :Text, atSeq :UInt64) -> (json :Text);
  # Time travel: the sandbox's state as replayed up to and including event `atSeq` (0: all),
  # as a JSON object (name, id, seq, execCount, openExecs, sleepAfterMs, keepAlive, hibernated ...).

  checkJournals @6 () -> (checked :UInt32, problems :List(Text));
  # Replays every journal (the registry's and each sandbox's) and reports each one that does
  # not decode or apply. `checked`: number of streams replayed.

  listSnapshots @7 () -> (snapshots :List(SnapshotInfo));
  # Every snapshot (Sandbox.snapshot), oldest first.

  deleteSnapshot @8 (id :UInt64) -> (existed :Bool);
  # Deletes a snapshot and its files (journaled). Sandboxes made from it keep their files:
  # they hold copy-on-write copies, not references, so nothing ever depends on a snapshot.

  listBackups @9 () -> (backups :List(BackupInfo));
  # Every backup that has not expired, oldest first.

  deleteBackup @10 (id :Text) -> (existed :Bool);
  # Deletes a backup and its archive (journaled).

  exportSnapshot @11 (id :UInt64) -> (blob :Text, sha256 :Text, bytes :UInt64);
  # Writes the snapshot as a btrfs send stream into the blob store (with the local store:
  # <data-dir>/blobs/`blob`), so that it can move to another machine's store. The blob is
  # the operator's to keep or delete; nothing is journaled.

  importSnapshot @12 (blob :Text, sha256 :Text, label :Text) -> (snapshot :SnapshotInfo);
  # A new snapshot from an exported one in the blob store: its SHA-256 is checked first (a
  # corrupt stream is refused with corrupt), then btrfs receive applies it, confined to a
  # staging directory. Journaled; `sandbox` is empty. Import only streams you exported.
}

struct BackupInfo {
  id @0 :Text;             # 32 hex characters; pass to Sandbox.restoreBackup.
  sandbox @1 :Text;        # The sandbox it was made of (it may be gone since).
  dir @2 :Text;            # The directory archived.
  bytes @3 :UInt64;        # Size of the archive (tar, zstd-compressed).
  sha256 @4 :Text;         # Of the archive; checked before every restore.
  createdAtMs @5 :UInt64;
  expiresAtMs @6 :UInt64;  # Deleted after this (ms since the Unix epoch).
}

struct SnapshotInfo {
  id @0 :UInt64;             # Use with SandboxOptions.fromSnapshot, Sandbox.restore, deleteSnapshot.
  label @1 :Text;            # The name given when it was taken; may be empty.
  sandbox @2 :Text;          # The sandbox it was taken of (it may be gone since),
  sandboxId @3 :UInt64;      # and its incarnation.
  createdAtMs @4 :UInt64;    # ms since the Unix epoch.
  pauseUs @5 :UInt64;        # How long the sandbox's processes were frozen (0: it did not run).
  ports @6 :List(UInt32);    # Its exposed ports then.
  processes @7 :List(SnapshotProcess);  # Its running background processes then.
}

struct SnapshotProcess {
  id @0 :Text;
  command @1 :List(Text);
}

struct JournalEntry {
  seq @0 :UInt64;      # Position in the sandbox's stream.
  atMs @1 :UInt64;     # When it happened, ms since the Unix epoch.
  kind @2 :Text;       # Event kind, e.g. "exec_finished".
  summary @3 :Text;    # One line for people.
  json @4 :Text;       # The event's fields as a JSON object.
}

struct SandboxOptions {
  # Options for get-or-create. Grows with later capabilities (limits, sleep_after ...).

  createIfMissing @0 :Bool = true;
  # When false, an unknown name fails with "not_found" instead of creating the sandbox.

  sleepAfterMs @1 :UInt64 = 600000;
  # For a new sandbox: idle time before it hibernates (1 s to 30 days). Idle means no client
  # call, no running command and no CPU use. An existing sandbox keeps its setting (see
  # Sandbox.configure).

  keepAlive @2 :Bool = false;
  # For a new sandbox: never hibernate when idle.

  start @3 :Bool = true;
  # When false, an existing sandbox is returned as it is: not started, not woken (for info,
  # usage or hibernate). A new sandbox is always started.

  memoryBytes @4 :UInt64;
  # For a new sandbox: its memory limit; 0 = the daemon's default (--sandbox-memory).
  pidsMax @5 :UInt32;
  # For a new sandbox: its process/thread limit; 0 = the daemon's default (--sandbox-pids).
  cpuMillis @6 :UInt32;
  # For a new sandbox: its CPU limit in 1/1000 CPU; 0 = the daemon's default (--sandbox-cpus).
  diskBytes @7 :UInt64;
  # For a new sandbox: the most its writable layer may hold; 0 = the daemon's default
  # (--sandbox-disk). Writes beyond it fail inside with "Disk quota exceeded".
  fromSnapshot @8 :UInt64;
  # For a new sandbox: its files start as those of this snapshot (Sandbox.snapshot): what was
  # written, sessions, and restart_on_wake processes, which start again. A copy on write:
  # milliseconds, whatever the size. Fails with already_exists when `name` exists, not_found
  # for an unknown snapshot, unavailable when the daemon has no disk pool.
}

enum SandboxState {
  stopped @0;      # Known, files on disk, no process (transient: a failed start, a stopping daemon).
  starting @1;     # Its init is being started.
  running @2;      # Its init runs and accepts commands.
  hibernated @3;   # Asleep: files on disk, no process; the next call wakes it transparently.
  needsRepair @4;  # Its journal does not replay; calls fail with "needs_repair" (see checkJournals).
}

struct SandboxInfo {
  name @0 :Text;              # The sandbox's name.
  id @1 :UInt64;              # Daemon-assigned id of this incarnation; a re-created name gets a new id.
  state @2 :SandboxState;     # Current lifecycle state.
  createdAtMs @3 :UInt64;     # Creation time, milliseconds since the Unix epoch.
  lastActivityMs @4 :UInt64;  # Last client call that touched it since the daemon started
                              # (its creation time before that), ms since the Unix epoch.
  sleepAfterMs @5 :UInt64;    # Idle time before it hibernates.
  keepAlive @6 :Bool;         # Never hibernates when idle.
}

interface Sandbox {
  # One named sandbox. The capability stays bound to the incarnation it was obtained for:
  # after a destroy it fails with "sandbox_gone", even if the name was created again.

  exec @0 (request :ExecRequest, output :ExecOutput) -> (result :ExecResult);
  # `output` may be null when request.collectOutput asks for the output in the result.
  # Runs a command to completion inside the sandbox. stdout and stderr stream to `output` as
  # they are produced (flow-controlled); the call returns when the command has exited.
  # Cancelling the call (or disconnecting) kills the command's whole process tree. When the
  # command exits, whatever is left of its tree is killed too (each exec runs in a cgroup of
  # its own, so even processes that left its process group with setsid go): an exec never
  # leaves processes behind (long-running servers will be background processes).
  # A command that cannot be found exits 127 with a message on stderr; that is a result,
  # not an error.

  info @1 () -> (info :SandboxInfo);
  # Current state of this sandbox. Does not wake a hibernated sandbox.

  configure @2 (sleepAfterMs :UInt64, keepAlive :Bool) -> (info :SandboxInfo);
  # Changes when it hibernates (journaled). sleepAfterMs: 1 s to 30 days.

  hibernate @3 () -> (info :SandboxInfo);
  # Puts it to sleep now: processes stopped, files kept, no memory used; the next call wakes it.
  # Fails with "busy" while a command runs.

  usage @4 () -> (usage :Usage);
  # What it uses now, from its cgroup and its writable layer. Does not wake it.

  setLimits @5 (memoryBytes :UInt64, pidsMax :UInt32, cpuMillis :UInt32, diskBytes :UInt64) -> (info :SandboxInfo);
  # Changes its resource limits; a 0 leaves that limit as it is. Journaled. A running sandbox
  # gets them at once (a memory limit below what it uses now is refused); a hibernated one
  # when it wakes. Does not wake it.

  files @6 () -> (files :Files);
  # Its files (wire/files.capnp): read, write (whole or streamed), mkdir, remove, rename,
  # list, stat, exists, always inside its root. Each call wakes a hibernated sandbox and
  # keeps it awake while it runs. Bound to this incarnation like the Sandbox itself.

  createSession @7 (name :Text, env :List(EnvVar), cwd :Text) -> ();
  # A new shell session (see ExecRequest.session) starting with the sandbox's default
  # environment plus `env`, in `cwd` (default /workspace). already_exists if it exists.

  listSessions @8 () -> (sessions :List(SessionInfo));
  # Every session of the sandbox, "default" included, sorted by name.

  deleteSession @9 (name :Text) -> (existed :Bool);
  # Forgets a session's state ("default" starts over empty).

  startProcess @10 (request :ExecRequest, options :ProcessOptions) -> (process :Process, info :ProcessInfo);
  # Starts a background process (wire/process.capnp): it runs until it ends or is killed,
  # its output goes to ring buffers that clients read and follow with offsets. `request`:
  # command, env, cwd and session as for exec (stdin, collectOutput, timeoutMs are not for
  # background processes and are refused). In a session it starts with the session's state
  # (environment and directory; a shell line also its variables and functions) but never
  # changes it, and it does not wait for the session's execs. Its start and end are
  # journaled (start before the reply). With options.restartOnWake it starts again after a
  # wake or a daemon restart; with options.autoCleanup it is forgotten once it ended.

  listProcesses @11 (statuses :List(ProcessStatus)) -> (processes :List(ProcessInfo));
  # Its background processes from the journal (the last 100, running ones always), oldest
  # first, with live figures for the running ones; a process that was running when the
  # sandbox hibernated or the daemon restarted is `lost`. `statuses`: only processes in one of
  # these states (empty: all).

  getProcess @12 (id :Text) -> (process :Process, info :ProcessInfo);
  # A process by id; not_found if unknown or forgotten (autoCleanup, or ended before the
  # last 64 ended ones: the sandbox keeps their output, the journal lists more).

  killAllProcesses @13 (signal :Int32) -> (count :UInt32);
  # Signal 0: kills every running process's tree. Returns how many were running.
  exposePort @14 (port :UInt32, name :Text) -> (port :ExposedPort);
  # Makes the sandbox's TCP `port` (its server listening on 0.0.0.0 or 127.0.0.1) reachable
  # through the daemon's HTTP listener at an unguessable URL; HTTP and WebSocket are proxied,
  # and a request wakes a hibernated sandbox. Exposing a port again returns the same URL
  # (`name`, a label of at most 63 of a-z, 0-9, '-', '_', is replaced). Journaled; the URL
  # survives hibernation and daemon restarts until unexposePort or destroy. Fails with
  # unavailable when the daemon runs without --http-listen, invalid_argument for a port
  # outside 1-65535 or one of the daemon's own. Does not wake the sandbox.
  unexposePort @15 (port :UInt32) -> (existed :Bool);
  # Revokes the URL at once: its requests get 404 from then on.
  listExposedPorts @16 () -> (ports :List(ExposedPort));
  # Its exposed ports, by port. Does not wake it.

  snapshot @17 (label :Text, withMemory :Bool) -> (snapshot :SnapshotInfo);
  # Captures its files (everything it wrote over the base image, its sessions and the specs
  # of its restart_on_wake processes; not /tmp, a memory filesystem) as an immutable
  # snapshot, journaled. A running sandbox is frozen only for that moment (see pauseUs) and
  # keeps running; a hibernated one is not woken. `label`: empty or at most 63 of a-z, 0-9,
  # '-', '_'. Fails with unavailable when the daemon has no disk pool (btrfs).
  # withMemory: also the memory of its processes, so that they go on where they were
  # (CRIU). Not available yet: fails with unsupported, saying what this host has (found at
  # the daemon's start-up; Debian 12's criu 3.17 does not work on current kernels).

  fork @18 (names :List(Text)) -> (snapshot :SnapshotInfo, sandboxes :List(SandboxInfo));
  # A snapshot of it (kept, labelled "fork"), then one new, running sandbox per name (1-16
  # names, none may exist) started from it: each sees its files, writes stay its own.

  restore @19 (snapshotId :UInt64) -> (info :SandboxInfo);
  # Rolls its files back (or over) to a snapshot's, of this sandbox or another: its
  # processes stop (running background processes are recorded as lost), the files are
  # replaced (a copy on write, then a rename), and it starts again, with the snapshot's
  # restart_on_wake processes. Journaled. Its exposed ports and settings stay. Fails with
  # busy while a command runs, not_found for an unknown snapshot.

  backup @20 (dir :Text, excludes :List(Text), respectGitignore :Bool, ttlMs :UInt64) -> (backup :BackupInfo);
  # Archives the directory `dir` (absolute; a symlink to a directory is followed) as tar +
  # zstd into the daemon's blob store (<data-dir>/blobs), with its SHA-256; journaled. The
  # archive is made inside the sandbox, by its own tar, so nothing of the sandbox's files
  # is interpreted by the host. `excludes`: tar patterns (`node_modules`, `*.log`, at most
  # 256); respectGitignore: also leave out what .gitignore files name (GNU tar's
  # --exclude-vcs-ignores: per-directory patterns, no negation). `ttlMs`: kept this long
  # (default 7 days, at most 365). At most 8 GiB of archive (too_large beyond). Files that
  # change while they are read are archived as read.

  restoreBackup @21 (id :Text, dir :Text) -> ();
  # Replaces `dir` (default: the backup's own directory) of this sandbox, which may be
  # another than the one it was made of, by the backup's contents. The archive's SHA-256
  # is checked first: a corrupt archive is refused and the directory left untouched; the
  # contents are unpacked beside it and swapped in only once complete.
}

struct ExposedPort {
  port @0 :UInt32;
  name @1 :Text;
  url @2 :Text;
  # http://{port}-{sandbox}-{token}.{preview domain}:{http port}/ : the page sees its own
  # origin (absolute links, cookies and WebSockets work). *.localhost resolves to the loopback
  # address in browsers and curl; elsewhere the domain needs wildcard DNS to this machine.
  pathUrl @3 :Text;
  # http://{preview domain}:{http port}/preview/{sandbox}/{port}/{token}/ : works without
  # wildcard DNS; the prefix is removed before the request reaches the sandbox, so only
  # pages that use relative links work well through it.
}

struct ProcessOptions {
  id @0 :Text;          # 1-64 of letters, digits, '-', '_', '.'; default p1, p2, ...
  logBytes @1 :UInt32;  # Ring buffer per output stream; 0: 1 MiB; at most 64 MiB. It grows
                        # with the output (a quiet process costs next to nothing).
  restartOnWake @2 :Bool;
  # When the sandbox hibernated (or the daemon restarted) while it ran, start it again, with
  # the same id, command, env and cwd, when the sandbox wakes. Its env is kept inside the
  # sandbox (/var/lib/warren/processes), never in the journal.
  autoCleanup @3 :Bool;
  # Once it ended (and its end is journaled), it leaves listProcesses and getProcess, and the
  # sandbox frees its output buffers; clients that hold its Process still read its logs and
  # end. The journal keeps its start and end. Default: it stays listed (the last 100 ended).
  pty @4 :Bool;
  # Run it on a terminal of its own (a pseudo-terminal, TERM=xterm-256color unless env sets
  # it): programs see a tty (colours, line editing, job control: ^C, ^Z, fg); its output,
  # stdout and stderr together, is stream 1 of the ring buffer (logBytes, default 1 MiB), so
  # a client that reconnects replays the screen from any offset; input goes through
  # Process.write, size through Process.resize. `cols`/`rows`: its first size (default 80x24).
  cols @5 :UInt16;
  rows @6 :UInt16;
}

struct SessionInfo {
  name @0 :Text;
  cwd @1 :Text;   # Its working directory now.
}

struct Usage {
  cpuSeconds @0 :Float64;       # CPU time its processes used since it last started or woke.
  memoryBytes @1 :UInt64;       # Memory in use now (0 when hibernated).
  memoryPeakBytes @2 :UInt64;   # Highest memory use since it last started (0 if unknown).
  pids @3 :UInt32;              # Processes and threads now.
  diskBytes @4 :UInt64;         # Bytes held by its writable layer (what it wrote or changed).
  memoryLimitBytes @5 :UInt64;  # Its memory limit, 0 for none.
  pidsLimit @6 :UInt32;         # Its process limit, 0 for none.
  diskLimitBytes @7 :UInt64;    # Its disk limit, 0 for none (or when the daemon has no disk pool).
}

struct ExecRequest {
  command :union {
    argv @0 :List(Text);      # Program and arguments; the program is looked up in PATH.
    shell @1 :Text;           # A command line, run by bash in the session (see `session`).
  }
  env @2 :List(EnvVar);       # Added to (or overriding) the sandbox's default environment.
  cwd @3 :Text;               # Working directory inside the sandbox. Default: /workspace.
  timeoutMs @4 :UInt64;       # Kill the command after this long (TERM, then KILL). 0: none.
  session @5 :Text;
  # Shell session to run in (1-63 of a-z, 0-9, '-', '_'); empty: "default". A session keeps
  # shell state between execs: a `shell` command runs in bash with the variables, exported
  # environment, functions and working directory the previous ones left (`cd`, `export`,
  # `x=1`, `f() {...}` persist); an `argv` command gets its environment and directory.
  # `env` and `cwd` of one request apply to that call only. Execs of one session run one
  # after the other, sessions in parallel. State lives in the sandbox
  # (/var/lib/warren/sessions/NAME), so it survives hibernation and restarts.
  stdin @6 :Data;             # Fed to the command's standard input, then EOF (at most 16 MiB).
                              # Empty: stdin is /dev/null.
  collectOutput @7 :UInt32;
  # Also keep up to this many bytes of each stream in ExecResult (at most 16 MiB); what is
  # beyond is still streamed to `output` but cut from the result, which says so
  # (stdoutTruncated, stderrTruncated). 0: nothing kept. `output` may then be null: the
  # result alone carries the output, the way a non-streaming client wants it.
  stdinStream @8 :Bool;
  # Keep the command's stdin open for the client: once the command runs, the daemon calls
  # output.started(stdin) with a sink for it; write chunks, then end() for EOF. (`stdin`
  # bytes, if any, go first.)
  finishOnCancel @9 :Bool;
  # When the client cancels the call or disconnects, let the command run to its end (its
  # output is then dropped; its end is journaled) instead of killing it (the default).
}

struct EnvVar {
  name @0 :Text;    # Variable name: non-empty, no '=' and no NUL.
  value @1 :Text;   # Its value. Never journaled or logged.
}

interface ExecOutput {
  # Implemented by the client; receives a command's output as it is produced.
  writeStdout @0 (data :Data) -> stream;  # A chunk of standard output, in order.
  writeStderr @1 (data :Data) -> stream;  # A chunk of standard error, in order.
  started @2 (stdin :ByteSink) -> ();
  # With stdinStream: the command runs; `stdin` feeds it (end() closes it).
}

struct ExecResult {
  exitCode @0 :Int32;      # Exit status when the command exited normally, else -1.
  signal @1 :Int32;        # Signal number that ended it, else 0.
  durationMs @2 :UInt64;   # Wall time from start to exit.
  timedOut @3 :Bool;       # True when timeoutMs elapsed and warren killed the command.
  stdoutBytes @4 :UInt64;  # Bytes of stdout delivered to `output`.
  stderrBytes @5 :UInt64;  # Bytes of stderr delivered to `output`.
  execId @6 :UInt64;       # Id of this exec in the sandbox's journal.
  oomKilled @7 :Bool;      # The sandbox's memory limit was hit while it ran and the kernel
                           # killed a process of the sandbox (typically this command).
  stdout @8 :Data;         # With collectOutput: the first collectOutput bytes of stdout.
  stderr @9 :Data;         # With collectOutput: the first collectOutput bytes of stderr.
  stdoutTruncated @10 :Bool;  # stdout had more than collectOutput bytes (stdoutBytes says how many).
  stderrTruncated @11 :Bool;
}
