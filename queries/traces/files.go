package traces

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"koala/dataplane"
	"koala/dataplane/control"
	"koala/dataplane/produce"
)

// trace describes one trace's CSV layout.
type trace struct {
	name   string
	header bool // every file starts with a header line
	// key validates one line and returns the key of its record.
	key func(line []byte) ([]byte, error)
}

// maxLineBytes bounds one CSV line; longer lines are malformed.
const maxLineBytes = 64 << 10

// lineReader reads the lines of one file, skipping (and reporting) lines
// longer than maxLineBytes.
type lineReader struct {
	f  *os.File
	rd *bufio.Reader
	no int // lines read
}

func openLines(path string) (*lineReader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("trace file: %w", err)
	}
	return &lineReader{f: f, rd: bufio.NewReaderSize(f, maxLineBytes)}, nil
}

// next returns the next line without its line ending; tooLong reports a
// line that was cut off (its rest was skipped). It returns io.EOF at the end.
func (l *lineReader) next() (line []byte, tooLong bool, err error) {
	line, err = l.rd.ReadSlice('\n')
	for errors.Is(err, bufio.ErrBufferFull) {
		tooLong = true
		line, err = l.rd.ReadSlice('\n')
	}
	if err == io.EOF && (len(line) > 0 || tooLong) {
		err = nil // the last line has no line ending; EOF comes next call
	}
	if err != nil {
		return nil, tooLong, err
	}
	l.no++
	return bytes.TrimRight(line, "\r\n"), tooLong, nil
}

func (l *lineReader) close() { _ = l.f.Close() }

// fileGenerator replays trace files as a dataplane.Generator. Next is
// called with n = 0, 1, 2, … by one producer goroutine.
type fileGenerator struct {
	tr    *trace
	paths []string
	log   *slog.Logger

	cur      *lineReader
	fileIdx  int
	pass     int   // complete passes over every file
	pos      int64 // number of the record Next returns next
	bad      atomic.Int64
	readErrs atomic.Int64
	told     time.Time
}

func newFileGenerator(tr *trace, paths []string, log *slog.Logger) (*fileGenerator, error) {
	if log == nil {
		log = slog.Default()
	}
	for i, p := range paths {
		if p == "" {
			return nil, fmt.Errorf("generator %q: FilePath[%d] is empty", tr.name, i)
		}
		st, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("generator %q: FilePath[%d]: %w", tr.name, i, err)
		}
		if st.IsDir() {
			return nil, fmt.Errorf("generator %q: FilePath[%d] %s is a directory, want a CSV file", tr.name, i, p)
		}
	}
	g := &fileGenerator{tr: tr, paths: paths, log: log, fileIdx: -1}
	// Refuse input without a single usable line, which Next could never
	// serve; the probe's counts are not kept (the first pass counts).
	probe := &fileGenerator{tr: tr, paths: paths, log: log, fileIdx: -1}
	var r dataplane.Record
	if !probe.read(&r) {
		return nil, fmt.Errorf("generator %q: FilePath %v holds no valid %s record (%d malformed lines, %d read errors)",
			tr.name, paths, tr.name, probe.bad.Load(), probe.readErrs.Load())
	}
	probe.closeFile()
	return g, nil
}

// Malformed is the number of lines skipped in the first pass over the files.
func (g *fileGenerator) Malformed() int64 { return g.bad.Load() }

// Next fills r with the n-th valid record of the files (replayed in a loop).
func (g *fileGenerator) Next(n int64, r *dataplane.Record) {
	if n < g.pos { // a restart: read again from the top
		g.closeFile()
		g.fileIdx, g.pos = -1, 0
	}
	for ; g.pos < n; g.pos++ {
		var skip dataplane.Record
		g.read(&skip)
	}
	if !g.read(r) {
		// Every file became unreadable after the constructor's probe:
		// reported through the read-error log; keep the stream's shape.
		r.Key, r.Value = []byte("unreadable"), nil
	}
	g.pos++
	r.EventTime = time.Now().UnixNano()
}

// read fills r with the next valid record, wrapping to the first file at
// the end of the last; false when a whole pass found nothing.
func (g *fileGenerator) read(r *dataplane.Record) bool {
	wraps := 0
	for {
		if g.cur == nil {
			opened, wrapped := g.openNext()
			if wrapped {
				// A second wrap within one call: a whole pass without a record.
				if wraps++; wraps > 1 {
					return false
				}
			}
			if !opened {
				continue
			}
		}
		line, tooLong, err := g.cur.next()
		if err != nil {
			if err != io.EOF {
				g.readErrs.Add(1)
				g.log.Error("reading trace file", "trace", g.tr.name, "file", g.paths[g.fileIdx], "err", err)
			}
			g.closeFile()
			continue
		}
		if g.tr.header && g.cur.no == 1 {
			continue
		}
		var key []byte
		if tooLong {
			err = fmt.Errorf("line longer than %d bytes", maxLineBytes)
		} else {
			key, err = g.tr.key(line)
		}
		if err != nil {
			g.malformedLine(line, err)
			continue
		}
		r.Key = append(r.Key[:0], key...)
		r.Value = append([]byte(nil), line...)
		r.Partition, r.Offset = 0, 0
		return true
	}
}

// openNext opens the next file. wrapped reports that the last file was
// passed (the next call starts a new pass); opened is false then and when
// the file cannot be opened (logged and counted).
func (g *fileGenerator) openNext() (opened, wrapped bool) {
	g.fileIdx++
	if g.fileIdx >= len(g.paths) {
		g.fileIdx = -1
		g.pass++
		return false, true
	}
	lr, err := openLines(g.paths[g.fileIdx])
	if err != nil {
		g.readErrs.Add(1)
		g.log.Error("opening trace file", "trace", g.tr.name, "err", err)
		return false, false
	}
	g.cur = lr
	return true, false
}

func (g *fileGenerator) closeFile() {
	if g.cur != nil {
		g.cur.close()
		g.cur = nil
	}
}

func (g *fileGenerator) malformedLine(line []byte, err error) {
	if g.pass > 0 {
		return // counted in the first pass
	}
	n := g.bad.Add(1)
	if now := time.Now(); now.Sub(g.told) >= 10*time.Second {
		g.log.Warn("skipping malformed trace lines", "trace", g.tr.name, "total", n,
			"file", g.paths[g.fileIdx], "line", g.cur.no, "err", err, "text", truncate(line, 120))
		g.told = now
	}
}

func truncate(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}

// ReadCSV reads every valid record of trace name ("azure", "borg", "taxi",
// "twitch") from paths once, in order, and returns them with the number
// of malformed lines it skipped.
func ReadCSV(name string, paths []string) ([]dataplane.Record, int64, error) {
	tr, ok := traceByName[name]
	if !ok {
		return nil, 0, fmt.Errorf("trace %q is unknown (known: %s, %s, %s, %s)", name, Azure, Borg, Taxi, Twitch)
	}
	var out []dataplane.Record
	var bad int64
	for _, p := range paths {
		lr, err := openLines(p)
		if err != nil {
			return nil, bad, err
		}
		for {
			line, tooLong, err := lr.next()
			if err == io.EOF {
				break
			}
			if err != nil {
				lr.close()
				return nil, bad, fmt.Errorf("trace file %s: %w", p, err)
			}
			if tr.header && lr.no == 1 {
				continue
			}
			if tooLong {
				bad++
				continue
			}
			key, err := tr.key(line)
			if err != nil {
				bad++
				continue
			}
			out = append(out, dataplane.Record{Key: key, Value: append([]byte(nil), line...)})
		}
		lr.close()
	}
	return out, bad, nil
}

var traceByName = map[string]*trace{}

// registerTrace registers the generator of tr: synthetic records from
// synth, or the files of FilePath.
func registerTrace(tr *trace, synth func(req control.ProduceRequest) (produce.Generator, error)) {
	traceByName[tr.name] = tr
	if err := produce.RegisterGenerator(tr.name, func(req control.ProduceRequest) (produce.Generator, error) {
		if len(req.FilePath) > 0 {
			return newFileGenerator(tr, req.FilePath, nil)
		}
		return synth(req)
	}); err != nil {
		panic(err)
	}
}

// keyIndex draws the key index of record n: a synthetic trace's key
// distribution.
type keyIndex interface {
	Index(seed, n int64) int
}

// sequentialKeys is the warm-up key stream (ProduceRequest.Sequential):
// record n has key index n mod the key count, so one round touches every
// key once.
type sequentialKeys struct{ n int64 }

func (s sequentialKeys) Index(_, n int64) int { return int(n % s.n) }

// traceKeys builds the key distribution of a synthetic trace: NumKeys ids,
// Zipf exponent Skew (the trace's default when 0), or the sequential
// warm-up stream over them when req.Sequential.
func traceKeys(name string, req control.ProduceRequest, defaultSkew float64, maxKeys int) (keyIndex, error) {
	if req.NumKeys < 1 || req.NumKeys > maxKeys {
		return nil, fmt.Errorf("generator %q: NumKeys %d must be between 1 and %d", name, req.NumKeys, maxKeys)
	}
	if req.Sequential {
		return sequentialKeys{n: int64(req.NumKeys)}, nil
	}
	skew := req.Skew
	if skew == 0 {
		skew = defaultSkew
	}
	z, err := produce.NewZipfKeys(req.NumKeys, skew)
	if err != nil {
		return nil, fmt.Errorf("generator %q: %w", name, err)
	}
	return z, nil
}
