package node

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"

	"github.com/svcdns/svc/internal/externaldns"
)

// startExternalDNS serves the external-dns webhook provider when
// externalDNS.webhook.enabled: the protocol on externalDNS.webhook.address,
// /healthz on healthAddress. Without a token only loopback peers are
// admitted, so a listener on another address needs tokenFile. On
// Kubernetes it runs in the operator pods only: the chart's one settings
// file reaches the data-plane DaemonSet too, and one writer beside a
// single external-dns is what the protocol expects, not one per node.
func (p *proc) startExternalDNS(context.Context) error {
	c := p.cfg.ExternalDNS.Webhook
	if !c.Enabled {
		return nil
	}
	if p.role == RoleDataplane {
		p.logger.Info("externalDNS.webhook.enabled: the webhook runs in the operator pods, not on the data plane")
		return nil
	}
	opts := externaldns.ServerOptions{LoopbackOnly: c.TokenFile == ""}
	if c.TokenFile != "" {
		b, err := os.ReadFile(c.TokenFile)
		if err != nil {
			return fmt.Errorf("externalDNS.webhook.tokenFile: %w", err)
		}
		if opts.Token = strings.TrimSpace(string(b)); opts.Token == "" {
			return fmt.Errorf("externalDNS.webhook.tokenFile %s is empty: write the token external-dns sends into it", c.TokenFile)
		}
	} else if !loopbackAddr(c.Address) {
		return fmt.Errorf("externalDNS.webhook.address %s is not a loopback address and externalDNS.webhook.tokenFile is empty: set a token file, or listen on 127.0.0.1 and run external-dns as a sidecar", c.Address)
	}
	prov, err := externaldns.New(externaldns.Options{Store: p.st, Namespace: c.Namespace, Zones: c.Zones, Logger: p.logger.With("component", "external-dns")})
	if err != nil {
		return err
	}
	if p.addrs.ExternalDNS, err = p.serveHTTP("externalDNS", c.Address, prov.Handler(opts)); err != nil {
		return err
	}
	if c.HealthAddress != "" {
		if p.addrs.ExternalDNSHealth, err = p.serveHTTP("externalDNSHealth", c.HealthAddress, prov.HealthHandler()); err != nil {
			return err
		}
	}
	return nil
}

// loopbackAddr reports whether host:port names a loopback address (or
// localhost).
func loopbackAddr(hp string) bool {
	host, _, err := net.SplitHostPort(hp)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Unmap().IsLoopback()
}
