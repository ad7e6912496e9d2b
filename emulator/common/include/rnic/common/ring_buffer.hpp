// A FIFO that is also a deque at its front, over one power-of-two array that doubles when full and
// never shrinks: after warming up, pushing and popping allocate nothing (std::deque frees and
// allocates blocks as it goes). Indices are positions from the front.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace rnic::common {

template <class T>
class RingBuffer {
public:
    size_t size() const noexcept { return size_; }
    bool empty() const noexcept { return size_ == 0; }
    size_t capacity() const noexcept { return items_.size(); }

    T& operator[](size_t i) noexcept { return items_[(head_ + i) & mask()]; }
    const T& operator[](size_t i) const noexcept { return items_[(head_ + i) & mask()]; }
    T& front() noexcept { return (*this)[0]; }
    const T& front() const noexcept { return (*this)[0]; }
    T& back() noexcept { return (*this)[size_ - 1]; }
    const T& back() const noexcept { return (*this)[size_ - 1]; }

    // Throw only std::bad_alloc, and only when the ring grows.
    void push_back(T v) {
        if (size_ == items_.size()) grow(size_ + 1);
        items_[(head_ + size_) & mask()] = std::move(v);
        ++size_;
    }
    void push_front(T v) {
        if (size_ == items_.size()) grow(size_ + 1);
        head_ = (head_ + items_.size() - 1) & mask();
        items_[head_] = std::move(v);
        ++size_;
    }
    void pop_front() noexcept {
        head_ = (head_ + 1) & mask();
        --size_;
    }
    void pop_back() noexcept { --size_; }
    void clear() noexcept {
        head_ = 0;
        size_ = 0;
    }
    void reserve(size_t n) {
        if (n > items_.size()) grow(n);
    }
    // Removes the items `pred` selects, keeping the order of the rest.
    template <class Pred>
    size_t erase_if(Pred&& pred) {
        size_t kept = 0;
        for (size_t i = 0; i < size_; ++i) {
            if (pred((*this)[i])) continue;
            if (kept != i) (*this)[kept] = std::move((*this)[i]);
            ++kept;
        }
        const size_t removed = size_ - kept;
        size_ = kept;
        return removed;
    }

private:
    size_t mask() const noexcept { return items_.size() - 1; }
    void grow(size_t at_least) {
        size_t n = items_.empty() ? 8 : items_.size();
        while (n < at_least) n *= 2;
        std::vector<T> bigger(n);
        for (size_t i = 0; i < size_; ++i) bigger[i] = std::move((*this)[i]);
        items_ = std::move(bigger);
        head_ = 0;
    }

    std::vector<T> items_;
    size_t head_ = 0;
    size_t size_ = 0;
};

}  // namespace rnic::common
