package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/yaml"
)

// ClientConfig is the client configuration file: saved contexts.
type ClientConfig struct {
	APIVersion     string    `json:"apiVersion"`
	Kind           string    `json:"kind"`
	CurrentContext string    `json:"currentContext,omitempty"`
	Contexts       []Context `json:"contexts"`
}

// Context is one saved server with its credentials.
type Context struct {
	Name                  string `json:"name"`
	Server                string `json:"server"`
	DefaultNamespace      string `json:"defaultNamespace,omitempty"`
	User                  string `json:"user,omitempty"`
	TokenID               string `json:"tokenID,omitempty"`
	CAFile                string `json:"caFile,omitempty"`
	InsecureSkipTLSVerify bool   `json:"insecureSkipTLSVerify,omitempty"`
	// Token is kept here (file mode 0600) when no OS keyring is used.
	Token string `json:"token,omitempty"`
}

// clientConfigSchema is printed by `svc config schema`.
const clientConfigSchema = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "title": "svc client configuration",
  "type": "object",
  "additionalProperties": false,
  "properties": {
    "apiVersion": {"type": "string", "const": "service.io/v1alpha1"},
    "kind": {"type": "string", "const": "Config"},
    "currentContext": {"type": "string", "description": "context used when --context is not given"},
    "contexts": {
      "type": "array",
      "items": {
        "type": "object",
        "additionalProperties": false,
        "required": ["name", "server"],
        "properties": {
          "name": {"type": "string", "minLength": 1},
          "server": {"type": "string", "description": "API address, e.g. https://127.0.0.1:8080"},
          "defaultNamespace": {"type": "string"},
          "user": {"type": "string", "description": "who logged in"},
          "tokenID": {"type": "string", "description": "id of the API token the CLI holds"},
          "caFile": {"type": "string"},
          "insecureSkipTLSVerify": {"type": "boolean"},
          "token": {"type": "string", "description": "API token, only when no OS keyring is used (SERVICE_KEYRING=file or the keyring failed; file mode 0600)"}
        }
      }
    }
  }
}
`

func expandHome(p string) string {
	if p == "~" || strings.HasPrefix(p, "~/") {
		if h, err := os.UserHomeDir(); err == nil {
			return filepath.Join(h, strings.TrimPrefix(p, "~"))
		}
	}
	return p
}

// loadClientConfig reads the file; a missing file is an empty config.
func loadClientConfig(path string) (*ClientConfig, error) {
	c := &ClientConfig{APIVersion: "service.io/v1alpha1", Kind: "Config"}
	b, err := os.ReadFile(expandHome(path))
	if errors.Is(err, fs.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return nil, fmt.Errorf("client config: %w", err)
	}
	if err := yaml.UnmarshalStrict(b, c); err != nil {
		return nil, fmt.Errorf("client config %s: %w", path, err)
	}
	return c, nil
}

// save writes the file with mode 0600 (directory 0700).
func (c *ClientConfig) save(path string) error {
	path = expandHome(path)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("client config: %w", err)
	}
	b, err := yaml.Marshal(c)
	if err != nil {
		return fmt.Errorf("client config: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".config-*.yaml")
	if err != nil {
		return fmt.Errorf("client config: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return fmt.Errorf("client config: %w", err)
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return fmt.Errorf("client config: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("client config: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("client config: %w", err)
	}
	return nil
}

func (c *ClientConfig) find(name string) *Context {
	for i := range c.Contexts {
		if c.Contexts[i].Name == name {
			return &c.Contexts[i]
		}
	}
	return nil
}

// upsert returns the named context, adding it when missing.
func (c *ClientConfig) upsert(name string) *Context {
	if ctx := c.find(name); ctx != nil {
		return ctx
	}
	c.Contexts = append(c.Contexts, Context{Name: name})
	return &c.Contexts[len(c.Contexts)-1]
}

func (c *ClientConfig) remove(name string) bool {
	for i := range c.Contexts {
		if c.Contexts[i].Name == name {
			c.Contexts = append(c.Contexts[:i], c.Contexts[i+1:]...)
			if c.CurrentContext == name {
				c.CurrentContext = ""
			}
			return true
		}
	}
	return false
}
