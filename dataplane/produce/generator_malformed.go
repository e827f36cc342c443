package produce

// MalformedCounter is implemented by generators that read external input
// (trace files) and skip lines they cannot parse. The producer reports the
// count in ProduceReport.Malformed, so skipped input is never silent.
// Malformed is called from another goroutine than Next.
type MalformedCounter interface {
	Malformed() int64
}

func generatorMalformed(g Generator) int64 {
	if m, ok := g.(MalformedCounter); ok {
		return m.Malformed()
	}
	return 0
}
