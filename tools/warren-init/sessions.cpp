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

// $1 line, $2 session dir, $3 names of the call's own env vars, $4 the call's own cwd,
// $5 "save" to write the state back on exit (execs), else nothing is saved (background
// processes read a session, they never change it).
// Saving uses builtins only (each external command costs a fork and an exec, ~7 ms on a
// small VM): the raw dumps go to vars.raw / funcs.raw / exports.raw / cwd.raw, and the
// agent turns them into the session's state when the exec ends (finish_session_exec).
constexpr const char* wrapper = R"WRAP(__warren_line=$1 __warren_dir=$2 __warren_call_env=$3 __warren_call_cwd=$4 __warren_save_state=$5
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
  declare -p > "$__warren_dir/vars.raw"
  declare -f > "$__warren_dir/funcs.raw"
  export -p > "$__warren_dir/exports.raw"
  printf %s "$__warren_pwd" > "$__warren_dir/cwd.raw"
  exit $__warren_rc
}
if [ "$__warren_save_state" = save ]; then trap __warren_save EXIT; fi
unset __warren_save_state
eval "$__warren_line"
)WRAP";

// Splits the output of bash's `declare -p` / `export -p` into one string per variable,
// honouring "..." and $'...' quoting (values may hold newlines).
std::vector<std::string> split_declarations(const std::string& text) {
  std::vector<std::string> out;
  std::string cur;
  enum { plain, dq, ansi } mode = plain;
  for (std::size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    cur.push_back(c);
    if (mode == plain) {
      if (c == '"') mode = dq;
      else if (c == '\'' && cur.size() >= 2 && cur[cur.size() - 2] == '$') mode = ansi;
      else if (c == '\n') {
        cur.pop_back();
        if (!cur.empty()) out.push_back(std::move(cur));
        cur.clear();
      }
    } else if (c == '\\' && i + 1 < text.size()) {
      cur.push_back(text[++i]);
    } else if ((mode == dq && c == '"') || (mode == ansi && c == '\'')) {
      mode = plain;
    }
  }
  if (!cur.empty()) out.push_back(std::move(cur));
  return out;
}

// "declare -x NAME=..." -> flags "x", name "NAME", value text after '=' (quoted), has_value.
struct declaration {
  std::string flags, name, value;
  bool has_value = false;
};

declaration parse_declaration(const std::string& entry) {
  declaration d;
  if (entry.rfind("declare -", 0) != 0) return d;
  auto space = entry.find(' ', 9);
  if (space == std::string::npos) return d;
  d.flags = entry.substr(9, space - 9);
  auto rest = entry.substr(space + 1);
  auto eq = rest.find('=');
  d.name = rest.substr(0, eq);
  if (eq != std::string::npos) {
    d.has_value = true;
    d.value = rest.substr(eq + 1);
  }
  return d;
}

// The value bash printed, unquoted ("..." or $'...' or bare).
std::string unquote(const std::string& v) {
  std::string out;
  if (v.size() >= 2 && v.front() == '"' && v.back() == '"') {
    for (std::size_t i = 1; i + 1 < v.size(); ++i) {
      if (v[i] == '\\' && i + 2 < v.size() && std::string("\"\\$`").find(v[i + 1]) != std::string::npos) ++i;
      out.push_back(v[i]);
    }
    return out;
  }
  if (v.size() >= 3 && v.compare(0, 2, "$'") == 0 && v.back() == '\'') {
    for (std::size_t i = 2; i + 1 < v.size(); ++i) {
      if (v[i] != '\\' || i + 2 >= v.size()) {
        out.push_back(v[i]);
        continue;
      }
      char e = v[++i];
      switch (e) {
        case 'n': out.push_back('\n'); break;
        case 't': out.push_back('\t'); break;
        case 'r': out.push_back('\r'); break;
        case 'a': out.push_back('\a'); break;
        case 'b': out.push_back('\b'); break;
        case 'e': case 'E': out.push_back('\x1b'); break;
        case 'f': out.push_back('\f'); break;
        case 'v': out.push_back('\v'); break;
        case '0': case '1': case '2': case '3': case '4': case '5': case '6': case '7': {
          int n = e - '0';
          for (int k = 0; k < 2 && i + 2 < v.size() && v[i + 1] >= '0' && v[i + 1] <= '7'; ++k) n = n * 8 + (v[++i] - '0');
          out.push_back(static_cast<char>(n));
          break;
        }
        default: out.push_back(e);
      }
    }
    return out;
  }
  return v;
}

// Variables of bash itself, which a restore must not set (or cannot: readonly).
bool bash_own(const std::string& name) {
  static const char* exact[] = {"SHELLOPTS", "EUID", "UID", "PPID", "GROUPS", "FUNCNAME", "HISTCMD", "LINENO",
                                "RANDOM", "SRANDOM", "SECONDS", "EPOCHSECONDS", "EPOCHREALTIME", "PIPESTATUS",
                                "DIRSTACK", "SHLVL", "OLDPWD", "PWD", "_", "BASHOPTS", "BASHPID"};
  for (auto e : exact)
    if (name == e) return true;
  return name.rfind("BASH_", 0) == 0 || name.rfind("COMP_", 0) == 0 || name.rfind("__warren_", 0) == 0;
}

bool write_atomically(const std::string& path, const std::string& text) {
  auto tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    if (!out) return false;
  }
  return ::rename(tmp.c_str(), path.c_str()) == 0;
}

std::string single_quoted(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

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
                   std::vector<std::string>& argv, std::vector<std::string>& env, std::string& cwd, bool save) {
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
            cwd_given ? cwd : "", save ? "save" : "read"};
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
  for (auto file : {"state", "env", "cwd", "state.tmp", "env.tmp", "cwd.tmp", "vars.raw", "funcs.raw", "exports.raw",
                    "cwd.raw"})
    ::unlink((dir + "/" + file).c_str());
  if (::rmdir(dir.c_str()) < 0) fail("rmdir", dir, errno);
  return true;
}

void finish_session_exec(const std::string& session, const std::vector<std::string>& call_env) {
  auto dir = sessions_root + "/" + session;
  bool have_vars = false, have_funcs = false, have_exports = false, have_cwd = false, found = false;
  auto vars = read_file(dir + "/vars.raw", have_vars);
  if (!have_vars) return;  // The line exec'd another program or was killed: nothing saved.
  auto funcs = read_file(dir + "/funcs.raw", have_funcs);
  auto exports = read_file(dir + "/exports.raw", have_exports);
  auto cwd = read_file(dir + "/cwd.raw", have_cwd);
  auto is_call_env = [&](const std::string& name) {
    return std::find(call_env.begin(), call_env.end(), name) != call_env.end();
  };
  // The call's own variables keep the values the session had before the call.
  std::map<std::string, std::string> before_state, before_env;
  for (auto& e : split_declarations(read_file(dir + "/state", found))) {
    auto d = parse_declaration(e);
    if (is_call_env(d.name)) before_state[d.name] = e;
  }
  auto old_env = read_file(dir + "/env", found);
  for (std::size_t at = 0; at < old_env.size();) {
    auto end = old_env.find('\0', at);
    if (end == std::string::npos) end = old_env.size();
    auto entry = old_env.substr(at, end - at);
    at = end + 1;
    auto name = entry.substr(0, entry.find('='));
    if (is_call_env(name)) before_env[name] = entry;
  }

  std::string state;
  for (auto& e : split_declarations(vars)) {
    auto d = parse_declaration(e);
    if (d.name.empty() || d.flags.find('r') != std::string::npos || bash_own(d.name) || is_call_env(d.name)) continue;
    state += e + "\n";
  }
  for (auto& [name, e] : before_state) state += e + "\n";
  state += funcs;
  if (have_cwd && !cwd.empty()) state += "cd -- " + single_quoted(cwd) + " 2>/dev/null\n";

  std::string env;
  for (auto& e : split_declarations(exports)) {
    auto d = parse_declaration(e);
    if (!d.has_value || d.name.empty() || bash_own(d.name) || is_call_env(d.name)) continue;
    env += d.name + "=" + unquote(d.value);
    env.push_back('\0');
  }
  for (auto& [name, e] : before_env) {
    env += e;
    env.push_back('\0');
  }
  write_atomically(dir + "/state", state);
  if (have_exports) write_atomically(dir + "/env", env);
  if (have_cwd && !cwd.empty()) write_atomically(dir + "/cwd", cwd);
  for (auto f : {"/vars.raw", "/funcs.raw", "/exports.raw", "/cwd.raw"}) ::unlink((dir + f).c_str());
}

}  // namespace warren::init
