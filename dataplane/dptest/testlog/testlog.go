// Package testlog is a log sink for tests that read what a component
// logged while its goroutines were still writing.
package testlog

import (
	"strings"
	"sync"
)

// Buffer is a strings.Builder safe for concurrent use.
type Buffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
