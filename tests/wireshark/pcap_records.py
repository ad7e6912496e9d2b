"""Classic pcap files (microsecond or nanosecond, little- or big-endian) read and written as
(timestamp_ns, bytes) records: just enough for the tests to copy and corrupt captures."""
import struct

MAGICS = {0xA1B2C3D4: 1000, 0xA1B23C4D: 1}  # magic -> nanoseconds per sub-second unit


def read(path):
    with open(path, "rb") as f:
        data = f.read()
    for endian in "<>":
        magic = struct.unpack(endian + "I", data[:4])[0]
        if magic in MAGICS:
            break
    else:
        raise ValueError(f"{path}: not a classic pcap file")
    scale = MAGICS[magic]
    linktype = struct.unpack(endian + "I", data[20:24])[0]
    records, off = [], 24
    while off + 16 <= len(data):
        sec, sub, incl, _orig = struct.unpack(endian + "IIII", data[off:off + 16])
        off += 16
        records.append((sec * 1_000_000_000 + sub * scale, data[off:off + incl]))
        off += incl
    return linktype, records


def write(path, records, linktype=1):
    """Nanosecond-resolution little-endian pcap."""
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 0x40000, linktype))
        for ts, frame in records:
            f.write(struct.pack("<IIII", ts // 1_000_000_000, ts % 1_000_000_000, len(frame), len(frame)))
            f.write(frame)
