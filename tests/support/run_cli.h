// Runs a command (or the switchyard binary built with the tests) and captures what it prints.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace sy::test {

struct CliRun {
  int code;
  std::string out;  // stdout and stderr together
};

// A shell command line; stderr is captured with stdout.
inline CliRun run_command(const std::string& command) {
  const std::string cmd = command + " 2>&1";
  CliRun r{-1, ""};
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

inline CliRun run_cli(const std::string& args) { return run_command(std::string(SY_CLI_PATH) + " " + args); }

}  // namespace sy::test
