#include "storage/layout.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

namespace warren::storage {

namespace fs = std::filesystem;

error prepare_layout(const std::string& data_dir, layout& out) {
  if (data_dir.empty()) return make_error(errc::invalid_argument, "the data directory is empty");
  std::error_code ec;
  auto abs = fs::absolute(data_dir, ec).lexically_normal().string();
  if (ec) return make_error(errc::invalid_argument, "data directory " + data_dir + ": " + ec.message());
  while (abs.size() > 1 && abs.back() == '/') abs.pop_back();
  if (abs.find_first_of(",:\\\n") != std::string::npos)
    return make_error(errc::invalid_argument,
                      "data directory " + abs +
                          " contains ',', ':', '\\' or a newline, which overlayfs mount options "
                          "cannot carry: choose another path");
  fs::create_directories(abs, ec);
  if (ec) return make_error(errc::invalid_argument, "cannot create data directory " + abs + ": " + ec.message());
  if (::chmod(abs.c_str(), 0700) != 0)
    return make_error(errc::invalid_argument,
                      "cannot chmod data directory " + abs + ": " + std::strerror(errno));
  out.data_dir = abs;
  for (auto dir : {out.sandboxes_dir(), out.data_dir + "/base"}) {
    fs::create_directories(dir, ec);
    if (ec) return make_error(errc::invalid_argument, "cannot create " + dir + ": " + ec.message());
  }
  return {};
}

error remove_tree(const std::string& path) {
  std::error_code ec;
  // remove_all removes symlinks themselves and never follows them.
  fs::remove_all(path, ec);
  if (ec && ec != std::errc::no_such_file_or_directory)
    return make_error(errc::internal, "cannot remove " + path + ": " + ec.message());
  return {};
}

std::uint64_t tree_bytes(const std::string& path) {
  std::uint64_t total = 0;
  struct stat root;
  if (::lstat(path.c_str(), &root) != 0) return 0;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(path, fs::directory_options::skip_permission_denied, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    struct stat st;
    if (::lstat(it->path().c_str(), &st) != 0) continue;
    if (st.st_dev != root.st_dev) {  // Another file system mounted inside: not ours to count.
      if (S_ISDIR(st.st_mode)) it.disable_recursion_pending();
      continue;
    }
    total += static_cast<std::uint64_t>(st.st_blocks) * 512;
  }
  return total;
}

namespace {
std::vector<std::uint64_t> numeric_entries(const std::string& dir) {
  std::vector<std::uint64_t> ids;
  std::error_code ec;
  for (auto& entry : fs::directory_iterator(dir, ec)) {
    auto name = entry.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    ids.push_back(std::stoull(name));
  }
  return ids;
}
}  // namespace

std::vector<std::uint64_t> list_sandbox_dirs(const layout& l) { return numeric_entries(l.sandboxes_dir()); }
std::vector<std::uint64_t> list_snapshot_dirs(const layout& l) { return numeric_entries(l.snapshots_dir()); }

}  // namespace warren::storage
