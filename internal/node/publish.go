package node

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/svcdns/svc/dataplane/xfr"
	"github.com/svcdns/svc/internal/publish"
	"github.com/svcdns/svc/internal/settings"
	"github.com/svcdns/svc/internal/store"
)

// startPublish runs the publisher (publish.targets) where exactly one
// writer exists: the node itself with the SQLite store. With the kube
// store it runs in the operator while it holds the Lease (publishRunnable).
func (p *proc) startPublish(ctx context.Context) error {
	if len(p.cfg.Publish.Targets) == 0 || p.kubeMode {
		return nil
	}
	pub, err := newPublisher(p.cfg, p.st, publish.FileState{Dir: filepath.Join(p.cfg.Node.DataDir, "publish")}, p.logger)
	if err != nil {
		return err
	}
	go func() {
		if err := pub.Run(ctx); stoppedEarly(ctx, err) {
			p.logger.Error("publisher stopped", "err", err)
		}
	}()
	return nil
}

// newPublisher builds the publisher of publish.targets; a TSIG secret file
// that cannot be read stops the start, naming the key.
func newPublisher(cfg *settings.Config, st store.Store, state publish.State, log *slog.Logger) (*publish.Publisher, error) {
	specs := make([]xfr.KeySpec, len(cfg.TSIGKeys))
	for i, k := range cfg.TSIGKeys {
		specs[i] = xfr.KeySpec{Name: k.Name, Algorithm: k.Algorithm, SecretFile: k.SecretFile}
	}
	keys, err := xfr.LoadKeys(specs)
	if err != nil {
		return nil, err
	}
	targets := make([]publish.Target, 0, len(cfg.Publish.Targets))
	for _, t := range cfg.Publish.Targets {
		pt := publish.Target{Name: t.Name, Server: t.Server, Zone: t.Zone, Timeout: t.Timeout}
		if t.TSIGKey != "" {
			k, ok := keys.Lookup(t.TSIGKey)
			if !ok {
				return nil, fmt.Errorf("publish.targets %s: tsigKey %q is not in tsigKeys", t.Name, t.TSIGKey)
			}
			pt.Key = &k
		}
		targets = append(targets, pt)
	}
	return publish.New(publish.Options{Store: st, Targets: targets, State: state, Logger: log.With("component", "publish")})
}

// publishStatePrefix names the state ConfigMaps on Kubernetes:
// service-publish-<target> in the operator's namespace.
const publishStatePrefix = "service-publish-"

// publishRunnable is the publisher of a kube store operator: it runs while
// the replica holds the Lease, with its state in ConfigMaps so the next
// leader continues where this one stopped. nil without publish.targets.
func publishRunnable(cfg *settings.Config, st *openedStore, ns string, log *slog.Logger) (func(context.Context) error, error) {
	if len(cfg.Publish.Targets) == 0 {
		return nil, nil
	}
	cs, err := kubernetes.NewForConfig(st.rest)
	if err != nil {
		return nil, fmt.Errorf("publish: %w", err)
	}
	state := publish.ConfigMapState{Client: cs, Namespace: ns, Prefix: publishStatePrefix}
	// Built once here so a bad key file stops the start; each election
	// builds a fresh publisher that reloads the state.
	if _, err := newPublisher(cfg, st, state, log); err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		backoff := time.Second
		for {
			pub, err := newPublisher(cfg, st, state, log)
			if err == nil {
				err = pub.Run(ctx)
			}
			if ctx.Err() != nil {
				return nil
			}
			// Never fail the manager: the other controllers keep running.
			log.Error("publisher stopped; starting again", "err", err, "retry", backoff)
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 5*time.Minute)
		}
	}, nil
}
