package node

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/svcdns/svc/internal/doctor"
	"github.com/svcdns/svc/internal/settings"
	"github.com/svcdns/svc/internal/version"
)

// doctorSource answers GET /doctor from the running node.
type doctorSource struct{ p *proc }

func (d doctorSource) Doctor(ctx context.Context) (*doctor.Report, error) {
	p := d.p
	rep := &doctor.Report{Node: p.nodeName, Version: version.Version}
	// The files as they are now: an edit made since the start that would
	// stop the next one shows here.
	if m, err := settings.Load(ctx, settings.Options{ConfigPath: p.opts.ConfigPath, ConfigPathExplicit: p.opts.ConfigExplicit, Environ: p.opts.Environ}); err != nil {
		rep.Add("config", doctor.Fail, "the configuration no longer loads, the next start would stop: %v (this node keeps running on what it loaded)", err)
	} else {
		rep.Add("config", doctor.OK, "%s loads", m.ConfigPath())
	}
	doctor.DataDir(rep, p.cfg.Node.DataDir)
	doctor.Bound(rep, boundAddrs(p.addrs))
	r := p.ops.readiness()
	switch {
	case r.Lameduck:
		rep.Add("ready", doctor.Warn, "in lameduck until %s: not ready on purpose, listeners close then", r.Until.Format(time.RFC3339))
	case !r.Ready:
		names := make([]string, 0, len(r.Failing))
		for n := range r.Failing {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			rep.Add("ready", doctor.Fail, "readiness check %s: %s", n, r.Failing[n])
		}
	default:
		rep.Add("ready", doctor.OK, "ready")
	}
	if rp := p.mgr.RestartPending(); len(rp) > 0 {
		rep.Add("restart", doctor.Warn, "changed since the start, applied at the next restart: %s", strings.Join(rp, ", "))
	} else {
		rep.Add("restart", doctor.OK, "no setting waits for a restart")
	}
	return rep, nil
}

// boundAddrs lists the node's listeners as network/address.
func boundAddrs(a Addrs) []string {
	var out []string
	for _, d := range a.DNS {
		kind, addr, _ := strings.Cut(d, "/")
		switch kind {
		case "dot", "doh":
			kind = "tcp"
		case "doq", "doh3":
			kind = "udp"
		}
		out = append(out, kind+"/"+addr)
	}
	for _, addr := range []string{a.API, a.Ops, a.Metrics, a.Internal, a.BlockPageHTTP, a.BlockPageHTTPS} {
		if addr != "" {
			out = append(out, fmt.Sprintf("tcp/%s", addr))
		}
	}
	return out
}
