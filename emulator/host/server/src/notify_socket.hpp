// The descriptors that say "look at the shared memory" between the daemon and one client
// (docs/host_interface.md, "Notification descriptors"). O_NONBLOCK lives in the open file
// description, which a client shares with the daemon once a descriptor is passed either way: a
// client can clear it, fill an eventfd's counter to 0xfffffffffffffffe (the daemon's write then
// blocks for ever: Linux 6.1's eventfd write looks at nothing but O_NONBLOCK) or drain it (a
// plain read then blocks). So:
// - the daemon's notifications (completion channels, async events) are connected AF_UNIX stream
//   socketpairs the daemon makes, sent to with MSG_DONTWAIT: a unix stream sendmsg sleeps only
//   for send-buffer space, and not with MSG_DONTWAIT (EAGAIN), whatever the description's flags
//   or socket options, and takes no lock a reader holds. (Before Linux 6.8 every AF_UNIX send
//   also waits for a running garbage collection of in-flight descriptors: a slowdown a client
//   can cause, bounded, which the control replies always paid.) The client gets its end and the
//   daemon's end, to make its own end readable again;
// - the kick, which the daemon only reads, is an eventfd per session read with
//   preadv2(RWF_NOWAIT): eventfd's read_iter honours IOCB_NOWAIT (well before 6.1; checked at
//   start), so the read cannot wait whatever the client did to the flags or the counter.
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

// A session's kick eventfd: 0 or an errno.
int make_kick(int& fd) noexcept;
// Takes the kick eventfd's count without ever blocking: 1 (kicked), 0 (nothing: another reader
// took it, or a spurious wake-up) or -errno (the kernel cannot read it without waiting).
int take_kick(int fd) noexcept;
// Whether this kernel reads eventfds with RWF_NOWAIT (checked once at start: without it
// take_kick could not be made safe).
bool kick_reads_never_wait() noexcept;

}  // namespace rnic::host::server
