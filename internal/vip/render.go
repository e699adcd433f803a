package vip

import (
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"strings"
)

// Render returns keepalived's configuration for o and what it decided.
// readKey reads a VRID's key file (nil: ReadKey); it is not called with
// o.Legacy.
func Render(o Options, readKey func(string) ([]byte, error)) ([]byte, Plan, error) {
	if readKey == nil {
		readKey = ReadKey
	}
	all, idx, err := o.validate()
	if err != nil {
		return nil, Plan{}, err
	}
	for _, s := range []string{o.Svc, o.RunDir, o.RouterID} {
		if strings.ContainsAny(s, " \t\n\"'{}#!") {
			return nil, Plan{}, fmt.Errorf("%q: white space, quotes, braces, '#' and '!' cannot be used in keepalived's config", s)
		}
	}
	plan := Plan{Self: o.Self.String(), PriorityIndex: idx, Auth: "AH"}
	if o.Legacy {
		plan.Auth = "none"
	}
	var peers []string
	for _, p := range all {
		plan.Peers = append(plan.Peers, p.String())
		if p != o.Self {
			peers = append(peers, p.String())
		}
	}
	routerID := o.RouterID
	if routerID == "" {
		routerID = "svc-" + strings.NewReplacer(".", "-", ":", "-").Replace(o.Self.String())
	}
	run := func(name string) string { return filepath.Join(o.RunDir, name) }

	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	w("# Rendered by svc vip render; do not edit: svc vip run renders it again on every start and peer change.")
	w("# node %s, priority index %d of %d nodes, advert authentication %s", o.Self, idx, len(all), plan.Auth)
	w("global_defs {")
	w("    router_id %s", routerID)
	w("    vrrp_version 2")
	// keepalived runs the track script and the fifo reader as root; it
	// refuses a script any other user could replace.
	w("    script_user root")
	w("    enable_script_security")
	w("    vrrp_notify_fifo %s", run(FifoFile))
	w("    vrrp_notify_fifo_script \"%s vip fifo --run-dir %s\"", o.Svc, o.RunDir)
	w("    fifo_write_vrrp_states_on_reload")
	w("}")
	w("")
	probe := []string{o.Svc, "vip", "probe", "--run-dir", o.RunDir, "--timeout", o.Probe.Timeout.String(),
		"--require-backends", strconv.Itoa(o.Probe.RequireBackends)}
	for _, d := range o.Probe.DNS {
		if strings.ContainsAny(d, " \t\"'{}#!") {
			return nil, Plan{}, fmt.Errorf("--dns %q: not an address", d)
		}
		probe = append(probe, "--dns", d)
	}
	track := "svc_health"
	if o.Track == TrackScript {
		w("# The local DNS must answer the health name: a node whose DNS fails goes to FAULT and gives its VIPs away.")
		w("vrrp_script svc_probe {")
		w("    script \"%s\"", strings.Join(probe, " "))
		w("    interval 1")
		w("    timeout %d", int(math.Ceil(o.Probe.Timeout.Seconds()))+1)
		w("    fall 1")
		w("    rise 2")
		w("}")
		track = ""
	} else {
		w("# svc vip run asks the local DNS for the health name every %s (%s) and writes 1 here", ProbeInterval, strings.Join(probe[2:], " "))
		w("# when it does not answer: the node goes to FAULT and gives its VIPs away at once.")
		w("track_file svc_health {")
		w("    file \"%s\"", run(HealthFile))
		w("    weight 0")
		w("}")
	}
	w("")
	w("# svc vip drain writes %d (FAULT: the VIPs leave at once) then %d (a backup below every serving node);", drainFault, drainBackup)
	w("# svc vip rebalance writes %d.", drainServing)
	w("track_file svc_drain {")
	w("    file \"%s\"", run(DrainFile))
	w("    weight 1")
	w("    init_file %d", drainServing)
	w("}")
	order := vipOrder(o.VIPs)
	for i, v := range order {
		rank := ((idx-i)%len(all) + len(all)) % len(all)
		in := Instance{Name: InstanceName(v), VIP: v.String(), Address: v.Prefix.Addr().String(), VRID: v.VRID,
			Priority: topPriority - rank, Preferred: rank == 0}
		plan.Instances = append(plan.Instances, in)
		w("")
		w("vrrp_instance %s {", in.Name)
		w("    state BACKUP")
		w("    interface %s", v.Iface)
		w("    virtual_router_id %d", v.VRID)
		w("    priority %d", in.Priority)
		w("    advert_int 1")
		if o.PreemptDelay > 0 {
			w("    preempt_delay %d", int(math.Ceil(o.PreemptDelay.Seconds())))
		}
		w("    unicast_src_ip %s", o.Self)
		if len(peers) > 0 {
			w("    unicast_peer {")
			for _, p := range peers {
				w("        %s", p)
			}
			w("    }")
		}
		if !o.Legacy && v.Prefix.Addr().Is6() {
			return nil, Plan{}, fmt.Errorf("--vip %s: keepalived authenticates VRRPv2 (IPv4) adverts only, and IPv6 runs VRRPv3, which has no authentication: pass --legacy to run IPv6 VIPs unauthenticated (docs/vip.md)", v)
		}
		if !o.Legacy {
			path := KeyPath(o.KeyFile, v.VRID)
			key, err := readKey(path)
			if err != nil {
				return nil, Plan{}, fmt.Errorf("--vip %s: %w", v, err)
			}
			w("    authentication {")
			w("        auth_type AH")
			w("        auth_pass %s", authPass(key, v.VRID))
			w("    }")
		}
		w("    virtual_ipaddress {")
		w("        %s dev %s", v.Prefix, v.Iface)
		w("    }")
		if track == "" {
			w("    track_script {")
			w("        svc_probe")
			w("    }")
		}
		w("    track_file {")
		if track != "" {
			w("        %s", track)
		}
		w("        svc_drain")
		w("    }")
		w("    notify_priority_changes")
		w("}")
	}
	return []byte(b.String()), plan, nil
}
