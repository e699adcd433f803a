package dataplane

import "github.com/svcdns/svc/dataplane/wire"

// questionName returns the wire name of msg's question, nil when msg is too
// short or the name is not plain labels ending in the root (a query's
// question is never compressed). It validates no more than a prefetch
// hint needs: the pipeline parses the query properly after.
func questionName(msg []byte) []byte {
	const start = wire.HeaderLen
	for off := start; off < len(msg) && off-start < wire.MaxNameLen; {
		l := int(msg[off])
		switch {
		case l == 0:
			return msg[start : off+1]
		case l > 63:
			return nil
		}
		off += 1 + l
	}
	return nil
}

// question returns the wire name and type of msg's question (see
// questionName); qtype is 0 when the datagram ends inside it.
func question(msg []byte) (name []byte, qtype uint16) {
	name = questionName(msg)
	if off := wire.HeaderLen + len(name); name != nil && off+2 <= len(msg) {
		qtype = uint16(msg[off])<<8 | uint16(msg[off+1])
	}
	return name, qtype
}
