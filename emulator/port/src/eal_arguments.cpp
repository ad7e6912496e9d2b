#include "rnic/port/eal_arguments.hpp"

#include <algorithm>
#include <string_view>

namespace rnic::port {

namespace {

bool has_arg(const std::vector<std::string>& args, std::initializer_list<std::string_view> names) {
    return std::any_of(args.begin(), args.end(), [&](const std::string& a) {
        return std::any_of(names.begin(), names.end(), [&](std::string_view n) {
            return a == n || (a.size() > n.size() && a.compare(0, n.size(), n) == 0 && a[n.size()] == '=');
        });
    });
}

}  // namespace

bool eal_names_devices(const std::vector<std::string>& eal_args) {
    return has_arg(eal_args, {"--vdev", "-a", "--allow"});
}

// af_packet ring frames default to 2048 bytes including its own header: bigger MTUs (RoCE
// MTU 4096 needs ~4200 on the wire) need bigger ring frames or the kernel truncates. Frames
// beyond the largest RoCE frame are never ours, so a jumbo interface (9000) does not need
// 16 KiB frames: the PMD wants every mbuf as big as a ring frame, and 16 KiB mbufs would not
// fit the default -m 128.
unsigned af_packet_frame_size(unsigned iface_mtu) {
    constexpr unsigned kLargestRoceIpPacket = 4096 + 256;  // payload + IP/UDP/BTH/ext/ICRC, rounded
    const unsigned need = std::min(iface_mtu, kLargestRoceIpPacket) + 14 + 4 + 128;
    if (need <= 2048) return 0;
    unsigned frame = 4096;
    while (frame < need) frame *= 2;
    return frame;
}

std::string af_packet_vdev(size_t index, const std::string& iface, unsigned iface_mtu) {
    // framecnt 4096: a smaller ring lost ~50 % of the frames at 330 kpps here (shared/GUIDE.md).
    std::string vdev = "net_af_packet" + std::to_string(index) + ",iface=" + iface + ",framecnt=4096";
    if (const unsigned frame = af_packet_frame_size(iface_mtu))
        vdev += ",blocksz=" + std::to_string(frame) + ",framesz=" + std::to_string(frame);
    return vdev;
}

std::vector<std::string> eal_arguments(const DpdkConfig& config, const std::vector<unsigned>& iface_mtus) {
    const auto& extra = config.eal_args;
    std::vector<std::string> args{"rnicd"};
    if (!has_arg(extra, {"-l", "--lcores", "-c"})) args.insert(args.end(), {"-l", "0"});
    if (!has_arg(extra, {"--huge-dir", "--socket-mem"})) args.emplace_back("--no-huge");
    if (!has_arg(extra, {"-a", "--allow", "-b", "--block"})) args.emplace_back("--no-pci");
    if (!has_arg(extra, {"--shconf"})) args.emplace_back("--no-shconf");  // two daemons on one host
    args.emplace_back("--no-telemetry");
    if (!has_arg(extra, {"-m", "--socket-mem"})) args.insert(args.end(), {"-m", std::to_string(128 * std::max<size_t>(1, config.ports.size()))});
    if (!has_arg(extra, {"--log-level"})) args.emplace_back("--log-level=notice");
    if (!eal_names_devices(extra)) {
        for (size_t i = 0; i < config.ports.size(); ++i) {
            const DpdkPortConfig& p = config.ports[i];
            if (p.iface.empty()) continue;
            args.insert(args.end(), {"--vdev", af_packet_vdev(i, p.iface, i < iface_mtus.size() ? iface_mtus[i] : 1500)});
        }
    }
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
}

unsigned mbuf_pool_size(const DpdkPortConfig& config) {
    const unsigned want = config.rx_descriptors + config.tx_descriptors + 2u * config.burst + 512u;
    unsigned mbufs = 1;
    while (mbufs < want) mbufs <<= 1;
    return mbufs - 1;
}

}  // namespace rnic::port
