package node

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/svcdns/svc/dataplane"
	"github.com/svcdns/svc/dataplane/authority"
	"github.com/svcdns/svc/dataplane/xfr"
	"github.com/svcdns/svc/internal/api"
	"github.com/svcdns/svc/internal/settings"
)

// transfers wires zone transfers and NOTIFY into the node: the data plane
// hands AXFR and IXFR read on TCP and DoT to srv; every table the node
// serves is recorded in srv's IXFR journal, and the zones whose serial
// changed are announced to their secondaries (notify settings).
type transfers struct {
	srv      *xfr.Server
	notifier *xfr.Notifier
	enabled  bool
	dp       *dataplane.Server
	log      *slog.Logger

	latest chan *authority.Table // the newest table not observed yet (at most one)
	wg     sync.WaitGroup
}

// newTransfers loads the TSIG keys (a secret file that cannot be read
// stops the start, naming the key and the file) and installs the
// transfer handler on dp.
func newTransfers(cfg *settings.Config, dp *dataplane.Server, reg prometheus.Registerer, log *slog.Logger) (*transfers, error) {
	specs := make([]xfr.KeySpec, len(cfg.TSIGKeys))
	for i, k := range cfg.TSIGKeys {
		specs[i] = xfr.KeySpec{Name: k.Name, Algorithm: k.Algorithm, SecretFile: k.SecretFile}
	}
	keys, err := xfr.LoadKeys(specs)
	if err != nil {
		return nil, err
	}
	m, err := xfr.NewMetrics(reg)
	if err != nil {
		return nil, err
	}
	srv := xfr.New(xfr.Config{Keys: keys, Logger: log, Metrics: m})
	nc, err := notifyConfig(cfg.Notify)
	if err != nil {
		return nil, err
	}
	nc.Logger, nc.Metrics = log, m
	t := &transfers{srv: srv, notifier: xfr.NewNotifier(nc, srv.Keys), enabled: cfg.Notify.Enabled, dp: dp, log: log,
		latest: make(chan *authority.Table, 1)}
	dp.SetTransfers(srv)
	return t, nil
}

func notifyConfig(n settings.Notify) (xfr.NotifyConfig, error) {
	c := xfr.NotifyConfig{Timeout: n.Timeout, Retries: n.Retries, FromNS: n.FromNS}
	if n.Source != "" {
		a, err := netip.ParseAddr(n.Source)
		if err != nil {
			return c, fmt.Errorf("notify.source: %w", err)
		}
		c.Source = a
	}
	for _, t := range n.Targets {
		tg := xfr.NotifyTarget{Zone: t.Zone, Key: t.TSIGKey}
		for _, a := range t.Addresses {
			ap, err := settings.NotifyAddress(a)
			if err != nil {
				return c, fmt.Errorf("notify.targets: %w", err)
			}
			tg.Addresses = append(tg.Addresses, ap)
		}
		c.Targets = append(c.Targets, tg)
	}
	return c, nil
}

// served takes a newly served table; run records it. A table not recorded
// yet is replaced by a newer one: the journal then holds one change over
// both (IXFR carries that as well).
func (t *transfers) served(tbl *authority.Table) {
	for {
		select {
		case t.latest <- tbl:
			return
		default:
		}
		select {
		case <-t.latest:
		default:
		}
	}
}

// run records served tables in the journal and sends NOTIFY for the zones
// whose serial changed, until ctx ends.
func (t *transfers) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			t.wg.Wait()
			return
		case tbl := <-t.latest:
			for _, s := range t.srv.Observe(tbl) {
				if s.Regressed {
					t.log.Warn("zone content changed without a greater serial (RFC 1982): secondaries will not see the change; IXFR starts over",
						"zone", s.Zone, "serial", s.Serial)
				}
				tz := s.TZ
				if !t.enabled || !t.notifier.HasTargets(tbl, tz) {
					continue
				}
				t.wg.Add(1)
				go func() {
					defer t.wg.Done()
					t.notifier.Notify(ctx, tbl, tz)
				}()
			}
		}
	}
}

// NotifyZone implements api.ZoneNotifier: NOTIFY for the serial this node
// serves, sent now, whatever notify.enabled says.
func (t *transfers) NotifyZone(ctx context.Context, zone string) (api.NotifyOutcome, error) {
	tbl := t.dp.Snapshot().Authority()
	if tbl == nil {
		return api.NotifyOutcome{}, notServedError{zone}
	}
	for _, tz := range tbl.TransferZones() {
		if tz.Object() != zone && tz.Name() != zone && tz.Name() != zone+"." {
			continue
		}
		if !tz.Synced() {
			return api.NotifyOutcome{}, notServedError{zone}
		}
		out := api.NotifyOutcome{Serial: int64(tz.Serial())}
		for _, s := range t.notifier.Notify(ctx, tbl, tz) {
			out.Sent = append(out.Sent, api.NotifySent{Target: s.Target, Key: s.Key, Rcode: s.Rcode, Error: s.Error,
				Attempts: s.Attempts, TookMS: float64(s.Took.Microseconds()) / 1000})
		}
		return out, nil
	}
	return api.NotifyOutcome{}, notServedError{zone}
}

// notServedError: the zone exists in the store but this node serves no
// primary zone of that name (a forward zone, or not compiled yet).
type notServedError struct{ zone string }

func (e notServedError) Error() string {
	return fmt.Sprintf("zone %s is not served as a primary zone on this node (a forward zone, or not loaded yet)", e.zone)
}
func (notServedError) ErrorKey() string { return api.KeyConflict }
func (notServedError) ErrorHint() string {
	return "NOTIFY is sent for primary zones once the node serves them; check GET /zones/{zone} status"
}
