// One control request on its way to its handler (op_table.cpp): what the handlers_*.cpp files
// see of a message, and how they answer it. By the time a handler runs, its op's row has
// checked the body's size, the descriptors' count and the session's Hello.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <span>
#include <vector>

#include "service_impl.hpp"

namespace rnic::host::server {

template <class T>
std::span<const uint8_t> bytes_of(const T& v) {
    return {reinterpret_cast<const uint8_t*>(&v), sizeof(T)};
}

struct Request {
    HostService::Impl& impl;
    Session& s;
    const abi::MessageHeader& h;
    std::span<const uint8_t> body;  // all of it: the row's struct, then any tail (RegMr's runs)
    // Exactly as many as the row says; the dispatcher closes whatever a handler leaves here.
    std::vector<int>& fds;

    // A reply with no body: 0, or an errno.
    void fail(int rc) const { impl.reply(s, h, rc); }
    template <class T>
    void ok(const T& out, std::span<const int> out_fds = {}) const {
        impl.reply(s, h, 0, bytes_of(out), out_fds);
    }
    // A ring's memfd goes to the client and is closed here: the daemon keeps the mapping only,
    // so its descriptors do not grow with the number of QPs, CQs and SRQs.
    template <class T>
    void ok_closing(const T& out, int fd) const {
        impl.reply(s, h, 0, bytes_of(out), std::span<const int>(&fd, 1));
        close(fd);
    }
    // The i-th descriptor the request carried, now the handler's to keep or close.
    int take_fd(size_t i) {
        const int fd = fds.at(i);
        fds.at(i) = -1;
        return fd;
    }
};

// Closes what a request carried and no handler took.
inline void close_fds(std::vector<int>& fds) {
    for (int& fd : fds)
        if (fd >= 0) close(fd);
    fds.clear();
}

}  // namespace rnic::host::server
