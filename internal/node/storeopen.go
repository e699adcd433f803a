package node

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/svcdns/svc/internal/auth"
	"github.com/svcdns/svc/internal/settings"
	"github.com/svcdns/svc/internal/store"
	"github.com/svcdns/svc/internal/store/kube"
	"github.com/svcdns/svc/internal/store/sqlite"
)

// DefaultNamespace holds internal objects outside Kubernetes, and in it unless
// SERVICE_NAMESPACE names the pod's namespace.
const DefaultNamespace = "service-system"

// openedStore is the node's store plus what the driver knows about freshness.
type openedStore struct {
	store.Store
	// fresh reports whether the node's view of the store is recent enough to
	// answer primary zones (store.kube.snapshot.maxAge); always true for sqlite.
	fresh func(now time.Time) (bool, time.Duration)
	rest  *rest.Config // nil outside Kubernetes
}

func openStore(ctx context.Context, cfg *settings.Config, env func(string) string, admit store.Admitter, log *slog.Logger) (*openedStore, error) {
	switch cfg.Store.Driver {
	case "sqlite", "":
		d, err := sqlite.Open(ctx, filepath.Join(cfg.Node.DataDir, "state.db"), sqlite.Options{Logger: log})
		if err != nil {
			return nil, err
		}
		st := store.New(d, admit)
		// before anything compiles or serves: lists written under the old
		// rule keep their meaning (docs/policies.md, "Upgrading")
		if err := upgradeGlobalLists(ctx, st, d, resolveTenancy(cfg, namespace(env)), log); err != nil {
			d.Close()
			return nil, err
		}
		return &openedStore{Store: st, fresh: func(time.Time) (bool, time.Duration) { return true, 0 }}, nil
	case "kube":
		rc, err := restConfig(env)
		if err != nil {
			return nil, fmt.Errorf("store.driver kube: %w", err)
		}
		keys, err := auth.LoadKeys(env, "", false)
		if err != nil {
			return nil, fmt.Errorf("store.driver kube needs SERVICE_ENCRYPTION_KEY: %w", err)
		}
		d, err := kube.Open(ctx, rc, kube.Options{
			Namespace: namespace(env), EncryptionKey: keys.Current, PreviousEncryptionKey: keys.Previous,
			StartupTimeout: cfg.Store.Kube.StartupTimeout, Logger: log.With("component", "kube-store"),
		})
		if err != nil {
			return nil, fmt.Errorf("store.driver kube: %w", err)
		}
		maxAge := cfg.Store.Kube.SnapshotMaxAge
		return &openedStore{
			Store: store.New(d, admit),
			fresh: func(now time.Time) (bool, time.Duration) { return d.Fresh(now, maxAge), d.SnapshotAge(now) },
			rest:  rc,
		}, nil
	default:
		return nil, fmt.Errorf("store.driver: unknown driver %q (sqlite or kube)", cfg.Store.Driver)
	}
}

// restConfig is the in-cluster configuration in a pod, else KUBECONFIG or
// ~/.kube/config, so a node can run on a laptop against any cluster.
func restConfig(env func(string) string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if p := env("KUBECONFIG"); p != "" {
		rules.ExplicitPath = p
	}
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, nil).ClientConfig()
}

func namespace(env func(string) string) string {
	if ns := env("SERVICE_NAMESPACE"); ns != "" {
		return ns
	}
	return DefaultNamespace
}
