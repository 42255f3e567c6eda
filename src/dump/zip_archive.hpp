// ZIP archives of STORED (uncompressed) entries, as torch.save's zip container uses them
// (PKWARE APPNOTE 6.3: local file headers, central directory, end of central directory, ZIP64).
// Private to the dump component.
//
// The writer aligns every entry's data to 64 bytes (a padding extra field, as PyTorch's own
// writer does, so the data can be memory-mapped), records each entry's CRC-32 (zlib), and
// switches an entry, and the archive's end records, to ZIP64 when a size or offset does not fit
// 32 bits (or always, for tests). Entries are streamed: the data's size is given first, its CRC
// is patched into the local header once the data is written.
//
// The reader reads only what it is asked for, with every offset and size checked against the
// archive's size first: damage is a ZipError saying what is wrong.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace mate::dump::detail {

struct ZipError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Where an archive is written: appends, and overwrites of bytes already written (the CRC).
struct ZipOutput {
  virtual ~ZipOutput() = default;
  virtual bool append(const void* data, std::size_t bytes) = 0;
  virtual bool overwrite(std::uint64_t offset, const void* data, std::size_t bytes) = 0;
};

struct ZipOptions {
  bool force_zip64 = false;  // ZIP64 records for every entry and the end, whatever the sizes
};

inline constexpr std::uint64_t kZipDataAlignment = 64;

class ZipWriter {
 public:
  explicit ZipWriter(ZipOutput& out, ZipOptions options = {}) : out_(out), options_(options) {}
  // A whole entry.
  bool add(std::string_view name, std::string_view data);
  // A streamed entry of exactly `size` bytes: begin, append the bytes, end (false when the
  // bytes appended are not `size`, or a write failed).
  bool begin(std::string_view name, std::uint64_t size);
  bool append(const void* data, std::size_t bytes);
  bool end();
  // The central directory and the end records. No entry can be added after.
  bool finish();
  std::uint64_t size() const noexcept { return at_; }
  // The CRC-32 of the last entry ended.
  std::uint32_t last_crc() const noexcept { return entries_.empty() ? 0 : entries_.back().crc; }

  // The archive's size for entries of these name lengths and data sizes, in this order.
  static std::uint64_t archive_size(const std::vector<std::pair<std::size_t, std::uint64_t>>& entries, ZipOptions options = {});

 private:
  struct Entry {
    std::string name;
    std::uint64_t offset = 0;  // of the local header
    std::uint64_t size = 0;
    std::uint32_t crc = 0;
    bool zip64 = false;
  };
  bool put(const void* data, std::size_t bytes);
  ZipOutput& out_;
  ZipOptions options_;
  std::vector<Entry> entries_;
  std::uint64_t at_ = 0;
  bool open_ = false;          // an entry is being streamed
  std::uint64_t streamed_ = 0; // its bytes so far
  bool failed_ = false;
};

// A random-access source of bytes: the archive.
struct ZipSource {
  std::uint64_t size = 0;
  // Reads exactly `bytes` at `offset` (within size); throws on failure.
  std::function<void(std::uint64_t offset, void* into, std::size_t bytes)> read;
};

struct ZipEntry {
  std::string name;
  std::uint64_t size = 0;
  std::uint32_t crc = 0;
  std::uint64_t header_offset = 0;  // of its local header
};

class ZipReader {
 public:
  // Reads the end records and the central directory (at most kMaxEntries entries).
  explicit ZipReader(ZipSource source);
  static constexpr std::size_t kMaxEntries = 4096;
  const std::vector<ZipEntry>& entries() const noexcept { return entries_; }
  // The entry named `name`, or nullptr.
  const ZipEntry* find(std::string_view name) const noexcept;
  // Where the entry's data starts in the archive (its local header checked).
  std::uint64_t data_offset(const ZipEntry& e) const;
  // The entry's bytes [offset, offset + bytes) into `into`. When the whole entry is read
  // (offset 0, bytes == size), its CRC-32 is checked.
  void read(const ZipEntry& e, std::uint64_t offset, void* into, std::size_t bytes) const;
  // The whole entry as a string; entries above `max_bytes` are refused.
  std::string read_all(const ZipEntry& e, std::uint64_t max_bytes) const;

 private:
  ZipSource source_;
  std::vector<ZipEntry> entries_;
  std::uint64_t directory_offset_ = 0;  // entries' data lie before it
};

// zlib's CRC-32 of `bytes`, continuing `crc`.
std::uint32_t crc32_of(std::uint32_t crc, const void* data, std::size_t bytes) noexcept;

}  // namespace mate::dump::detail
