package control

import "os"

// EnvHome names the directory of koala's local state that the CLI, the
// controller and its activities share: the stack's install cache and run
// directory, default checkpoint stores and warm-up snapshots.
const EnvHome = "KOALA_HOME"

// DefaultHome is the home directory, relative to the working directory,
// when EnvHome is unset.
const DefaultHome = ".koala"

// Home is $KOALA_HOME, or DefaultHome when it is unset.
func Home() string {
	if h := os.Getenv(EnvHome); h != "" {
		return h
	}
	return DefaultHome
}
