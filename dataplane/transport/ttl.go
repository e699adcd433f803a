package transport

import "encoding/binary"

// cacheTTL returns the smallest TTL of the records of an answer for
// Cache-Control (RFC 8484 5.1). ok is false for answers that must not be
// cached: rcodes other than NOERROR and NXDOMAIN, truncated or unparsable
// messages. An answer without records gets 0.
func cacheTTL(msg []byte) (uint32, bool) {
	if len(msg) < 12 {
		return 0, false
	}
	if rc := msg[3] & 0x0F; rc != 0 && rc != 3 || msg[2]&0x02 != 0 {
		return 0, false
	}
	qd := int(binary.BigEndian.Uint16(msg[4:]))
	rr := int(binary.BigEndian.Uint16(msg[6:])) + int(binary.BigEndian.Uint16(msg[8:])) + int(binary.BigEndian.Uint16(msg[10:]))
	off := 12
	var ok bool
	for range qd {
		if off, ok = skipName(msg, off); !ok || off+4 > len(msg) {
			return 0, false
		}
		off += 4
	}
	minTTL, seen := uint32(0), false
	for range rr {
		if off, ok = skipName(msg, off); !ok || off+10 > len(msg) {
			return 0, false
		}
		typ := binary.BigEndian.Uint16(msg[off:])
		ttl := binary.BigEndian.Uint32(msg[off+4:])
		rdlen := int(binary.BigEndian.Uint16(msg[off+8:]))
		off += 10 + rdlen
		if off > len(msg) {
			return 0, false
		}
		if typ == 41 { // OPT: no TTL
			continue
		}
		if ttl > 1<<31-1 {
			ttl = 0
		}
		if !seen || ttl < minTTL {
			minTTL, seen = ttl, true
		}
	}
	return minTTL, true
}

// skipName returns the offset after the name at off.
func skipName(msg []byte, off int) (int, bool) {
	for range 128 {
		if off >= len(msg) {
			return 0, false
		}
		c := int(msg[off])
		switch {
		case c == 0:
			return off + 1, true
		case c&0xC0 == 0xC0:
			if off+2 > len(msg) {
				return 0, false
			}
			return off + 2, true
		case c&0xC0 != 0:
			return 0, false
		}
		off += 1 + c
	}
	return 0, false
}
