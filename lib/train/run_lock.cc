#include "lib/train/run_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <thread>

#include "lib/core/error.h"
#include "lib/train/run_files.h"

namespace fs = std::filesystem;

namespace trainer {
namespace {

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0 || !buf[0]) return "unknown";
  return buf;
}

std::string read_all(int fd) {
  std::string text;
  char buf[512];
  off_t at = 0;
  for (;;) {
    const ssize_t n = ::pread(fd, buf, sizeof buf, at);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0 || text.size() > 4096) break;
    text.append(buf, size_t(n));
    at += n;
  }
  return text;
}

// "pid 4242 on host build-7" from the lock file's "pid 4242\nhost build-7\n"; "" when the text
// names no holder, or names a process of this host that no longer lives: a file left by a killed
// run (its lock died with it) whose new holder has not written its own pid yet.
std::string describe_holder(const std::string& text) {
  std::string pid, host;
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(at, end - at);
    if (line.rfind("pid ", 0) == 0) pid = line.substr(4);
    if (line.rfind("host ", 0) == 0) host = line.substr(5);
    at = end + 1;
  }
  for (char& c : host)
    if (!std::isprint(static_cast<unsigned char>(c))) c = '?';
  if (pid.empty() || pid.size() > 9 || pid.find_first_not_of("0123456789") != std::string::npos) return "";
  if (host == host_name() && ::kill(pid_t(std::stol(pid)), 0) != 0 && errno == ESRCH) return "";
  return "pid " + pid + " on host " + (host.empty() ? "unknown" : host);
}

}  // namespace

RunLock::RunLock(const std::string& dir, const std::string& flag) {
  const std::string path = file_in(dir);
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0644);
  if (fd_ < 0) {
    const int err = errno;
    // A directory the user cannot write (permissions, a read-only mount) is the user's to change,
    // as an --out that cannot be created is (exit 2); a full or failing disk is not.
    const std::string why =
        flag + " " + dir + ": cannot open the lock file " + path + ": " + std::strerror(err);
    if (err == EACCES || err == EPERM || err == EROFS)
      throw UsageError(why + "; choose a directory you can write");
    throw RuntimeError(why);
  }
  struct stat st {};
  if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd_);
    fd_ = -1;
    throw DataError(flag + " " + dir + ": " + path + " is not a regular file; remove it");
  }
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    std::string holder;
    if (err == EWOULDBLOCK) {
      // The holder writes its pid right after it takes the lock: give it a moment to do so (up to
      // a second, for a loaded machine that descheduled it in between).
      for (int i = 0; i < 200 && holder.empty(); ++i) {
        holder = describe_holder(read_all(fd_));
        if (holder.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    }
    ::close(fd_);
    fd_ = -1;
    if (err != EWOULDBLOCK)
      throw RuntimeError(flag + " " + dir + ": cannot lock " + path + ": " + std::strerror(err));
    throw UsageError(flag + " " + dir + ": the run directory is in use by another trainer run (" +
                     (holder.empty() ? "its lock file names no holder yet" : holder) +
                     "); wait for it to end" + (flag == "--out" ? " or choose another --out" : ""));
  }
  const std::string me = "pid " + std::to_string(::getpid()) + "\nhost " + host_name() + "\n";
  // Best effort: the lock is what protects the directory, the text only names its holder.
  if (::ftruncate(fd_, 0) == 0) {
    ssize_t ignored = ::pwrite(fd_, me.data(), me.size(), 0);
    (void)ignored;
  }
}

RunLock::~RunLock() {
  if (fd_ < 0) return;
  // Still holding the lock: empty the file so that the next run's rival never reads this pid as
  // its holder's. Best effort (a killed run leaves its pid; describe_holder skips dead pids).
  const int ignored = ::ftruncate(fd_, 0);
  (void)ignored;
  ::close(fd_);  // releases the flock
}

int remove_stale_temp_files(const std::string& dir) {
  int removed = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    // Only the temporaries of trainer's own files: "notes.tmp-2024" is the user's.
    long pid = 0;
    const auto ours = [](const std::string& n) { return is_run_file_name(n) || is_checkpoint_file_name(n); };
    if (!is_temp_file_name(name, ours, &pid)) continue;
    if (pid <= 0 || pid == long(::getpid())) continue;
    if (::kill(pid_t(pid), 0) == 0 || errno != ESRCH) continue;  // alive, or not ours to judge
    std::error_code rm;
    if (e.is_regular_file(rm) && fs::remove(e.path(), rm)) ++removed;
  }
  return removed;
}

}  // namespace trainer
