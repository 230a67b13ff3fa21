#include "storage/blobs.hpp"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace warren::storage {
namespace fs = std::filesystem;

namespace {
error sys(const std::string& what) { return make_error(errc::internal, what + ": " + std::strerror(errno)); }
}  // namespace

sha256::sha256() : ctx_(EVP_MD_CTX_new()) { EVP_DigestInit_ex(static_cast<EVP_MD_CTX*>(ctx_), EVP_sha256(), nullptr); }
sha256::~sha256() { EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(ctx_)); }
void sha256::update(const void* data, std::size_t n) { EVP_DigestUpdate(static_cast<EVP_MD_CTX*>(ctx_), data, n); }
std::string sha256::hex() {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  EVP_DigestFinal_ex(static_cast<EVP_MD_CTX*>(ctx_), md, &len);
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned i = 0; i < len; ++i) {
    out += digits[md[i] >> 4];
    out += digits[md[i] & 15];
  }
  return out;
}

bool valid_blob_name(const std::string& name) {
  if (name.empty() || name.size() > 128 || name[0] == '.') return false;
  for (char c : name)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.')) return false;
  return true;
}

std::unique_ptr<local_blobs> local_blobs::open(const std::string& dir, error& err) {
  if (::mkdir(dir.c_str(), 0700) < 0 && errno != EEXIST) {
    err = sys("cannot create " + dir);
    return nullptr;
  }
  // Temporary files of writes a crash interrupted.
  std::error_code ec;
  for (auto& e : fs::directory_iterator(dir, ec))
    if (e.path().extension() == ".tmp") fs::remove(e.path(), ec);
  auto b = std::make_unique<local_blobs>();
  b->dir_ = dir;
  return b;
}

local_blobs::writer::~writer() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(tmp_.c_str());
  }
}

error local_blobs::writer::write(const void* data, std::size_t n) {
  auto* p = static_cast<const char*>(data);
  hash_.update(p, n);
  bytes_ += n;
  while (n > 0) {
    auto w = ::write(fd_, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return errno == ENOSPC ? make_error(errc::no_space, "the daemon's disk is full") : sys("write " + tmp_);
    p += w;
    n -= static_cast<std::size_t>(w);
  }
  return {};
}

error local_blobs::writer::commit(std::string& sha256_hex, std::uint64_t& bytes) {
  if (::fsync(fd_) < 0) return sys("fsync " + tmp_);
  ::close(fd_);
  fd_ = -1;
  if (::rename(tmp_.c_str(), path_.c_str()) < 0) {
    auto e = sys("rename " + tmp_);
    ::unlink(tmp_.c_str());
    return e;
  }
  int d = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (d >= 0) {
    ::fsync(d);
    ::close(d);
  }
  sha256_hex = hash_.hex();
  bytes = bytes_;
  return {};
}

std::unique_ptr<local_blobs::writer> local_blobs::create(const std::string& name, error& err) {
  if (!valid_blob_name(name)) {
    err = make_error(errc::invalid_argument, "invalid blob name " + name);
    return nullptr;
  }
  auto w = std::unique_ptr<writer>(new writer());
  w->dir_ = dir_;
  w->path_ = dir_ + "/" + name;
  w->tmp_ = w->path_ + ".tmp";
  w->fd_ = ::open(w->tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (w->fd_ < 0) {
    err = sys("cannot create " + w->tmp_);
    return nullptr;
  }
  return w;
}

local_blobs::reader::~reader() {
  if (fd_ >= 0) ::close(fd_);
}

error local_blobs::reader::read(void* buf, std::size_t max, std::size_t& got) {
  for (;;) {
    auto n = ::read(fd_, buf, max);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return sys("read");
    got = static_cast<std::size_t>(n);
    return {};
  }
}

std::unique_ptr<local_blobs::reader> local_blobs::open_verified(const std::string& name, const std::string& expected,
                                                                error& err) {
  if (!valid_blob_name(name)) {
    err = make_error(errc::invalid_argument, "invalid blob name " + name);
    return nullptr;
  }
  auto r = std::unique_ptr<reader>(new reader());
  r->fd_ = ::open((dir_ + "/" + name).c_str(), O_RDONLY | O_CLOEXEC);
  if (r->fd_ < 0) {
    err = errno == ENOENT ? make_error(errc::not_found, "the archive " + name + " is missing from the blob store")
                          : sys("cannot open " + name);
    return nullptr;
  }
  sha256 h;
  std::vector<char> buf(1 << 20);
  for (;;) {
    std::size_t got = 0;
    if ((err = r->read(buf.data(), buf.size(), got))) return nullptr;
    if (got == 0) break;
    h.update(buf.data(), got);
  }
  if (h.hex() != expected) {
    err = make_error(errc::corrupt, "the archive " + name + " is corrupt: its SHA-256 does not match the one recorded "
                                     "when it was made (nothing was restored)");
    return nullptr;
  }
  if (::lseek(r->fd_, 0, SEEK_SET) < 0) {
    err = sys("seek " + name);
    return nullptr;
  }
  return r;
}

error local_blobs::remove(const std::string& name) {
  if (!valid_blob_name(name)) return make_error(errc::invalid_argument, "invalid blob name " + name);
  if (::unlink((dir_ + "/" + name).c_str()) < 0 && errno != ENOENT) return sys("cannot remove " + name);
  return {};
}

std::vector<std::string> local_blobs::list() const {
  std::vector<std::string> out;
  std::error_code ec;
  for (auto& e : fs::directory_iterator(dir_, ec)) {
    auto n = e.path().filename().string();
    if (valid_blob_name(n) && e.path().extension() != ".tmp") out.push_back(n);
  }
  return out;
}

}  // namespace warren::storage
