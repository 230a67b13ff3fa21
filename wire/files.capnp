# Files of one sandbox: the interface served by the sandbox's agent (warren-init, inside the
# sandbox's root and user namespace) and handed to clients by Sandbox.files() through the
# daemon. Every path is resolved inside the sandbox's root: absolute paths from its `/`,
# relative ones from /workspace; `..`, symlinks (even ones its processes swap while a call
# runs) and /proc magic links cannot lead outside. Paths are UTF-8 text without NUL, at most
# 4096 bytes, each component at most 255. Operations act as the sandbox's root.
#
# Errors ("code: sentence", see wire/errors.hpp): not_found, already_exists,
# not_a_directory, is_a_directory, permission_denied, not_empty, too_large, no_space,
# invalid_argument.
@0xf7a8db7f9a49bc02;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("warren::wire");

interface Files {
  writeFile @0 (path :Text, data :Data, options :WriteOptions) -> (info :FileInfo);
  # Writes a whole file (at most 16 MiB; larger: openWrite). Atomic: the data goes to a
  # temporary file in the same directory, is synced, then renamed over `path`, so readers
  # see the old or the new content, never a part, and a failed write leaves nothing.

  openWrite @1 (path :Text, options :WriteOptions) -> (sink :FileSink);
  # Streams a file of any size: write chunks to `sink`, then commit(). Dropping the sink
  # without commit() discards what was written. Same atomicity as writeFile.

  readFile @2 (path :Text, offset :UInt64, length :UInt64) -> (data :Data, info :FileInfo);
  # Reads `length` bytes from `offset` (length 0: to the end), at most 16 MiB per call
  # (too_large beyond: use streamFile, or ranges). info has mimeType and isBinary.

  streamFile @3 (path :Text, offset :UInt64, length :UInt64, sink :ByteSink) -> (info :FileInfo, bytes :UInt64);
  # Streams `length` bytes from `offset` (0: to the end) to `sink`, flow-controlled, never
  # holding the file in memory. Returns once every chunk was accepted.

  mkdir @4 (path :Text, recursive :Bool, mode :UInt32) -> (info :FileInfo);
  # Creates a directory (mode 0: 0755). recursive: parents too, and an existing directory is
  # success; otherwise an existing one is already_exists.

  remove @5 (path :Text, recursive :Bool) -> ();
  # Removes a file, symlink (not its target) or empty directory; a directory with contents
  # needs recursive. `/` and /workspace themselves cannot be removed.

  rename @6 (from :Text, to :Text, overwrite :Bool) -> (info :FileInfo);
  # Renames or moves, also across directories and filesystems of the sandbox (then as a
  # copy and a removal). An existing `to` is already_exists unless overwrite.

  list @7 (path :Text, recursive :Bool, hidden :Bool, limit :UInt32) -> (entries :List(FileInfo), truncated :Bool);
  # Entries of a directory, sorted by path; recursive descends (not through symlinks);
  # hidden includes names starting with '.'. At most `limit` entries (0: 10000; at most
  # 100000 per call).

  stat @8 (path :Text) -> (info :FileInfo);
  # What `path` is; a symlink is described itself (with its target), not followed.

  exists @9 (path :Text) -> (exists :Bool);
  # Whether `path` names something (a dangling symlink counts).
}

struct WriteOptions {
  mode @0 :UInt32;           # Permission bits; 0: keep an existing file's, else 0644.
  makeParents @1 :Bool;      # Create missing parent directories (0755).
  noOverwrite @2 :Bool;      # Fail with already_exists if `path` exists.
}

interface FileSink {
  write @0 (data :Data) -> stream;
  commit @1 () -> (info :FileInfo);
  # Syncs and renames the file into place; the sink is finished afterwards.
}

interface ByteSink {
  write @0 (data :Data) -> stream;
  end @1 () -> ();
  # Called once after the last chunk; streamFile returns only after it has returned, so a
  # client has every byte when the call returns.
}

enum FileType {
  file @0;
  directory @1;
  symlink @2;
  other @3;        # Device, FIFO or socket.
}

struct FileInfo {
  path @0 :Text;           # Absolute and normalized, inside the sandbox.
  type @1 :FileType;
  size @2 :UInt64;         # Bytes (files), as stat reports it otherwise.
  mode @3 :UInt32;         # Permission bits (07777).
  mtimeMs @4 :Int64;       # Last modification, ms since the Unix epoch.
  symlinkTarget @5 :Text;  # For symlinks: where it points (not resolved).
  mimeType @6 :Text;       # For files: from the name, else from the first bytes (readFile, stat).
  isBinary @7 :Bool;       # For files: the first 8 KiB hold a NUL or invalid UTF-8 (readFile).
}
