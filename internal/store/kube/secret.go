package kube

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/svcdns/svc/api/v1alpha1/iam"
	"github.com/svcdns/svc/internal/store"
)

// Labels and annotations on the Secrets holding internal kinds.
const (
	KindLabel           = "service.io/kind"
	NameAnnotation      = "service.io/name"
	NamespaceAnnotation = "service.io/namespace"
	objectKey           = "object"
	encPrefix           = "enc:v1:"
	fieldKeyInfo        = "service/kube-store/fields"
)

// sealer encrypts sensitive fields with AES-256-GCM under a key derived
// (HKDF-SHA256) from the encryption key; the previous key still opens.
type sealer struct {
	current  cipher.AEAD
	previous cipher.AEAD
}

func newAEAD(key []byte) (cipher.AEAD, error) {
	k, err := hkdf.Key(sha256.New, key, nil, fieldKeyInfo, 32)
	if err != nil {
		return nil, fmt.Errorf("derive field key: %w", err)
	}
	b, err := aes.NewCipher(k)
	if err != nil {
		return nil, fmt.Errorf("field cipher: %w", err)
	}
	return cipher.NewGCM(b)
}

func newSealer(current, previous []byte) (*sealer, error) {
	if len(current) == 0 {
		return nil, errors.New("the kube store needs an encryption key (SERVICE_ENCRYPTION_KEY)")
	}
	s := &sealer{}
	var err error
	if s.current, err = newAEAD(current); err != nil {
		return nil, err
	}
	if len(previous) > 0 {
		if s.previous, err = newAEAD(previous); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func (s *sealer) seal(plain, aad string) (string, error) {
	nonce := make([]byte, s.current.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", fmt.Errorf("nonce: %w", err)
	}
	ct := s.current.Seal(nonce, nonce, []byte(plain), []byte(aad))
	return encPrefix + base64.RawStdEncoding.EncodeToString(ct), nil
}

func (s *sealer) open(v, aad string) (string, error) {
	raw, err := base64.RawStdEncoding.DecodeString(strings.TrimPrefix(v, encPrefix))
	if err != nil {
		return "", fmt.Errorf("sealed field: %w", err)
	}
	for _, a := range []cipher.AEAD{s.current, s.previous} {
		if a == nil || len(raw) < a.NonceSize() {
			continue
		}
		if pt, err := a.Open(nil, raw[:a.NonceSize()], raw[a.NonceSize():], []byte(aad)); err == nil {
			return string(pt), nil
		}
	}
	return "", errors.New("sealed field: no configured encryption key opens it")
}

func fieldAAD(key store.Key, field []string) string {
	return key.String() + "#" + strings.Join(field, ".")
}

// secretName names the Secret holding key: "<kind>.<name>" or
// "<kind>.<namespace>.<name>" (namespaces hold no dots, so this is
// unambiguous), or a digest when that is not a valid Secret name.
func secretName(key store.Key) string {
	n := lower(key.Kind) + "."
	if key.Namespace != "" {
		n += key.Namespace + "."
	}
	n += key.Name
	if len(validation.IsDNS1123Subdomain(n)) == 0 {
		return n
	}
	sum := sha256.Sum256([]byte(key.Namespace + "/" + key.Name))
	return lower(key.Kind) + ".x-" + hex.EncodeToString(sum[:20])
}

// toSecret encodes obj (an internal kind) as a Secret in namespace ns.
func (d *Driver) toSecret(obj *unstructured.Unstructured, rv string) (*unstructured.Unstructured, error) {
	key := store.KeyOf(obj)
	body := obj.DeepCopy()
	unstructured.RemoveNestedField(body.Object, "metadata", "resourceVersion")
	unstructured.RemoveNestedField(body.Object, "metadata", "uid")
	unstructured.RemoveNestedField(body.Object, "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(body.Object, "metadata", "managedFields")
	for _, f := range iam.SensitiveFields(key.Kind) {
		v, ok, _ := unstructured.NestedString(body.Object, f...)
		if !ok || v == "" {
			continue
		}
		sealed, err := d.sealer.seal(v, fieldAAD(key, f))
		if err != nil {
			return nil, err
		}
		if err := unstructured.SetNestedField(body.Object, sealed, f...); err != nil {
			return nil, fmt.Errorf("seal %s: %w", strings.Join(f, "."), err)
		}
	}
	data, err := json.Marshal(body.Object)
	if err != nil {
		return nil, fmt.Errorf("%w: encode: %v", store.ErrInvalid, err)
	}
	ann := map[string]string{NameAnnotation: key.Name}
	if key.Namespace != "" {
		ann[NamespaceAnnotation] = key.Namespace
	}
	if m := obj.GetAnnotations()[store.ManagerAnnotation]; m != "" {
		ann[store.ManagerAnnotation] = m
	}
	sec := &corev1.Secret{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{
			Name:            secretName(key),
			Namespace:       d.namespace,
			Labels:          map[string]string{KindLabel: key.Kind},
			Annotations:     ann,
			ResourceVersion: rv,
		},
		Type: corev1.SecretType("service.io/" + lower(key.Kind)),
		Data: map[string][]byte{objectKey: data},
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(sec)
	if err != nil {
		return nil, fmt.Errorf("encode secret: %w", err)
	}
	return &unstructured.Unstructured{Object: m}, nil
}

// fromSecret decodes the object a Secret holds; uid, resourceVersion and
// creationTimestamp are the Secret's.
func (d *Driver) fromSecret(u *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	var sec corev1.Secret
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &sec); err != nil {
		return nil, fmt.Errorf("decode secret %s: %w", u.GetName(), err)
	}
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(sec.Data[objectKey]); err != nil {
		return nil, fmt.Errorf("decode secret %s: %w", sec.Name, err)
	}
	key := store.KeyOf(obj)
	for _, f := range iam.SensitiveFields(key.Kind) {
		v, ok, _ := unstructured.NestedString(obj.Object, f...)
		if !ok || !strings.HasPrefix(v, encPrefix) {
			continue
		}
		plain, err := d.sealer.open(v, fieldAAD(key, f))
		if err != nil {
			return nil, fmt.Errorf("secret %s: %w", sec.Name, err)
		}
		_ = unstructured.SetNestedField(obj.Object, plain, f...)
	}
	obj.SetUID(sec.UID)
	obj.SetResourceVersion(sec.ResourceVersion)
	obj.SetCreationTimestamp(sec.CreationTimestamp)
	return obj, nil
}
