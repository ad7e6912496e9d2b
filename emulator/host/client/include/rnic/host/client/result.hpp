// Errors cross the client API as positive errno values (what rdma-core's verbs return), never as
// exceptions: the library is linked into a drop-in libibverbs that C programs load.
#pragma once

#include <utility>

namespace rnic::host::client {

struct Error {
    int code;  // a positive errno
};

template <class T>
class Result {
public:
    Result(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design
    Result(Error e) : error_(e.code) {}            // NOLINT: implicit by design

    bool ok() const noexcept { return error_ == 0; }
    explicit operator bool() const noexcept { return ok(); }
    int error() const noexcept { return error_; }

    T& value() & noexcept { return value_; }
    const T& value() const& noexcept { return value_; }
    T&& value() && noexcept { return std::move(value_); }
    T& operator*() & noexcept { return value_; }
    const T& operator*() const& noexcept { return value_; }
    T* operator->() noexcept { return &value_; }
    const T* operator->() const noexcept { return &value_; }

private:
    T value_{};
    int error_ = 0;
};

}  // namespace rnic::host::client
