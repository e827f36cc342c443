package produce

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"koala/dataplane/control"
	"koala/dataplane/wire"
)

// Generator makes input records; it is deterministic for a seed. A
// generator is used by one goroutine (it may keep buffers between records).
type Generator interface {
	// Next fills r with the n-th record (n counts from 0).
	Next(n int64, r *wire.Record)
}

// GeneratorFactory builds a generator from a produce request.
type GeneratorFactory func(req control.ProduceRequest) (Generator, error)

// DefaultGenerator spreads records uniformly over NumKeys keys.
const DefaultGenerator = "keys"

var (
	genMu      sync.RWMutex
	generators = map[string]GeneratorFactory{}
)

// RegisterGenerator makes a generator available to `koala produce` and to
// experiment producers.
func RegisterGenerator(name string, f GeneratorFactory) error {
	genMu.Lock()
	defer genMu.Unlock()
	if _, dup := generators[name]; dup {
		return fmt.Errorf("register generator: %q already registered", name)
	}
	generators[name] = f
	return nil
}

// NewGenerator builds the named generator.
func NewGenerator(req control.ProduceRequest) (Generator, error) {
	name := req.Generator
	if name == "" {
		name = DefaultGenerator
	}
	genMu.RLock()
	f, ok := generators[name]
	var names []string
	for n := range generators {
		names = append(names, n)
	}
	genMu.RUnlock()
	if !ok {
		sort.Strings(names)
		return nil, fmt.Errorf("generator %q is unknown (known: %s)", name, strings.Join(names, ", "))
	}
	return f(req)
}

// keysGenerator draws keys uniformly from a fixed key space.
type keysGenerator struct {
	numKeys   int
	seed      uint64
	valueSize int
	arena     byteArena
}

// KeyName is the key of index i in generated key spaces; oracles use it.
func KeyName(i int) string { return string(AppendKeyName(make([]byte, 0, keyNameLen), i)) }

// keyNameLen is the length of KeyName(i) for 0 ≤ i < 10⁷.
const keyNameLen = 8

// AppendKeyName appends KeyName(i) ("k" and i in at least 7 zero-padded
// digits) to dst without formatting through fmt: generators call it per
// record.
func AppendKeyName(dst []byte, i int) []byte {
	if i < 0 {
		return fmt.Appendf(dst, "k%07d", i)
	}
	var digits [20]byte
	pos := len(digits)
	for v := uint64(i); v > 0 || pos > len(digits)-7; v /= 10 {
		pos--
		digits[pos] = byte('0' + v%10)
	}
	dst = append(dst, 'k')
	return append(dst, digits[pos:]...)
}

// UniformKeyIndex is the key index the "keys" generator picks for record n;
// oracles recompute the input with it. It is rand.New(rand.NewPCG(seed, n))
// .IntN(numKeys), computed on a PCG held on the stack: building a Rand per
// record allocated twice.
func UniformKeyIndex(seed int64, numKeys int, n int64) int {
	src := rand.NewPCG(uint64(seed), uint64(n))
	return int(uniformBelow(src, uint64(numKeys)))
}

// uniformBelow draws a uniform value in [0, bound) from src exactly as
// math/rand/v2's Rand.IntN does (a mask for powers of two, else the
// multiply-and-reject method), so the generated key streams stay the same.
func uniformBelow(src *rand.PCG, bound uint64) uint64 {
	if bound&(bound-1) == 0 {
		return src.Uint64() & (bound - 1)
	}
	hi, lo := bits.Mul64(src.Uint64(), bound)
	if lo < bound {
		reject := -bound % bound
		for lo < reject {
			hi, lo = bits.Mul64(src.Uint64(), bound)
		}
	}
	return hi
}

// byteArena hands out byte slices carved from shared chunks, so a
// generator allocates once per chunk instead of once per record. A chunk is
// never reused: it is collected when no record refers to it any more.
type byteArena struct{ free []byte }

const arenaChunk = 16 << 10

// alloc returns n zeroed bytes with no spare capacity.
func (a *byteArena) alloc(n int) []byte {
	if n > arenaChunk/4 {
		return make([]byte, n)
	}
	if len(a.free) < n {
		a.free = make([]byte, arenaChunk)
	}
	b := a.free[:n:n]
	a.free = a.free[n:]
	return b
}

// keyAndValue allocates a record's key (KeyName(idx)) and value (valueSize
// bytes, at least 8, holding n little-endian) from arena.
func keyAndValue(arena *byteArena, idx int, n int64, valueSize int) (key, value []byte) {
	var name [24]byte
	k := AppendKeyName(name[:0], idx)
	vs := max(valueSize, 8)
	buf := arena.alloc(len(k) + vs)
	copy(buf, k)
	binary.LittleEndian.PutUint64(buf[len(k):], uint64(n))
	return buf[:len(k):len(k)], buf[len(k):]
}

// stampedGenerator is a generator whose records carry the time they are
// made as event time. The Producer passes that time in — it reads the clock
// at the start of each burst of the rate limiter and every stampEvery
// records, microseconds apart — instead of each record reading it.
type stampedGenerator interface {
	Generator
	NextAt(n, now int64, r *wire.Record)
}

func (g *keysGenerator) Next(n int64, r *wire.Record) { g.NextAt(n, time.Now().UnixNano(), r) }

func (g *keysGenerator) NextAt(n, now int64, r *wire.Record) {
	r.Key, r.Value = keyAndValue(&g.arena, UniformKeyIndex(int64(g.seed), g.numKeys, n), n, g.valueSize)
	r.EventTime = now
}

// SequentialGenerator emits key n mod NumKeys for record n: a bounded key
// stream that touches every key once per round (warm-up state).
const SequentialGenerator = "sequential"

type sequentialGenerator struct {
	numKeys   int
	valueSize int
	arena     byteArena
}

func (g *sequentialGenerator) Next(n int64, r *wire.Record) { g.NextAt(n, time.Now().UnixNano(), r) }

func (g *sequentialGenerator) NextAt(n, now int64, r *wire.Record) {
	r.Key, r.Value = keyAndValue(&g.arena, int(n%int64(g.numKeys)), n, g.valueSize)
	r.EventTime = now
}

func init() {
	_ = RegisterGenerator(SequentialGenerator, func(req control.ProduceRequest) (Generator, error) {
		if req.NumKeys < 1 {
			return nil, fmt.Errorf("generator %q: NumKeys %d must be ≥ 1", SequentialGenerator, req.NumKeys)
		}
		return &sequentialGenerator{numKeys: req.NumKeys, valueSize: req.ValueSize}, nil
	})
	_ = RegisterGenerator(DefaultGenerator, func(req control.ProduceRequest) (Generator, error) {
		if req.NumKeys < 1 {
			return nil, fmt.Errorf("generator %q: NumKeys %d must be ≥ 1", DefaultGenerator, req.NumKeys)
		}
		return &keysGenerator{numKeys: req.NumKeys, seed: uint64(req.Seed), valueSize: req.ValueSize}, nil
	})
}

// ProducerStats is what a Producer has written so far.
type ProducerStats = control.ProduceReport

// Produce writes generated records to Kafka at req.RatePerSec until ctx
// ends or req.MaxEvents records were acknowledged. It returns what Kafka
// acknowledged; onTick, when set, is called about once a second.
func Produce(ctx context.Context, req control.ProduceRequest, extra []kgo.Opt, onTick func(control.ProduceReport)) (control.ProduceReport, error) {
	p, err := NewProducer(req, extra)
	if err != nil {
		return control.ProduceReport{}, err
	}
	p.onTick = onTick
	p.Run(ctx)
	return p.Report(), p.Err()
}

// Producer writes the records of one produce request to Kafka. A worker
// runs it in the background (Start, Stop); Produce runs one in the caller.
type Producer struct {
	req     control.ProduceRequest
	gen     Generator
	client  *kgo.Client
	onTick  func(control.ProduceReport)
	slab    []kgo.Record // unused records of the current slab (produce)
	now     int64        // event time of the next records (stampedGenerator)
	stamped int          // records stamped with now; 0 reads the clock again
	// stampedGen is gen when it takes the event time from the Producer.
	stampedGen stampedGenerator
	ackFn      func(*kgo.Record, error)

	acked, failed atomic.Int64
	mu            sync.Mutex
	perPart       map[int32]int64
	err           error
	started       time.Time
	elapsed       time.Duration

	cancel context.CancelFunc
	done   chan struct{}
}

// NewProducer checks req and connects; nothing is written before Run or
// Start.
func NewProducer(req control.ProduceRequest, extra []kgo.Opt) (*Producer, error) {
	if req.Topic == "" {
		return nil, fmt.Errorf("produce: Topic must not be empty")
	}
	if len(req.KafkaBrokers) == 0 {
		return nil, fmt.Errorf("produce: KafkaBrokers must list at least one broker")
	}
	if req.StartEvent < 0 {
		return nil, fmt.Errorf("produce: StartEvent %d must be ≥ 0", req.StartEvent)
	}
	if req.RatePerSec < 0 {
		return nil, fmt.Errorf("produce: RatePerSec %d must be ≥ 0 (0 = unlimited)", req.RatePerSec)
	}
	if len(req.RateLimit) > 0 || len(req.RateChangeInterval) > 0 {
		if err := (RateSchedule{RateLimit: req.RateLimit, RateChangeInterval: req.RateChangeInterval}).Validate(); err != nil {
			return nil, fmt.Errorf("produce: %w", err)
		}
	}
	gen, err := NewGenerator(req)
	if err != nil {
		return nil, fmt.Errorf("produce: %w", err)
	}
	opts := append([]kgo.Opt{
		kgo.SeedBrokers(req.KafkaBrokers...),
		kgo.DefaultProduceTopic(req.Topic),
		kgo.ProducerLinger(5 * time.Millisecond),
		// Generated records are small and the Producer's CPU is the
		// pipeline's (it runs in a worker): compressing each batch and
		// decompressing it at the source cost more than the bytes saved.
		// Callers may pass another codec in extra.
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)),
	}, extra...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("produce: kafka client for %v: %w", req.KafkaBrokers, err)
	}
	p := &Producer{req: req, gen: gen, client: cl, perPart: map[int32]int64{}}
	p.ackFn = p.ack // one closure, not one per record
	p.stampedGen, _ = gen.(stampedGenerator)
	return p, nil
}

// Run paces records by the request's rate schedule or, without one, by
// RatePerSec, and waits for every outstanding acknowledgement before
// returning.
func (p *Producer) Run(ctx context.Context) {
	defer p.client.Close()
	p.started = time.Now()
	if len(p.req.RateLimit) > 0 {
		p.runSchedule(ctx, RateSchedule{RateLimit: p.req.RateLimit, RateChangeInterval: p.req.RateChangeInterval})
	} else {
		p.runSmooth(ctx)
	}
	if err := p.client.Flush(context.Background()); err != nil {
		p.setErr(fmt.Errorf("produce: flush: %w", err))
	}
	p.elapsed = time.Since(p.started)
}

// runSmooth produces RatePerSec records per second in 10 ms slots (all at
// once when RatePerSec is 0).
func (p *Producer) runSmooth(ctx context.Context) {
	const slot = 10 * time.Millisecond
	tick := time.NewTicker(slot)
	defer tick.Stop()
	report := time.NewTicker(time.Second)
	defer report.Stop()
	var n int64
	var due float64
	perSlot := float64(p.req.RatePerSec) * slot.Seconds()
	for ctx.Err() == nil {
		if p.req.MaxEvents > 0 && n >= p.req.MaxEvents {
			break
		}
		batch := 1000
		if p.req.RatePerSec > 0 {
			select {
			case <-ctx.Done():
				continue
			case <-report.C:
				if p.onTick != nil {
					p.onTick(p.Report())
				}
				continue
			case <-tick.C:
			}
			due += perSlot
			batch = int(due)
			due -= float64(batch)
		}
		p.stamped = 0
		for i := 0; i < batch && (p.req.MaxEvents == 0 || n < p.req.MaxEvents); i++ {
			p.produce(n)
			n++
		}
	}
}

// runSchedule follows a rate schedule: interval k starts at
// started + k·RateInterval (absolute times, so delays do not accumulate)
// and produces the interval's quota at once, as the artifact's limiter
// lets a burst through and then blocks until the interval ends.
func (p *Producer) runSchedule(ctx context.Context, sched RateSchedule) {
	report := time.NewTicker(time.Second)
	defer report.Stop()
	wait := time.NewTimer(0)
	defer wait.Stop()
	var n int64
	for k := int64(0); ctx.Err() == nil; k++ {
		if p.req.MaxEvents > 0 && n >= p.req.MaxEvents {
			return
		}
		wait.Reset(time.Until(p.started.Add(time.Duration(k) * RateInterval)))
	waiting:
		for {
			select {
			case <-ctx.Done():
				return
			case <-report.C:
				if p.onTick != nil {
					p.onTick(p.Report())
				}
			case <-wait.C:
				break waiting
			}
		}
		quota, _ := sched.RateAt(k)
		p.stamped = 0
		for i := int64(0); i < quota && (p.req.MaxEvents == 0 || n < p.req.MaxEvents); i++ {
			p.produce(n)
			n++
		}
	}
}

// produceSlab is how many Kafka records the Producer allocates at once.
const produceSlab = 256

// stampEvery is how many records share one reading of the clock as event
// time; every burst of the rate limiter also starts with a fresh reading.
const stampEvery = 64

// produce generates the n-th record of this Producer (the generator's
// record StartEvent + n) and writes it asynchronously. Kafka records are
// carved from slabs: one allocation per produceSlab records instead of one
// each (a slab lives until its last record is acknowledged).
func (p *Producer) produce(n int64) {
	var r wire.Record
	if len(p.slab) == 0 {
		p.slab = make([]kgo.Record, produceSlab)
	}
	if p.stamped == 0 {
		p.now = time.Now().UnixNano()
	}
	p.stamped = (p.stamped + 1) % stampEvery
	if p.stampedGen != nil {
		p.stampedGen.NextAt(p.req.StartEvent+n, p.now, &r)
	} else {
		p.gen.Next(p.req.StartEvent+n, &r)
	}
	rec := &p.slab[0]
	p.slab = p.slab[1:]
	rec.Key, rec.Value, rec.Timestamp = r.Key, r.Value, time.Unix(0, r.EventTime)
	p.client.Produce(context.Background(), rec, p.ackFn)
}

func (p *Producer) ack(r *kgo.Record, err error) {
	if err != nil {
		p.failed.Add(1)
		p.setErr(fmt.Errorf("produce to %s: %w", r.Topic, err))
		return
	}
	p.acked.Add(1)
	p.mu.Lock()
	p.perPart[r.Partition]++
	p.mu.Unlock()
}

func (p *Producer) setErr(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err == nil {
		p.err = err
	}
}

// Err is the first write error, if any.
func (p *Producer) Err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// Report is what Kafka acknowledged so far.
func (p *Producer) Report() control.ProduceReport {
	p.mu.Lock()
	defer p.mu.Unlock()
	per := make(map[int32]int64, len(p.perPart))
	for k, v := range p.perPart {
		per[k] = v
	}
	el := p.elapsed
	if el == 0 && !p.started.IsZero() {
		el = time.Since(p.started)
	}
	return control.ProduceReport{Acked: p.acked.Load(), Failed: p.failed.Load(), PerPart: per, ElapsedSecs: el.Seconds(), Malformed: generatorMalformed(p.gen)}
}

// Stop ends a background Producer and waits for its acknowledgements.
func (p *Producer) Stop(ctx context.Context) {
	if p.cancel == nil {
		return
	}
	p.cancel()
	select {
	case <-p.done:
	case <-ctx.Done():
	}
}

// Start runs p in the background until parent ends or Stop.
func (p *Producer) Start(parent context.Context) {
	ctx, cancel := context.WithCancel(parent)
	p.cancel, p.done = cancel, make(chan struct{})
	go func() {
		defer close(p.done)
		p.Run(ctx)
	}()
}

// Done is closed when a started Producer has finished (MaxEvents written,
// or stopped).
func (p *Producer) Done() <-chan struct{} { return p.done }
