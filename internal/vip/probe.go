package vip

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/svcdns/svc/dataplane/probe"
	"github.com/svcdns/svc/internal/atomicfile"
)

// HealthName is the name the track script asks the local DNS for.
const HealthName = "health.service.internal."

// RunProbe asks every address in p.DNS for the health name's TXT record at
// once and succeeds when at least p.RequireBackends answer NOERROR within
// p.Timeout. With runDir set, the last failure is kept in ProbeFile (and
// removed on success) for svc health --vrrp.
func RunProbe(ctx context.Context, p Probe, runDir string) error {
	if len(p.DNS) == 0 {
		return errors.New("probe: no --dns address to ask")
	}
	if p.RequireBackends < 1 || p.RequireBackends > len(p.DNS) {
		return fmt.Errorf("probe: --require-backends %d: want 1..%d (the number of --dns addresses)", p.RequireBackends, len(p.DNS))
	}
	ctx, cancel := context.WithTimeout(ctx, p.Timeout)
	defer cancel()
	var mu sync.Mutex
	var fails []string
	up := 0
	var wg sync.WaitGroup
	for _, addr := range p.DNS {
		wg.Go(func() {
			rcode, err := probe.Query(ctx, addr, HealthName, "TXT", p.Timeout)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				fails = append(fails, err.Error())
			case rcode != "NOERROR":
				fails = append(fails, fmt.Sprintf("%s at %s: %s", HealthName, addr, rcode))
			default:
				up++
			}
		})
	}
	wg.Wait()
	var err error
	if up < p.RequireBackends {
		err = fmt.Errorf("probe: %d of %d DNS backends answer, %d required: %s", up, len(p.DNS), p.RequireBackends, strings.Join(fails, "; "))
	}
	if runDir != "" {
		path := filepath.Join(runDir, ProbeFile)
		if err != nil {
			_ = atomicfile.Write(path, []byte(time.Now().UTC().Format(time.RFC3339)+" "+err.Error()+"\n"), 0o644)
		} else {
			_ = os.Remove(path)
		}
	}
	return err
}
