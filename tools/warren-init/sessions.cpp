// Shell sessions: state that persists between execs of one session, kept in the sandbox
// under /var/lib/warren/sessions/NAME (so hibernation, restarts and snapshots carry it):
//   state  a bash script: variables (declare -p, readonly and bash's own left out),
//          functions (declare -f) and the working directory (cd)
//   env    the exported environment (NUL-separated NAME=VALUE), for argv commands
//   cwd    the working directory, for argv commands
// A `shell` exec runs its line in bash through the wrapper below, which sources `state`,
// applies the call's own env and cwd on top, runs the line, and on exit writes the state
// back (without the call's own env and cwd: they apply to that call only). An `argv` exec
// only reads `env` and `cwd`. Each exec is a fresh process tree, so a timeout or a hung
// command kills that command only, and the session carries on.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <map>

#include "sys.hpp"

namespace warren::init {
namespace {

const std::string sessions_root = "/var/lib/warren/sessions";

// $1 line, $2 session dir, $3 names of the call's own env vars, $4 the call's own cwd.
constexpr const char* wrapper = R"WRAP(__warren_line=$1 __warren_dir=$2 __warren_call_env=$3 __warren_call_cwd=$4
set --
for __warren_n in $__warren_call_env; do eval "__warren_keep_$__warren_n=\${$__warren_n-}"; done
if [ -f "$__warren_dir/state" ]; then . "$__warren_dir/state"; fi
for __warren_n in $__warren_call_env; do eval "export $__warren_n=\"\$__warren_keep_$__warren_n\""; unset "__warren_keep_$__warren_n"; done
__warren_session_pwd=$PWD
if [ -n "$__warren_call_cwd" ]; then cd -- "$__warren_call_cwd" || exit 126; fi
__warren_save() {
  __warren_rc=$?
  __warren_pwd=$PWD
  if [ -n "$__warren_call_cwd" ]; then __warren_pwd=$__warren_session_pwd; fi
  __warren_skip='^declare -[^ ]* (BASH[A-Z_]*|SHELLOPTS|EUID|UID|PPID|GROUPS|FUNCNAME|HISTCMD|LINENO|RANDOM|SRANDOM|SECONDS|EPOCHSECONDS|EPOCHREALTIME|PIPESTATUS|DIRSTACK|COMP_[A-Z_]*|SHLVL|OLDPWD|PWD|_|__warren_[a-z_]*'
  for __warren_n in $__warren_call_env; do __warren_skip="$__warren_skip|$__warren_n"; done
  __warren_skip="$__warren_skip)(=|\$)"
  {
    declare -p | /usr/bin/grep -Ev '^declare -[a-zA-Z]*r' | /usr/bin/grep -Ev "$__warren_skip"
    if [ -f "$__warren_dir/state" ]; then
      for __warren_n in $__warren_call_env; do /usr/bin/grep -E "^declare -[^ ]* $__warren_n(=|\$)" "$__warren_dir/state"; done
    fi
    declare -f
    printf 'cd -- %q 2>/dev/null\n' "$__warren_pwd"
  } > "$__warren_dir/state.tmp" && /usr/bin/mv -f "$__warren_dir/state.tmp" "$__warren_dir/state"
  ( for __warren_n in $__warren_call_env; do unset "$__warren_n"; done
    . "$__warren_dir/state" > /dev/null 2>&1
    printf %s "$PWD" > "$__warren_dir/cwd.tmp" && /usr/bin/env -0 > "$__warren_dir/env.tmp" ) &&
    /usr/bin/mv -f "$__warren_dir/cwd.tmp" "$__warren_dir/cwd" && /usr/bin/mv -f "$__warren_dir/env.tmp" "$__warren_dir/env"
  exit $__warren_rc
}
trap __warren_save EXIT
eval "$__warren_line"
)WRAP";

std::string read_file(const std::string& path, bool& found) {
  std::ifstream in(path, std::ios::binary);
  found = static_cast<bool>(in);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void make_dirs(const std::string& path) {
  std::string at;
  for (std::size_t i = 1; i <= path.size(); ++i) {
    if (i == path.size() || path[i] == '/') {
      at = path.substr(0, i);
      if (::mkdir(at.c_str(), 0700) < 0 && errno != EEXIST) fail("mkdir", at, errno);
    }
  }
}

}  // namespace

void apply_session(const std::string& session, bool shell, const std::vector<std::string>& call_env, bool cwd_given,
                   std::vector<std::string>& argv, std::vector<std::string>& env, std::string& cwd) {
  auto dir = sessions_root + "/" + session;
  make_dirs(dir);
  bool have_env = false, have_cwd = false;
  auto saved_env = read_file(dir + "/env", have_env);
  if (have_env && !saved_env.empty()) {
    // The session's environment, then the call's own variables on top.
    std::map<std::string, std::string> own;
    for (auto& e : env) {
      auto eq = e.find('=');
      for (auto& name : call_env)
        if (e.compare(0, eq, name) == 0 && eq == name.size()) own[name] = e;
    }
    std::vector<std::string> merged;
    std::size_t at = 0;
    while (at < saved_env.size()) {
      auto end = saved_env.find('\0', at);
      if (end == std::string::npos) end = saved_env.size();
      auto entry = saved_env.substr(at, end - at);
      at = end + 1;
      auto name = entry.substr(0, entry.find('='));
      if (!own.count(name) && !entry.empty()) merged.push_back(entry);
    }
    for (auto& [name, entry] : own) merged.push_back(entry);
    env = std::move(merged);
  }
  if (!cwd_given) {
    auto saved_cwd = read_file(dir + "/cwd", have_cwd);
    struct stat st {};
    if (have_cwd && !saved_cwd.empty() && ::stat(saved_cwd.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) cwd = saved_cwd;
  }
  if (shell && argv.size() == 3) {
    std::string names;
    for (auto& n : call_env) names += (names.empty() ? "" : " ") + n;
    auto line = argv[2];
    argv = {"/bin/bash", "--noprofile", "--norc", "-c", wrapper, "warren-session", line, dir, names,
            cwd_given ? cwd : ""};
  }
}

}  // namespace warren::init

namespace warren::init {

bool create_session(const std::string& name, const std::vector<std::string>& env, const std::string& cwd) {
  make_dirs(sessions_root);
  auto dir = sessions_root + "/" + name;
  if (::mkdir(dir.c_str(), 0700) < 0) {
    if (errno == EEXIST) return false;
    fail("mkdir", dir, errno);
  }
  std::string joined;
  for (auto& e : env) joined.append(e).push_back('\0');
  for (auto [file, text] : {std::pair{"/env", joined}, std::pair{"/cwd", cwd}}) {
    std::ofstream out(dir + file, std::ios::binary | std::ios::trunc);
    out << text;
    if (!out) fail("write", dir + file, errno);
  }
  return true;
}

std::vector<std::pair<std::string, std::string>> list_sessions() {
  std::vector<std::pair<std::string, std::string>> out;
  make_dirs(sessions_root + "/default");
  DIR* d = ::opendir(sessions_root.c_str());
  if (!d) fail("opendir", sessions_root, errno);
  while (auto* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    bool found = false;
    auto cwd = read_file(sessions_root + "/" + name + "/cwd", found);
    out.emplace_back(name, found && !cwd.empty() ? cwd : "/workspace");
  }
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

bool delete_session(const std::string& name) {
  auto dir = sessions_root + "/" + name;
  struct stat st {};
  if (::lstat(dir.c_str(), &st) < 0) return false;
  for (auto file : {"state", "env", "cwd", "state.tmp", "env.tmp", "cwd.tmp"}) ::unlink((dir + "/" + file).c_str());
  if (::rmdir(dir.c_str()) < 0) fail("rmdir", dir, errno);
  return true;
}

}  // namespace warren::init
