// RecordBuffer (src/log/record_buffer.hpp): every length of piece, within the inline storage and
// beyond it, comes out as std::string's append gives it.
#include <gtest/gtest.h>

#include <string>

#include "log/record_buffer.hpp"

namespace {

TEST(RecordBuffer, AppendsPiecesOfEveryLengthAsAStringDoes) {
  std::string source;
  for (int i = 0; i < 100; ++i) source.push_back(static_cast<char>('!' + i % 90));
  mate::log::detail::InlineRecordBuffer<64> out;  // outgrown after a few pieces: the heap as well
  std::string expected;
  for (std::size_t n = 0; n <= 40; ++n) {
    for (std::size_t offset : {std::size_t{0}, std::size_t{3}, std::size_t{7}}) {
      out.append(source.data() + offset, n);
      expected.append(source.data() + offset, n);
      ASSERT_EQ(out.view(), expected) << "after a piece of " << n << " bytes";
    }
  }
  out.push_back('x');
  expected.push_back('x');
  EXPECT_EQ(out.view(), expected);
  out.clear();
  out.append(std::string_view("ab"));
  EXPECT_EQ(out.view(), "ab");
}

}  // namespace
