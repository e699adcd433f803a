package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"

	"github.com/svcdns/svc/internal/internalapi"
	"github.com/svcdns/svc/internal/kubewatch"
	"github.com/svcdns/svc/internal/settings"
)

// sharedSettingsKey is the ConfigMap key holding the cluster settings (the
// YAML of nested keys a settings file has).
const sharedSettingsKey = "settings.yaml"

// kubeSharedSettings keeps the cluster-scope settings in one ConfigMap of
// the service's namespace (store.kube.settingsConfigMap, created by the
// chart): PATCH /settings updates it and every node watches it.
type kubeSharedSettings struct {
	cs       kubernetes.Interface
	ns, name string
	log      *slog.Logger
}

// sharedError is a refusal of the shared settings store, answered by the
// API as 503 unavailable with the ConfigMap named.
type sharedError struct {
	err  error
	hint string
}

func (e *sharedError) Error() string        { return e.err.Error() }
func (e *sharedError) Unwrap() error        { return e.err }
func (e *sharedError) ErrorKey() string     { return "unavailable" }
func (e *sharedError) HTTPStatus() int      { return http.StatusServiceUnavailable }
func (e *sharedError) ErrorHint() string    { return e.hint }
func (e *sharedError) ServerFault() bool    { return false }
func (e *sharedError) ErrorMessage() string { return e.err.Error() }

// Update implements settings.Shared: read, change, write back with the read
// resourceVersion, again on a conflict.
func (k *kubeSharedSettings) Update(ctx context.Context, change func([]byte) ([]byte, error)) error {
	var changeErr error
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cms := k.cs.CoreV1().ConfigMaps(k.ns)
		cm, err := cms.Get(ctx, k.name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			next, err := change(nil)
			if err != nil {
				changeErr = err
				return err
			}
			cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: k.name, Namespace: k.ns,
				Labels: map[string]string{"app.kubernetes.io/component": "settings"}},
				Data: map[string]string{sharedSettingsKey: string(next)}}
			_, err = cms.Create(ctx, cm, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				return apierrors.NewConflict(schema.GroupResource{Resource: "configmaps"}, k.name, err)
			}
			return err
		}
		if err != nil {
			return err
		}
		next, err := change([]byte(cm.Data[sharedSettingsKey]))
		if err != nil {
			changeErr = err
			return err
		}
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		cm.Data[sharedSettingsKey] = string(next)
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
		return err
	})
	if err == nil || (changeErr != nil && errors.Is(err, changeErr)) {
		return err
	}
	return &sharedError{err: fmt.Errorf("cluster settings in ConfigMap %s/%s: %w", k.ns, k.name, err),
		hint: "the node's ServiceAccount needs get and update on that ConfigMap (the chart grants them and creates it)"}
}

// read returns the stored document; found is false without the ConfigMap.
func (k *kubeSharedSettings) read(ctx context.Context) (data []byte, found bool, err error) {
	cm, err := k.cs.CoreV1().ConfigMaps(k.ns).Get(ctx, k.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return []byte(cm.Data[sharedSettingsKey]), true, nil
}

// follow applies every version of the ConfigMap until ctx ends; a deleted
// ConfigMap means no cluster overrides. A refused document is logged and
// the settings in force stay.
func (k *kubeSharedSettings) follow(ctx context.Context, m *settings.Manager) {
	lw := cache.NewListWatchFromClient(k.cs.CoreV1().RESTClient(), "configmaps", k.ns,
		fields.OneTermEqualSelector("metadata.name", k.name))
	apply := func(obj any, deleted bool) {
		data := []byte("{}")
		if cm, ok := obj.(*corev1.ConfigMap); ok && !deleted {
			data = []byte(cm.Data[sharedSettingsKey])
		}
		if err := m.ReplaceCluster(ctx, data); err != nil && ctx.Err() == nil {
			k.log.Error("cluster settings in the ConfigMap refused, keeping the settings in force",
				"configmap", k.ns+"/"+k.name, "err", err)
		}
	}
	inf := cache.NewSharedIndexInformer(kubewatch.New(lw), &corev1.ConfigMap{}, 0, cache.Indexers{})
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { apply(obj, false) },
		UpdateFunc: func(_, obj any) { apply(obj, false) },
		DeleteFunc: func(obj any) { apply(obj, true) },
	})
	// Not waited for on stop: it ends with ctx (kubewatch lists and then
	// watches, and its retries end with the context).
	go inf.Run(ctx.Done())
}

// shareSettings joins the cluster's shared settings before anything else
// starts, so restart keys set cluster-wide are in force from the start:
// with the kube store the ConfigMap is read and then watched; in the
// multi-node SQLite mode (SERVICE_INTERNAL_PEERS) PATCH /settings pushes
// the cluster keys to the peers (wired in startInternal).
func (p *proc) shareSettings(ctx context.Context) error {
	if !p.kubeMode {
		return nil
	}
	rc, err := restConfig(p.env)
	if err != nil {
		return fmt.Errorf("shared settings: %w", err)
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return fmt.Errorf("shared settings: kubernetes client: %w", err)
	}
	sh := &kubeSharedSettings{cs: cs, ns: namespace(p.env), name: p.cfg.Store.Kube.SettingsConfigMap,
		log: p.logger.With("component", "settings")}
	p.mgr.UseShared(sh)
	rctx, cancel := context.WithTimeout(ctx, p.cfg.Store.Kube.StartupTimeout)
	data, found, err := sh.read(rctx)
	cancel()
	switch {
	case err != nil:
		// The watch keeps trying; the node starts with its own files.
		sh.log.Error("cluster settings not read at start", "configmap", sh.ns+"/"+sh.name, "err", err)
	case found:
		if err := p.mgr.ReplaceCluster(ctx, data); err != nil {
			sh.log.Error("cluster settings in the ConfigMap refused, starting without them", "configmap", sh.ns+"/"+sh.name, "err", err)
		}
	}
	p.mgr.MarkStarted()
	p.cfg = p.mgr.Current()
	sh.follow(ctx, p.mgr)
	return nil
}

// peerSettings pushes the cluster settings to every peer after a PATCH
// /settings this node applied (multi-node SQLite mode).
type peerSettings struct {
	client *internalapi.Client
	peers  []string
	log    *slog.Logger
}

// push sends data to every peer at once, each bounded by 5s. A peer that
// did not take it makes the answer 503 naming it (this node and the other
// peers keep the change; the same PATCH again reaches it).
func (s peerSettings) push(ctx context.Context, data []byte) error {
	addrs := resolvePeers(ctx, s.peers)
	var mu sync.Mutex
	var failed []string
	var wg sync.WaitGroup
	for _, a := range addrs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			if err := s.client.PutClusterSettings(pctx, a, data); err != nil {
				s.log.Error("cluster settings not applied on a peer", "peer", a, "err", err)
				mu.Lock()
				failed = append(failed, err.Error())
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(failed) == 0 {
		return nil
	}
	return &sharedError{err: fmt.Errorf("applied on this node and %d of %d peers; not on: %s",
		len(addrs)-len(failed), len(addrs), strings.Join(failed, "; ")),
		hint: "send the same PATCH again once the peer is up; " + PeersEnv + " lists the peers"}
}
