package control

import (
	"os"
	"path/filepath"
)

// EnvHome names the directory of koala's local state that the CLI, the
// controller and its activities share: the stack's install cache and run
// directory, default checkpoint stores and warm-up snapshots.
const EnvHome = "KOALA_HOME"

// DefaultHome is the home directory, relative to the working directory,
// when EnvHome is unset.
const DefaultHome = ".koala"

// Home is $KOALA_HOME, or DefaultHome when it is unset, made absolute
// against the working directory: paths under it are sent to workers and
// the controller, whose working directories differ from the CLI's (a
// relative path put the CLI's snapshot under a worker's run directory).
func Home() string {
	h := os.Getenv(EnvHome)
	if h == "" {
		h = DefaultHome
	}
	if abs, err := filepath.Abs(h); err == nil {
		return abs
	}
	return h
}
