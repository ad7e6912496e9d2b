// Link loss for tools/testbed.sh: an XDP program on the receiving veth that drops LOSS_PCT % of
// the RoCEv2 frames (UDP 4791 over IPv4 or IPv6) arriving there.
//
// Why XDP on the receiver and not an nftables rule on the sender: rnicd's af_packet port sends
// from a TX ring, and a frame an egress hook drops is not lost there: the kernel puts it back in
// the ring (TP_STATUS_SEND_REQUEST) and sends it again on the next sendto(), with everything
// queued behind it. "Loss" then only delayed frames and stalled the ones after them, PSNs never
// had gaps, and at 10 % the growing backlog starved the QP into retry-exceeded. On the receiving
// side, XDP runs before the packet sockets take their copies (ingress hooks run after), so a
// dropped frame reaches neither rnicd nor its capture, exactly like a frame lost on the wire.
//
// Built by `testbed.sh loss` with: clang -O2 -g -target bpf -DLOSS_PCT=N -c this -o OUT.
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/udp.h>

#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#ifndef LOSS_PCT
#error "LOSS_PCT (0-100) must be defined"
#endif

#define ROCE_V2_PORT 4791

SEC("xdp")
int testbed_loss(struct xdp_md* ctx) {
    const void* data = (const void*)(long)ctx->data;
    const void* end = (const void*)(long)ctx->data_end;
    const struct ethhdr* eth = data;
    if ((const void*)(eth + 1) > end) return XDP_PASS;
    const struct udphdr* udp;
    if (eth->h_proto == bpf_htons(ETH_P_IP)) {
        const struct iphdr* ip = (const void*)(eth + 1);
        if ((const void*)(ip + 1) > end || ip->protocol != IPPROTO_UDP || ip->ihl < 5) return XDP_PASS;
        udp = (const void*)ip + ip->ihl * 4;
    } else if (eth->h_proto == bpf_htons(ETH_P_IPV6)) {
        const struct ipv6hdr* ip6 = (const void*)(eth + 1);
        if ((const void*)(ip6 + 1) > end || ip6->nexthdr != IPPROTO_UDP) return XDP_PASS;
        udp = (const void*)(ip6 + 1);
    } else {
        return XDP_PASS;  // ARP, VLAN tags: never dropped, as the old rule
    }
    if ((const void*)(udp + 1) > end || udp->dest != bpf_htons(ROCE_V2_PORT)) return XDP_PASS;
    return bpf_get_prandom_u32() % 100 < LOSS_PCT ? XDP_DROP : XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
