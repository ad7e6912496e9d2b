-- rnic-roce.lua: a Wireshark/tshark postdissector for RoCEv2 (UDP 4791) frames.
--
-- Wireshark 4.0's InfiniBand dissector shows the ICRC but never checks it, names CNP (BTH opcode
-- 0x81) "Unknown OpCode", and does not know IBTA 1.5's FLUSH (0x1C) and ATOMIC WRITE (0x1D).
-- This plugin adds, under "RNIC RoCEv2" (filter prefix `rnic`):
--   rnic.icrc.status    "good" or "bad" for every RoCEv2 frame; a bad one is an expert error
--   rnic.icrc.computed  the CRC-32 of the invariant fields, rnic.icrc.carried the frame's
--   rnic.cnp.*          CNP: FECN, BECN, destination QP, the 16 reserved bytes
--   rnic.feth.*, rnic.reth.*, rnic.atomic_write.data   FLUSH and ATOMIC WRITE headers
--
-- Usage from a checkout:  tshark -X lua_script:tools/wireshark/rnic-roce.lua -r FILE.pcap
-- Installed: in Wireshark's global Lua plugin directory (`tshark -G folders`, "Global Lua
-- Plugins"; /usr/lib/x86_64-linux-gnu/wireshark/plugins on Debian 12) or the personal one.
--
-- The ICRC (IBA A17.8, RoCEv2): IEEE CRC-32 over eight 0xFF bytes, the IP header with its
-- variant fields set to ones (IPv4 TOS, TTL, header checksum; IPv6 traffic class, flow label,
-- hop limit), the UDP header with the checksum set to ones, the BTH with byte 4 (FECN, BECN,
-- reserved) set to ones, and everything after up to the ICRC, which is sent least significant
-- byte first. Same rules as wire/src/icrc.cpp (docs/wire.md "ICRC").
--
-- Wireshark 4.0 embeds Lua 5.2: bit operations come from its bit32 library.

-- Loaded both from the global plugin directory (the Debian package) and with -X lua_script:
-- a second Proto named "rnic" would be an error, so the second copy steps aside.
if rawget(_G, "rnic_roce_plugin_loaded") then return end
rnic_roce_plugin_loaded = true

local band, bor, bxor, rshift = bit32.band, bit32.bor, bit32.bxor, bit32.rshift
local sbyte, schar = string.byte, string.char

local ROCEV2_PORT = 4791
local BTH_LEN = 12
local ICRC_LEN = 4

local OP_FLUSH = 0x1C
local OP_ATOMIC_WRITE = 0x1D
local OP_CNP = 0x81

local proto = Proto("rnic", "RNIC RoCEv2")

-- BTH opcode names (IBA 9.2.1, IBTA 1.5, RoCEv2 A17.9.3): the high three bits give the transport,
-- the low five the operation.
local opcode_names = {}
do
    local ops = {
        [0x00] = "SEND First", [0x01] = "SEND Middle", [0x02] = "SEND Last",
        [0x03] = "SEND Last with Immediate", [0x04] = "SEND Only", [0x05] = "SEND Only with Immediate",
        [0x06] = "RDMA WRITE First", [0x07] = "RDMA WRITE Middle", [0x08] = "RDMA WRITE Last",
        [0x09] = "RDMA WRITE Last with Immediate", [0x0A] = "RDMA WRITE Only",
        [0x0B] = "RDMA WRITE Only with Immediate",
    }
    local rc_only = {
        [0x0C] = "RDMA READ Request", [0x0D] = "RDMA READ Response First",
        [0x0E] = "RDMA READ Response Middle", [0x0F] = "RDMA READ Response Last",
        [0x10] = "RDMA READ Response Only", [0x11] = "Acknowledge", [0x12] = "ATOMIC Acknowledge",
        [0x13] = "CmpSwap", [0x14] = "FetchAdd", [0x16] = "SEND Last with Invalidate",
        [0x17] = "SEND Only with Invalidate", [OP_FLUSH] = "FLUSH", [OP_ATOMIC_WRITE] = "ATOMIC WRITE",
    }
    for code, name in pairs(ops) do
        opcode_names[code] = "RC " .. name
        opcode_names[0x20 + code] = "UC " .. name
    end
    for code, name in pairs(rc_only) do opcode_names[code] = "RC " .. name end
    opcode_names[0x64] = "UD SEND Only"
    opcode_names[0x65] = "UD SEND Only with Immediate"
    opcode_names[OP_CNP] = "CNP"
end

local f = {
    icrc_status = ProtoField.string("rnic.icrc.status", "ICRC status"),
    icrc_computed = ProtoField.uint32("rnic.icrc.computed", "ICRC computed", base.HEX),
    icrc_carried = ProtoField.uint32("rnic.icrc.carried", "ICRC carried (read least significant byte first)", base.HEX),
    opcode = ProtoField.uint8("rnic.opcode", "Opcode", base.HEX, opcode_names),
    cnp = ProtoField.none("rnic.cnp", "Congestion Notification Packet"),
    cnp_fecn = ProtoField.bool("rnic.cnp.fecn", "FECN", 8, nil, 0x80),
    cnp_becn = ProtoField.bool("rnic.cnp.becn", "BECN", 8, nil, 0x40),
    cnp_destqp = ProtoField.uint24("rnic.cnp.destqp", "Destination QP (the QP whose traffic was marked)", base.HEX),
    cnp_reserved = ProtoField.bytes("rnic.cnp.reserved", "Reserved (16 bytes)"),
    feth = ProtoField.uint32("rnic.feth", "FETH", base.HEX),
    feth_placement = ProtoField.uint32("rnic.feth.placement", "Placement type", base.DEC,
        { [1] = "global visibility", [2] = "persistence" }, 0x0000000F),
    feth_level = ProtoField.uint32("rnic.feth.level", "Selectivity level", base.DEC,
        { [0] = "memory range (RETH)", [1] = "memory region" }, 0x00000030),
    feth_reserved = ProtoField.uint32("rnic.feth.reserved", "Reserved", base.HEX, nil, 0xFFFFFFC0),
    reth_va = ProtoField.uint64("rnic.reth.va", "Virtual address", base.HEX),
    reth_rkey = ProtoField.uint32("rnic.reth.r_key", "R_Key", base.HEX),
    reth_dmalen = ProtoField.uint32("rnic.reth.dmalen", "DMA length", base.DEC),
    atomic_write_data = ProtoField.uint64("rnic.atomic_write.data", "Data (8 bytes)", base.HEX),
}
proto.fields = {
    f.icrc_status, f.icrc_computed, f.icrc_carried, f.opcode, f.cnp, f.cnp_fecn, f.cnp_becn,
    f.cnp_destqp, f.cnp_reserved, f.feth, f.feth_placement, f.feth_level, f.feth_reserved,
    f.reth_va, f.reth_rkey, f.reth_dmalen, f.atomic_write_data,
}

local ex_bad_icrc = ProtoExpert.new("rnic.icrc.bad", "Bad ICRC", expert.group.CHECKSUM, expert.severity.ERROR)
local ex_short = ProtoExpert.new("rnic.short", "RoCEv2 frame too short for its headers and ICRC",
    expert.group.MALFORMED, expert.severity.ERROR)
local ex_truncated = ProtoExpert.new("rnic.icrc.unchecked", "ICRC not checked: frame truncated by the capture",
    expert.group.UNDECODED, expert.severity.NOTE)
proto.experts = { ex_bad_icrc, ex_short, ex_truncated }

-- Reflected CRC-32 (polynomial 0xEDB88320), one table lookup per byte.
local crc_table = {}
for i = 0, 255 do
    local c = i
    for _ = 1, 8 do
        if band(c, 1) ~= 0 then c = bxor(0xEDB88320, rshift(c, 1)) else c = rshift(c, 1) end
    end
    crc_table[i] = c
end

-- `crc` is the running register (pre-inverted); feeds bytes i..j of s.
local function crc_feed(crc, s, i, j)
    for k = i, j do
        crc = bxor(crc_table[band(bxor(crc, sbyte(s, k)), 0xFF)], rshift(crc, 8))
    end
    return crc
end

-- The register after the eight leading 0xFF bytes, computed once.
local CRC_AFTER_PREFIX = crc_feed(0xFFFFFFFF, string.rep("\255", 8), 1, 8)

-- Returns l3, l4 offsets, IP version and the end of the IP packet, or nil when the frame is not
-- RoCEv2 over Ethernet (IPv6 extension headers are not followed: no RoCEv2 sender uses them).
local function locate(tvb)
    local len = tvb:len()
    if len < 14 then return nil end
    local l3 = 14
    local ethertype = tvb(12, 2):uint()
    if ethertype == 0x8100 then
        if len < 18 then return nil end
        ethertype = tvb(16, 2):uint()
        l3 = 18
    end
    local l4, ip_end, version
    if ethertype == 0x0800 then
        if len < l3 + 20 then return nil end
        local ihl = band(tvb(l3, 1):uint(), 0x0F) * 4
        if ihl < 20 or tvb(l3 + 9, 1):uint() ~= 17 then return nil end
        -- A fragment has no UDP header of its own: not ours.
        if band(tvb(l3 + 6, 2):uint(), 0x3FFF) ~= 0 then return nil end
        l4 = l3 + ihl
        ip_end = l3 + tvb(l3 + 2, 2):uint()
        version = 4
    elseif ethertype == 0x86DD then
        if len < l3 + 40 or tvb(l3 + 6, 1):uint() ~= 17 then return nil end
        l4 = l3 + 40
        ip_end = l4 + tvb(l3 + 4, 2):uint()
        version = 6
    else
        return nil
    end
    if len < l4 + 8 or tvb(l4 + 2, 2):uint() ~= ROCEV2_PORT then return nil end
    return l3, l4, version, ip_end
end

-- The CRC over the masked IP/UDP/BTH copy, then the rest of the packet in place.
local function compute_icrc(tvb, l3, l4, version, bth, ip_end)
    local head = { sbyte(tvb:raw(l3, bth + BTH_LEN - l3), 1, -1) }
    if version == 4 then
        head[2] = 0xFF                       -- TOS (DSCP, ECN)
        head[9] = 0xFF                       -- TTL
        head[11], head[12] = 0xFF, 0xFF      -- header checksum
    else
        head[1] = bor(head[1], 0x0F)         -- traffic class (high nibble) ...
        head[2], head[3], head[4] = 0xFF, 0xFF, 0xFF  -- ... its low nibble and the flow label
        head[8] = 0xFF                       -- hop limit
    end
    local u = l4 - l3
    head[u + 7], head[u + 8] = 0xFF, 0xFF    -- UDP checksum
    head[bth - l3 + 5] = 0xFF                -- BTH byte 4: FECN, BECN, reserved
    local s = schar(table.unpack(head))
    local crc = crc_feed(CRC_AFTER_PREFIX, s, 1, #s)
    local rest = ip_end - ICRC_LEN - (bth + BTH_LEN)
    if rest > 0 then
        crc = crc_feed(crc, tvb:raw(bth + BTH_LEN, rest), 1, rest)
    end
    return bxor(crc, 0xFFFFFFFF)
end

local function fmt_qp(qp) return string.format("0x%06x", qp) end

-- CNP: BTH, 16 reserved bytes, ICRC (RoCEv2 Annex A17.9.3).
local function dissect_cnp(tvb, pinfo, tree, bth, ip_end)
    local sub = tree:add(f.cnp, tvb(bth, ip_end - bth))
    sub:add(f.cnp_fecn, tvb(bth + 4, 1))
    sub:add(f.cnp_becn, tvb(bth + 4, 1))
    sub:add(f.cnp_destqp, tvb(bth + 5, 3))
    if ip_end - ICRC_LEN - (bth + BTH_LEN) >= 16 then
        sub:add(f.cnp_reserved, tvb(bth + BTH_LEN, 16))
    end
    local becn = band(tvb(bth + 4, 1):uint(), 0x40) ~= 0
    pinfo.cols.info:set(string.format("CNP QP=%s%s", fmt_qp(tvb(bth + 5, 3):uint()), becn and " BECN" or ""))
end

local function add_reth(tree, tvb, at)
    tree:add(f.reth_va, tvb(at, 8))
    tree:add(f.reth_rkey, tvb(at + 8, 4))
    tree:add(f.reth_dmalen, tvb(at + 12, 4))
end

-- FLUSH: BTH, FETH (4), RETH (16), no payload. ATOMIC WRITE: BTH, RETH, 8 bytes of data.
local function dissect_ibta15(tvb, pinfo, tree, opcode, bth, ip_end)
    local ext = bth + BTH_LEN
    local room = ip_end - ICRC_LEN - ext
    local qp = fmt_qp(tvb(bth + 5, 3):uint())
    local psn = tvb(bth + 9, 3):uint()
    if opcode == OP_FLUSH then
        if room < 20 then tree:add_proto_expert_info(ex_short); return end
        local feth = tree:add(f.feth, tvb(ext, 4))
        feth:add(f.feth_placement, tvb(ext, 4))
        feth:add(f.feth_level, tvb(ext, 4))
        feth:add(f.feth_reserved, tvb(ext, 4))
        add_reth(tree, tvb, ext + 4)
        pinfo.cols.info:set(string.format("RC Flush QP=%s PSN=%d", qp, psn))
    else
        if room < 24 then tree:add_proto_expert_info(ex_short); return end
        add_reth(tree, tvb, ext)
        tree:add(f.atomic_write_data, tvb(ext + 16, 8))
        pinfo.cols.info:set(string.format("RC Atomic Write QP=%s PSN=%d", qp, psn))
    end
end

function proto.dissector(tvb, pinfo, tree)
    local l3, l4, version, ip_end = locate(tvb)
    if not l3 then return end
    local bth = l4 + 8
    local sub = tree:add(proto, tvb(l3))
    if ip_end < bth + BTH_LEN + ICRC_LEN then
        sub:add_proto_expert_info(ex_short)
        return
    end
    if ip_end > tvb:len() then
        sub:add_proto_expert_info(ex_truncated)
        return
    end
    local opcode = tvb(bth, 1):uint()
    sub:add(f.opcode, tvb(bth, 1))
    local carried = tvb(ip_end - ICRC_LEN, 4):le_uint()
    local computed = compute_icrc(tvb, l3, l4, version, bth, ip_end)
    local good = carried == computed
    local status = sub:add(f.icrc_status, tvb(ip_end - ICRC_LEN, 4), good and "good" or "bad")
    sub:add(f.icrc_computed, computed):set_generated()
    sub:add_le(f.icrc_carried, tvb(ip_end - ICRC_LEN, 4))
    if not good then
        status:add_proto_expert_info(ex_bad_icrc,
            string.format("Bad ICRC: carried 0x%08x, computed 0x%08x", carried, computed))
    end
    if opcode == OP_CNP then
        dissect_cnp(tvb, pinfo, sub, bth, ip_end)
    elseif opcode == OP_FLUSH or opcode == OP_ATOMIC_WRITE then
        dissect_ibta15(tvb, pinfo, sub, opcode, bth, ip_end)
    end
    if not good then pinfo.cols.info:append(" [BAD ICRC]") end
end

register_postdissector(proto)
