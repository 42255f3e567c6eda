// The buffer a log record is rendered into before its one write(2).
//
// Why not fmt::memory_buffer: a record is built from ~50 small pieces, and fmt's append is an
// out-of-line call with a memcpy for each (a quarter of a level-3 call's own time). Here an
// append of a literal is an inlined copy of a known size.
//
// RecordBuffer is the interface renderers take; InlineRecordBuffer<N> keeps the first N bytes in
// itself (on the stack, or in a call's state), beyond them the heap.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string_view>

namespace mate::log::detail {

// memcpy, with the short copies of a record's pieces (names, type names, numbers' text: a few
// to a few dozen bytes, of a length known only at run time) done inline as two overlapping
// moves, not as a call to the library's memcpy (~5 ns each, tens per record).
inline void copy_short(char* to, const char* from, std::size_t n) noexcept {
  if (n >= 8 && n <= 16) {
    std::uint64_t head, tail;
    std::memcpy(&head, from, 8);
    std::memcpy(&tail, from + n - 8, 8);
    std::memcpy(to, &head, 8);
    std::memcpy(to + n - 8, &tail, 8);
  } else if (n >= 4 && n < 8) {
    std::uint32_t head, tail;
    std::memcpy(&head, from, 4);
    std::memcpy(&tail, from + n - 4, 4);
    std::memcpy(to, &head, 4);
    std::memcpy(to + n - 4, &tail, 4);
  } else if (n > 0 && n < 4) {
    const char first = from[0], middle = from[n / 2], last = from[n - 1];
    to[0] = first;
    to[n / 2] = middle;
    to[n - 1] = last;
  } else if (n > 16) {
    std::memcpy(to, from, n);
  }
}

class RecordBuffer {
 public:
  RecordBuffer(const RecordBuffer&) = delete;
  RecordBuffer& operator=(const RecordBuffer&) = delete;

  const char* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return size_; }
  std::string_view view() const noexcept { return {data_, size_}; }
  void clear() noexcept { size_ = 0; }

  void append(const char* p, std::size_t n) {
    copy_short(room(n), p, n);
    size_ += n;
  }
  void append(std::string_view s) { append(s.data(), s.size()); }
  void push_back(char c) {
    *room(1) = c;
    ++size_;
  }
  // Where the next `n` bytes go; advance(k) then keeps k <= n of them.
  char* room(std::size_t n) {
    if (n > capacity_ - size_) [[unlikely]] grow(n);
    return data_ + size_;
  }
  void advance(std::size_t k) noexcept { size_ += k; }

 protected:
  RecordBuffer(char* storage, std::size_t capacity) noexcept : data_(storage), capacity_(capacity) {}
  ~RecordBuffer() = default;

 private:
  [[gnu::noinline]] void grow(std::size_t n) {
    std::size_t capacity = capacity_ * 2;
    while (capacity - size_ < n) capacity *= 2;
    auto bigger = std::make_unique_for_overwrite<char[]>(capacity);  // not zeroed: about to be written
    std::memcpy(bigger.get(), data_, size_);
    heap_ = std::move(bigger);
    data_ = heap_.get();
    capacity_ = capacity;
  }

  char* data_;
  std::size_t size_ = 0;
  std::size_t capacity_;
  std::unique_ptr<char[]> heap_;
};

template <std::size_t N>
class InlineRecordBuffer : public RecordBuffer {
 public:
  InlineRecordBuffer() noexcept : RecordBuffer(storage_, N) {}

 private:
  char storage_[N];
};

}  // namespace mate::log::detail
