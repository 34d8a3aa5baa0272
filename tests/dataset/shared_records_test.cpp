// RecordList and SharedValue: copies share storage, and a change through one copy never shows in
// another (copy on write), across chunk boundaries too.
#include <gtest/gtest.h>

#include <algorithm>
#include <iterator>
#include <vector>

#include "fib/dataset/shared_records.h"

namespace fib {
namespace {

constexpr std::size_t kChunk = RecordList<int>::kChunkSize;

RecordList<int> numbers(std::size_t n) {
  RecordList<int> list;
  for (std::size_t i = 0; i < n; ++i) list.push_back({static_cast<int>(i), {0, 0}});
  return list;
}

std::vector<int> values(const RecordList<int>& list) {
  std::vector<int> out;
  for (const auto& r : list) out.push_back(r.value);
  return out;
}

TEST(RecordList, IndexesAndIteratesAcrossChunks) {
  const RecordList<int> list = numbers(2 * kChunk + 3);
  ASSERT_EQ(list.size(), 2 * kChunk + 3);
  for (std::size_t i = 0; i < list.size(); ++i) ASSERT_EQ(list[i].value, static_cast<int>(i));
  EXPECT_EQ(list.front().value, 0);
  EXPECT_EQ(list.back().value, static_cast<int>(2 * kChunk + 2));
  EXPECT_EQ(std::distance(list.begin(), list.end()), static_cast<std::ptrdiff_t>(list.size()));
  EXPECT_EQ((list.begin() + static_cast<std::ptrdiff_t>(kChunk))->value, static_cast<int>(kChunk));
  EXPECT_EQ(list.rbegin()->value, list.back().value);
  std::vector<int> reversed;
  for (auto it = list.rbegin(); it != list.rend(); ++it) reversed.push_back(it->value);
  std::reverse(reversed.begin(), reversed.end());
  EXPECT_EQ(reversed, values(list));
  EXPECT_TRUE(RecordList<int>().empty());
}

TEST(RecordList, AppendingToACopyLeavesTheOriginal) {
  for (std::size_t n : {std::size_t{0}, std::size_t{5}, kChunk, kChunk + 5}) {
    const RecordList<int> original = numbers(n);
    const std::vector<int> before = values(original);
    RecordList<int> a = original;
    RecordList<int> b = original;
    a.push_back({-1, {0, 0}});
    b.push_back({-2, {0, 0}});
    b.push_back({-3, {0, 0}});
    EXPECT_EQ(values(original), before) << n;
    std::vector<int> want_a = before, want_b = before;
    want_a.push_back(-1);
    want_b.insert(want_b.end(), {-2, -3});
    EXPECT_EQ(values(a), want_a) << n;
    EXPECT_EQ(values(b), want_b) << n;
    if (n > 0) {
      // A full chunk is shared by all three; a partial one was copied by the copies that grew.
      EXPECT_EQ(n >= kChunk, &a.front() == &original.front()) << n;
      EXPECT_EQ(n >= kChunk, &b.front() == &original.front()) << n;
    }
  }
}

TEST(RecordList, AListHeldAloneGrowsInPlace) {
  RecordList<int> list = numbers(3);
  const Record<int>* first = &list.front();
  list.push_back({3, {0, 0}});
  EXPECT_EQ(&list.front(), first);  // not copied: nobody else holds the chunk
  {
    const RecordList<int> copy = list;
    list.push_back({4, {0, 0}});
    EXPECT_NE(&list.front(), first);  // copied: the copy held it
    EXPECT_EQ(&copy.front(), first);
  }
  const Record<int>* own = &list.front();
  list.push_back({5, {0, 0}});
  EXPECT_EQ(&list.front(), own);
  EXPECT_EQ(values(list), (std::vector<int>{0, 1, 2, 3, 4, 5}));
}

TEST(RecordList, AMovedFromListIsEmpty) {
  RecordList<int> from = numbers(kChunk + 1);
  const RecordList<int> to = std::move(from);
  EXPECT_EQ(to.size(), kChunk + 1);
  EXPECT_TRUE(from.empty());  // NOLINT(bugprone-use-after-move): what is checked
  from.push_back({7, {0, 0}});
  EXPECT_EQ(values(from), std::vector<int>{7});
}

TEST(SharedValue, AMovedFromValueStaysReadable) {
  SharedValue<std::vector<int>> from;
  from.edit().push_back(1);
  const SharedValue<std::vector<int>> to = std::move(from);
  EXPECT_EQ(*to, std::vector<int>{1});
  EXPECT_EQ(*from, std::vector<int>{1});  // NOLINT(bugprone-use-after-move): what is checked
  from.edit().push_back(2);
  EXPECT_EQ(*to, std::vector<int>{1});
}

TEST(SharedValue, EditCopiesOnlyWhenShared) {
  SharedValue<std::vector<int>> a;
  a.edit().push_back(1);
  const std::vector<int>* alone = &*a;
  a.edit().push_back(2);
  EXPECT_EQ(&*a, alone);
  SharedValue<std::vector<int>> b = a;
  EXPECT_EQ(&*b, &*a);
  b.edit().push_back(3);
  EXPECT_EQ(*a, (std::vector<int>{1, 2}));
  EXPECT_EQ(*b, (std::vector<int>{1, 2, 3}));
  EXPECT_NE(&*b, &*a);
}

}  // namespace
}  // namespace fib
