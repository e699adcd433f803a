package settings

import (
	"fmt"
	"strings"
)

// ExternalDNS is the externalDNS section: the webhook provider external-dns
// (--provider=webhook) writes DNSRecordSet objects through.
type ExternalDNS struct {
	Webhook ExternalDNSWebhook
}

// ExternalDNSWebhook configures the provider's listeners and scope.
type ExternalDNSWebhook struct {
	Enabled       bool
	Address       string   // the protocol listener
	HealthAddress string   // /healthz; "" turns it off
	Zones         []string // the domain filter; empty: every primary zone but the root
	Namespace     string   // where its record sets live
	TokenFile     string   // bearer token; "" admits loopback peers only
}

func externalDNSKeys() []*key {
	const N = ScopeNode
	return []*key{
		mk("externalDNS.webhook.enabled", boolean(), false, N, hr, "serve the external-dns webhook provider: external-dns --provider=webhook writes DNSRecordSet objects (manager integration:external-dns) through it", func(c *Config, v bool) { c.ExternalDNS.Webhook.Enabled = v }),
		mk("externalDNS.webhook.address", hostport(), "127.0.0.1:8888", N, hr, "webhook listener (external-dns's default --webhook-provider-url is http://localhost:8888: a sidecar); an address that is not loopback needs tokenFile", func(c *Config, v string) { c.ExternalDNS.Webhook.Address = v }),
		mk("externalDNS.webhook.healthAddress", hostport(), "0.0.0.0:8889", N, hr, "serves the webhook's /healthz (200 while the store answers); empty turns it off", func(c *Config, v string) { c.ExternalDNS.Webhook.HealthAddress = v }),
		mk("externalDNS.webhook.zones", strs(), []string{}, N, hr, "zones external-dns may write into, sent as its domain filter (subzones included); empty: every primary zone except the root zone whose recordSetNamespaces admit the namespace", func(c *Config, v []string) { c.ExternalDNS.Webhook.Zones = v }, each(checkZoneName)),
		mk("externalDNS.webhook.namespace", str(), "default", N, hr, "namespace of the record sets the webhook writes and reads; the zones' spec.recordSetNamespaces must admit it", func(c *Config, v string) { c.ExternalDNS.Webhook.Namespace = v }, opt[string]{check: checkNamespaceName}),
		mk("externalDNS.webhook.tokenFile", str(), "", N, hr, "file holding the token external-dns must send (Authorization: Bearer, or as the password in --webhook-provider-url=http://external-dns:<token>@host:8888); empty admits loopback peers only", func(c *Config, v string) { c.ExternalDNS.Webhook.TokenFile = v }),
	}
}

func checkZoneName(s string) error {
	t := strings.TrimSuffix(s, ".")
	if t == "" || strings.Contains(t, "..") || strings.HasPrefix(t, ".") || strings.ContainsAny(t, " \t/*") {
		return fmt.Errorf("invalid zone %q: want a domain name such as example.com", s)
	}
	return nil
}

func checkNamespaceName(s string) error {
	if s == "" || len(s) > 63 {
		return fmt.Errorf("invalid namespace %q: want a Kubernetes namespace name such as default", s)
	}
	for i, r := range s {
		ok := r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || (r == '-' && i > 0 && i < len(s)-1)
		if !ok {
			return fmt.Errorf("invalid namespace %q: want lower-case letters, digits and '-', such as default", s)
		}
	}
	return nil
}
