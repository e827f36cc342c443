// Package experiments owns experiment configs in the Koala artifact's format, summaries and figures.
// What runs experiments against a stack lives in subpackages that import
// this one, never the other way round: runner (workflows of run, suite,
// compare, figures) and bench (koala bench).
package experiments
