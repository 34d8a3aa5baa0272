// Records of a dataset and the storage that lets copies of a TraceSet share them: a snapshot
// made from another (TraceSet::with_traces) copies only what changes, and what it shares is
// never written while shared, so the older snapshot stays readable from other threads.
#pragma once

#include <atomic>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <memory>
#include <utility>
#include <vector>

namespace fib {

// Where a record came from: file index into TraceSet::files() and 1-based line (0 for JSON).
struct RecordSource {
  std::uint32_t file = 0;
  std::uint32_t line = 0;
};

template <typename T>
struct Record {
  T value;
  RecordSource source;
};

namespace detail {

// Whether `owner` may be written in place: no other copy holds its value. The acquire fence
// orders the write after everything the last other holder did before it let go (its release
// of the count), which use_count()'s plain load does not.
template <typename T>
bool owned_alone(const std::shared_ptr<T>& owner) {
  if (owner.use_count() != 1) return false;
  std::atomic_thread_fence(std::memory_order_acquire);
  return true;
}

}  // namespace detail

// A value shared by the copies that hold it and copied on the first change made through a copy
// that does not hold it alone (copy on write).
template <typename T>
class SharedValue {
 public:
  SharedValue() : value_(std::make_shared<T>()) {}
  // Copied, not moved: a moved-from holder still holds the value (a pointer copy), so a
  // moved-from TraceSet stays readable.
  SharedValue(const SharedValue&) = default;
  SharedValue& operator=(const SharedValue&) = default;
  const T& operator*() const { return *value_; }
  const T* operator->() const { return value_.get(); }
  // The value, for changing it: this copy's own from here on.
  T& edit() {
    if (!detail::owned_alone(value_)) value_ = std::make_shared<T>(std::as_const(*value_));
    return *value_;
  }

 private:
  std::shared_ptr<T> value_;
};

// A list of records in chunks of kChunkSize, shared by the copies that hold them: copying a list
// copies a pointer per chunk, and appending to a list shared with another copies at most its
// partial last chunk (full chunks are never written again). Indexable and iterable like a
// vector.
template <typename T>
class RecordList {
 public:
  static constexpr std::size_t kChunkSize = 256;

  class const_iterator {
   public:
    using iterator_category = std::random_access_iterator_tag;
    using value_type = Record<T>;
    using difference_type = std::ptrdiff_t;
    using pointer = const Record<T>*;
    using reference = const Record<T>&;

    const_iterator() = default;
    const_iterator(const RecordList* list, std::size_t index) : list_(list), index_(index) {}
    reference operator*() const { return (*list_)[index_]; }
    pointer operator->() const { return &(*list_)[index_]; }
    reference operator[](difference_type n) const { return *(*this + n); }
    const_iterator& operator++() { return ++index_, *this; }
    const_iterator operator++(int) { return {list_, index_++}; }
    const_iterator& operator--() { return --index_, *this; }
    const_iterator operator--(int) { return {list_, index_--}; }
    const_iterator& operator+=(difference_type n) {
      index_ = static_cast<std::size_t>(static_cast<difference_type>(index_) + n);
      return *this;
    }
    const_iterator& operator-=(difference_type n) { return *this += -n; }
    friend const_iterator operator+(const_iterator it, difference_type n) { return it += n; }
    friend const_iterator operator+(difference_type n, const_iterator it) { return it += n; }
    friend const_iterator operator-(const_iterator it, difference_type n) { return it -= n; }
    friend difference_type operator-(const const_iterator& a, const const_iterator& b) {
      return static_cast<difference_type>(a.index_) - static_cast<difference_type>(b.index_);
    }
    friend bool operator==(const const_iterator& a, const const_iterator& b) {
      return a.index_ == b.index_;
    }
    friend auto operator<=>(const const_iterator& a, const const_iterator& b) {
      return a.index_ <=> b.index_;
    }

   private:
    const RecordList* list_ = nullptr;
    std::size_t index_ = 0;
  };
  using value_type = Record<T>;
  using size_type = std::size_t;
  using const_reference = const Record<T>&;
  using iterator = const_iterator;
  using const_reverse_iterator = std::reverse_iterator<const_iterator>;

  RecordList() = default;
  RecordList(const RecordList&) = default;
  RecordList& operator=(const RecordList&) = default;
  // A moved-from list is empty (its size goes with its chunks).
  RecordList(RecordList&& other) noexcept
      : chunks_(std::move(other.chunks_)), size_(std::exchange(other.size_, 0)) {}
  RecordList& operator=(RecordList&& other) noexcept {
    chunks_ = std::move(other.chunks_);
    size_ = std::exchange(other.size_, 0);
    return *this;
  }

  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const Record<T>& operator[](std::size_t i) const {
    return (*chunks_[i / kChunkSize])[i % kChunkSize];
  }
  const Record<T>& front() const { return (*this)[0]; }
  const Record<T>& back() const { return (*this)[size_ - 1]; }
  const_iterator begin() const { return {this, 0}; }
  const_iterator end() const { return {this, size_}; }
  const_reverse_iterator rbegin() const { return const_reverse_iterator(end()); }
  const_reverse_iterator rend() const { return const_reverse_iterator(begin()); }

  void push_back(Record<T> record) {
    if (size_ % kChunkSize == 0) {
      chunks_.push_back(std::make_shared<std::vector<Record<T>>>());
    } else if (!detail::owned_alone(chunks_.back())) {
      chunks_.back() = std::make_shared<std::vector<Record<T>>>(std::as_const(*chunks_.back()));
    }
    chunks_.back()->push_back(std::move(record));
    ++size_;
  }

 private:
  std::vector<std::shared_ptr<std::vector<Record<T>>>> chunks_;
  std::size_t size_ = 0;
};

}  // namespace fib
