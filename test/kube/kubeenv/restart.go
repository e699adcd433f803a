package kubeenv

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

// StartRestartable starts a control plane whose kube-apiserver can be
// stopped and started again on the same port, certificates and etcd
// (StopAPIServer, StartAPIServer), as in a control-plane upgrade: envtest
// otherwise gives a restarted apiserver a new certificate directory, which
// clients holding the old CA would refuse.
func StartRestartable() (*Env, error) {
	dir, err := os.MkdirTemp("", "kubeenv-apiserver-")
	if err != nil {
		return nil, err
	}
	return start(func(e *Env) {
		e.ControlPlane.GetAPIServer().CertDir = dir
		e.ControlPlane.GetAPIServer().StopTimeout = apiserverGrace
	}, func() { os.RemoveAll(dir) })
}

// apiserverGrace is how long a stopping kube-apiserver may drain before it is
// killed, as the kubelet does after a pod's grace period: with watches open
// it can take longer than a test should wait.
const apiserverGrace = 5 * time.Second

// StopAPIServer stops the kube-apiserver process (SIGTERM, SIGKILL after
// apiserverGrace) and waits until its port is closed; etcd keeps running.
func (e *Env) StopAPIServer() error {
	err := e.ControlPlane.APIServer.Stop()
	if err != nil && !strings.Contains(err.Error(), "timeout waiting for process") {
		return err
	}
	addr := e.ControlPlane.APIServer.SecureServing.ListenAddr.HostPort()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return nil
		}
		c.Close()
	}
	return fmt.Errorf("kube-apiserver still listening on %s 30s after it was killed", addr)
}

// StartAPIServer starts the kube-apiserver again on the same address and
// etcd, and waits until it is healthy.
func (e *Env) StartAPIServer() error {
	return e.ControlPlane.APIServer.Start()
}

// CompactEtcd compacts etcd's history up to its current revision (through
// etcd's JSON gateway), as the apiserver does every 5 minutes: a watch that
// resumes from an older resourceVersion then gets 410 Gone. It returns the
// revision compacted at.
func (e *Env) CompactEtcd(ctx context.Context) (int64, error) {
	base := e.ControlPlane.Etcd.URL.String()
	var rng struct {
		Header struct {
			Revision string `json:"revision"`
		} `json:"header"`
	}
	// any key: only the header's revision matters
	if err := etcdPost(ctx, base+"/v3/kv/range", map[string]any{"key": "Lw=="}, &rng); err != nil {
		return 0, err
	}
	rev, err := strconv.ParseInt(rng.Header.Revision, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("etcd revision %q: %w", rng.Header.Revision, err)
	}
	if err := etcdPost(ctx, base+"/v3/kv/compaction", map[string]any{"revision": strconv.FormatInt(rev, 10), "physical": true}, nil); err != nil {
		return 0, err
	}
	return rev, nil
}

func etcdPost(ctx context.Context, url string, body any, out any) error {
	b, _ := json.Marshal(body)
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("etcd %s: %w", url, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("etcd %s: %s: %s", url, resp.Status, data)
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}
