package node

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/svcdns/svc/controllers/blocklists"
)

// kubeConfigMaps reads the ConfigMaps of configMapRef BlockList sources with
// the node's own credentials (ServiceAccount: configmaps get).
type kubeConfigMaps struct{ cs kubernetes.Interface }

// newConfigMaps returns the reader of a kube store node; nil outside
// Kubernetes (configMapRef sources then report an error).
func newConfigMaps(rc *rest.Config) (blocklists.ConfigMaps, error) {
	if rc == nil {
		return nil, nil
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	return kubeConfigMaps{cs: cs}, nil
}

// ListBody implements blocklists.ConfigMaps.
func (k kubeConfigMaps) ListBody(ctx context.Context, namespace, name string) (string, error) {
	cm, err := k.cs.CoreV1().ConfigMaps(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	return blocklists.ConfigMapBody(cm.Data), nil
}
