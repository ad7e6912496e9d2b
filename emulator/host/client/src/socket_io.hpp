// One SOCK_SEQPACKET message with its descriptors, each way.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace rnic::host::client::detail {

// 0 or an errno (EPIPE/ECONNRESET: the peer is gone). MSG_NOSIGNAL: no SIGPIPE for the app.
int send_message(int fd, std::span<const uint8_t> bytes, std::span<const int> fds) noexcept;

// 0 or an errno; ECONNRESET for end of file. Descriptors arrive close-on-exec; on a truncated
// message they are closed and EPROTO returned.
int receive_message(int fd, std::vector<uint8_t>& bytes, std::vector<int>& fds);

void close_all(std::vector<int>& fds) noexcept;

// The notification sockets (a completion channel, async events: one byte means "look"): one
// byte sent without blocking or SIGPIPE, and everything queued read without blocking.
void send_byte(int fd) noexcept;
void drain(int fd) noexcept;

}  // namespace rnic::host::client::detail
