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
}

struct SandboxOptions {
  # Options for get-or-create. Grows with later capabilities (limits, sleep_after ...).

  createIfMissing @0 :Bool = true;
  # When false, an unknown name fails with "not_found" instead of creating the sandbox.
}

enum SandboxState {
  stopped @0;   # Known, files on disk, no process (e.g. after a daemon restart).
  starting @1;  # Its init is being started.
  running @2;   # Its init runs and accepts commands.
}

struct SandboxInfo {
  name @0 :Text;              # The sandbox's name.
  id @1 :UInt64;              # Daemon-assigned id of this incarnation; a re-created name gets a new id.
  state @2 :SandboxState;     # Current lifecycle state.
  createdAtMs @3 :UInt64;     # Creation time, milliseconds since the Unix epoch.
  lastActivityMs @4 :UInt64;  # Last client call that touched it since the daemon started
                              # (its creation time before that), ms since the Unix epoch.
}

interface Sandbox {
  # One named sandbox. The capability stays bound to the incarnation it was obtained for:
  # after a destroy it fails with "sandbox_gone", even if the name was created again.

  exec @0 (request :ExecRequest, output :ExecOutput) -> (result :ExecResult);
  # Runs a command to completion inside the sandbox. stdout and stderr stream to `output` as
  # they are produced (flow-controlled); the call returns when the command has exited.
  # Cancelling the call (or disconnecting) kills the command's process group. When the
  # command exits, whatever is left of its process group is killed too: an exec never leaves
  # processes behind (long-running servers will be background processes).
  # A command that cannot be found exits 127 with a message on stderr; that is a result,
  # not an error.

  info @1 () -> (info :SandboxInfo);
  # Current state of this sandbox.
}

struct ExecRequest {
  command :union {
    argv @0 :List(Text);      # Program and arguments; the program is looked up in PATH.
    shell @1 :Text;           # A shell command line, run as `/bin/sh -c <shell>`.
  }
  env @2 :List(EnvVar);       # Added to (or overriding) the sandbox's default environment.
  cwd @3 :Text;               # Working directory inside the sandbox. Default: /workspace.
  timeoutMs @4 :UInt64;       # Kill the command after this long (TERM, then KILL). 0: none.
}

struct EnvVar {
  name @0 :Text;    # Variable name: non-empty, no '=' and no NUL.
  value @1 :Text;   # Its value. Never journaled or logged.
}

interface ExecOutput {
  # Implemented by the client; receives a command's output as it is produced.
  writeStdout @0 (data :Data) -> stream;  # A chunk of standard output, in order.
  writeStderr @1 (data :Data) -> stream;  # A chunk of standard error, in order.
}

struct ExecResult {
  exitCode @0 :Int32;      # Exit status when the command exited normally, else -1.
  signal @1 :Int32;        # Signal number that ended it, else 0.
  durationMs @2 :UInt64;   # Wall time from start to exit.
  timedOut @3 :Bool;       # True when timeoutMs elapsed and warren killed the command.
  stdoutBytes @4 :UInt64;  # Bytes of stdout delivered to `output`.
  stderrBytes @5 :UInt64;  # Bytes of stderr delivered to `output`.
  execId @6 :UInt64;       # Id of this exec in the sandbox's journal.
}
