// The test bed's link for tools/testbed.sh: an XDP program on the receiving veth that drops
// LOSS_PCT % of the RoCEv2 frames (UDP 4791 over IPv4 or IPv6) arriving there and marks
// MARK_PPM per million of the ECN-capable ones Congestion Experienced, as a switch with a
// congested queue would (a frame is first spared by the loss, then maybe marked).
//
// Why XDP on the receiver and not an nftables rule on the sender: rnicd's af_packet port sends
// from a TX ring, and a frame an egress hook drops is not lost there: the kernel puts it back in
// the ring (TP_STATUS_SEND_REQUEST) and sends it again on the next sendto(), with everything
// queued behind it. "Loss" then only delayed frames and stalled the ones after them, PSNs never
// had gaps, and at 10 % the growing backlog starved the QP into retry-exceeded. On the receiving
// side, XDP runs before the packet sockets take their copies (the netdev ingress hook and tc run
// after them), so a dropped frame reaches neither rnicd nor its capture, exactly like a frame
// lost on the wire, and a marked frame reaches both marked. An nftables `ip ecn set ce` at
// netdev ingress would change the frame only after rnicd's af_packet socket had its copy.
//
// Built by `testbed.sh loss|mark` with: clang -O2 -g -target bpf -DLOSS_PCT=N -DMARK_PPM=M -c this -o OUT.
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/udp.h>

#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#ifndef LOSS_PCT
#define LOSS_PCT 0
#endif
#ifndef MARK_PPM
#define MARK_PPM 0
#endif
#if LOSS_PCT < 0 || LOSS_PCT > 100 || MARK_PPM < 0 || MARK_PPM > 1000000
#error "LOSS_PCT is 0-100, MARK_PPM 0-1000000"
#endif

#define ROCE_V2_PORT 4791
#define ECN_MASK 3
#define ECN_CE 3

static __always_inline int chance(__u32 parts, __u32 whole) {
    return parts != 0 && (parts >= whole || bpf_get_prandom_u32() % whole < parts);
}

// RFC 1624's incremental update of the IPv4 header checksum for one changed 16-bit word:
// HC' = ~(~HC + ~m + m'). One's-complement sums do not depend on byte order, so the words are
// used as they lie in the frame.
static __always_inline __u16 csum_replace(__u16 check, __u16 old_word, __u16 new_word) {
    __u32 sum = (__u16)~check + (__u16)~old_word + (__u32)new_word;
    sum = (sum & 0xffff) + (sum >> 16);
    sum = (sum & 0xffff) + (sum >> 16);
    return (__u16)~sum;
}

enum action { PASS, DROP, MARK };

// What happens to a RoCEv2 frame: lost, else maybe marked.
static __always_inline enum action roce_action(const struct udphdr* udp, const void* end) {
    if ((const void*)(udp + 1) > end || udp->dest != bpf_htons(ROCE_V2_PORT)) return PASS;
    if (chance(LOSS_PCT, 100)) return DROP;
    return chance(MARK_PPM, 1000000) ? MARK : PASS;
}

// Only ECN-capable frames are marked (a switch drops the others instead; CNPs are not ECT).
// The ICRC does not cover the ECN bits (they are masked to ones), so it stays valid.
SEC("xdp")
int testbed_link(struct xdp_md* ctx) {
    void* data = (void*)(long)ctx->data;
    const void* end = (const void*)(long)ctx->data_end;
    struct ethhdr* eth = data;
    if ((void*)(eth + 1) > end) return XDP_PASS;
    if (eth->h_proto == bpf_htons(ETH_P_IP)) {
        struct iphdr* ip = (void*)(eth + 1);
        if ((void*)(ip + 1) > end || ip->protocol != IPPROTO_UDP || ip->ihl < 5) return XDP_PASS;
        const enum action a = roce_action((const void*)ip + ip->ihl * 4, end);
        if (a == DROP) return XDP_DROP;
        if (a == PASS || (ip->tos & ECN_MASK) == 0 || (ip->tos & ECN_MASK) == ECN_CE) return XDP_PASS;
        const __u16 old_word = *(const __u16*)ip;  // version/IHL and TOS
        ip->tos |= ECN_CE;
        ip->check = csum_replace(ip->check, old_word, *(const __u16*)ip);
    } else if (eth->h_proto == bpf_htons(ETH_P_IPV6)) {
        struct ipv6hdr* ip6 = (void*)(eth + 1);
        if ((void*)(ip6 + 1) > end || ip6->nexthdr != IPPROTO_UDP) return XDP_PASS;
        const enum action a = roce_action((const void*)(ip6 + 1), end);
        if (a == DROP) return XDP_DROP;
        // The traffic class straddles the first two bytes: its ECN bits are 0x30 of the second.
        __u8* b = (__u8*)ip6;
        if (a == PASS || (b[1] & 0x30) == 0 || (b[1] & 0x30) == 0x30) return XDP_PASS;
        b[1] |= 0x30;
    }
    return XDP_PASS;  // ARP, VLAN tags: never dropped nor marked
}

char LICENSE[] SEC("license") = "GPL";
