package validation

import (
	"bytes"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// Decode reads one object from JSON or YAML bytes, refusing duplicate keys
// (as the apiserver's strict decoding does) and anything but a JSON object.
// Numbers become int64 or float64, as the apiserver's decoder makes them.
func Decode(data []byte) (*unstructured.Unstructured, error) {
	j, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, fmt.Errorf("decoding object: %w", err)
	}
	j = bytes.TrimSpace(j)
	if len(j) == 0 || j[0] != '{' {
		return nil, fmt.Errorf("decoding object: not a JSON or YAML object")
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(j); err != nil {
		return nil, fmt.Errorf("decoding object: %w", err)
	}
	// UnmarshalJSON checks only kind; a valid object is a JSON map all through.
	if _, err := json.Marshal(u.Object); err != nil {
		return nil, fmt.Errorf("decoding object: %w", err)
	}
	return u, nil
}
