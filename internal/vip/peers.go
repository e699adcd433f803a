package vip

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
)

// ParsePeers parses addresses separated by commas, white space or lines
// ('#' starts a comment), as --peers and --peers-file give them.
func ParsePeers(s, where string) ([]netip.Addr, error) {
	var out []netip.Addr
	sc := bufio.NewScanner(strings.NewReader(s))
	for ln := 1; sc.Scan(); ln++ {
		line, _, _ := strings.Cut(sc.Text(), "#")
		for _, f := range strings.FieldsFunc(line, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' }) {
			a, err := netip.ParseAddr(f)
			if err != nil {
				return nil, fmt.Errorf("%s line %d: peer %q is not an IP address (one node address per entry, no port)", where, ln, f)
			}
			out = append(out, a.Unmap())
		}
	}
	return out, nil
}

// PeerSource returns the peers now; run calls it again to follow changes.
type PeerSource func(ctx context.Context) ([]netip.Addr, error)

// StaticPeers are --peers and --peers-file (read again on every call, so
// that an edit of the file is a peer change).
func StaticPeers(list []string, file string) PeerSource {
	return func(context.Context) ([]netip.Addr, error) {
		peers, err := ParsePeers(strings.Join(list, ","), "--peers")
		if err != nil {
			return nil, err
		}
		if file != "" {
			b, err := os.ReadFile(file)
			if err != nil {
				return nil, fmt.Errorf("--peers-file: %w", err)
			}
			more, err := ParsePeers(string(bytes.TrimSpace(b)), file)
			if err != nil {
				return nil, err
			}
			peers = append(peers, more...)
		}
		return peers, nil
	}
}

// localAddrs are this host's interface addresses (in the current network
// namespace).
func localAddrs() (map[netip.Addr]string, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, fmt.Errorf("listing interfaces: %w", err)
	}
	out := map[netip.Addr]string{}
	for _, ifc := range ifs {
		addrs, err := ifc.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok {
				if ip, ok := netip.AddrFromSlice(n.IP); ok {
					out[ip.Unmap()] = ifc.Name
				}
			}
		}
	}
	return out, nil
}

// DetectSelf picks this node's unicast source address: the peer that is an
// address of this host, else the first address of the first VIP's
// interface in the VIP's family that is not a VIP itself.
func DetectSelf(peers []netip.Addr, vips []VIP) (netip.Addr, error) {
	local, err := localAddrs()
	if err != nil {
		return netip.Addr{}, err
	}
	isVIP := map[netip.Addr]bool{}
	for _, v := range vips {
		isVIP[v.Prefix.Addr()] = true
	}
	for _, p := range peers {
		if _, ok := local[p]; ok && !isVIP[p] {
			return p, nil
		}
	}
	if len(vips) == 0 {
		return netip.Addr{}, fmt.Errorf("no --vip")
	}
	ifc, err := net.InterfaceByName(vips[0].Iface)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("--vip %s: interface %s: %w", vips[0], vips[0].Iface, err)
	}
	addrs, _ := ifc.Addrs()
	for _, a := range addrs {
		n, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		ip, ok := netip.AddrFromSlice(n.IP)
		if !ok {
			continue
		}
		ip = ip.Unmap()
		if ip.Is4() == vips[0].Prefix.Addr().Is4() && ip.IsGlobalUnicast() && !isVIP[ip] {
			return ip, nil
		}
	}
	return netip.Addr{}, fmt.Errorf("no address of this host among the peers and none on %s: add this node's address to --peers", vips[0].Iface)
}
