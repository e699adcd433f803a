package node

import (
	"context"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/svcdns/svc/internal/dnslog"
	"github.com/svcdns/svc/internal/querylog"
	"github.com/svcdns/svc/internal/settings"
)

// querylogConfig maps querylog.* and the node's data directory.
func querylogConfig(cfg *settings.Config, nodeName string) querylog.Config {
	q := cfg.Querylog
	c := querylog.DefaultConfig()
	c.Enabled, c.Sink, c.Privacy, c.Anonymize = q.Enabled, q.Sink, q.Privacy, q.Anonymize
	c.RetentionRaw, c.MaxDBBytes = q.Retention.Raw, q.Retention.MaxDBBytes
	c.ExcludeDomains, c.ExcludeClients, c.ExcludeSUDN = q.Exclude.Domains, q.Exclude.Clients, q.Exclude.SUDN
	c.DataDir, c.Node = cfg.Node.DataDir, nodeName
	return c
}

// openQueryLog opens the node's query log; the returned logger is what the data
// plane's log stage feeds. Close the logger before the writer: it hands its
// buffered records over first.
func openQueryLog(ctx context.Context, cfg *settings.Config, nodeName string, reg prometheus.Registerer, log *slog.Logger) (*querylog.Writer, *dnslog.Logger, error) {
	w, err := querylog.Open(ctx, querylogConfig(cfg, nodeName), querylog.Options{Logger: log.With("component", "querylog"), Registerer: reg})
	if err != nil {
		return nil, nil, err
	}
	return w, dnslog.New(w), nil
}
