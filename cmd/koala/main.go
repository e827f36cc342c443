// Command koala is the one binary of the project: control plane, data-plane
// worker, input producer, local stack and experiment runner. Each subcommand
// lives in its own file and only wires flags to the packages that do the work.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

var rootCmd = &cobra.Command{
	Use:           "koala",
	Short:         "Stream processing with live, non-disruptive reconfiguration",
	SilenceUsage:  true,
	SilenceErrors: true,
}

func init() { rootCmd.AddCommand(newSoakCmd()) }

func main() {
	if err := rootCmd.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "koala:", err)
		os.Exit(1)
	}
}

// envOr returns the environment variable key, or def when it is unset, so
// every address flag can also be given through the environment.
func envOr(key, def string) string {
	if v, ok := os.LookupEnv(key); ok && v != "" {
		return v
	}
	return def
}
