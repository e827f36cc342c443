package control

import (
	"os"
	"path/filepath"
	"testing"
)

// Home is absolute whatever the variable says, resolved against the
// working directory of the process asking.
func TestHomeIsAbsolute(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ env, want string }{
		{"", filepath.Join(wd, DefaultHome)},
		{"rel/home", filepath.Join(wd, "rel/home")},
		{"/abs/home", "/abs/home"},
	} {
		t.Setenv(EnvHome, c.env)
		if got := Home(); got != c.want {
			t.Errorf("KOALA_HOME=%q: Home() = %q, want %q", c.env, got, c.want)
		}
	}
}
