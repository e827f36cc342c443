// Package experiments owns experiment configs in the Koala artifact's format, summaries and figures.
package experiments
