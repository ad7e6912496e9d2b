// The descriptors that say "look at the shared memory" between the daemon and one client: the
// client's doorbell kick, the daemon's completion-channel and async-event notifications. Each is
// a connected AF_UNIX stream socketpair the daemon makes; the bytes mean nothing, readability
// does.
//
// Not eventfds (as until ABI version 2): O_NONBLOCK lives in the open file description, which a
// client shares with the daemon when the fd is passed either way. A client could clear it and
// fill the counter to 0xfffffffffffffffe (the daemon's write then blocks for ever) or drain it
// (the daemon's read blocks for ever, or another session's kick is eaten). send and recv with
// MSG_DONTWAIT never wait on the client, whatever the description's flags or socket options:
// a unix stream sendmsg sleeps only for send-buffer space, and not with MSG_DONTWAIT (EAGAIN),
// and takes no lock a reader holds; recv likewise waits only for data. (Before Linux 6.8 every
// AF_UNIX send also waits for a running garbage collection of in-flight descriptors: a slowdown
// a client can cause, bounded, which the control replies always paid.) The daemon keeps its
// end; the client gets its own end and, for the daemon's notifications, the daemon's end as
// well, so it can make its own end readable again (docs/host_interface.md, "Notification
// sockets").
#pragma once

namespace rnic::host::server {

struct NotifyPair {
    int daemon = -1;  // O_NONBLOCK, close-on-exec; the daemon's end
    int client = -1;  // blocking (the application's choice to change); sent, then closed here
};

// 0 or an errno.
int make_notify_pair(NotifyPair& out) noexcept;

// One byte to the peer, never blocking and never raising SIGPIPE. A full socket means the reader
// is behind and the socket readable already; a closed or shut-down peer is the client's loss.
void notify(int fd) noexcept;

// Reads everything queued without blocking: the bytes read, or -1 once the peer closed its end.
long drain(int fd) noexcept;

}  // namespace rnic::host::server
