// The log sink: one write(2) per record on an O_APPEND descriptor, stderr as the fallback.
#include "mate/core/log_sink.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace mate::core {

std::string expand_pid(std::string_view pattern, long pid) {
  std::string out;
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '%' && i + 1 < pattern.size() && pattern[i + 1] == 'i') {
      out += std::to_string(pid);
      ++i;
    } else {
      out += pattern[i];
    }
  }
  return out;
}

namespace {

void write_all(int fd, const char* data, std::size_t size, int* error) noexcept {
  *error = 0;
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      *error = errno;
      return;
    }
    data += n;
    size -= static_cast<std::size_t>(n);
  }
}

void say(const std::string& message) noexcept {
  int ignored;
  write_all(2, message.data(), message.size(), &ignored);
}

}  // namespace

std::unique_ptr<LogSink> LogSink::open(std::string_view destination) {
  std::unique_ptr<LogSink> sink(new LogSink());
  if (destination.empty() || destination == "stdout") {
    sink->path_ = "stdout";
    sink->fd_ = 1;
    return sink;
  }
  if (destination == "stderr") {
    sink->path_ = "stderr";
    sink->fd_ = 2;
    return sink;
  }
  sink->path_ = expand_pid(destination, static_cast<long>(::getpid()));
  std::filesystem::path parent = std::filesystem::path(sink->path_).parent_path();
  if (!parent.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(parent, ec);  // open() below reports what matters
  }
  int fd = ::open(sink->path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) {
    sink->fall_back(errno);
    return sink;
  }
  sink->owned_ = fd;
  sink->fd_ = fd;
  return sink;
}

LogSink::~LogSink() {
  if (owned_ >= 0) ::close(owned_);
}

void LogSink::fall_back(int error) noexcept {
  bool expected = false;
  if (!fallback_.compare_exchange_strong(expected, true)) return;  // one message per sink
  fd_.store(2, std::memory_order_relaxed);
  try {
    say("mate: cannot write the API log to '" + path_ + "': " + std::strerror(error) +
        "; logging to stderr instead\n");
  } catch (...) {
  }
}

void LogSink::write(std::string_view record) noexcept {
  int fd = fd_.load(std::memory_order_relaxed);
  int error = 0;
  write_all(fd, record.data(), record.size(), &error);
  if (error != 0 && fd != 2) {
    fall_back(error);
    write_all(2, record.data(), record.size(), &error);
  }
}

}  // namespace mate::core
