// Helpers for tests that run the gpuaas binary: run a command and capture its output, start a
// server in the background and learn its port from its log.
#ifndef GPUAAS_TEST_PROCESS_H_
#define GPUAAS_TEST_PROCESS_H_

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace gpuaas::testing {

inline std::string Bin() {
  const char* b = std::getenv("GPUAAS_BIN");
  return b ? b : "build/dev/src/exe/gpuaas";
}

struct RunResult {
  int code = -1;
  std::string out;  // stdout and stderr together
};

// Runs `cmd` through the shell with stderr folded into stdout.
inline RunResult RunShell(const std::string& cmd) {
  RunResult r;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// Runs the gpuaas binary with `args`, stderr folded into stdout.
inline RunResult RunGpuaas(const std::string& args) { return RunShell(Bin() + " " + args); }

// Whether `cond` holds within `timeout`, looked at every `step`.
inline bool Eventually(const std::function<bool()>& cond, std::chrono::milliseconds timeout,
                       std::chrono::milliseconds step = std::chrono::milliseconds(100)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (cond()) return true;
    std::this_thread::sleep_for(step);
  }
  return cond();
}

inline std::vector<std::string> Lines(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// Any long-running child (`gpuaas server`, `gpuaas agent`, `prometheus`): started through the
// shell with output to a log, ready once the log matches `ready` (its first group, if any, is
// kept: a port).
class Background {
 public:
  bool Start(const std::string& cmd, const std::string& log_path, const std::string& ready, int timeout_s = 30) {
    log_path_ = log_path;
    // Empty the log here, before the child exists: a log left by an earlier run of the same
    // command (a restart) must not be read as this one's (its port).
    std::ofstream(log_path, std::ios::trunc).close();
    pid_ = fork();
    if (pid_ == 0) {
      FILE* f = std::fopen(log_path.c_str(), "w");
      dup2(fileno(f), 1);
      dup2(fileno(f), 2);
      const std::string c = "exec " + cmd;
      execl("/bin/sh", "sh", "-c", c.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    const std::regex re(ready);
    for (int i = 0; i < timeout_s * 20; ++i) {
      std::smatch m;
      const std::string text = Log();
      if (std::regex_search(text, m, re)) {
        if (m.size() > 1) match_ = m[1];
        return true;
      }
      int status;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }
  int Stop(int sig = SIGTERM) {
    if (pid_ <= 0) return -1;
    kill(pid_, sig);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
  }
  ~Background() { Stop(SIGKILL); }
  const std::string& match() const { return match_; }
  std::string Log() const {
    std::ifstream in(log_path_);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

 private:
  pid_t pid_ = -1;
  std::string log_path_;

 public:
  pid_t pid() const { return pid_; }

 private:
  std::string match_;
};

// A `gpuaas server` child process on a free port.
class ServerProcess {
 public:
  // Starts the server with `args` (plus --listen 127.0.0.1:0) and waits until it serves.
  bool Start(const std::string& args, const std::string& log_path) {
    if (!child_.Start(Bin() + " server --listen 127.0.0.1:0 " + args, log_path,
                      R"(serving http://127\.0\.0\.1:(\d+))")) {
      return false;
    }
    port_ = std::stoi(child_.match());
    return true;
  }
  // Sends `sig` and returns the exit status (or -signal).
  int Stop(int sig = SIGTERM) { return child_.Stop(sig); }
  // Sends `sig` without waiting (SIGSTOP, SIGCONT).
  void Signal(int sig) const { kill(child_.pid(), sig); }
  // Whether the process still runs (it has not exited).
  bool Alive() const { return kill(child_.pid(), 0) == 0 && !Exited(); }
  std::string Url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::string Log() const { return child_.Log(); }
  // Resident memory of the server process, from /proc (0 when unknown).
  int64_t RssKiB() const {
    std::ifstream in("/proc/" + std::to_string(child_.pid()) + "/status");
    for (std::string line; std::getline(in, line);) {
      if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6));
    }
    return 0;
  }

 private:
  bool Exited() const {
    std::ifstream in("/proc/" + std::to_string(child_.pid()) + "/stat");
    std::string pid, comm, state;
    in >> pid >> comm >> state;
    return !in || state == "Z";
  }
  Background child_;
  int port_ = 0;
};

}  // namespace gpuaas::testing

#endif  // GPUAAS_TEST_PROCESS_H_
