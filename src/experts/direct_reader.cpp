#include "experts/direct_reader.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/clock.h"
#include "base/error.h"
#include "base/worker_signals.h"

namespace sy {

namespace {

// The bounce buffer of the calling thread, when it is an I/O thread of `owner`.
struct Bounce {
  const DirectReader* owner = nullptr;
  uint8_t* data = nullptr;
};
thread_local Bounce t_bounce;

}  // namespace

DirectReader::DirectReader(const std::string& path, int io_threads, size_t bounce_bytes) : path_(path) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECT);
  direct_ = fd_ >= 0;
  if (!direct_) fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) throw Error(path + ": cannot open for expert loading: " + std::strerror(errno));
  ring_.resize(256);
  if (bounce_bytes > 0) {
    bounce_bytes_ = (bounce_bytes + kAlign - 1) / kAlign * kAlign;
    for (int i = 0; i < io_threads; ++i) bounce_.emplace_back(bounce_bytes_, /*prefault=*/true);
  }
  for (int i = 0; i < io_threads; ++i) threads_.emplace_back([this, i] {
    block_stop_signals_in_this_thread();
    loop(bounce_.empty() ? nullptr : bounce_[static_cast<size_t>(i)].data());
  });
}

DirectReader::~DirectReader() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
  if (fd_ >= 0) ::close(fd_);
}

const uint8_t* DirectReader::read(uint8_t* buf, uint64_t offset, size_t len) const {
  const uint64_t start = offset / kAlign * kAlign;
  const uint64_t end = (offset + len + kAlign - 1) / kAlign * kAlign;
  size_t done = 0;
  const size_t want = static_cast<size_t>(end - start);
  const double t0 = now_seconds();
  {
    std::lock_guard<std::mutex> lock(stats_mu_);
    if (in_flight_++ == 0) busy_since_ = t0;
    started_sum_ += t0;
  }
  struct Done {  // counts the read as over however it leaves
    const DirectReader& r;
    double t0;
    double copying = 0;
    ~Done() {
      const double t1 = now_seconds();
      std::lock_guard<std::mutex> lock(r.stats_mu_);
      r.stats_.reads++;
      r.stats_.read_seconds += t1 - t0;
      r.stats_.copy_seconds += copying;
      r.started_sum_ -= t0;
      if (--r.in_flight_ == 0) {
        r.stats_.busy_seconds += t1 - r.busy_since_;
        r.started_sum_ = 0;  // exactly, whatever the rounding of the sums
      }
    }
  } done_guard{*this, t0};
  if (t_bounce.owner == this) {
    // In pieces of the bounce buffer's size, each copied to its place.
    while (done < want) {
      const size_t piece = std::min(bounce_bytes_, want - done);
      size_t got = 0;
      read_span(t_bounce.data, start + done, piece, got);
      const double c0 = now_seconds();
      std::memcpy(buf + done, t_bounce.data, got);
      done_guard.copying += now_seconds() - c0;
      done += got;
      if (got < piece) break;
    }
  } else {
    read_span(buf, start, want, done);
  }
  if (done < offset - start + len) throw Error(path_ + ": expert data past the end of the file (truncated?)");
  if (!direct_) ::posix_fadvise(fd_, static_cast<off_t>(start), static_cast<off_t>(want), POSIX_FADV_DONTNEED);
  return buf + (offset - start);
}

// Reads up to `want` bytes at `start` into dst; `done` counts them (fewer at the end of the file).
void DirectReader::read_span(uint8_t* dst, uint64_t start, size_t want, size_t& done) const {
  while (done < want) {
    const ssize_t n = ::pread(fd_, dst + done, want - done, static_cast<off_t>(start + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      throw Error(path_ + ": expert read failed at offset " + std::to_string(start + done) + ": " + std::strerror(errno));
    }
    if (n == 0) break;  // end of file: the last tensor need not fill the aligned tail
    done += static_cast<size_t>(n);
  }
}

ReadStats DirectReader::stats() const {
  std::lock_guard<std::mutex> lock(stats_mu_);
  // Reads still in flight count up to now, in both sums, so that between two snapshots
  // read_seconds is the integral of the reads in flight and busy_seconds the time that
  // integral was growing.
  ReadStats s = stats_;
  if (in_flight_ > 0) {
    const double now = now_seconds();
    s.busy_seconds += now - busy_since_;
    s.read_seconds += in_flight_ * now - started_sum_;
  }
  return s;
}

void DirectReader::submit(std::function<void()> job, bool urgent) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (queued_ == ring_.size()) {  // full: unroll into a ring twice the size
      std::vector<Job> grown(2 * ring_.size());
      for (size_t k = 0; k < queued_; ++k) grown[k] = std::move(ring_[(head_ + k) % ring_.size()]);
      ring_ = std::move(grown);
      head_ = 0;
    }
    const size_t at = urgent ? (head_ = (head_ + ring_.size() - 1) % ring_.size()) : (head_ + queued_) % ring_.size();
    ring_[at] = Job{std::move(job), now_seconds()};
    queued_++;
  }
  cv_.notify_one();
}

void DirectReader::loop(uint8_t* bounce) {
  if (bounce) t_bounce = {this, bounce};
  for (;;) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || queued_ > 0; });
      if (queued_ == 0) return;
      job = std::move(ring_[head_]);
      head_ = (head_ + 1) % ring_.size();
      queued_--;
    }
    const double waited = now_seconds() - job.submitted;
    {
      std::lock_guard<std::mutex> lock(stats_mu_);
      stats_.queued++;
      stats_.queue_seconds += waited;
    }
    job.run();
  }
}

}  // namespace sy
