package publish

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// configMapKey holds the snapshot in a state ConfigMap.
const configMapKey = "state.json"

// maxConfigMapState keeps a snapshot under the apiserver's 1 MiB object
// limit with room for metadata.
const maxConfigMapState = 900 << 10

// ConfigMapState keeps one ConfigMap per target, <Prefix><target> in
// Namespace (Kubernetes mode: the operator's namespace), so whichever
// replica leads next knows what the last leader published.
type ConfigMapState struct {
	Client    kubernetes.Interface
	Namespace string
	Prefix    string
}

func (c ConfigMapState) name(target string) string { return c.Prefix + target }

// Load implements State.
func (c ConfigMapState) Load(ctx context.Context, target string) (*Snapshot, error) {
	cm, err := c.Client.CoreV1().ConfigMaps(c.Namespace).Get(ctx, c.name(target), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("ConfigMap %s/%s: %w", c.Namespace, c.name(target), err)
	}
	var s Snapshot
	if err := json.Unmarshal([]byte(cm.Data[configMapKey]), &s); err != nil {
		return nil, fmt.Errorf("ConfigMap %s/%s: %s: %w", c.Namespace, c.name(target), configMapKey, err)
	}
	if s.Version != snapshotVersion {
		return nil, fmt.Errorf("ConfigMap %s/%s: version %d, want %d", c.Namespace, c.name(target), s.Version, snapshotVersion)
	}
	return &s, nil
}

// Save implements State.
func (c ConfigMapState) Save(ctx context.Context, target string, s *Snapshot) error {
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	if len(b) > maxConfigMapState {
		return fmt.Errorf("the state of %d RRsets is %d bytes, over the %d a ConfigMap holds: split the target's record sets over more targets", len(s.RRsets), len(b), maxConfigMapState)
	}
	cms := c.Client.CoreV1().ConfigMaps(c.Namespace)
	cm, err := cms.Get(ctx, c.name(target), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: c.name(target), Namespace: c.Namespace,
			Labels: map[string]string{"app.kubernetes.io/component": "publish"}},
			Data: map[string]string{configMapKey: string(b)}}
		_, err = cms.Create(ctx, cm, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
	cm.Data[configMapKey] = string(b)
	_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
	return err
}
