package blocklists

import "testing"

func TestConfigMapBody(t *testing.T) {
	got := ConfigMapBody(map[string]string{"b.txt": "b.example\n", "a.txt": "a.example", "empty": ""})
	if want := "a.example\nb.example\n"; got != want {
		t.Fatalf("ConfigMapBody = %q, want %q", got, want)
	}
	if got := ConfigMapBody(nil); got != "" {
		t.Fatalf("ConfigMapBody(nil) = %q", got)
	}
}
