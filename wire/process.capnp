# Background processes of a sandbox: served by the sandbox's agent (warren-init), which owns
# each process and a bounded ring buffer per output stream; handed to clients through
# Sandbox.startProcess / getProcess (the daemon proxies the capability).
#
# Output offsets are absolute byte positions in a stream since the process started, so a
# client that reconnects asks for what it missed with the offsets it has seen: everything
# still in the ring buffer comes back, then live output. Bytes that fell out of the buffer
# are counted (droppedBytes), never silently skipped.
@0xc38afbed334cb9c5;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("warren::wire");

interface Process {
  info @0 () -> (info :ProcessInfo);

  kill @1 (signal :Int32) -> ();
  # Signal 0 (the default): SIGTERM to its process group, then after 2 s SIGKILL to its whole
  # tree (its cgroup: children that left the group too). Another signal goes to the process
  # group as it is. Killing an ended process does nothing.

  logs @2 () -> (stdout :LogChunk, stderr :LogChunk);
  # What the ring buffers hold now.

  streamLogs @3 (stdoutFrom :UInt64, stderrFrom :UInt64, sink :LogSink) -> ();
  # Everything from these offsets that is still buffered, then live output as it comes, until
  # the process has ended and its output is drained (or the call is cancelled). Bytes before
  # the buffer's start are reported through sink.dropped.

  waitForExit @4 (timeoutMs :UInt64) -> (info :ProcessInfo);
  # Resolves when the process has ended (at once if it has); fails with "timeout" after
  # timeoutMs (0: no limit).

  waitForLog @5 (pattern :Text, fromStart :Bool, timeoutMs :UInt64) -> (stream :UInt8, offset :UInt64, line :Text);
  # Resolves at the first line (of stdout, 1, or stderr, 2) that contains `pattern`: in what
  # is buffered (fromStart) or only in new output. Fails with "timeout", or with "not_found"
  # when the process ends without printing it.

  waitForPort @6 (port :UInt16, http :Bool, path :Text, statusMin :UInt16, statusMax :UInt16,
                  intervalMs :UInt32, timeoutMs :UInt64) -> (status :UInt16);
  # Resolves once the sandbox's 127.0.0.1:`port` accepts a connection (http false) or answers
  # `GET path` (default /) with a status in [statusMin, statusMax] (default 200-399; status
  # is returned). Tries every intervalMs (default 100). Fails with "timeout", or "not_found"
  # when the process ends first.

  write @7 (data :Data) -> stream;
  # Input for a process started with a terminal (ProcessOptions.pty): keystrokes, in order
  # (^C is byte 3, and the terminal turns it into SIGINT as a real one does). Refused with
  # invalid_argument for a process without a terminal; at most 64 KiB per call.

  resize @8 (cols :UInt16, rows :UInt16) -> ();
  # The terminal's size (1-1000 each); its programs get SIGWINCH.
}

struct LogChunk {
  data @0 :Data;
  startOffset @1 :UInt64;    # Offset of data's first byte.
  endOffset @2 :UInt64;      # Bytes the stream has produced so far.
  droppedBytes @3 :UInt64;   # Bytes that fell out of the ring buffer (= startOffset).
}

interface LogSink {
  write @0 (stream :UInt8, offset :UInt64, data :Data) -> stream;
  # A chunk of stdout (1) or stderr (2) starting at `offset`.
  dropped @1 (stream :UInt8, fromOffset :UInt64, toOffset :UInt64) -> ();
  # Bytes in [from, to) of that stream are no longer buffered.
  ended @2 (info :ProcessInfo) -> ();
  # The process ended and all its output was sent; streamLogs returns after this.
}

enum ProcessStatus {
  running @0;
  exited @1;    # Ended by itself: exitCode.
  killed @2;    # Ended by a signal: signal (also when warren killed it).
  lost @3;      # The sandbox stopped (hibernation, daemon restart) while it ran.
}

struct ProcessInfo {
  id @0 :Text;
  command @1 :List(Text);     # argv as started (a shell line as /bin/bash -c LINE).
  status @2 :ProcessStatus;
  exitCode @3 :Int32;         # When exited.
  signal @4 :Int32;           # When killed.
  pid @5 :Int32;              # Inside the sandbox's pid namespace.
  startedAtMs @6 :UInt64;     # Unix epoch ms.
  endedAtMs @7 :UInt64;       # 0 while running.
  stdoutBytes @8 :UInt64;     # Produced so far (with a terminal: everything it showed).
  stderrBytes @9 :UInt64;
  pty @10 :Bool;              # It runs on a terminal (output is stream 1 only).
}
