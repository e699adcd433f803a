package node

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"time"

	"golang.org/x/net/netutil"

	"github.com/svcdns/svc/dataplane"
	"github.com/svcdns/svc/internal/blockpage"
	"github.com/svcdns/svc/internal/settings"
	"github.com/svcdns/svc/internal/unblock"
)

// blockPageAddrs are the A and AAAA answers of block mode blockPage:
// blockPage.ipv4/.ipv6, else the specific IP of a block page listener of
// this node (settings refuse blockPage.enabled when neither exists). With
// the block page off only the configured addresses answer (a page served
// elsewhere); none means NODATA.
func blockPageAddrs(cfg *settings.Config) (v4, v6 netip.Addr) {
	v4, v6 = cfg.BlockPage.IPv4, cfg.BlockPage.IPv6
	if !cfg.BlockPage.Enabled || v4.IsValid() || v6.IsValid() {
		return v4, v6
	}
	for _, hp := range []string{cfg.Listeners.BlockPage.HTTP, cfg.Listeners.BlockPage.HTTPS} {
		host, _, err := net.SplitHostPort(hp)
		if err != nil {
			continue
		}
		a, err := netip.ParseAddr(host)
		if err != nil || a.IsUnspecified() {
			continue
		}
		a = a.Unmap()
		if a.Is4() && !v4.IsValid() {
			v4 = a
		} else if a.Is6() && !v6.IsValid() {
			v6 = a
		}
	}
	return v4, v6
}

// blockPageDecider re-runs the DNS decision for the block page through the
// data plane's own stages (dataplane.Server.Explain): what POST /dns/query
// asks, without going upstream or into the query log.
type blockPageDecider struct{ dp *dataplane.Server }

func (d blockPageDecider) Decide(ctx context.Context, name string, client netip.Addr) (blockpage.Decision, error) {
	// The browser's address family says which query it most likely made
	// first; a rule for one type only is found by asking the other too.
	a, _ := dataplane.ParseType("A")
	aaaa, _ := dataplane.ParseType("AAAA")
	types := []uint16{a, aaaa}
	if client.Is6() {
		types[0], types[1] = types[1], types[0]
	}
	for _, t := range types {
		e, err := d.dp.Explain(ctx, dataplane.QueryRequest{Name: name, Type: t, Client: client, Transport: dataplane.TransportUDP})
		if err != nil {
			return blockpage.Decision{}, err
		}
		if e.Blocked() {
			return blockpage.Decision{Blocked: true, Policy: e.Policy, List: e.List, Rule: e.Rule, Groups: e.Groups}, nil
		}
	}
	return blockpage.Decision{}, nil
}

// blockPageSettings maps the cluster settings the page reads per request.
func blockPageSettings(c *settings.Config) blockpage.Settings {
	return blockpage.Settings{
		Title: c.BlockPage.Title, Message: c.BlockPage.Message, Contact: c.BlockPage.Contact,
		ShowDetails: c.BlockPage.ShowDetails, DashboardURL: c.BlockPage.DashboardURL,
		RateLimit: c.BlockPage.RateLimit, UnblockEnabled: c.UnblockRequests.Enabled && c.BlockPage.Enabled,
	}
}

// startBlockPage serves the block page on listeners.blockPage.http and
// .https when blockPage.enabled (a restart setting): with the page off
// nothing binds port 80. The operator role serves no page.
func (p *proc) startBlockPage(ctx context.Context) error {
	cfg, logger := p.cfg, p.logger.With("component", "blockpage")
	if p.role == RoleOperator || !cfg.BlockPage.Enabled {
		return nil
	}
	lc := cfg.Listeners.BlockPage
	if lc.HTTP == "" && lc.HTTPS == "" {
		v4, v6 := blockPageAddrs(cfg)
		logger.Warn("blockPage.enabled but both block page listeners are off on this node: blocked names answer the configured address, which must serve the page", "ipv4", v4, "ipv6", v6)
		return nil
	}
	stateDir := blockpage.StateDir(cfg.Node.DataDir)
	var ca *blockpage.CA
	var tlsCfg *tls.Config
	if lc.HTTPS != "" {
		var err error
		if lc.TLS.CertFile == "" && lc.TLS.KeyFile == "" {
			if ca, err = blockpage.LoadOrCreateCA(stateDir, nil); err != nil {
				return err
			}
			logger.Info("block page CA", "certificate", stateDir+"/ca.crt", "sha256", ca.Fingerprint())
		}
		if tlsCfg, err = blockpage.TLSConfig(lc.TLS.CertFile, lc.TLS.KeyFile, ca); err != nil {
			return err
		}
	}
	mgr := p.mgr
	srv, err := blockpage.New(blockpage.Options{
		Settings:  func() blockpage.Settings { return blockPageSettings(mgr.Current()) },
		Decider:   blockPageDecider{dp: p.dp},
		Submitter: p.unblockSubmitter(),
		StateDir:  stateDir, CA: ca, Logger: logger,
	})
	if err != nil {
		return err
	}
	serve := func(name, addr string, tc *tls.Config) (string, error) {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return "", fmt.Errorf("block page %s listener %s: %w", name, addr, err)
		}
		// the node's per-pool stream bound (connlimit.go): a flood of
		// idle connections to the page cannot take the DNS listeners'
		// descriptors
		ln = netutil.LimitListener(ln, p.limits.Stream)
		hs := blockpage.HTTPServer(srv, tc, slog.NewLogLogger(logger.Handler(), slog.LevelDebug))
		p.onStop(func() {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = hs.Shutdown(sctx)
		})
		go func() {
			var err error
			if tc != nil {
				err = hs.ServeTLS(ln, "", "")
			} else {
				err = hs.Serve(ln)
			}
			if err != nil && !errors.Is(err, http.ErrServerClosed) {
				logger.Error("block page listener failed", "listener", name, "err", err)
			}
		}()
		logger.Info("listening", "listener", "blockpage-"+name, "address", ln.Addr().String())
		return ln.Addr().String(), nil
	}
	if lc.HTTP != "" {
		if p.addrs.BlockPageHTTP, err = serve("http", lc.HTTP, nil); err != nil {
			return err
		}
	}
	if lc.HTTPS != "" {
		if p.addrs.BlockPageHTTPS, err = serve("https", lc.HTTPS, tlsCfg); err != nil {
			return err
		}
	}
	return nil
}

// unblockSubmitter is the unblock request service the form files into
// (the node's one unblock.Service: its per-client limit is in memory).
func (p *proc) unblockSubmitter() unblock.Submitter {
	if p.blk == nil || p.blk.unblock == nil {
		return nil
	}
	return p.blk.unblock
}
