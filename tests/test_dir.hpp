// A temporary directory for one test, removed with everything in it afterwards.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>

struct test_dir {
  std::string path;
  test_dir() {
    char tmpl[] = "/tmp/warren-test-XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~test_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  test_dir(const test_dir&) = delete;
  test_dir& operator=(const test_dir&) = delete;
};
