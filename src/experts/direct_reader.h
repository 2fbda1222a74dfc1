// Reads byte ranges of a file with O_DIRECT, so the slow tier really is the disk and the
// OS page cache does not hide the cost (falls back to buffered reads plus
// POSIX_FADV_DONTNEED where the file system refuses O_DIRECT, e.g. tmpfs). Reads run on a
// few I/O threads so that several expert loads are in flight at once.
//
// With a bounce buffer, each I/O thread reads into a buffer of its own and copies the bytes
// to their destination. On the virtio disks measured here, direct reads into a few hot
// buffers ran at 3.5 GB/s while the same reads spread over an expert cache's hundreds of
// slots ran at 2.4 GB/s (the hypervisor's side of the DMA, not the guest's CPU); the copy
// costs ~15% of a core at 3 GB/s and gets most of it back (docs/expert-buffering.md).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/huge_pages.h"

namespace sy {

struct FileRange {
  uint64_t offset;
  size_t len;
};

// What the reads cost, for finding where a pipeline of loads loses time against the disk.
struct ReadStats {
  int64_t reads = 0;         // completed
  double read_seconds = 0;   // each read's duration, summed (reads overlap; those in flight up to now)
  double copy_seconds = 0;   // of that, copying out of bounce buffers (completed reads): CPU, not disk
  double busy_seconds = 0;   // wall time with at least one read in flight
  int64_t queued = 0;        // submitted jobs that have started
  double queue_seconds = 0;  // their time from submit() to an I/O thread taking them, summed
};

class DirectReader {
 public:
  static constexpr size_t kAlign = 4096;

  // `bounce_bytes` > 0 gives every I/O thread a bounce buffer of that size (reads larger than
  // it go in pieces); 0 reads straight into the destination.
  DirectReader(const std::string& path, int io_threads, size_t bounce_bytes = 0);
  ~DirectReader();
  DirectReader(const DirectReader&) = delete;
  DirectReader& operator=(const DirectReader&) = delete;

  // Bytes a buffer needs to receive `len` bytes at any file offset (alignment slack).
  static size_t span_bytes(size_t len) { return (len + 2 * kAlign - 1) / kAlign * kAlign + kAlign; }
  // Reads [offset, offset + len) into `buf` (kAlign-aligned, span_bytes(len) long) and
  // returns where the bytes start inside it. Runs on the calling thread (through the
  // thread's bounce buffer when it is one of this reader's I/O threads); throws sy::Error.
  const uint8_t* read(uint8_t* buf, uint64_t offset, size_t len) const;
  // Runs `job` on an I/O thread; an urgent job goes ahead of those already queued. The
  // queue is a ring that only grows past its largest size so far, and a job that fits
  // std::function's inline buffer (16 bytes of captures) allocates nothing either.
  void submit(std::function<void()> job, bool urgent = false);

  bool direct() const { return direct_; }
  ReadStats stats() const;
  int threads() const { return static_cast<int>(threads_.size()); }
  size_t bounce_bytes() const { return bounce_bytes_; }
  const std::string& path() const { return path_; }

 private:
  struct Job {
    std::function<void()> run;
    double submitted;
  };
  void loop(uint8_t* bounce);
  void read_span(uint8_t* dst, uint64_t start, size_t want, size_t& done) const;

  std::string path_;
  int fd_ = -1;
  bool direct_ = false;
  size_t bounce_bytes_ = 0;
  std::vector<HugePageMemory> bounce_;  // one per I/O thread
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Job> ring_;  // queued jobs: ring_[(head_ + k) % size] for k < queued_
  size_t head_ = 0, queued_ = 0;
  mutable std::mutex stats_mu_;
  mutable ReadStats stats_;
  mutable int in_flight_ = 0;
  mutable double busy_since_ = 0;
  mutable double started_sum_ = 0;  // start times of the reads in flight, summed
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace sy
