package internalapi

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// maxSettingsBody bounds a pushed cluster settings document.
const maxSettingsBody = 4 << 20

// ClusterSettings takes the cluster-scope settings a peer pushes after a
// PATCH /settings it served (multi-node SQLite mode: SERVICE_INTERNAL_PEERS).
// *settings.Manager implements it.
type ClusterSettings interface {
	ReplaceCluster(ctx context.Context, data []byte) error
}

// serveClusterSettings answers PUT /internal/settings/cluster: 204 when
// applied, 400 with the reason when the document is refused.
func serveClusterSettings(w http.ResponseWriter, r *http.Request, deps Deps) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxSettingsBody+1))
	if err != nil {
		http.Error(w, "reading body: "+err.Error(), http.StatusBadRequest)
		return
	}
	if len(body) > maxSettingsBody {
		http.Error(w, "cluster settings over 4 MiB", http.StatusRequestEntityTooLarge)
		return
	}
	if err := deps.Settings.ReplaceCluster(r.Context(), body); err != nil {
		deps.Logger.Warn("internal api: cluster settings from a peer refused", "err", err)
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// PutClusterSettings pushes the cluster-scope settings (YAML) to peer.
func (c *Client) PutClusterSettings(ctx context.Context, peer string, data []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, "https://"+peer+"/internal/settings/cluster", bytes.NewReader(data))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.creds.Token)
	req.Header.Set("Content-Type", "application/yaml")
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("settings to %s: %w", peer, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("settings to %s: %s: %s", peer, resp.Status, strings.TrimSpace(string(msg)))
	}
	return nil
}
