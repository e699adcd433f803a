package node

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/svcdns/svc/internal/settings"
)

func TestConnLimit(t *testing.T) {
	const mib = 1 << 20
	cases := []struct {
		name        string
		nofile, mem uint64
		pools, quic int
		want        connLimits
	}{
		{"nothing known", 0, 0, 3, 1, connLimits{maxConnsPerPool, maxConnsPerPool}},
		{"container descriptors, no memory limit", 1048576, 0, 3, 1, connLimits{maxConnsPerPool, maxConnsPerPool}},
		{"descriptors shared evenly", 20000, 0, 3, 1, connLimits{(20000 - fdReserve) / 3, maxConnsPerPool}},
		{"no pools counted: one", 20000, 0, 0, 0, connLimits{20000 - fdReserve, maxConnsPerPool}},
		{"below the reserve: the floor", 1024, 0, 3, 1, connLimits{minConnsPerPool, maxConnsPerPool}},
		// Half of 1 GiB over 3 stream pools and one DoQ listener, all full.
		{"memory bounds both", 1048576, 1024 * mib, 3, 1, connLimits{512 * mib / (3*streamConnCost + quicConnCost), 512 * mib / (3*streamConnCost + quicConnCost)}},
		{"descriptors lower than memory", 4096, 1024 * mib, 3, 1, connLimits{(4096 - fdReserve) / 3, 512 * mib / (3*streamConnCost + quicConnCost)}},
		{"tiny memory: the floor", 1048576, 16 * mib, 3, 1, connLimits{minConnsPerPool, minConnsPerPool}},
	}
	for _, c := range cases {
		if got := connLimit(c.nofile, c.mem, c.pools, c.quic); got != c.want {
			t.Errorf("%s: connLimit(%d, %d, %d, %d) = %+v, want %+v", c.name, c.nofile, c.mem, c.pools, c.quic, got, c.want)
		}
	}
	// The Helm chart's data plane limit (512Mi) with its listeners (Do53
	// TCP, DoT, DoH; DoQ, DoH3): every pool full at once stays within half
	// of it.
	l := connLimit(1048576, 512*mib, 3, 2)
	if used := uint64(l.Stream)*3*streamConnCost + uint64(l.QUIC)*2*quicConnCost; used > 256*mib || l.Stream < 1000 {
		t.Errorf("512Mi: %+v uses %d MiB", l, used/mib)
	}
}

func TestMemLimit(t *testing.T) {
	write := func(t *testing.T, root string, files map[string]string) {
		for p, body := range files {
			full := filepath.Join(root, p)
			if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(full, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	cases := []struct {
		name  string
		files map[string]string
		want  uint64
	}{
		{"v2 container", map[string]string{"proc/self/cgroup": "0::/\n", "sys/fs/cgroup/memory.max": "536870912\n"}, 512 << 20},
		{"v2 host path", map[string]string{"proc/self/cgroup": "0::/kubepods/pod1/c1\n", "sys/fs/cgroup/kubepods/pod1/c1/memory.max": "268435456\n"}, 256 << 20},
		{"v2 unlimited", map[string]string{"proc/self/cgroup": "0::/\n", "sys/fs/cgroup/memory.max": "max\n"}, 0},
		{"v1 with its path", map[string]string{"proc/self/cgroup": "4:memory:/docker/abc\n1:cpu:/\n", "sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes": "1073741824\n"}, 1 << 30},
		{"v1 mounted at the root", map[string]string{"proc/self/cgroup": "4:memory:/docker/abc\n", "sys/fs/cgroup/memory/memory.limit_in_bytes": "1073741824\n"}, 1 << 30},
		{"v1 unlimited", map[string]string{"proc/self/cgroup": "4:memory:/\n", "sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n"}, 0},
		{"no cgroup", map[string]string{}, 0},
		{"garbage", map[string]string{"proc/self/cgroup": "0::/\n", "sys/fs/cgroup/memory.max": "lots\n"}, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("GOMEMLIMIT", "")
			root := t.TempDir()
			write(t, root, c.files)
			if got := memLimit(root); got != c.want {
				t.Fatalf("memLimit = %d, want %d", got, c.want)
			}
		})
	}
	t.Run("GOMEMLIMIT wins", func(t *testing.T) {
		root := t.TempDir()
		write(t, root, map[string]string{"proc/self/cgroup": "0::/\n", "sys/fs/cgroup/memory.max": "536870912\n"})
		for v, want := range map[string]uint64{"300MiB": 300 << 20, "2GiB": 2 << 30, "1048576": 1 << 20, "off": 512 << 20, "nonsense": 512 << 20} {
			t.Setenv("GOMEMLIMIT", v)
			if got := memLimit(root); got != want {
				t.Errorf("GOMEMLIMIT=%s: %d, want %d", v, got, want)
			}
		}
	})
}

func TestStreamPools(t *testing.T) {
	tls := settings.TLSListener{Address: "127.0.0.1:853"}
	https := settings.HTTPSListener{Address: "127.0.0.1:443"}
	cases := []struct {
		name string
		cfg  settings.Config
		want int
	}{
		{"udp only", settings.Config{Listeners: settings.Listeners{DNS: []settings.DNSListener{{Address: ":53", Protocols: []string{"udp"}}}}}, 0},
		{"two tcp listeners share one pool", settings.Config{Listeners: settings.Listeners{DNS: []settings.DNSListener{
			{Address: ":53", Protocols: []string{"udp", "tcp"}}, {Address: ":5353", Protocols: []string{"tcp"}}}}}, 1},
		{"dot and doh", settings.Config{Listeners: settings.Listeners{DNS: []settings.DNSListener{{Address: ":53"}},
			DoT: []settings.TLSListener{tls, tls}, DoH: []settings.HTTPSListener{https}}}, 4},
	}
	for _, c := range cases {
		if got := streamPools(&c.cfg); got != c.want {
			t.Errorf("%s: %d pools, want %d", c.name, got, c.want)
		}
	}
}
