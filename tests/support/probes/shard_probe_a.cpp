// One of three files of a test program for tests/support/test_test_shards.cpp (sharding by file).
#include <gtest/gtest.h>

TEST(ShardProbe_a, First) {}
TEST(ShardProbe_a, Second) {}
