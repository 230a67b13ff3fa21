#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "storage/base_image.hpp"
#include "storage/layout.hpp"
#include "test_dir.hpp"

using namespace warren;
using namespace warren::storage;
namespace fs = std::filesystem;

TEST_CASE("the data directory is created private and absolute", "[layout]") {
  test_dir dir;
  layout l;
  REQUIRE_FALSE(prepare_layout(dir.path + "/data/", l));
  CHECK(l.data_dir == dir.path + "/data");
  struct stat st;
  REQUIRE(::stat(l.data_dir.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0700);
  CHECK(fs::is_directory(l.sandboxes_dir()));
  CHECK(l.sandbox_dir(12) == l.data_dir + "/sandboxes/12");
}

TEST_CASE("data directories that overlay options cannot carry are refused", "[layout]") {
  test_dir dir;
  layout l;
  for (auto bad : {"/a,b", "/a:b", "/a\\b"}) {
    auto e = prepare_layout(dir.path + bad, l);
    CHECK(e.code == errc::invalid_argument);
  }
}

TEST_CASE("the base image has a generated /etc and no host secret", "[layout][security]") {
  test_dir dir;
  // A fake host /etc with secrets next to the files that are copied.
  auto etc = dir.path + "/etc";
  fs::create_directories(etc + "/ssl/private");
  fs::create_directories(etc + "/ssl/certs");
  std::ofstream(etc + "/shadow") << "root:$6$secret:::\n";
  std::ofstream(etc + "/ssl/private/key.pem") << "PRIVATE KEY\n";
  std::ofstream(etc + "/ssl/certs/ca.pem") << "CERT\n";
  std::ofstream(etc + "/os-release") << "ID=debian\n";
  std::ofstream(etc + "/passwd") << "root:x:0:0::/root:/bin/bash\nalice:x:1000:1000::/home/alice:/bin/sh\n";
  auto base = dir.path + "/base";
  REQUIRE_FALSE(ensure_base_image(base, etc));
  CHECK(fs::exists(base + "/etc/ssl/certs/ca.pem"));
  CHECK(fs::exists(base + "/etc/os-release"));
  CHECK_FALSE(fs::exists(base + "/etc/shadow"));
  CHECK_FALSE(fs::exists(base + "/etc/ssl/private"));
  std::ifstream passwd(base + "/etc/passwd");
  std::string all((std::istreambuf_iterator<char>(passwd)), std::istreambuf_iterator<char>());
  CHECK(all.find("alice") == std::string::npos);  // Generated, not copied.
  CHECK(all.find("root:x:0:0") != std::string::npos);
  CHECK(fs::is_symlink(base + "/bin"));
  CHECK(fs::read_symlink(base + "/bin") == "usr/bin");
  CHECK(fs::is_directory(base + "/workspace"));
  // Idempotent: a second call keeps what is there.
  std::ofstream(base + "/etc/marker") << "x";
  REQUIRE_FALSE(ensure_base_image(base, etc));
  CHECK(fs::exists(base + "/etc/marker"));
}

TEST_CASE("remove_tree removes a tree without following symlinks", "[layout][security]") {
  test_dir dir;
  auto outside = dir.path + "/outside";
  fs::create_directories(outside);
  std::ofstream(outside + "/keep") << "x";
  auto tree = dir.path + "/tree";
  fs::create_directories(tree + "/a/b");
  fs::create_directory_symlink(outside, tree + "/a/link");
  REQUIRE_FALSE(remove_tree(tree));
  CHECK_FALSE(fs::exists(tree));
  CHECK(fs::exists(outside + "/keep"));
  CHECK_FALSE(remove_tree(tree));  // Missing is fine.
}
