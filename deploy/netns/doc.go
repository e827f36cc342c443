// Package netns runs koala across several network hosts on one machine: its
// test builds network namespaces joined by veth pairs and a bridge, starts
// the control plane on the host side and one worker per namespace, and
// checks that a lazy scale-out across the hosts stays exact and that a host
// whose link is cut during a migration makes the run fail with an error
// naming that worker rather than produce a wrong answer. The test needs root
// and the `ip` tool and is skipped without them; it removes every namespace,
// link and process it created.
package netns
