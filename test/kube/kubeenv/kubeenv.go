// Package kubeenv starts one envtest control plane (a real kube-apiserver and
// etcd) for a test package, with the service's CRDs installed.
package kubeenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Version is the Kubernetes version hack/kube-testenv.sh builds.
const Version = "1.37.1"

// Assets returns the directory holding kube-apiserver, etcd, kubectl and
// helm: $KUBEBUILDER_ASSETS, else the hack/kube-testenv.sh cache; empty when
// neither has the binaries.
func Assets() string {
	dirs := []string{os.Getenv("KUBEBUILDER_ASSETS")}
	if home, err := os.UserHomeDir(); err == nil {
		dirs = append(dirs, filepath.Join(home, ".cache", "service-kube-testenv", Version))
	}
	for _, d := range dirs {
		if d == "" {
			continue
		}
		if _, err := os.Stat(filepath.Join(d, "kube-apiserver")); err == nil {
			return d
		}
	}
	return ""
}

// SkipReason explains why kube tests cannot run here (empty when they can).
func SkipReason() string {
	if Assets() == "" {
		return "envtest binaries not found: run hack/kube-testenv.sh and set KUBEBUILDER_ASSETS"
	}
	return ""
}

// RepoRoot is the module root (for CRD and chart paths).
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", "..", ".."))
}

// Env is a running control plane.
type Env struct {
	*envtest.Environment
	Config  *rest.Config
	cleanup func()
}

// Start starts etcd and kube-apiserver with the CRDs of config/crd/bases.
// Etcd accepts requests up to 4 MiB so objects at the store's size cap fit.
func Start() (*Env, error) { return start(nil, nil) }

// StartWithoutCRDs starts a control plane with none of the service's CRDs:
// a cluster the chart meets for the first time. Tests that need that start
// their own instead of deleting the package's CRDs, whose deletion waits on
// the apiserver's CRD finalizer (minutes once in CI).
func StartWithoutCRDs() (*Env, error) {
	return start(func(e *Env) {
		e.CRDDirectoryPaths = nil
		e.ErrorIfCRDPathMissing = false
	}, nil)
}

// start starts the control plane; configure, when set, adjusts it first and
// cleanup runs after Stop.
func start(configure func(*Env), cleanup func()) (*Env, error) {
	assets := Assets()
	if assets == "" {
		return nil, fmt.Errorf("%s", SkipReason())
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDDirectoryPaths:     []string{filepath.Join(RepoRoot(), "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
	}
	env.ControlPlane.Etcd = &envtest.Etcd{}
	env.ControlPlane.Etcd.Configure().Set("max-request-bytes", "4194304")
	env.ControlPlane.GetAPIServer().StartTimeout = time.Minute
	env.ControlPlane.Etcd.StartTimeout = time.Minute
	e := &Env{Environment: env, cleanup: cleanup}
	if configure != nil {
		configure(e)
	}
	cfg, err := env.Start()
	if err != nil {
		if cleanup != nil {
			cleanup()
		}
		return nil, fmt.Errorf("start envtest: %w", err)
	}
	e.Config = cfg
	return e, nil
}

// Stop stops the control plane and removes what start made for it.
func (e *Env) Stop() error {
	err := e.Environment.Stop()
	if e.cleanup != nil {
		e.cleanup()
	}
	return err
}

// Namespaces creates the namespaces (existing ones are fine).
func (e *Env) Namespaces(ctx context.Context, names ...string) error {
	cs, err := kubernetes.NewForConfig(e.Config)
	if err != nil {
		return err
	}
	for _, n := range names {
		_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create namespace %s: %w", n, err)
		}
	}
	return nil
}
