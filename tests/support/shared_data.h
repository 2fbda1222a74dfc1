// Locates ../shared (fixtures and reference models) for tests; fails with a clear
// message when it is missing instead of skipping silently.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace sy::test {

inline std::string shared_dir() {
  const char* env = std::getenv("SY_SHARED_DIR");
  return env ? env : SY_SHARED_DIR;
}

inline std::string missing_shared_data(const std::string& path) {
  return "reference data missing: " + path +
         " (clone next to shared/, or set SY_SHARED_DIR or the CMake variable SY_SHARED_DIR to the shared/ folder)";
}

// Path of a file under shared/, asserting that it exists.
inline std::string shared_path(const std::string& rel) {
  const std::string p = shared_dir() + "/" + rel;
  if (!std::filesystem::exists(p)) ADD_FAILURE() << missing_shared_data(p);
  return p;
}

// The same for code that runs while a suite is instantiated, before any test, where a
// failed expectation goes nowhere: a missing file stops the binary with its name (and the
// build, whose test discovery runs it).
inline std::string required_shared_path(const std::string& rel) {
  const std::string p = shared_dir() + "/" + rel;
  if (!std::filesystem::is_regular_file(p)) {
    std::fprintf(stderr, "%s\n", missing_shared_data(p).c_str());
    std::exit(2);
  }
  return p;
}

inline std::vector<float> read_f32_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  in.seekg(0, std::ios::end);
  const auto size = static_cast<size_t>(in.tellg());
  in.seekg(0);
  std::vector<float> v(size / sizeof(float));
  in.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(float)));
  return v;
}

inline std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace sy::test
