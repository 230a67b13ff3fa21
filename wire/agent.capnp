# The agent link between warrend and a sandbox's warren-init (PID 1 inside the sandbox),
# over a socketpair. warren-init serves Agent as its bootstrap. Both ends are built from the
# same tree, but the schema follows the public evolution rules anyway so that a daemon can
# be upgraded while old sandboxes still run.
@0xdf180425acf317e2;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("warren::wire");
using Files = import "files.capnp".Files;
using ByteSink = import "files.capnp".ByteSink;
using Process = import "process.capnp".Process;
using ProcessInfo = import "process.capnp".ProcessInfo;

interface Agent {
  exec @0 (argv :List(Text), env :List(Text), cwd :Text, timeoutMs :UInt64, sink :OutputSink,
           session :Text, shell :Bool, stdin :Data, callEnv :List(Text), cwdGiven :Bool,
           stdinStream :Bool)
       -> (status :ExitStatus);
  # session: run in that shell session (state under /var/lib/warren/sessions/NAME; one exec
  # at a time per session); empty: none. shell: argv is ["/bin/bash", "-c", LINE] and LINE
  # runs with the session's state, which it may change. stdin: fed to the command, then EOF
  # (empty: /dev/null). callEnv / cwdGiven: what of env and cwd the caller set for this call
  # only (never saved in the session). stdinStream: stdin stays open; sink.started() gets a
  # ByteSink for it once the command runs (after the `stdin` bytes).
  # Runs argv[0] (looked up in PATH of `env`) in a new session and process group, and in a
  # cgroup of its own (execs/eN below the sandbox's cgroup), with stdin from /dev/null unless
  # given. `env`: complete environment as NAME=VALUE. `timeoutMs`: 0 = none; at the deadline
  # the process group gets SIGTERM, then the whole cgroup SIGKILL after a grace period.
  # Cancelling the call, or the command's exit, kills the whole cgroup.

  ping @1 () -> (pid :Int32);
  # Liveness check; returns the agent's pid as seen inside the sandbox (1).

  files @2 () -> (files :Files);
  # The sandbox's files, served by the agent from inside its root.

  createSession @3 (name :Text, env :List(Text), cwd :Text) -> ();
  # A session with this complete environment (NAME=VALUE) and directory; fails with
  # "already_exists: ..." if it exists.
  listSessions @4 () -> (names :List(Text), cwds :List(Text));
  deleteSession @5 (name :Text) -> (existed :Bool);

  startProcess @6 (id :Text, argv :List(Text), env :List(Text), cwd :Text, ringBytes :UInt32,
                   events :ProcessEvents, restartOnWake :Bool, session :Text, shell :Bool,
                   callEnv :List(Text), cwdGiven :Bool, autoCleanup :Bool, pty :Bool, cols :UInt16,
                   rows :UInt16)
              -> (process :Process, info :ProcessInfo, cwd :Text);
  # A background process (wire/process.capnp): complete env, cwd as given; fails with
  # "code: message" (invalid_argument, already_exists for a running id, not_found).
  # restartOnWake: its ProcessSpec is kept in /var/lib/warren/processes/ID.spec until it
  # exits or is killed through Process.kill / killAllProcesses; a process that was still
  # running when the sandbox stopped (hibernation, a restart) starts again through
  # restartProcesses.
  # session, shell, callEnv, cwdGiven: as for exec, but the process only reads the session's
  # state (a shell line sees its variables, functions and directory; nothing is saved back)
  # and does not wait for the session's execs. `cwd` in the results: where it runs.
  # autoCleanup: once it ended and ProcessEvents.ended returned, the agent forgets it (its
  # buffers are freed; getProcess says not_found; capabilities already handed out still work).
  listProcesses @7 () -> (processes :List(ProcessInfo));
  getProcess @8 (id :Text) -> (process :Process, info :ProcessInfo);
  # not_found for an unknown id.
  killAllProcesses @9 (signal :Int32) -> (count :UInt32);
  restartProcesses @10 (events :ProcessEvents) -> (started :List(RestartedProcess), failed :List(Text));
  # Starts every process whose spec was left behind (called by the daemon once per start of
  # the sandbox). `failed`: "ID: reason" for specs that could not start (they are removed).
}

struct RestartedProcess {
  info @0 :ProcessInfo;
  cwd @1 :Text;
  envNames @2 :List(Text);
  autoCleanup @3 :Bool;
  session @4 :Text;
}

struct ProcessSpec {
  # How a restart_on_wake process was started; kept inside the sandbox (its env may hold
  # secrets, which never enter the daemon's journal).
  id @0 :Text;
  argv @1 :List(Text);
  env @2 :List(Text);
  cwd @3 :Text;
  ringBytes @4 :UInt32;
  autoCleanup @5 :Bool;
  command @6 :List(Text);   # What the client asked for (argv may be a session's wrapper).
  session @7 :Text;
  pty @8 :Bool;
  cols @9 :UInt16;
  rows @10 :UInt16;
}

interface ProcessEvents {
  ended @0 (id :Text, info :ProcessInfo) -> ();
  # A background process ended and its output is drained (the daemon journals it).
}

interface OutputSink {
  write @0 (fd :UInt8, data :Data) -> stream;
  # A chunk read from the command's stdout (fd 1) or stderr (fd 2).
  started @1 (stdin :ByteSink) -> ();
  # With stdinStream: the command's stdin.
}

struct ExitStatus {
  exitCode @0 :Int32;      # Exit status if exited normally, else -1.
  signal @1 :Int32;        # Terminating signal, else 0.
  timedOut @2 :Bool;       # The timeout fired and the agent killed the process group.
  durationUs @3 :UInt64;   # Microseconds from fork to exit.
  stdoutBytes @4 :UInt64;  # Bytes of stdout sent to the sink (the daemon waits until it has
                           # handled them all: the return can overtake the last stream calls).
  stderrBytes @5 :UInt64;  # Bytes of stderr sent to the sink.
}
